"""Atomic file replacement: write a temporary file beside the target, fsync it, rename it over
the target, fsync the directory. A crash at any point leaves either the old file or the new
one, never a mixture. And one writer per directory: ``DirectoryLock``."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable
from pathlib import Path

from tiermem.errors import ConfigError, LTMLockedError, TiermemError

TMP_SUFFIX = ".tmp"
LOCK_FILE = "ltm.lock"


def atomic_write(path: Path, data: bytes) -> None:
    """``data`` as the new content of ``path``, readable by its owner only (0600)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(path.name + TMP_SUFFIX)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as f:
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


class DirectoryLock:
    """An exclusive lock on a directory for as long as its holder keeps it: ``flock`` on
    ``LOCK_FILE`` inside it, which names the holder's pid for whoever is refused. ``flock``
    belongs to an open file description, so a second holder in the same process is refused
    too, and the kernel drops the lock when the holder dies: a crash never leaves it stale.
    The file itself stays (removing it would let two holders lock two different files).

    >>> import tempfile
    >>> where = Path(tempfile.mkdtemp())
    >>> lock = DirectoryLock.acquire(where)
    >>> DirectoryLock.acquire(where)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    tiermem.errors.LTMLockedError: knowledge graph at ... is in use by process ...
    >>> lock.release()
    >>> DirectoryLock.acquire(where).release()
    """

    def __init__(self, directory: Path, fd: int) -> None:
        self.directory = directory
        self._fd: int | None = fd

    @classmethod
    def acquire(
        cls,
        directory: Path,
        *,
        lock_file: str = LOCK_FILE,
        refused: Callable[[Path, int | None], TiermemError] = LTMLockedError,
        role: str = "the knowledge graph's directory (ltm.path)",
    ) -> DirectoryLock:
        """Take the lock, or raise ``refused(directory, holder pid)`` (``LTMLockedError`` by
        default; ``ConfigError`` naming the directory as ``role`` when it cannot be a
        directory, or cannot be written). ``lock_file`` names the lock inside it."""
        try:
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(directory / lock_file, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise ConfigError(f"cannot use {directory} as {role}: {exc.strerror or exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            raise refused(directory, holder) from None
        except BaseException:
            os.close(fd)
            raise
        try:  # the pid is for whoever is refused; on a full disk the lock holds without it
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            pass
        return cls(directory, fd)

    def fileno(self) -> int:
        """The lock file's descriptor (``-1`` once released): whoever removes the directory
        can tell a lock on a removed file from one on the file at its path."""
        return -1 if self._fd is None else self._fd

    def release(self) -> None:
        """Give the lock up (idempotent); the pid is cleared first, while still held."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            with contextlib.suppress(OSError):  # a read-only disk: the pid just stays
                os.ftruncate(fd, 0)
        finally:
            os.close(fd)  # closing the last descriptor drops the flock


def _read_pid(fd: int) -> int | None:
    try:
        return int(os.pread(fd, 32, 0).decode().strip())
    except (OSError, ValueError):
        return None  # the holder has not written it yet, or is clearing it
