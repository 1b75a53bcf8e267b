"""The service's own settings: the ``[service]`` table of the config file and
``TIERMEM_SERVICE__<FIELD>`` in the environment (read at the edge by ``tiermem serve``).

>>> ServiceConfig.model_validate({"max_k": "20"}).max_k
20
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field
from tiermem.validation import MAX_CONTENT_CHARS, MAX_QUERY_CHARS


class ServiceConfig(BaseModel):
    """Limits and files of one ``tiermem serve`` process.

    A request over a limit is refused before it reaches the memory: a body over
    ``max_body_bytes`` with 413, a text, ``k`` or message count over its limit with 422 (the
    same typed error ``Memory`` raises past its own limits), and a request beyond
    ``max_in_flight`` concurrent ones with 503 and ``Retry-After``."""

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
    # SIGTERM: stop accepting, let requests in flight finish for up to this long, then close
    # the memory (which itself waits for a write in flight: an acknowledged write is never
    # lost; a request cut off past the grace is never acknowledged).
    shutdown_grace_s: float = Field(default=30.0, gt=0)
