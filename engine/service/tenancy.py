"""User ids scoped by tenant: the service stores tenant ``acme``'s user ``ana`` as
``acme:ana``. Tenant names never hold ``:``, so no two (tenant, user) pairs share a stored id,
and every store, journal and search is already per user id: a tenant cannot name, list, read
or erase another tenant's users, and another tenant's memory id is simply not found (404).

Responses give the caller its own user id back: the stored one never leaves the service.

``OWNER`` (the empty name, which no keys file can hold) is the owner of an embedded data
directory, whose user ids are stored as they are: ``tiermem inspect`` serves it so.

>>> scope = UserScope.of("acme", "Jose\u0301")
>>> scope.stored, scope.user_id == "Jos\u00e9"
('acme:José', True)
>>> scope.to_caller({"user_id": "acme:José", "entries": [{"user_id": "acme:José"}]})
{'user_id': 'José', 'entries': [{'user_id': 'José'}]}
>>> UserScope.of(OWNER, "ana").stored, tenant_users("acme", ["acme:ana", "acme2:bo", "ana"])
('ana', ['ana'])
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tiermem.validation import MAX_ID_LENGTH, validate_user_id

SEPARATOR = ":"
OWNER = ""  # an embedded directory's owner: ids as stored (tenant names are 1-32 characters)


@dataclass(frozen=True, slots=True)
class UserScope:
    """One request's user: as the caller names it (``user_id``, in NFC) and as stored."""

    tenant: str
    user_id: str
    stored: str

    @classmethod
    def of(cls, tenant: str, user_id: object) -> UserScope:
        """Validate the caller's user id as ``Memory`` would (so its errors name what the
        caller sent), then scope it. The scoped id must fit ``Memory``'s id limit, so a
        tenant's user ids are at most ``MAX_ID_LENGTH - len(tenant) - 1`` characters."""
        if tenant == OWNER:
            external = validate_user_id(user_id)
            return cls(tenant, external, external)
        limit = MAX_ID_LENGTH - len(tenant) - len(SEPARATOR)
        external = validate_user_id(user_id, max_length=limit)  # the tenant's own limit
        return cls(tenant, external, f"{tenant}{SEPARATOR}{external}")

    def to_caller(self, data: Any) -> Any:
        """JSON ``data`` with every ``user_id`` of this scope given back as the caller's."""
        if isinstance(data, dict):
            return {
                key: self.user_id
                if key == "user_id" and value == self.stored
                else self.to_caller(value)
                for key, value in data.items()
            }
        if isinstance(data, list):
            return [self.to_caller(item) for item in data]
        return data


def tenant_users(tenant: str, stored: Iterable[str]) -> list[str]:
    """The user ids of ``tenant`` among ``stored`` ones, as the tenant names them, sorted:
    every stored id for ``OWNER``."""
    if tenant == OWNER:
        return sorted(stored)
    prefix = f"{tenant}{SEPARATOR}"
    return sorted(s.removeprefix(prefix) for s in stored if s.startswith(prefix))
