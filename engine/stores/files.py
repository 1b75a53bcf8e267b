"""The embedded store's files: readable by their owner only, and a probe of whether their
directory can take a write now.

>>> import tempfile
>>> from pathlib import Path
>>> root = Path(tempfile.mkdtemp())
>>> (root / "storage.sqlite").write_bytes(b"")
0
>>> (root / "storage.sqlite").chmod(0o644)
>>> restrict_tree(root)
>>> oct((root / "storage.sqlite").stat().st_mode & 0o777)
'0o600'
>>> probe_writes(root, 4096)
>>> sorted(p.name for p in root.iterdir())
['storage.sqlite']
>>> with open(root / "sparse", "wb") as f:
...     _ = f.write(b"head"); _ = f.seek(2**20); _ = f.write(b"tail")
>>> copy_sparse(root / "sparse", root / "copy")
>>> (root / "copy").read_bytes() == (root / "sparse").read_bytes()
True
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

PROBE_NAME = ".tiermem-probe"


def restrict_tree(root: Path) -> None:
    """Every directory under ``root`` (itself too) 0700, every file 0600, where looser."""
    for where, _, files in os.walk(root):
        for name, mode in [(where, 0o700)] + [(os.path.join(where, f), 0o600) for f in files]:
            found = os.lstat(name).st_mode
            if found & 0o077 and not stat.S_ISLNK(found):
                os.chmod(name, mode)


def probe_writes(directory: Path, size: int) -> None:
    """Write ``size`` bytes to a file in ``directory``, sync them and remove the file: raises
    ``OSError`` when the disk is full or read-only."""
    probe = directory / PROBE_NAME
    fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, bytes(size))
        os.fsync(fd)
    finally:
        os.close(fd)
        probe.unlink(missing_ok=True)


def copy_sparse(source: Path, target: Path) -> None:
    """Copy file ``source`` to ``target`` (0600), holes kept as holes: only the ranges that
    hold data are written (``SEEK_DATA`` / ``SEEK_HOLE``), so a mostly empty memory-mapped
    file (a 32 MiB WAL segment with a few pages written) costs its data, not its length."""
    src = os.open(source, os.O_RDONLY | os.O_CLOEXEC)
    try:
        dst = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            size = os.fstat(src).st_size
            os.ftruncate(dst, size)
            offset = 0
            while offset < size:
                try:
                    start = os.lseek(src, offset, os.SEEK_DATA)
                except OSError:  # ENXIO: no data past offset
                    break
                end = os.lseek(src, start, os.SEEK_HOLE)
                while start < end:
                    chunk = os.pread(src, min(end - start, 2**20), start)
                    os.pwrite(dst, chunk, start)
                    start += len(chunk)
                offset = end
        finally:
            os.close(dst)
    finally:
        os.close(src)
