"""API keys: each maps to one tenant, and only its SHA-256 is ever stored.

A key is 32 random bytes (``secrets.token_urlsafe``), so a fast hash is enough: nothing can
be guessed from it, and there is no password to stretch. ``tiermem keys add TENANT`` prints
a new key once; the keys file keeps ``{"tenant", "sha256", "admin", "created"}`` per key.

>>> import tempfile
>>> from pathlib import Path
>>> path = Path(tempfile.mkdtemp()) / "keys.json"
>>> key = add_key(path, "acme")
>>> ring = KeyRing(path)
>>> ring.tenant_for(key)
Tenant(name='acme', admin=False)
>>> ring.tenant_for("tmk_not-a-key") is None, key in path.read_text()
(True, False)
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import secrets
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from tiermem.errors import ConfigError, InvalidInputError
from tiermem.ltm.persist import atomic_write

logger = logging.getLogger(__name__)

KEY_PREFIX = "tmk_"
KEYS_FORMAT = "tiermem-keys-1"
# Tenant names never hold ":", so "tenant:user" scopes a user id without any collision.
TENANT_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")


@dataclass(frozen=True, slots=True)
class Tenant:
    """Whom a key belongs to. ``admin`` keys may also run service-wide operations
    (consolidating every user, the scheduler's state)."""

    name: str
    admin: bool = False


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def validate_tenant(name: str) -> str:
    if not TENANT_NAME.fullmatch(name):
        raise InvalidInputError(
            f"tenant {name!r}: 1-32 characters of a-z, 0-9, '_' and '-', starting with a "
            "letter or digit"
        )
    return name


def _read(path: Path) -> list[dict[str, object]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the keys file {path}: {exc}") from exc
    if not isinstance(data, dict) or data.get("format") != KEYS_FORMAT:
        raise ConfigError(f"{path} is not a tiermem keys file (format {KEYS_FORMAT})")
    keys = data.get("keys")
    if not isinstance(keys, list) or not all(isinstance(k, dict) for k in keys):
        raise ConfigError(f"{path}: 'keys' must be a list of objects")
    return keys


def add_key(path: Path, tenant: str, *, admin: bool = False) -> str:
    """Store the hash of a new key of ``tenant`` in ``path`` (created, mode 0600) and return
    the key: the only time it is seen. A tenant may hold several keys (rotation)."""
    record = {
        "tenant": validate_tenant(tenant),
        "sha256": "",
        "admin": admin,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    record["sha256"] = hash_key(key)
    keys = [*_read(path), record]
    atomic_write(path, json.dumps({"format": KEYS_FORMAT, "keys": keys}, indent=1).encode())
    path.chmod(0o600)
    return key


def list_tenants(path: Path) -> list[Tenant]:
    """Every tenant with a key in ``path``, once each (admin if any of its keys is)."""
    return sorted(set(_load(path).values()), key=lambda t: (t.name, t.admin))


def _load(path: Path) -> dict[str, Tenant]:
    ring: dict[str, Tenant] = {}
    for index, record in enumerate(_read(path)):
        tenant, digest = record.get("tenant"), record.get("sha256")
        if not isinstance(tenant, str) or not isinstance(digest, str) or len(digest) != 64:
            raise ConfigError(f"{path}: key {index} needs a tenant and a sha256")
        try:
            name = validate_tenant(tenant)
        except InvalidInputError as exc:  # the file is configuration: its faults are ConfigError
            raise ConfigError(f"{path}: key {index}: {exc}") from exc
        ring[digest] = Tenant(name, record.get("admin") is True)
    return ring


class KeyLookup(Protocol):
    """What the service asks of its keys: the tenant of a key, or ``None``."""

    def tenant_for(self, key: str) -> Tenant | None: ...


class OneKey:
    """A single key held in memory, never written anywhere: ``tiermem inspect`` makes one
    per run for the data directory's owner.

    >>> one = OneKey(Tenant("", admin=False))
    >>> one.tenant_for(one.key), one.tenant_for("tmk_other")
    (Tenant(name='', admin=False), None)
    """

    def __init__(self, tenant: Tenant) -> None:
        self.key = KEY_PREFIX + secrets.token_urlsafe(32)
        self._digest = hash_key(self.key)
        self._tenant = tenant

    def tenant_for(self, key: str) -> Tenant | None:
        return self._tenant if secrets.compare_digest(hash_key(key), self._digest) else None


class KeyRing:
    """The service's view of the keys file, read again whenever the file changes, so a key
    added (or removed) while the service runs counts from its next request."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._refused: tuple[int, int] | None = None  # the version of the file last refused
        self._ring: dict[str, Tenant] = {}
        self._refresh()
        if not self._ring:
            raise ConfigError(
                f"no API keys in {path}: add one with `tiermem keys add TENANT --keys {path}`"
            )

    def _refresh(self) -> None:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            stamp = None
        else:
            stamp = (stat.st_mtime_ns, stat.st_size)
        with self._lock:
            if stamp is not None and stamp in (self._stamp, self._refused):
                return  # read already, or refused already: nothing new to read
            try:
                ring = _load(self.path)
            except ConfigError as exc:
                if not self._ring:
                    raise
                # a file caught half-edited, or with one bad entry, must not lock every tenant
                # out: keep the last good keys until it changes and reads again
                logger.warning("keys file refused (%s); keeping the keys read before", exc)
                self._refused = stamp
                return
            self._ring, self._stamp = ring, stamp

    def tenant_for(self, key: str) -> Tenant | None:
        """The tenant of ``key``, or ``None`` for an unknown key."""
        self._refresh()
        return self._ring.get(hash_key(key))
