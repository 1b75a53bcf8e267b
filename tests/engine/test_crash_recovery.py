"""The kill -9 suite: a write killed with SIGKILL at any of its steps leaves, once the memory
is reopened, no store entry without its ADD row and source turns, no acknowledged write lost,
every write all done or not done at all, and no erasure half done.

Each case runs the write in a child process on an on-disk MTM store (Qdrant through
qdrant-client, and Qdrant Edge shards: every case runs on both) and an on-disk journal and
kills it (``os.kill(getpid(), SIGKILL)``) at one named step (``tiermem.faults``), or inside
the journal's COMMIT itself. The parent then reopens the same files and compares them with two
snapshots taken in-process: before the write, and after it ran to the end. Every step a write
reaches is listed below, and a test checks that the list misses none.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from tiermem import ManualClock, Memory, SearchFilters, StoreError, TiermemConfig
from tiermem.components import build_components
from tiermem.config import JournalConfig, QdrantConfig, SLMConfig
from tiermem.config.stores import EdgeStoreConfig, MTMConfig
from tiermem.roles.extract import CandidateEntry, Extraction
from tiermem.types import MemoryEntry, MemoryKind, Role, Turn

from tests.conftest import T0, chat, many_pages

pytestmark = pytest.mark.slow  # kill -9 at every step of every write

STORES = ("qdrant", "edge")  # the on-disk MTM stores: qdrant-client's embedded mode, Edge
USER, OTHER = "mira-5521", "otto-7310"  # distinctive: the erasure check greps files for them
SECRET = "Zyxwvutsrq-7731"
T_OP = T0 + timedelta(days=10)
# Forked from a server that imported everything once: a case costs a fork, not an import.
_CTX = multiprocessing.get_context("forkserver")
_CTX.set_forkserver_preload(["tests.engine.test_crash_recovery"])


class FactExtractor:
    """One fact per user turn, so that entries merge and supersede without a model. A turn
    "Update: X" replaces the related memory that starts with the same two words as X."""

    name = "facts-test"
    wants_existing = True

    def extract(
        self, turns: Sequence[Turn], context: Sequence[Turn], existing: Sequence[MemoryEntry]
    ) -> Extraction:
        out = []
        for t in turns:
            if t.role is not Role.USER:
                continue
            text = t.content.removeprefix("Update: ")
            replaces = None
            if text != t.content:
                head = text.split()[:2]
                replaces = next((e.id for e in existing if e.text.split()[:2] == head), None)
            out.append(
                CandidateEntry(
                    text,
                    MemoryKind.FACT,
                    (t.turn_id,),
                    t.timestamp,
                    t.session_id,
                    stable_key=f"fact:{t.turn_id}",
                    replaces=replaces,
                )
            )
        return Extraction(tuple(out), ())


class FailingStore:
    """The real store, except that every upsert fails after writing the first entry."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def upsert(self, user_id: str, entries: Sequence[MemoryEntry], vectors: Any) -> None:
        self._store.upsert(user_id, entries[:1], vectors[:1])
        raise StoreError("injected: connection lost mid-upsert")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


# -- scenarios ----------------------------------------------------------------------------


def _base(memory: Memory, clock: ManualClock) -> None:
    memory.add(chat(("user", "I play the oboe."), ("assistant", "Since when?")), user_id=USER)
    memory.add(chat(("user", "I like jazz."), speaker="Otto"), user_id=OTHER)


ADDED = chat(
    ("user", "My sister lives in Lisbon."),
    ("assistant", "Nice."),
    start=T0 + timedelta(days=1),
)


def _entry(memory: Memory, text: str) -> MemoryEntry:
    return next(e for e in memory.get_all(USER) if e.text == text)


def _facts_setup(memory: Memory, clock: ManualClock) -> None:
    _base(memory, clock)
    memory.add(chat(("user", "My dog Miso hates thunderstorms.")), user_id=USER)
    memory.add(chat(("user", "Miso weighs 10 kg."), start=T0 + timedelta(hours=1)), user_id=USER)


# Evictions: each entry written a day after the one before, so the oldest go first; all said
# on one day, so that the twins below embed alike.
EVICT_TURNS = [
    "I have a bike.",
    "I like green tea!",  # evicted, and merged into its twin below first
    "I was born in Porto.",
    "I like green tea.",
    "I play the cello.",
]


def _evict_messages(i: int) -> list[dict[str, object]]:
    return chat(("user", EVICT_TURNS[i]), start=T0 + timedelta(hours=i))


def _evict_setup(memory: Memory, clock: ManualClock) -> None:
    memory.add(chat(("user", "I like jazz."), speaker="Otto"), user_id=OTHER)
    for i in range(len(EVICT_TURNS)):
        clock.set(T0 + timedelta(days=i))
        memory.add(_evict_messages(i), user_id=USER)


def _forget_setup(memory: Memory, clock: ManualClock) -> None:
    _base(memory, clock)
    many_pages(memory, USER, OTHER)  # the erased user's fragments sat in shared pages
    memory.add(chat(("user", f"My locker code is {SECRET}.")), user_id=USER, session_id="s1")
    entry = _entry(memory, f"Ana: My locker code is {SECRET}.")
    memory.update(entry.id, f"Mira's locker code is {SECRET}, on floor 2.", USER)


@dataclass(frozen=True)
class Scenario:
    setup: Callable[[Memory, ManualClock], None]
    op: Callable[[Memory], object]
    kill_points: tuple[str, ...]
    before_points: frozenset[str]  # killed there, the write is not done; elsewhere it is
    facts: bool = False
    op_capacity: int = 10_000
    merge_threshold: float = 0.92
    failing_store: bool = False
    done_like: str | None = None  # the scenario whose finished state "done" means here


def _steps(kind: str) -> tuple[str, ...]:
    return tuple(
        f"{kind}:{step}"
        for step in (
            "before-journal-commit",
            "after-journal-commit",
            "mid-store-apply",
            "after-store-apply",
        )
    )


def _scenario(kind: str, setup: Callable[[Memory, ManualClock], None], **kw: Any) -> Scenario:
    return Scenario(
        setup=setup,
        kill_points=_steps(kind),
        before_points=frozenset({f"{kind}:before-journal-commit", "journal-commit"}),
        **kw,
    )


def _says(text: str, hours: int) -> Callable[[Memory], object]:
    return lambda m: m.add(chat(("user", text), start=T0 + timedelta(hours=hours)), user_id=USER)


SCENARIOS: dict[str, Scenario] = {
    "add": _scenario("add", _base, op=lambda m: m.add(ADDED, user_id=USER)),
    "merge": _scenario(
        "add", _facts_setup, op=_says("My dog Miso hates thunderstorms!", hours=2), facts=True
    ),
    "supersede": _scenario(
        "add",
        _facts_setup,
        op=_says("Update: Miso weighs 12 kg.", hours=24),
        facts=True,
        merge_threshold=0.99,
    ),
    "update": _scenario(
        "update",
        _base,
        op=lambda m: m.update(_entry(m, "Ana: I play the oboe.").id, "I play the bassoon.", USER),
    ),
    "delete": _scenario(
        "delete", _base, op=lambda m: m.delete(_entry(m, "Ana: I play the oboe.").id, USER)
    ),
    # Re-adding known turns writes nothing new; the capacity check then evicts.
    "evict": _scenario(
        "evict",
        _evict_setup,
        op=lambda m: m.add(_evict_messages(len(EVICT_TURNS) - 1), user_id=USER),
        op_capacity=3,
    ),
    "forget": Scenario(
        setup=_forget_setup,
        op=lambda m: m.forget_user(USER),
        kill_points=tuple(
            f"forget:{step}"
            for step in (
                "after-job-commit",
                "after-ltm-withdraw",
                "after-drop-collection",
                "after-journal-delete",
                "after-stm",
                "after-job-end",
                "after-compact",
            )
        ),
        before_points=frozenset(),  # once the job is committed, the erasure always finishes
    ),
    # The store fails mid-write: the write is rolled back, unless the process dies before
    # it could start the rollback (then the journal holds it and it is finished on reopen).
    "add-store-fails": Scenario(
        setup=_base,
        op=lambda m: m.add(ADDED, user_id=USER),
        kill_points=(
            "add:before-journal-commit",
            "add:after-journal-commit",
            "add:undo-marked",
            "add-undo:mid-store-apply",
            "add:undone",
        ),
        before_points=frozenset(
            {
                "add:before-journal-commit",
                "add:undo-marked",
                "add-undo:mid-store-apply",
                "add:undone",
            }
        ),
        failing_store=True,
        done_like="add",
    ),
}

KILLS = [(name, point) for name, s in SCENARIOS.items() for point in s.kill_points]
# Killed inside sqlite's COMMIT itself (a hook on ``Journal._commit``, which older versions
# have too): the window of the original defect.
COMMIT_KILLS = [
    ("add", "journal-commit"),
    ("update", "journal-commit"),
    ("delete", "journal-commit"),
    # Killed as the erasure reaches the journal, after the collection is gone: the window of
    # the original erasure defect (``Journal.forget_user`` is that step in every version).
    ("forget", "journal-forget"),
]
# Killed once in the write, then again while reopening finishes it.
RECRASHES = [
    ("add", "add:after-journal-commit", "add:mid-store-apply"),
    ("evict", "evict:mid-store-apply", "evict:after-store-apply"),
    ("forget", "forget:after-drop-collection", "forget:after-journal-delete"),
    # killed before the file was compacted, then again as reopening compacts it
    ("forget", "forget:after-job-end", "forget:after-compact"),
]


# -- opening, snapshots, checks -------------------------------------------------------------


def _mtm(store: str, root: Path, capacity: int) -> MTMConfig:
    if store == "edge":
        return EdgeStoreConfig(path=root / "edge", capacity=capacity)
    return QdrantConfig(location="path", path=root / "qdrant", capacity=capacity)


def open_memory(
    root: Path,
    s: Scenario,
    store: str,
    *,
    when: datetime = T_OP,
    capacity: int = 10_000,
    failing: bool = False,
) -> tuple[Memory, ManualClock]:
    config = TiermemConfig.for_tests().model_copy(
        update={
            "mtm": _mtm(store, root, capacity),
            "journal": JournalConfig(path=root / "journal.sqlite3"),
            "data_dir": root,
            "slm": SLMConfig(merge_threshold=s.merge_threshold),
        }
    )
    clock = ManualClock(when)
    components = build_components(config, clock)
    if s.facts:
        components = replace(components, extractor=FactExtractor())
    if failing:
        components = replace(components, store=FailingStore(components.store))
    return Memory(config, components=components), clock


@dataclass(frozen=True)
class Snapshot:
    entries: dict[str, list[tuple[object, ...]]]
    audit: list[tuple[object, ...]]
    turns: list[tuple[object, ...]]
    intents: int = 0
    files: dict[str, bytes] = field(default_factory=dict, compare=False)


def snapshot(root: Path, s: Scenario, store: str) -> Snapshot:
    """Reopen (which finishes what a crash left), check that every entry has its ADD row and
    its source turns, and read back the entries and the journal's rows."""
    memory, _ = open_memory(root, s, store)
    try:
        entries = {}
        for user in (USER, OTHER):
            found = memory.get_all(user, SearchFilters(include_superseded=True))
            for e in found:
                events = memory.history(e.id, user)
                assert events[0].op == "ADD", f"{e.text!r} has no ADD row"
                turns = memory.components.journal.turns(user, list(e.source_turn_ids))
                assert set(turns) == set(e.source_turn_ids), f"{e.text!r} lost its turns"
            entries[user] = sorted(
                (e.id, e.text, e.superseded_by, e.source_turn_ids) for e in found
            )
    finally:
        memory.close()
    with sqlite3.connect(root / "journal.sqlite3") as db:
        audit = sorted(
            db.execute("SELECT user_id, memory_id, op, before, after FROM audit").fetchall(),
            key=repr,
        )
        turns = sorted(db.execute("SELECT user_id, turn_id, content FROM turns").fetchall())
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        intents = (
            db.execute("SELECT COUNT(*) FROM intents").fetchone()[0] if "intents" in tables else 0
        )
    db.close()
    files = {str(p): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    return Snapshot(entries, audit, turns, intents, files)


def _setup(root: Path, s: Scenario, store: str) -> None:
    memory, clock = open_memory(root, s, store, when=T0)
    try:
        s.setup(memory, clock)
    finally:
        memory.close()


@dataclass(frozen=True)
class Reference:
    before: Snapshot
    done: Snapshot
    reached: list[str]


_REFERENCES: dict[tuple[str, str], Reference] = {}


def reference(name: str, store: str, base: Path) -> Reference:
    """The scenario run in-process to the end, with every step it reached."""
    if (name, store) in _REFERENCES:
        return _REFERENCES[name, store]
    from tiermem import faults

    s = SCENARIOS[name]
    root = base / f"ref-{name}-{store}"
    _setup(root, s, store)
    before = snapshot(root, s, store)
    memory, _ = open_memory(root, s, store, capacity=s.op_capacity, failing=s.failing_store)
    reached: list[str] = []
    faults.set_hook(reached.append)
    try:
        s.op(memory)
    except StoreError:
        if not s.failing_store:
            raise
    finally:
        faults.set_hook(None)
        memory.close()
    done = (
        snapshot(root, s, store)
        if s.done_like is None
        else reference(s.done_like, store, base).done
    )
    _REFERENCES[name, store] = Reference(before, done, reached)
    return _REFERENCES[name, store]


def _child(name: str, kill_at: str, root: str, phase: str, store: str) -> None:
    """Runs in the child: open the memory (``phase == "open"``: reopening is what gets
    killed) or run the scenario's write, and die at ``kill_at``."""
    s = SCENARIOS[name]

    def die(point: str) -> None:
        if point == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    def arm() -> None:
        if kill_at == "journal-commit":
            from tiermem.journal import Journal

            Journal._commit = lambda self: os.kill(os.getpid(), signal.SIGKILL)  # type: ignore[method-assign]
        elif kill_at == "journal-forget":
            from tiermem.journal import Journal

            Journal.forget_user = lambda self, user_id: os.kill(os.getpid(), signal.SIGKILL)  # type: ignore[assignment,method-assign,return-value]
        else:
            from tiermem import faults

            faults.set_hook(die)

    if phase == "open":
        arm()
        open_memory(Path(root), s, store)
        return
    memory, _ = open_memory(Path(root), s, store, capacity=s.op_capacity, failing=s.failing_store)
    arm()
    s.op(memory)


def kill(name: str, kill_at: str, root: Path, store: str, phase: str = "op") -> None:
    child = _CTX.Process(target=_child, args=(name, kill_at, str(root), phase, store))
    child.start()
    child.join(60)
    assert child.exitcode == -signal.SIGKILL, (
        f"{name}: the child was not killed at {kill_at} (exit code {child.exitcode})"
    )


def check_recovered(name: str, point: str, root: Path, ref: Reference, store: str) -> Snapshot:
    s = SCENARIOS[name]
    got = snapshot(root, s, store)
    assert got.intents == 0, "an intent was left unfinished after reopening"
    expected = ref.before if point in s.before_points else ref.done
    assert got == expected
    if name == "forget":
        needles = (SECRET.encode(), USER.encode(), b"Mira")
        leaks = [p for p, data in got.files.items() if any(n in data for n in needles)]
        assert leaks == [], f"the forgotten user is still in {leaks}"
    return got


@pytest.fixture(scope="module")
def references(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, str], Reference]:
    base = tmp_path_factory.mktemp("references")
    return lambda name, store: reference(name, store, base)


# -- the suite ----------------------------------------------------------------------------


@pytest.mark.parametrize("store", STORES)
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_every_step_a_write_reaches_has_a_kill_point(
    name: str, store: str, references: Callable[[str, str], Reference]
) -> None:
    assert sorted(set(references(name, store).reached)) == sorted(SCENARIOS[name].kill_points)


@pytest.mark.parametrize("store", STORES)
@pytest.mark.parametrize(("name", "point"), KILLS + COMMIT_KILLS)
def test_killed_write_is_all_or_nothing_after_reopen(
    name: str,
    point: str,
    store: str,
    references: Callable[[str, str], Reference],
    tmp_path: Path,
) -> None:
    ref = references(name, store)
    s = SCENARIOS[name]
    _setup(tmp_path, s, store)
    kill(name, point, tmp_path, store)
    check_recovered(name, point, tmp_path, ref, store)
    if point in s.before_points:  # never acknowledged: a retry does it, as if nothing happened
        memory, _ = open_memory(tmp_path, s, store, capacity=s.op_capacity)
        try:
            s.op(memory)
        finally:
            memory.close()
        assert snapshot(tmp_path, s, store) == ref.done
    memory, _ = open_memory(tmp_path, s, store)
    try:  # and the memory takes new writes
        entry = memory.add(chat(("user", "One more thing."), start=T_OP), user_id=USER).entries[0]
        assert [e.op for e in memory.history(entry.id, USER)] == ["ADD"]
    finally:
        memory.close()


@pytest.mark.parametrize("store", STORES)
@pytest.mark.parametrize(("name", "first", "second"), RECRASHES)
def test_killed_again_while_reopening_still_finishes(
    name: str,
    first: str,
    second: str,
    store: str,
    references: Callable[[str, str], Reference],
    tmp_path: Path,
) -> None:
    ref = references(name, store)
    _setup(tmp_path, SCENARIOS[name], store)
    kill(name, first, tmp_path, store)
    kill(name, second, tmp_path, store, phase="open")
    check_recovered(name, first, tmp_path, ref, store)


# The journal as version 1 wrote it, before writes had intents.
V1_SCHEMA = """
CREATE TABLE audit (seq INTEGER PRIMARY KEY AUTOINCREMENT, at TEXT NOT NULL,
    user_id TEXT NOT NULL, memory_id TEXT NOT NULL, op TEXT NOT NULL, before TEXT, after TEXT,
    actor TEXT NOT NULL, detail TEXT NOT NULL DEFAULT '{}');
CREATE INDEX audit_by_memory ON audit (user_id, memory_id, seq);
CREATE TABLE ltm_audit (seq INTEGER PRIMARY KEY AUTOINCREMENT, at TEXT NOT NULL,
    op TEXT NOT NULL, item_id TEXT NOT NULL, before TEXT, after TEXT,
    evidence INTEGER NOT NULL, actor TEXT NOT NULL);
CREATE TABLE turns (user_id TEXT NOT NULL, turn_id TEXT NOT NULL, session_id TEXT NOT NULL,
    role TEXT NOT NULL, speaker TEXT NOT NULL, content TEXT NOT NULL, at TEXT NOT NULL,
    PRIMARY KEY (user_id, turn_id));
INSERT INTO audit (at, user_id, memory_id, op, before, after, actor)
    VALUES ('2026-03-02T09:00:00+00:00', 'mira-5521', 'm-old', 'ADD', NULL, 'I sing.', 'api');
INSERT INTO turns VALUES ('mira-5521', 't-old', 'default', 'user', 'Mira', 'I sing.',
    '2026-03-02T09:00:00+00:00');
PRAGMA user_version = 1;
"""


def test_a_version_1_journal_is_migrated_and_takes_crash_safe_writes(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "journal.sqlite3") as db:
        db.executescript(V1_SCHEMA)
    db.close()
    s = SCENARIOS["add"]
    memory, _ = open_memory(tmp_path, s, "qdrant")
    try:
        assert [e.after for e in memory.history("m-old", USER)] == ["I sing."]
        assert memory.components.journal.turns(USER, ["t-old"])["t-old"].content == "I sing."
    finally:
        memory.close()
    kill("add", "add:after-store-apply", tmp_path, "qdrant")
    got = snapshot(tmp_path, s, "qdrant")
    assert got.intents == 0
    assert ("mira-5521", "m-old", "ADD", None, "I sing.") in got.audit
    assert "Ana: My sister lives in Lisbon." in [e[1] for e in got.entries[USER]]
    with sqlite3.connect(tmp_path / "journal.sqlite3") as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 2
    db.close()
