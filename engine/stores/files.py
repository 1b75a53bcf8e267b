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
