"""The exception hierarchy: every error tiermem raises on purpose is a ``TiermemError``.

Input errors are raised before anything is stored; provider errors are translated at the
boundary with ``raise ... from`` so callers never have to catch a Qdrant or torch exception.
"""

from __future__ import annotations

import shlex

SHOWN_CHARS = 60


def shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """``value`` as an error message shows it: its repr, cut to about ``limit`` characters
    with the full length said, so a 10 MB id never becomes a 10 MB message.

    >>> shown("ana")
    "'ana'"
    >>> shown("x" * 100, limit=5)
    "'xxxxx'... (100 characters)"
    """
    if isinstance(value, str | bytes) and len(value) > limit:
        unit = "characters" if isinstance(value, str) else "bytes"
        return f"{value[:limit]!r}... ({len(value)} {unit})"
    try:
        text = repr(value)
    except ValueError:  # an int past sys.get_int_max_str_digits()
        return f"<{type(value).__name__} too large to show>"
    return text if len(text) <= limit else f"{text[:limit]}... ({type(value).__name__})"


class TiermemError(Exception):
    """Root of every error raised by tiermem."""


class InvalidInputError(TiermemError, ValueError):
    """A caller passed something tiermem cannot accept. Nothing was stored."""


class InvalidUserIdError(InvalidInputError):
    """The user id is empty, too long, not a string, or holds control characters."""

    def __init__(self, user_id: object, reason: str) -> None:
        self.user_id = user_id
        self.reason = reason
        super().__init__(f"invalid user id {shown(user_id)}: {reason}")


class InvalidSessionIdError(InvalidInputError):
    """The session id is empty, too long, not a string, or holds control characters."""

    def __init__(self, session_id: object, reason: str) -> None:
        self.session_id = session_id
        self.reason = reason
        super().__init__(f"invalid session id {shown(session_id)}: {reason}")


class EmptyMessagesError(InvalidInputError):
    """``add()`` got no messages, or a message with no content."""


class InvalidMessageError(InvalidInputError):
    """A message could not be understood (wrong type, missing field, bad value)."""

    def __init__(self, index: int, reason: str) -> None:
        self.index = index
        self.reason = reason
        super().__init__(f"message {index}: {reason}")


class UnknownRoleError(InvalidMessageError):
    """A message's role is not one of ``user``, ``assistant``, ``system``."""

    def __init__(self, index: int, role: object) -> None:
        self.role = role
        super().__init__(index, f"unknown role {shown(role)} (expected user, assistant or system)")


class NaiveTimestampError(InvalidMessageError):
    """A timestamp has no time zone; tiermem never guesses one."""

    def __init__(self, index: int, value: object) -> None:
        self.value = value
        super().__init__(index, f"timestamp {shown(value)} has no time zone")


class InvalidLimitError(InvalidInputError):
    """A result limit such as ``k`` is not a positive integer (or is over ``maximum``, where
    one applies: the service's own limits)."""

    def __init__(self, name: str, value: object, maximum: int | None = None) -> None:
        self.name = name
        self.value = value
        self.maximum = maximum
        bound = "" if maximum is None else f" of at most {maximum}"
        super().__init__(f"{name} must be a positive integer{bound}, got {shown(value)}")


class InvalidQueryError(InvalidInputError):
    """A query or memory text is empty or too long."""


class InvalidFilterError(InvalidInputError):
    """A search filter is inconsistent (for example ``since`` after ``until``)."""


class MemoryNotFoundError(TiermemError, KeyError):
    """No memory with this id exists for this user."""

    def __init__(self, memory_id: str, user_id: str, message: str | None = None) -> None:
        self.memory_id = memory_id
        self.user_id = user_id
        super().__init__(message or f"no memory {shown(memory_id)} for this user")

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0])


class InvalidMemoryIdError(MemoryNotFoundError, InvalidInputError):
    """The memory id cannot name any memory (not a string, empty, too long, a lone
    surrogate). Still a ``MemoryNotFoundError``: no memory has this id."""

    def __init__(self, memory_id: object, user_id: str, reason: str) -> None:
        self.reason = reason
        text = memory_id if isinstance(memory_id, str) else shown(memory_id)
        super().__init__(text, user_id, f"invalid memory id {shown(memory_id)}: {reason}")


class KnowledgeItemError(MemoryNotFoundError):
    """The id names an item of the shared knowledge graph (an ``ltm:`` hit id), not a memory
    of this user. LTM knowledge is de-identified and shared by every user, so no user can get,
    update or delete it, and it has no per-user history: only consolidation changes it, and
    ``Memory.knowledge_history(id)`` lists its changes. Still a ``MemoryNotFoundError``: this
    user has no memory with this id."""

    def __init__(self, memory_id: str, user_id: str, operation: str) -> None:
        self.operation = operation
        super().__init__(
            memory_id,
            user_id,
            f"{shown(memory_id)} is shared LTM knowledge, not a memory of this user: knowledge "
            f"is de-identified and shared across users, so {operation}() does not apply to it "
            "(only consolidation changes it); use Memory.knowledge_history(id) for its changes",
        )


class WrongTierError(TiermemError, AttributeError):
    """A search hit was asked for what its tier does not have: the MTM ``entry`` of an LTM
    hit, or the LTM ``fact`` of an MTM hit. Check ``hit.tier``, or use ``hit.id``/``hit.text``,
    which both tiers have. An ``AttributeError`` too, so ``getattr(hit, "entry", None)`` works."""

    def __init__(self, item_id: str, tier: str, wanted: str) -> None:
        self.item_id = item_id
        self.tier = tier
        self.wanted = wanted
        if tier == "ltm":
            what = "shared LTM knowledge (use hit.fact)"
        else:
            what = "an MTM entry (use hit.entry)"
        super().__init__(f"hit {shown(item_id)} is {what}; it has no .{wanted}")


class ConfigError(TiermemError):
    """The configuration names something that does not exist or cannot work together."""


class UnknownProviderError(ConfigError):
    """A registry was asked for a provider name it does not know."""

    def __init__(self, family: str, name: str, known: list[str]) -> None:
        self.family = family
        self.name = name
        self.known = known
        super().__init__(f"unknown {family} provider {name!r}; known: {', '.join(sorted(known))}")


class StoreError(TiermemError):
    """The vector store failed; the operation was rolled back where it had started."""


class EmbedderError(TiermemError):
    """The embedder failed or returned vectors of the wrong shape."""


class EmbedderUnavailableError(EmbedderError):
    """The embedder's server could not be reached, timed out, or kept failing with a
    transient status (429, 5xx) through all its retries. Nothing was stored."""


class EmbedderDimensionError(EmbedderError):
    """The embedder returned vectors of another dimension than the configuration's ``dim``."""

    def __init__(self, name: str, expected: int, got: int) -> None:
        self.name = name
        self.expected = expected
        self.got = got
        super().__init__(
            f"embedder {name} returned {got}-d vectors, but embedder.dim is {expected}: set "
            f"embedder.dim = {got}, or name a model that embeds in {expected} dimensions"
        )


class EmbedderMismatchError(ConfigError):
    """A user's MTM collection was written by another embedder than the configured one: its
    vectors would be compared with vectors of another space, and every search would return
    noise. ``tiermem reindex --user U`` embeds the user's entries again with the configured
    embedder."""

    def __init__(
        self, user_id: str, recorded: str, recorded_dim: int, configured: str, configured_dim: int
    ) -> None:
        self.user_id = user_id
        self.recorded = recorded
        self.recorded_dim = recorded_dim
        self.configured = configured
        self.configured_dim = configured_dim
        user = shlex.quote(user_id) if len(user_id) <= SHOWN_CHARS else "<this user>"
        super().__init__(
            f"the MTM collection of user {shown(user_id)} was written by embedder {recorded} "
            f"({recorded_dim}-d), but the configured embedder is {configured} "
            f"({configured_dim}-d): run `tiermem reindex --user {user}` with this "
            "configuration to embed its entries again, or configure the embedder that wrote it"
        )


class AuditError(TiermemError):
    """The audit log could not be written; the change it described was rolled back."""


class JournalUnavailableError(AuditError):
    """The journal cannot be written now (a full or read-only disk, an I/O error, a lock held
    too long): nothing was changed, and retrying once the cause is gone may work."""


class JournalLockedError(TiermemError):
    """Another process holds this journal: one process writes a journal at a time."""

    def __init__(self, path: object, pid: int | None) -> None:
        super().__init__(f"journal {path} is in use by {_holder(pid)}; stop it first")
        self.path = path
        self.pid = pid


class ClosedError(TiermemError):
    """The memory was used after ``close()``."""


class SLMError(TiermemError):
    """A small-model call failed. Roles catch it and fall back (counted); it never loses data."""

    def __init__(self, task: str, message: str) -> None:
        self.task = task
        super().__init__(f"{task}: {message}")


class SLMOutputInvalid(SLMError):  # noqa: N818 - the name the conventions give it
    """The model's output did not parse or did not match the task's schema."""

    def __init__(self, task: str, raw: str, reason: str) -> None:
        self.raw = raw
        self.reason = reason
        super().__init__(task, f"invalid output ({reason}): {raw[:200]!r}")


class SLMTimeout(SLMError):  # noqa: N818
    """The model did not answer within the role's time budget."""


class SLMUnavailable(SLMError):  # noqa: N818
    """The backend could not be reached or the model could not be loaded."""


class ModelNotInstalledError(ConfigError):
    """A model alias was named but its weights are not provisioned."""


class LTMError(TiermemError):
    """The knowledge graph could not be loaded, saved or updated."""


class LTMCorruptError(LTMError):
    """The saved graph is unreadable or of an unknown schema version."""

    def __init__(self, path: object, reason: str) -> None:
        super().__init__(f"knowledge graph at {path} cannot be loaded: {reason}")
        self.path = path
        self.reason = reason


def _holder(pid: int | None) -> str:
    return f"process {pid}" if pid is not None else "another process"


class LTMEmbedderMismatchError(ConfigError):
    """The knowledge graph was embedded by another embedder than the configured one: its
    vectors would be compared with vectors of another space. ``tiermem reindex --ltm``
    embeds its node and edge texts again with the configured embedder."""

    def __init__(self, path: object, recorded: str, configured: str) -> None:
        self.path = str(path)
        self.recorded = recorded
        self.configured = configured
        super().__init__(
            f"the knowledge graph at {path} was embedded by {recorded}, but the configured "
            f"embedder is {configured}: run `tiermem reindex --ltm` with this configuration "
            "to embed it again, or configure the embedder that wrote it"
        )


class LTMLockedError(LTMError):
    """Another process (or another open memory in this one) holds this knowledge graph: two
    writers would overwrite each other's graph, so the second refuses to start."""

    def __init__(self, path: object, pid: int | None) -> None:
        super().__init__(
            f"knowledge graph at {path} is in use by {_holder(pid)}; stop it first, or give this "
            "memory its own data directory (ltm.path)"
        )
        self.path = path
        self.pid = pid


class DataDirLockedError(TiermemError):
    """A running tiermem service owns this data directory: its stores have one writer, so a
    second process (``tiermem consolidate``, another service) refuses to open them."""

    def __init__(self, path: object, pid: int | None) -> None:
        super().__init__(
            f"data directory {path} is owned by a running tiermem service ({_holder(pid)}); "
            "use that service (its scheduler consolidates: POST /v1/consolidation/run), or "
            "stop it first"
        )
        self.path = path
        self.pid = pid


class ServiceError(TiermemError):
    """The tiermem service (``RemoteMemory``'s server) refused or failed a request for a reason
    of its own, not of the memory's: authentication, limits, availability."""


class AuthenticationError(ServiceError):
    """The API key is missing, malformed or unknown (HTTP 401)."""


class PermissionDeniedError(ServiceError):
    """This API key's tenant may not use a service-wide operation (HTTP 403): consolidating
    every user and the scheduler's state need a key added with ``--admin``."""


class RequestTooLargeError(ServiceError, InvalidInputError):
    """The request body is over the service's size limit (HTTP 413). Nothing was stored."""


class ServiceUnavailableError(ServiceError):
    """The service cannot take the request now: it is starting, shutting down, overloaded
    (too many requests in flight), or it could not be reached. A refused request stored
    nothing; one whose connection broke after it was sent may have run."""


class ServiceOverloadedError(ServiceUnavailableError):
    """Too many requests are in flight at the service (HTTP 503 with ``Retry-After``)."""


class TenantBusyError(ServiceOverloadedError):
    """This API key's tenant has its whole share of the service's requests in flight (HTTP
    429 with ``Retry-After``): one tenant cannot take every slot from the others."""


class RequestTimeoutError(ServiceError):
    """The request's body did not arrive within the service's ``body_timeout_s`` (HTTP
    408). Nothing was stored."""
