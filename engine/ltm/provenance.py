"""LTM provenance as opaque keys: a keyed hash (HMAC-SHA256 with a configured secret) of the
user and the MTM entry that contributed. No user id or name is stored in the graph.

Keys of one user's different entries are unrelated to each other, so the graph does not even
reveal which facts came from the same person. Erasure recomputes the keys from the user's
entry ids (the journal keeps every id the user ever had until ``forget_user``).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from collections.abc import Iterable
from pathlib import Path

from tiermem.errors import ConfigError

SECRET_BYTES = 32


class Provenance:
    """Derives the opaque keys. The same secret gives the same keys across restarts.

    >>> p = Provenance(b"0" * 32)
    >>> key = p.entry_key("alice", "m1")
    >>> len(key), "alice" in key, key == p.entry_key("alice", "m1")
    (32, False, True)
    """

    def __init__(self, secret: bytes) -> None:
        if len(secret) < 16:
            raise ConfigError("the LTM provenance secret must be at least 16 bytes")
        self._secret = secret

    def _mac(self, *parts: str) -> str:
        message = "\x1f".join(parts).encode()
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()[:32]

    def entry_key(self, user_id: str, entry_id: str) -> str:
        """The provenance key of one MTM entry of one user."""
        return self._mac("entry", user_id, entry_id)

    def entry_keys(self, user_id: str, entry_ids: Iterable[str]) -> set[str]:
        return {self.entry_key(user_id, e) for e in entry_ids}

    def user_key(self, user_id: str) -> str:
        """The key under which the consolidation state of a user is kept."""
        return self._mac("user", user_id)

    def mark(self, user_id: str, entry_id: str, version: str) -> str:
        """A key for "this version of this entry was consolidated"."""
        return self._mac("done", user_id, entry_id, version)


def load_or_create_secret(path: Path) -> bytes:
    """The secret stored at ``path`` (hex), created with mode 0600 on first use. A path that
    cannot hold it (a file where its directory should be, no permission) is a
    ``ConfigError`` naming it."""
    try:
        return bytes.fromhex(path.read_text().strip())
    except FileNotFoundError:
        pass
    except ValueError as exc:
        raise ConfigError(f"the LTM secret at {path} is not hex") from exc
    except OSError as exc:
        raise ConfigError(f"cannot read the LTM secret at {path}: {exc.strerror or exc}") from exc
    secret = secrets.token_bytes(SECRET_BYTES)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secret.hex())
    except OSError as exc:
        raise ConfigError(f"cannot create the LTM secret at {path}: {exc.strerror or exc}") from exc
    return secret
