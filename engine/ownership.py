"""One process owns a data directory's stores while a service runs on it.

``tiermem serve`` claims its data directory for as long as it runs (an ``flock`` on
``service.lock`` inside it, naming its pid; the kernel drops it when the process dies, so a
crash never leaves it stale). Every other process that would open the same stores for writing
(``tiermem consolidate``, a second service) checks the claim first and refuses with
``DataDirLockedError``: consolidation then runs on the service's own scheduler.

>>> import tempfile
>>> from pathlib import Path
>>> where = Path(tempfile.mkdtemp())
>>> claim = claim_data_dir(where)
>>> refuse_if_owned(where)  # doctest: +ELLIPSIS
Traceback (most recent call last):
tiermem.errors.DataDirLockedError: data directory ... is owned by a running tiermem service ...
>>> claim.release()
>>> refuse_if_owned(where)
"""

from __future__ import annotations

from pathlib import Path

from tiermem.errors import DataDirLockedError
from tiermem.ltm.persist import DirectoryLock

SERVICE_LOCK_FILE = "service.lock"


def claim_data_dir(data_dir: Path) -> DirectoryLock:
    """Own ``data_dir`` until the returned lock is released (or the process ends), or raise
    ``DataDirLockedError`` naming the process that owns it."""
    return DirectoryLock.acquire(
        data_dir.expanduser(),
        lock_file=SERVICE_LOCK_FILE,
        refused=DataDirLockedError,
        role="the service's data directory (data_dir)",
    )


def refuse_if_owned(data_dir: Path) -> None:
    """Raise ``DataDirLockedError`` when a running service owns ``data_dir``; else return,
    holding nothing."""
    claim_data_dir(data_dir).release()
