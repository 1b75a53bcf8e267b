"""Atomic file replacement: write a temporary file beside the target, fsync it, rename it over
the target, fsync the directory. A crash at any point leaves either the old file or the new
one, never a mixture."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

TMP_SUFFIX = ".tmp"


def atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + TMP_SUFFIX)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fsync_dir(path.parent)


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def discard_leftovers(path: Path) -> None:
    """A temporary file left by a crash is never the graph: remove it."""
    with contextlib.suppress(FileNotFoundError):
        path.with_name(path.name + TMP_SUFFIX).unlink()
