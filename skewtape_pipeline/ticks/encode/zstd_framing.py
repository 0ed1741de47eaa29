"""Whether a zstd file is whole: its frames walked from header to last block, nothing decoded.

zstandard's ``stream_reader`` ends quietly where the file ends, inside a frame or not, so a file
cut short (an interrupted download) reads as a shorter file. :func:`check_zstd_framing` walks
the frame format (RFC 8878: frame header, then each block's 3-byte header and size, then the
optional checksum; skippable frames by their size) by seeking from block to block, and refuses
a file that ends inside a frame or holds bytes after its last frame that begin no frame.
"""

from __future__ import annotations

from typing import BinaryIO

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
SKIPPABLE_MAGIC_HIGH = 0x184D2A5
"""Skippable frames' magic numbers are 0x184D2A50 to 0x184D2A5F (their top 28 bits)."""
_CONTENT_SIZE_BYTES = (0, 2, 4, 8)
_DICTIONARY_ID_BYTES = (0, 1, 2, 4)
_RESERVED_BLOCK = 3
_RLE_BLOCK = 1


def is_zstd_start(head: bytes) -> bool:
    """Whether a file's first four bytes begin a zstd frame or a skippable frame."""
    return head == ZSTD_MAGIC or _is_skippable(head)


def _is_skippable(magic: bytes) -> bool:
    return len(magic) == 4 and int.from_bytes(magic, "little") >> 4 == SKIPPABLE_MAGIC_HIGH


class FramingError(ValueError):
    """The file is not whole zstd frames; the message says where it stops being one."""


def check_zstd_framing(handle: BinaryIO) -> int:
    """Walk every frame of the seekable zstd file ``handle`` from its start; return how many
    frames it holds (skippable ones included) and leave ``handle`` at its start.

    Raises FramingError: the file ends inside a frame (cut short), or bytes after a frame
    begin no frame."""
    walk = _Walk(handle)
    try:
        while handle.tell() < walk.size:
            start = handle.tell()
            magic = walk.take(4)
            if magic == ZSTD_MAGIC:
                walk.skip_frame()
            elif _is_skippable(magic):
                walk.skip(int.from_bytes(walk.take(4), "little"))
            else:
                raise FramingError(
                    f"bytes {start:,} to {walk.size:,}, after {walk.frames} whole frames, begin "
                    "no zstd frame"
                )
            walk.frames += 1
        return walk.frames
    finally:
        handle.seek(0)


class _Walk:
    """A walk through ``handle``'s frames: its size, the frames passed."""

    def __init__(self, handle: BinaryIO):
        self.handle = handle
        self.size = handle.seek(0, 2)
        self.frames = 0
        handle.seek(0)

    def skip_frame(self) -> None:
        """Past one zstd frame whose magic number was read: header, blocks, checksum."""
        descriptor = self.take(1)[0]
        single_segment = bool(descriptor & 0x20)
        content_size_flag = descriptor >> 6
        self.skip(
            (0 if single_segment else 1)  # the window descriptor
            + _DICTIONARY_ID_BYTES[descriptor & 0x03]
            + (1 if content_size_flag == 0 and single_segment else 0)
            + _CONTENT_SIZE_BYTES[content_size_flag]
        )
        last = False
        while not last:
            at = self.handle.tell()
            block = int.from_bytes(self.take(3), "little")
            last, kind, length = bool(block & 1), (block >> 1) & 0x03, block >> 3
            if kind == _RESERVED_BLOCK:
                raise FramingError(
                    f"zstd frame {self.frames + 1}: a block of a reserved type at byte {at:,}"
                )
            self.skip(1 if kind == _RLE_BLOCK else length)
        if descriptor & 0x04:  # the content checksum
            self.skip(4)

    def take(self, count: int) -> bytes:
        """The next ``count`` bytes; FramingError when the file ends before them."""
        at = self.handle.tell()
        data = self.handle.read(count)
        if len(data) < count:
            raise self._cut_short(at)
        return data

    def skip(self, count: int) -> None:
        """Past the next ``count`` bytes; FramingError when the file ends before them."""
        at = self.handle.tell()
        if at + count > self.size:
            raise self._cut_short(at)
        self.handle.seek(at + count)

    def _cut_short(self, at: int) -> FramingError:
        return FramingError(
            f"the file ends inside zstd frame {self.frames + 1} (at byte {at:,} of "
            f"{self.size:,}): it is cut short"
        )
