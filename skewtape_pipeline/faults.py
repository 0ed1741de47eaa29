"""Crash-injection seam: named checkpoints at every step boundary of the writers.

:func:`checkpoint` is a no-op unless a test installs a hook with :func:`installed`. The hook is
also called just before every atomic rename made through :mod:`skewtape_pipeline.fsio`
(named ``publish:<file name>``). The delta applier and the re-tiering job call it. A hook
that raises simulates a crash between writing a temporary file and renaming it, leaving the
temporary file behind as a real crash would.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

from skewtape_pipeline import fsio

Hook = Callable[[str], None]

_hook: Hook | None = None


def checkpoint(name: str) -> None:
    """Mark a step boundary called ``name``; calls the installed hook, if any."""
    if _hook is not None:
        _hook(name)


def _before_publish(temp: Path, target: Path) -> None:
    checkpoint(f"publish:{target.name}")


@contextlib.contextmanager
def installed(hook: Hook) -> Iterator[None]:
    """Call ``hook(name)`` at every checkpoint while the block runs (tests only; one thread)."""
    global _hook
    previous = _hook
    previous_publish = fsio.set_publish_hook(_before_publish)
    _hook = hook
    try:
        yield
    finally:
        _hook = previous
        fsio.set_publish_hook(previous_publish)
