"""Collection names for user ids.

A name is the configured prefix and a 128-bit BLAKE2b digest of the user id: any
string is a safe name, two user ids never share a collection short of a hash collision, and no
user id can be crafted to address another user's collection.
"""

from __future__ import annotations

import hashlib


def collection_name(prefix: str, user_id: str) -> str:
    """The collection that holds ``user_id``'s MTM.

    >>> name = collection_name("tiermem_mtm_", "alice")
    >>> name.startswith("tiermem_mtm_u_"), len(name)
    (True, 46)
    """
    digest = hashlib.blake2b(user_id.encode("utf-8"), digest_size=16).hexdigest()
    return f"{prefix}u_{digest}"
