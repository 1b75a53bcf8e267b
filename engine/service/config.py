"""The service's own settings: the ``[service]`` table of the config file and
``TIERMEM_SERVICE__<FIELD>`` in the environment (read at the edge by ``tiermem serve``).

>>> ServiceConfig.model_validate({"max_k": "20"}).max_k
20
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator
from tiermem.validation import MAX_CONTENT_CHARS, MAX_QUERY_CHARS


class ServiceConfig(BaseModel):
    """Limits and files of one ``tiermem serve`` process.

    A request over a limit is refused before it reaches the memory: a body over
    ``max_body_bytes`` with 413, a text, ``k`` or message count over its limit with 422 (the
    same typed error ``Memory`` raises past its own limits), a request beyond
    ``max_in_flight`` concurrent ones with 503 and ``Retry-After``, and one beyond its
    tenant's share of them (``max_in_flight_per_tenant``, by default half) with 429 and
    ``Retry-After``. A body that has not fully arrived ``body_timeout_s`` after its headers
    is answered 408 and frees its slot."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    keys_file: Path | None = None
    # a message of MAX_CONTENT_CHARS characters, each escaped as JSON's \\uXXXX pair at worst
    max_body_bytes: int = Field(default=4 * 1_048_576, gt=0)
    max_text_chars: int = Field(default=MAX_CONTENT_CHARS, gt=0, le=MAX_CONTENT_CHARS)
    max_query_chars: int = Field(default=MAX_QUERY_CHARS, gt=0, le=MAX_QUERY_CHARS)
    max_messages: int = Field(default=256, gt=0)
    max_k: int = Field(default=100, gt=0)
    max_budget_tokens: int = Field(default=16_000, gt=0)
    max_in_flight: int = Field(default=32, gt=0)
    max_in_flight_per_tenant: int | None = Field(default=None, gt=0)  # None: half, at least 1
    body_timeout_s: float = Field(default=30.0, gt=0)
    public_metrics: bool = False  # False: /metrics needs an admin key

    @model_validator(mode="after")
    def _share_within_limit(self) -> ServiceConfig:
        share = self.max_in_flight_per_tenant
        if share is not None and share > self.max_in_flight:
            raise ValueError(
                f"max_in_flight_per_tenant ({share}) is over max_in_flight ({self.max_in_flight})"
            )
        return self

    @property
    def tenant_share(self) -> int:
        """Requests one tenant may have in flight at once."""
        share = self.max_in_flight_per_tenant
        return share if share is not None else max(1, self.max_in_flight // 2)

    # SIGTERM: stop accepting, let requests in flight finish for up to this long, then close
    # the memory (which itself waits for a write in flight: an acknowledged write is never
    # lost; a request cut off past the grace is never acknowledged).
    shutdown_grace_s: float = Field(default=30.0, gt=0)
