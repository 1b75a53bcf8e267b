"""``tiermem mcp``: one user's memory as an MCP server, on the official ``mcp`` SDK.

The server is bound to one user when it is built: no tool takes a user id, so a model that
calls it reaches that user's memory and no one else's. A served deployment runs one server
per user (or mounts one per user), and whatever authenticates the caller picks the server.

A tiermem error becomes a tool error (``isError``) whose content is the body the HTTP service
answers, ``{"error": {"code", "message", "detail"}}``, with the same stable codes
(``tiermem.service.codes``); the server goes on serving.

>>> import anyio
>>> from mcp import Client
>>> from tiermem import Memory, TiermemConfig
>>> async def ask(server: MCPServer[Any]) -> tuple[bool, str]:
...     async with Client(server) as client:
...         result = await client.call_tool("get", {"memory_id": "m-none"})
...     return result.is_error, result.structured_content["error"]["code"]
>>> with Memory(TiermemConfig.for_tests()) as memory:
...     anyio.run(ask, build_server(memory, "maya"))
(True, 'memory_not_found')
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field
from rich.console import Console
from tiermem.api import MemoryAPI
from tiermem.context import DEFAULT_BUDGET_TOKENS
from tiermem.errors import ConfigError, TiermemError
from tiermem.service.codes import error_body
from tiermem.service.wire import ISO_8601, FiltersIn, filters_from
from tiermem.types import AddResult, AuditEvent, MemoryEntry, MemoryKind, SearchHit, Tier
from tiermem.validation import validate_user_id

RECENT_URI = "memory://recent"
RECENT_LIMIT = 20
_READS = ToolAnnotations(read_only_hint=True, open_world_hint=False)
_CHANGES = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
_REMOVES = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False)

INSTRUCTIONS = """\
The long-term memory of one user: the user this server was started for. Every tool reads and
writes that user's memory only. Call `context` (or `search`) before answering anything that
may depend on earlier conversations; call `remember` with an exchange worth keeping (facts,
plans, preferences, changes of mind). Memory ids come from `remember`, `search` and the
memory://recent resource. A failed call answers {"error": {"code", "message", "detail"}}."""


# -- arguments ----------------------------------------------------------------------------
class ChatMessage(BaseModel):
    """One message of an exchange, as ``Memory.add`` takes it."""

    model_config = ConfigDict(extra="forbid")
    role: Literal["user", "assistant", "system"] = Field(description="who said it")
    content: str = Field(description="what was said, verbatim")
    speaker: str | None = Field(default=None, description="the speaker's name, if known")
    timestamp: str | None = Field(default=None, description=f"when it was said: {ISO_8601}")


MemoryId = Annotated[str, Field(description="a memory id from remember, search or get")]
SessionId = Annotated[
    str | None, Field(description="the conversation this belongs to (default: one session)")
]


# -- results ------------------------------------------------------------------------------
class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)


class MemoryOut(_Out):
    """One of the user's memories: its text, when it happened, and the turns it came from."""

    id: str
    text: str
    kind: str
    date: str = Field(description="when it happened if known, else when it was written")
    created_at: str
    updated_at: str
    session_id: str | None
    source_turn_ids: list[str]
    superseded_by: str | None = Field(description="the newer memory that replaced this one")

    @classmethod
    def of(cls, entry: MemoryEntry) -> MemoryOut:
        return cls(
            id=entry.id,
            text=entry.text,
            kind=str(entry.kind),
            date=entry.effective_time.isoformat(),
            created_at=entry.created_at.isoformat(),
            updated_at=entry.updated_at.isoformat(),
            session_id=entry.session_id,
            source_turn_ids=list(entry.source_turn_ids),
            superseded_by=entry.superseded_by,
        )


class RememberOut(_Out):
    turn_ids: list[str] = Field(description="the turns accepted, in order")
    stored: list[MemoryOut] = Field(description="new memories")
    merged: list[MemoryOut] = Field(description="existing memories the new turns were merged in")
    superseded: list[MemoryOut] = Field(description="older memories the new ones replace")
    skipped_turn_ids: list[str] = Field(description="already known, or small talk")
    evicted_ids: list[str]
    eviction_error: str | None
    empty_messages: list[int] = Field(description="positions of messages with no content")

    @classmethod
    def of(cls, result: AddResult) -> RememberOut:
        return cls(
            turn_ids=[t.turn_id for t in result.turns],
            stored=[MemoryOut.of(e) for e in result.entries],
            merged=[MemoryOut.of(e) for e in result.merged],
            superseded=[MemoryOut.of(e) for e in result.superseded],
            skipped_turn_ids=list(result.skipped_turn_ids),
            evicted_ids=list(result.evicted_ids),
            eviction_error=result.eviction_error,
            empty_messages=list(result.empty_messages),
        )


class HitOut(_Out):
    id: str
    text: str
    score: float
    tier: str = Field(description="mtm: the user's own memory; ltm: shared, de-identified")
    kind: str
    date: str
    source_turn_ids: list[str]

    @classmethod
    def of(cls, hit: SearchHit) -> HitOut:
        if hit.tier is Tier.LTM:
            kind, date = hit.fact.kind, hit.fact.last_supported
        else:
            kind, date = str(hit.entry.kind), hit.entry.effective_time
        return cls(
            id=hit.id,
            text=hit.text,
            score=hit.score,
            tier=str(hit.tier),
            kind=kind,
            date=date.isoformat(),
            source_turn_ids=list(hit.source_turn_ids),
        )


class SearchOut(_Out):
    hits: list[HitOut] = Field(description="best first")


class ContextOut(_Out):
    text: str = Field(description="the remembered turns, by session, one date per session")
    tokens: int
    budget_tokens: int
    memory_ids: list[str] = Field(description="the memories delivered, best first")
    turn_ids: list[str]


class DeletedOut(_Out):
    deleted: str


class EventOut(_Out):
    seq: int
    at: str
    op: str
    before: str | None
    after: str | None
    actor: str

    @classmethod
    def of(cls, event: AuditEvent) -> EventOut:
        return cls(
            seq=event.seq,
            at=event.at.isoformat(),
            op=str(event.op),
            before=event.before,
            after=event.after,
            actor=event.actor,
        )


class HistoryOut(_Out):
    memory_id: str
    events: list[EventOut] = Field(description="oldest first")


class ForgetOut(_Out):
    entries: int
    turns: int
    audit_rows: int
    stm_sessions: int
    ltm_removed: int
    ltm_decremented: int


class RecentOut(_Out):
    memories: list[MemoryOut] = Field(description="newest first")


def _ok(out: BaseModel) -> CallToolResult:
    data = out.model_dump(mode="json")
    text = json.dumps(data, ensure_ascii=False)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


def _failed(exc: TiermemError) -> CallToolResult:
    """The service's error body, as a tool error the model reads and can act on."""
    body = error_body(exc)
    text = json.dumps(body, ensure_ascii=False)
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=body, is_error=True
    )


def _answer(work: Callable[[], BaseModel]) -> CallToolResult:
    try:
        return _ok(work())
    except TiermemError as exc:  # anything else is a bug: the SDK reports it, generically
        return _failed(exc)


def _filters(
    since: str | None, until: str | None, kinds: list[MemoryKind] | None
) -> FiltersIn | None:
    if since is None and until is None and not kinds:
        return None
    return FiltersIn(since=since, until=until, kinds=[str(k) for k in kinds or ()])


# -- the server ---------------------------------------------------------------------------
def build_server(
    memory: MemoryAPI, user_id: str, *, allow_forget: bool = False, recent: int = RECENT_LIMIT
) -> MCPServer[Any]:
    """An MCP server over ``memory`` (a ``Memory`` or a ``RemoteMemory``) for ``user_id``
    only. ``forget_user`` (erase this user) is offered only with ``allow_forget``. The
    caller keeps ``memory`` and closes it; ``InvalidUserIdError`` for an unusable id."""
    user = validate_user_id(user_id)
    server: MCPServer[Any] = MCPServer(
        name="tiermem", instructions=INSTRUCTIONS, log_level="WARNING"
    )

    @server.tool(
        name="remember",
        annotations=_CHANGES,
        description="Store an exchange in the user's memory: its turns are kept verbatim and "
        "turned into memories (a repeated fact merges into the older one, kept in its history; "
        "with slm.writer_supersedes on, an update supersedes it). Pass the messages worth "
        "remembering, oldest first. Returns the new memories, those merged into, and those "
        "superseded.",
    )
    def remember(
        messages: Annotated[list[ChatMessage], Field(description="the exchange, oldest first")],
        session_id: SessionId = None,
    ) -> Annotated[CallToolResult, RememberOut]:
        given = [m.model_dump(exclude_none=True) for m in messages]
        return _answer(lambda: RememberOut.of(memory.add(given, user, session_id)))

    @server.tool(
        name="search",
        annotations=_READS,
        description="Find the user's memories most relevant to a query, best first: each "
        "with its id, text, score, date and the ids of the turns it came from. Filter by "
        "time (since/until, inclusive) or kind when the question says so.",
    )
    def search(
        query: Annotated[str, Field(description="what to look for, in plain words")],
        k: Annotated[int | None, Field(description="at most this many (default: 5)")] = None,
        since: Annotated[str | None, Field(description=f"not before: {ISO_8601}")] = None,
        until: Annotated[str | None, Field(description=f"not after: {ISO_8601}")] = None,
        kinds: Annotated[list[MemoryKind] | None, Field(description="only these kinds")] = None,
        session_id: SessionId = None,
    ) -> Annotated[CallToolResult, SearchOut]:
        def run() -> SearchOut:
            filters = filters_from(_filters(since, until, kinds))
            hits = memory.search(query, user, k, filters, session_id)
            return SearchOut(hits=[HitOut.of(h) for h in hits])

        return _answer(run)

    @server.tool(
        name="context",
        annotations=_READS,
        description="What to read before answering a question from memory: the remembered "
        "turns that bear on it, grouped by conversation under their dates, within a token "
        "budget. Returns the text, its token count and the ids of the memories delivered.",
    )
    def context(
        question: Annotated[str, Field(description="the question to answer")],
        budget_tokens: Annotated[int, Field(description="at most this many tokens")] = (
            DEFAULT_BUDGET_TOKENS
        ),
        session_id: SessionId = None,
    ) -> Annotated[CallToolResult, ContextOut]:
        def run() -> ContextOut:
            ctx = memory.context(question, user, budget_tokens, session_id)
            return ContextOut(
                text=ctx.text,
                tokens=ctx.tokens,
                budget_tokens=ctx.budget_tokens,
                memory_ids=[h.id for h in ctx.hits],
                turn_ids=list(ctx.turn_ids),
            )

        return _answer(run)

    @server.tool(name="get", annotations=_READS, description="One memory of the user, by id.")
    def get(memory_id: MemoryId) -> Annotated[CallToolResult, MemoryOut]:
        return _answer(lambda: MemoryOut.of(memory.get(memory_id, user)))

    @server.tool(
        name="update",
        annotations=_CHANGES,
        description="Correct a memory's text (the user said it is wrong or out of date). "
        "The old text stays in its history.",
    )
    def update(
        memory_id: MemoryId,
        text: Annotated[str, Field(description="the corrected, self-contained text")],
    ) -> Annotated[CallToolResult, MemoryOut]:
        return _answer(lambda: MemoryOut.of(memory.update(memory_id, text, user)))

    @server.tool(
        name="delete",
        annotations=_REMOVES,
        description="Remove a memory the user wants gone. Its history keeps the removal.",
    )
    def delete(memory_id: MemoryId) -> Annotated[CallToolResult, DeletedOut]:
        def run() -> DeletedOut:
            memory.delete(memory_id, user)
            return DeletedOut(deleted=memory_id)

        return _answer(run)

    @server.tool(
        name="history",
        annotations=_READS,
        description="Every change to one memory, oldest first: added, merged, superseded, "
        "updated, deleted, with the text before and after.",
    )
    def history(memory_id: MemoryId) -> Annotated[CallToolResult, HistoryOut]:
        def run() -> HistoryOut:
            events = memory.history(memory_id, user)
            return HistoryOut(memory_id=memory_id, events=[EventOut.of(e) for e in events])

        return _answer(run)

    if allow_forget:

        @server.tool(
            name="forget_user",
            annotations=_REMOVES,
            description="Erase everything remembered about the user, for good: memories, "
            "turns, history. Only when the user asks for exactly that.",
        )
        def forget_user() -> Annotated[CallToolResult, ForgetOut]:
            return _answer(lambda: ForgetOut(**asdict(memory.forget_user(user))))

    @server.resource(
        RECENT_URI,
        name="recent",
        description=f"The user's {recent} newest memories, newest first.",
        mime_type="application/json",
    )
    def recent_memories() -> str:
        try:
            entries = memory.get_all(user)
        except TiermemError as exc:
            raise ResourceError(json.dumps(error_body(exc), ensure_ascii=False)) from exc
        newest = sorted(entries, key=lambda e: (e.created_at, e.id), reverse=True)[:recent]
        return RecentOut(memories=[MemoryOut.of(e) for e in newest]).model_dump_json()

    return server


# -- the command line ---------------------------------------------------------------------
def run_mcp(args: argparse.Namespace, console: Console) -> int:
    """``tiermem mcp``: serve ``--user`` of the memory that ``--config``/``--data-dir`` name
    until the client goes (stdio) or SIGINT (HTTP). ``console`` is stderr: on stdio, stdout
    is the protocol's."""
    from tiermem.memory import Memory
    from tiermem.ownership import claim_data_dir
    from tiermem.settings import load_config

    environ = dict(os.environ)
    if args.data_dir is not None:
        environ["TIERMEM_DATA_DIR"] = str(args.data_dir)
    try:
        user = validate_user_id(args.user)  # before anything opens
        if args.remote is not None:
            _serve(_remote(args, environ), user, args)
            return 0
        config = load_config(args.config, environ)
        if args.embedder is not None:
            embedder = config.embedder.model_copy(update={"kind": args.embedder})
            config = config.model_copy(update={"embedder": embedder})
        claim = None if config.data_dir is None else claim_data_dir(Path(config.data_dir))
        try:
            _serve(Memory(config), user, args)
        finally:
            if claim is not None:
                claim.release()
    except (TiermemError, OSError) as exc:
        console.print(f"error: {exc}", highlight=False, markup=False, soft_wrap=True)
        return 2
    return 0


def _remote(args: argparse.Namespace, environ: dict[str, str]) -> MemoryAPI:
    """The service at ``--remote``, with the key from the environment (never an argument,
    which any user of the machine can read in the process list)."""
    from tiermem.remote import RemoteMemory

    local = [f"--{name.replace('_', '-')}" for name in ("config", "data_dir", "embedder")]
    given = [flag for flag in local if getattr(args, flag[2:].replace("-", "_")) is not None]
    if given:
        raise ConfigError(f"--remote serves the service's memory: drop {', '.join(given)}")
    key = environ.get(args.api_key_env, "")
    if not key:
        raise ConfigError(f"--remote needs the service's API key in ${args.api_key_env}")
    return RemoteMemory(args.remote, key)


def _serve(memory: MemoryAPI, user: str, args: argparse.Namespace) -> None:
    """Serve ``memory`` for ``user`` on the chosen transport until it ends, then close it."""
    try:
        server = build_server(memory, user, allow_forget=args.allow_forget)
        if args.transport == "stdio":
            server.run("stdio")
        else:
            server.run("streamable-http", host=args.host, port=args.port)
    finally:
        memory.close()
