"""The SQLite journal: the audit log of every change to a memory, the source turns that MTM
entries point back to, and the intents of writes in flight. It is the source of truth: a write
commits its audit rows, its turns and its intent (the store change to make, and the store state
it replaces) in one transaction before the store is touched, and the intent is deleted once the
store has it. An intent found on open is a write a crash interrupted; ``tiermem.pipeline
.recovery`` finishes it. An erasure (``forget_user``) is an intent too, a job that names only
the user.

Deleted rows are overwritten on disk (``PRAGMA secure_delete``): ``forget_user`` leaves no
readable trace of the user in the file.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from tiermem.changes import Change
from tiermem.errors import AuditError, ClosedError
from tiermem.types import AuditEvent, AuditOp, Role, Turn

SCHEMA_VERSION = 2
FORGET = "forget"  # the kind of an erasure job
IntentState = Literal["pending", "undoing"]
# ``op_id`` on audit rows and turns: the intent that wrote them, so that a write the store
# refused can be taken back out of the journal.
_SCHEMA = """
CREATE TABLE IF NOT EXISTS audit (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    at TEXT NOT NULL,
    user_id TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    op TEXT NOT NULL,
    before TEXT,
    after TEXT,
    actor TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT '{}',
    op_id INTEGER
);
CREATE INDEX IF NOT EXISTS audit_by_memory ON audit (user_id, memory_id, seq);
CREATE TABLE IF NOT EXISTS ltm_audit (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    at TEXT NOT NULL,
    op TEXT NOT NULL,
    item_id TEXT NOT NULL,
    before TEXT,
    after TEXT,
    evidence INTEGER NOT NULL,
    actor TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS ltm_audit_by_item ON ltm_audit (item_id, seq);
CREATE TABLE IF NOT EXISTS turns (
    user_id TEXT NOT NULL,
    turn_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    role TEXT NOT NULL,
    speaker TEXT NOT NULL,
    content TEXT NOT NULL,
    at TEXT NOT NULL,
    op_id INTEGER,
    PRIMARY KEY (user_id, turn_id)
);
CREATE INDEX IF NOT EXISTS turns_by_session ON turns (user_id, session_id, at);
CREATE TABLE IF NOT EXISTS intents (
    op_id INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    state TEXT NOT NULL,
    payload TEXT NOT NULL
);
"""
# Version 1 had no intents (created above by IF NOT EXISTS) and no op_id columns.
_FROM_V1 = (
    "ALTER TABLE audit ADD COLUMN op_id INTEGER",
    "ALTER TABLE turns ADD COLUMN op_id INTEGER",
)


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """An audit row about to be written."""

    at: datetime
    user_id: str
    memory_id: str
    op: AuditOp
    before: str | None
    after: str | None
    actor: str
    detail: dict[str, object]


@dataclass(frozen=True, slots=True)
class LTMAuditEvent:
    """One row of the LTM audit log."""

    seq: int
    at: datetime
    op: str
    item_id: str
    before: str | None
    after: str | None
    evidence: int
    actor: str


@dataclass(frozen=True, slots=True)
class ForgetCounts:
    audit_rows: int
    turns: int


@dataclass(frozen=True, slots=True)
class Intent:
    """A write the journal holds and the store may not have yet. ``pending``: to be applied
    (again); ``undoing``: the store refused it, to be rolled back. ``payload`` is the
    writer's own (JSON); an erasure's is empty."""

    op_id: int
    user_id: str
    kind: str
    state: IntentState
    payload: dict[str, Any]


class JournalWriter:
    """Writes inside one open transaction; see ``Journal.transaction``."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def intend(self, user_id: str, kind: str, payload: dict[str, Any]) -> int:
        """Record a pending intent; its op id tags the rows written for it."""
        cursor = self._conn.execute(
            "INSERT INTO intents (user_id, kind, state, payload) VALUES (?, ?, 'pending', ?)",
            (user_id, kind, json.dumps(payload, sort_keys=True)),
        )
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def record(self, records: Sequence[AuditRecord], op_id: int | None = None) -> None:
        self._conn.executemany(
            "INSERT INTO audit (at, user_id, memory_id, op, before, after, actor, detail, op_id)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    r.at.isoformat(),
                    r.user_id,
                    r.memory_id,
                    r.op.value,
                    r.before,
                    r.after,
                    r.actor,
                    json.dumps(r.detail, sort_keys=True, default=str),
                    op_id,
                )
                for r in records
            ],
        )

    def save_turns(self, turns: Sequence[Turn], op_id: int | None = None) -> None:
        """Store turns not stored yet; only those are tagged with ``op_id``."""
        self._conn.executemany(
            "INSERT OR IGNORE INTO turns"
            " (user_id, turn_id, session_id, role, speaker, content, at, op_id)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    t.user_id,
                    t.turn_id,
                    t.session_id,
                    t.role.value,
                    t.speaker,
                    t.content,
                    t.timestamp.isoformat(),
                    op_id,
                )
                for t in turns
            ],
        )


class Journal:
    """SQLite audit log and turn log. ``path=None`` keeps the database in memory.

    Every method raises ``AuditError`` when SQLite fails (another connection holding the file
    longer than ``busy_timeout_s``, a full disk) and ``ClosedError`` after ``close()``; no
    ``sqlite3`` error reaches the caller."""

    def __init__(self, path: Path | None, *, busy_timeout_s: float = 5.0) -> None:
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        self._closed = False
        try:
            self._conn = sqlite3.connect(
                str(path) if path else ":memory:",
                timeout=busy_timeout_s,
                check_same_thread=False,
                isolation_level=None,
            )
            self._conn.execute("PRAGMA secure_delete = ON")
            self._conn.execute("PRAGMA foreign_keys = ON")
            self._conn.executescript(_SCHEMA)
            version = self._conn.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:
                self._conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            elif version == 1:
                self._migrate(_FROM_V1)
            elif version != SCHEMA_VERSION:
                raise AuditError(f"journal schema {version} is not {SCHEMA_VERSION}")
        except sqlite3.Error as exc:
            raise AuditError(f"cannot open the journal at {path}: {exc}") from exc
        self._lock = threading.RLock()

    def _migrate(self, statements: Sequence[str]) -> None:
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in statements:
                self._conn.execute(statement)
            self._conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("the journal is closed")

    def _query(self, sql: str, params: Sequence[object] = ()) -> list[Any]:
        """Every row ``sql`` selects, read under the lock, with SQLite's errors typed."""
        with self._lock:
            self._check_open()
            try:
                return self._conn.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise AuditError(f"cannot read the journal: {exc}") from exc

    @contextmanager
    def transaction(self) -> Iterator[JournalWriter]:
        """One atomic write. If the body raises, nothing it wrote stays; if the commit fails,
        ``AuditError`` is raised and nothing stays either."""
        with self._lock:
            self._check_open()
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise AuditError(f"cannot start a journal transaction: {exc}") from exc
            try:
                yield JournalWriter(self._conn)
            except sqlite3.Error as exc:  # a statement of the body (a full disk, a lock)
                self._conn.execute("ROLLBACK")
                raise AuditError(f"journal write failed: {exc}") from exc
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            try:
                self._commit()
            except sqlite3.Error as exc:
                self._conn.execute("ROLLBACK")
                raise AuditError(f"journal commit failed: {exc}") from exc

    def _commit(self) -> None:
        self._conn.execute("COMMIT")

    def history(self, user_id: str, memory_id: str) -> list[AuditEvent]:
        """The entry's audit rows, oldest first, less those of a write being rolled back."""
        rows = self._query(
            "SELECT seq, at, user_id, memory_id, op, before, after, actor, detail FROM audit"
            " WHERE user_id = ? AND memory_id = ? AND (op_id IS NULL OR op_id NOT IN"
            " (SELECT op_id FROM intents WHERE state = 'undoing')) ORDER BY seq",
            (user_id, memory_id),
        )
        return [
            AuditEvent(
                seq,
                datetime.fromisoformat(at),
                uid,
                mid,
                AuditOp(op),
                before,
                after,
                actor,
                json.loads(detail),
            )
            for seq, at, uid, mid, op, before, after, actor, detail in rows
        ]

    def turns(self, user_id: str, turn_ids: Sequence[str]) -> dict[str, Turn]:
        """The stored turns with these ids, for this user only."""
        found = self._select_turns(user_id, "turn_id", turn_ids, "")
        return {t.turn_id: t for t in found}

    def session_turns(self, user_id: str, session_ids: Sequence[str]) -> list[Turn]:
        """Every stored turn of these sessions of this user, each session in the order its
        turns were said (time, then the order they were stored in)."""
        return self._select_turns(
            user_id, "session_id", session_ids, " ORDER BY session_id, at, rowid"
        )

    def session_tail(
        self, user_id: str, session_id: str, n: int, before: Sequence[str] = ()
    ) -> list[Turn]:
        """The last ``n`` stored turns of one session of this user, oldest first, leaving
        out the turns ``before`` names (those being added)."""
        self._check_open()
        marks = ",".join("?" * len(before))
        rows = self._query(
            "SELECT turn_id, session_id, role, speaker, content, at FROM turns"
            " WHERE user_id = ? AND session_id = ?"
            + (f" AND turn_id NOT IN ({marks})" if before else "")
            + " ORDER BY at DESC, rowid DESC LIMIT ?",
            (user_id, session_id, *before, n),
        )
        return [
            Turn(tid, user_id, sid, Role(role), speaker, content, datetime.fromisoformat(at))
            for tid, sid, role, speaker, content, at in reversed(rows)
        ]

    def _select_turns(
        self, user_id: str, column: str, values: Sequence[str], order: str
    ) -> list[Turn]:
        if not values:
            self._check_open()
            return []
        marks = ",".join("?" * len(values))
        rows = self._query(
            "SELECT turn_id, session_id, role, speaker, content, at FROM turns"
            f" WHERE user_id = ? AND {column} IN ({marks}){order}",
            (user_id, *values),
        )
        return [
            Turn(tid, user_id, sid, Role(role), speaker, content, datetime.fromisoformat(at))
            for tid, sid, role, speaker, content, at in rows
        ]

    def user_ids(self) -> list[str]:
        """Every user with stored turns or audit rows."""
        rows = self._query("SELECT user_id FROM turns UNION SELECT user_id FROM audit ORDER BY 1")
        return [r[0] for r in rows]

    def speakers(self, user_id: str | None = None) -> list[str]:
        """The speaker names of this user's stored turns (of every user's, if ``None``)."""
        where, params = ("WHERE user_id = ?", (user_id,)) if user_id is not None else ("", ())
        rows = self._query(f"SELECT DISTINCT speaker FROM turns {where} ORDER BY 1", params)
        return [r[0] for r in rows]

    def had_memories(self, user_id: str, memory_ids: Sequence[str]) -> set[str]:
        """Which of ``memory_ids`` this user ever had (deleted, evicted or merged ones too)."""
        if not memory_ids:
            self._check_open()
            return set()
        marks = ",".join("?" * len(memory_ids))
        rows = self._query(
            f"SELECT DISTINCT memory_id FROM audit WHERE user_id = ? AND memory_id IN ({marks})",
            (user_id, *memory_ids),
        )
        return {r[0] for r in rows}

    def memory_ids(self, user_id: str) -> list[str]:
        """Every memory id this user ever had (the audit log keeps deleted and merged ones)."""
        rows = self._query(
            "SELECT DISTINCT memory_id FROM audit WHERE user_id = ? ORDER BY 1", (user_id,)
        )
        return [r[0] for r in rows]

    def record_ltm(self, changes: Sequence[Change], at: datetime, actor: str) -> None:
        """Audit rows for changes to the shared knowledge graph. They name graph items and
        de-identified texts, never a user. Erasing a user leaves the rows of knowledge other
        users still support; an item that loses its last support to an erasure (``REMOVE``)
        was that user's alone, so every text of it is blanked on disk (``secure_delete``):
        its rows keep what happened and when, not what it said."""
        erased = [c.item for c in changes if c.op == "REMOVE"]
        with self.transaction() as _:
            self._conn.executemany(
                "INSERT INTO ltm_audit (at, op, item_id, before, after, evidence, actor)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (at.isoformat(), c.op, c.item, c.before, c.after, c.evidence, actor)
                    for c in changes
                ],
            )
            self._conn.executemany(
                "UPDATE ltm_audit SET before = NULL, after = NULL WHERE item_id = ?",
                [(item,) for item in erased],
            )

    def ltm_history(self, item_id: str) -> list[LTMAuditEvent]:
        """Every recorded change to one graph item, oldest first."""
        rows = self._query(
            "SELECT seq, at, op, item_id, before, after, evidence, actor FROM ltm_audit"
            " WHERE item_id = ? ORDER BY seq",
            (item_id,),
        )
        return [
            LTMAuditEvent(seq, datetime.fromisoformat(at), op, iid, before, after, ev, actor)
            for seq, at, op, iid, before, after, ev, actor in rows
        ]

    def count_audit(self, user_id: str) -> int:
        rows = self._query("SELECT COUNT(*) FROM audit WHERE user_id = ?", (user_id,))
        return int(rows[0][0])

    # -- intents ----------------------------------------------------------------------------
    def unfinished(self) -> list[Intent]:
        """Every intent not finished yet, oldest first."""
        rows = self._query(
            "SELECT op_id, user_id, kind, state, payload FROM intents ORDER BY op_id"
        )
        return [
            Intent(op_id, uid, kind, state, json.loads(payload))
            for op_id, uid, kind, state, payload in rows
        ]

    def has_unfinished(self) -> bool:
        return bool(self._query("SELECT 1 FROM intents LIMIT 1"))

    def finish(self, op_id: int) -> None:
        """The store has the intent's change (or an erasure is complete): forget the intent."""
        with self.transaction():
            self._conn.execute("DELETE FROM intents WHERE op_id = ?", (op_id,))

    def mark_undoing(self, op_id: int) -> None:
        """The store refused the intent's change: from now on it is to be rolled back."""
        with self.transaction():
            self._conn.execute("UPDATE intents SET state = 'undoing' WHERE op_id = ?", (op_id,))

    def revoke(self, op_id: int) -> None:
        """Take a rolled-back write out of the journal: its audit rows, the turns it saved,
        and its intent."""
        with self.transaction():
            self._conn.execute("DELETE FROM audit WHERE op_id = ?", (op_id,))
            self._conn.execute("DELETE FROM turns WHERE op_id = ?", (op_id,))
            self._conn.execute("DELETE FROM intents WHERE op_id = ?", (op_id,))

    def begin_forget(self, user_id: str) -> int:
        """The durable erasure job of this user (the one already there, if an erasure was
        interrupted). It holds the user id and nothing else."""
        with self.transaction():
            row = self._conn.execute(
                "SELECT op_id FROM intents WHERE user_id = ? AND kind = ?", (user_id, FORGET)
            ).fetchone()
            if row is not None:
                return int(row[0])
            return JournalWriter(self._conn).intend(user_id, FORGET, {})

    def forget_user(self, user_id: str) -> ForgetCounts:
        """Delete every audit row, turn and write intent of this user, overwriting them on
        disk. The erasure job itself stays until ``finish``."""
        with self.transaction():
            audit = self._conn.execute("DELETE FROM audit WHERE user_id = ?", (user_id,)).rowcount
            turns = self._conn.execute("DELETE FROM turns WHERE user_id = ?", (user_id,)).rowcount
            self._conn.execute(
                "DELETE FROM intents WHERE user_id = ? AND kind != ?", (user_id, FORGET)
            )
        return ForgetCounts(audit_rows=audit, turns=turns)

    def close(self) -> None:
        """Close the database (idempotent); every later call raises ``ClosedError``."""
        with self._lock:
            self._closed = True
            self._conn.close()
