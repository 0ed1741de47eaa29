"""CHECKSUMS.sha256 as GNU coreutils writes and reads it, tested against the real ``sha256sum``.

The oracle is the coreutils binary: files with awkward names are hashed by ``sha256sum`` (text
and binary mode) and its output must parse to exactly the files' hashes; what we write must be
accepted by ``sha256sum -c --strict``; and a line ``sha256sum -c --strict`` calls improperly
formatted must be a typed error naming the file and the line.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from skewtape_pipeline.errors import ChecksumLineError, ManifestError
from skewtape_pipeline.hashing import format_checksums, parse_checksums

SHA256SUM = shutil.which("sha256sum")
pytestmark = pytest.mark.skipif(SHA256SUM is None, reason="GNU coreutils sha256sum not installed")

AWKWARD_NAMES = (
    "plain.txt",
    "with space.md",
    " leading space",
    "trailing space ",
    "*star first",
    "back\\slash",
    "new\nline",
    "carriage\rreturn",
    "tab\there",
    "ünïcödé.parquet",
    "#hash first",
    "double  space",
)
SRC = Path("CHECKSUMS.sha256")


def _awkward_files(folder: Path) -> dict[str, str]:
    """Write one small file per awkward name; {name: sha256}."""
    folder.mkdir()
    hashes = {}
    for index, name in enumerate(AWKWARD_NAMES):
        data = f"file {index}\n".encode()
        (folder / name).write_bytes(data)
        hashes[name] = hashlib.sha256(data).hexdigest()
    return hashes


def _sha256sum(folder: Path, *args: str) -> bytes:
    return subprocess.run(
        [SHA256SUM, *args, "--", *AWKWARD_NAMES], cwd=folder, capture_output=True, check=True
    ).stdout


def _accepted_by_sha256sum(folder: Path, listing: bytes) -> subprocess.CompletedProcess:
    (folder.parent / "listing.sha256").write_bytes(listing)
    return subprocess.run(
        [SHA256SUM, "-c", "--strict", "--quiet", str(folder.parent / "listing.sha256")],
        cwd=folder,
        capture_output=True,
    )


@pytest.mark.parametrize("mode", ["--text", "--binary"])
def test_parse_checksums_when_sha256sum_wrote_awkward_names_gives_every_hash(tmp_path, mode):
    hashes = _awkward_files(tmp_path / "files")
    written = _sha256sum(tmp_path / "files", mode)
    assert b"\\" in written  # the escaped form is exercised
    assert parse_checksums(written, source=SRC) == hashes


def test_parse_checksums_when_uppercase_crlf_and_no_final_newline_reads_as_sha256sum(tmp_path):
    hashes = _awkward_files(tmp_path / "files")
    lines = _sha256sum(tmp_path / "files", "--binary").split(b"\n")[:-1]
    shouted = [line[:1] + line[1:65].upper() + line[65:] if line[:1] == b"\\" else
               line[:64].upper() + line[64:] for line in lines]  # fmt: skip
    listing = b"\r\n".join(shouted)
    assert _accepted_by_sha256sum(tmp_path / "files", listing).returncode == 0
    assert parse_checksums(listing, source=SRC) == hashes


def test_format_checksums_when_names_are_awkward_is_accepted_by_sha256sum_check(tmp_path):
    hashes = _awkward_files(tmp_path / "files")
    written = format_checksums(hashes)
    checked = _accepted_by_sha256sum(tmp_path / "files", written)
    assert checked.returncode == 0, checked.stderr.decode()
    assert parse_checksums(written, source=SRC) == hashes


def test_format_checksums_when_names_are_awkward_writes_what_sha256sum_writes(tmp_path):
    hashes = _awkward_files(tmp_path / "files")
    ours = sorted(format_checksums(hashes).split(b"\n")[:-1])
    theirs = sorted(_sha256sum(tmp_path / "files").split(b"\n")[:-1])
    assert ours == theirs


def test_parse_checksums_when_blank_and_comment_lines_skips_them_as_sha256sum_does(tmp_path):
    hashes = _awkward_files(tmp_path / "files")
    listing = b"\n# a comment\n" + _sha256sum(tmp_path / "files") + b"\r\n"
    assert _accepted_by_sha256sum(tmp_path / "files", listing).returncode == 0
    assert parse_checksums(listing, source=SRC) == hashes


IMPROPER_LINES = (
    b"%(hex)s plain.txt",  # one space: the BSD "reversed" form sha256sum -c does not mix in
    b"%(short)s  plain.txt",
    b"%(hex)s0  plain.txt",
    b"%(hex)s  ",
    b"\\%(hex)s  back\\qslash",  # an escape sha256sum does not know
    b"SHA256 (plain.txt) = %(hex)s",  # the --tag form: not a form CHECKSUMS.sha256 uses
    b"%(hex)sX plain.txt",
    b"not a checksum line",
)


@pytest.mark.parametrize("template", IMPROPER_LINES)
def test_parse_checksums_when_line_is_improper_raises_naming_file_and_line(tmp_path, template):
    _awkward_files(tmp_path / "files")
    digest = hashlib.sha256(b"file 0\n").hexdigest().encode()
    good = digest + b"  plain.txt\n"
    bad = template % {b"hex": digest, b"short": digest[:63]}
    if not template.startswith(b"SHA256"):
        strict = _accepted_by_sha256sum(tmp_path / "files", good + bad + b"\n")
        assert strict.returncode != 0  # the oracle refuses it too
    with pytest.raises(ChecksumLineError, match=r"CHECKSUMS\.sha256.*line 2") as caught:
        parse_checksums(good + bad + b"\n", source=SRC)
    assert isinstance(caught.value, ManifestError)
    assert caught.value.line == 2


def test_parse_checksums_when_a_path_is_listed_twice_raises_naming_the_line():
    digest = "ab" * 32
    with pytest.raises(ChecksumLineError, match="line 2 lists 'a' a second time"):
        parse_checksums(f"{digest}  a\n{digest.upper()} *a\n".encode(), source=SRC)


def test_parse_checksums_when_not_utf8_raises_naming_the_line():
    digest = b"ab" * 32
    with pytest.raises(ChecksumLineError, match=r"line 2.*UTF-8"):
        parse_checksums(digest + b"  a\n" + digest + b"  \xff\n", source=SRC)


def test_parse_checksums_when_name_holds_a_form_feed_keeps_it_in_the_name():
    digest = "ab" * 32
    # Only "\n" ends a line (str.splitlines would also split at \x0c, \x1c, \u2028 ...).
    assert parse_checksums(f"{digest}  a\x0cb\u2028c\n".encode(), source=SRC) == {
        "a\x0cb\u2028c": digest
    }


def test_verify_when_an_apply_merged_tables_names_exactly_those_sha256sum_fails(
    published_sample: Path, tmp_path: Path, capsys
):
    from skewtape_pipeline.cli.app import main

    root = tmp_path / "mirror"
    assert main(["sync", str(published_sample), "--root", str(root), "--json"]) == 0
    snapshot = sorted((root / "history").iterdir())[-1]
    capsys.readouterr()
    assert main(["verify", str(snapshot), "--full"]) == 0
    out = capsys.readouterr().out
    checked = subprocess.run(
        [SHA256SUM, "-c", "CHECKSUMS.sha256"], cwd=snapshot, capture_output=True, text=True
    )
    failed = sorted(line.split(": ")[0] for line in checked.stdout.splitlines()
                    if line.endswith(": FAILED"))  # fmt: skip
    assert failed, "the sample chain merges reference tables, which sha256sum then fails"
    assert f"{len(failed)} reference tables compared by their rows" in out
    assert f"not their bytes: {', '.join(failed)}\n" in out
    assert "`sha256sum -c CHECKSUMS.sha256` lists them as FAILED; this check covers every" in out
    assert "verify --full` is the check" not in out  # said without --full only
    assert main(["verify", str(snapshot)]) == 0
    assert "`skewtape-pipeline verify --full` is the check that covers every file" in (
        capsys.readouterr().out
    )
