"""The SQLite journal: the audit log of every change to a memory, the source turns that MTM
entries point back to, and the intents of writes in flight. It is the source of truth: a write
commits its audit rows, its turns and its intent (the store change to make, and the store state
it replaces) in one transaction before the store is touched, and the intent is deleted once the
store has it. An intent found on open is a write a crash interrupted; ``tiermem.pipeline
.recovery`` finishes it. An erasure (``forget_user``) is an intent too, a job that names only
the user.

Deleted rows are overwritten on disk (``PRAGMA secure_delete``), and an erasure ends by
rewriting the file without its free space (``compact``, a job of its own that names no one):
secure_delete alone left fragments of deleted rows in the free space of pages shared with other
users' rows (issue #19), VACUUM rebuilds every page from the live rows only.

Every failure of SQLite is an ``AuditError``; one that retrying later may cure (a full or
read-only disk, an I/O error, a lock held too long) is a ``JournalUnavailableError``. One
process holds a journal at a time (an ``flock`` on ``<journal>.lock``): a second one is refused
with ``JournalLockedError`` instead of interleaving its writes.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from tiermem.changes import Change
from tiermem.errors import ClosedError, JournalLockedError, JournalUnavailableError
from tiermem.journal_schema import audit_error, prepare
from tiermem.ltm.persist import DirectoryLock
from tiermem.types import AuditEvent, AuditOp, AuditRecord, Role, Turn

logger = logging.getLogger(__name__)

FORGET = "forget"  # the kind of an erasure job
COMPACT = "compact"  # the job that rewrites the file after an erasure; it names no user
IntentState = Literal["pending", "undoing"]
_PROBE = 16_384  # bytes the readiness probe writes (and rolls back): a few pages


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
class AddSnapshot:
    """``Journal.before_add``: what an add reads before it writes."""

    unfinished: bool  # an earlier write or erasure is to be finished first
    known: dict[str, Turn]  # the turns of the add already stored, by id
    tail: list[Turn]  # the session's last stored turns before the new ones, oldest first


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


_TURN_COLUMNS = "turn_id, session_id, role, speaker, content, at"


def _turns(user_id: str, rows: Iterable[Any]) -> list[Turn]:
    """Rows of ``_TURN_COLUMNS`` as this user's turns."""
    return [
        Turn(tid, user_id, sid, Role(role), speaker, content, datetime.fromisoformat(at))
        for tid, sid, role, speaker, content, at in rows
    ]


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
                    json.dumps(dict(r.detail), sort_keys=True, default=str),
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

    Every method raises ``AuditError`` when SQLite fails: ``JournalUnavailableError`` when
    retrying later may work (another connection holding the file longer than
    ``busy_timeout_s``, a full or read-only disk); and ``ClosedError`` after ``close()``. No
    ``sqlite3`` error reaches the caller. Opening a journal another process holds raises
    ``JournalLockedError``."""

    def __init__(self, path: Path | None, *, busy_timeout_s: float = 5.0) -> None:
        self._closed = False
        self._hold: DirectoryLock | None = None
        if path is not None:
            self._hold = DirectoryLock.acquire(
                path.parent,
                lock_file=f"{path.name}.lock",
                refused=lambda _, pid: JournalLockedError(path, pid),
                role="the journal's directory",
            )
        try:
            self._conn = self._open(path, busy_timeout_s)
        except BaseException:
            if self._hold is not None:
                self._hold.release()
            raise
        self._lock = threading.RLock()

    def _open(self, path: Path | None, busy_timeout_s: float) -> sqlite3.Connection:
        where = f"cannot open the journal at {path}"
        try:
            if path is not None:  # created owner-only before SQLite opens it (its -journal too)
                os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600))
                if path.stat().st_mode & 0o077:  # made by a version that left it 0644
                    path.chmod(0o600)
            conn = sqlite3.connect(
                str(path) if path else ":memory:",
                timeout=busy_timeout_s,
                check_same_thread=False,
                isolation_level=None,
            )
        except OSError as exc:
            raise JournalUnavailableError(f"{where}: {exc}") from exc
        except sqlite3.Error as exc:
            raise audit_error(where, exc) from exc
        try:
            prepare(conn)
        except sqlite3.Error as exc:
            conn.close()
            raise audit_error(where, exc) from exc
        except BaseException:
            conn.close()
            raise
        return conn

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("the journal is closed")

    def _query(
        self, sql: str, params: Sequence[object] = (), failed: str = "cannot read the journal"
    ) -> list[Any]:
        """Every row ``sql`` selects, read under the lock, with SQLite's errors typed."""
        with self._lock:
            self._check_open()
            try:
                return self._conn.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise audit_error(failed, exc) from exc

    @contextmanager
    def transaction(self) -> Iterator[JournalWriter]:
        """One atomic write. If the body raises, nothing it wrote stays; if the commit fails,
        ``AuditError`` is raised and nothing stays either."""
        with self._lock:
            self._check_open()
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise audit_error("cannot start a journal transaction", exc) from exc
            try:
                yield JournalWriter(self._conn)
            except sqlite3.Error as exc:  # a statement of the body (a full disk, a lock)
                self._rollback()
                raise audit_error("journal write failed", exc) from exc
            except BaseException:
                self._rollback()
                raise
            try:
                self._commit()
            except sqlite3.Error as exc:
                self._rollback()
                raise audit_error("journal commit failed", exc) from exc

    def _rollback(self) -> None:
        """Roll the open transaction back, if SQLite has not already done so itself (it does
        on a full disk, and a second ROLLBACK then fails: "no transaction is active")."""
        if not self._conn.in_transaction:
            return
        try:
            self._conn.execute("ROLLBACK")
        except sqlite3.Error:  # the error that brought us here is the one to raise
            logger.warning("the journal could not roll back; SQLite rolls back on reopen")

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
                datetime.fromisoformat(at),
                uid,
                mid,
                AuditOp(op),
                before,
                after,
                actor,
                json.loads(detail),
                seq=seq,
            )
            for seq, at, uid, mid, op, before, after, actor, detail in rows
        ]

    def turns(self, user_id: str, turn_ids: Sequence[str]) -> dict[str, Turn]:
        """The stored turns with these ids, for this user only."""
        if not turn_ids:
            self._check_open()
            return {}
        marks = ",".join("?" * len(turn_ids))
        rows = self._query(
            f"SELECT {_TURN_COLUMNS} FROM turns WHERE user_id = ? AND turn_id IN ({marks})",
            (user_id, *turn_ids),
        )
        return {t.turn_id: t for t in _turns(user_id, rows)}

    def before_add(
        self, user_id: str, session_id: str, turn_ids: Sequence[str], n: int
    ) -> AddSnapshot:
        """What ``add()`` reads before it writes, in one read of one snapshot: whether an
        earlier write or erasure is unfinished (``has_unfinished``), which of ``turn_ids``
        are stored (``turns``), and the last ``n`` stored turns of the session that are not
        among them (``session_tail``)."""
        with self._lock:
            self._check_open()
            try:
                self._conn.execute("BEGIN")  # deferred: a read transaction, one snapshot
            except sqlite3.Error as exc:
                raise audit_error("cannot read the journal", exc) from exc
            try:
                unfinished = self.has_unfinished()
                known = self.turns(user_id, turn_ids)
                new = [t for t in turn_ids if t not in known]
                tail = self.session_tail(user_id, session_id, n, new)
            finally:
                self._rollback()  # nothing was written: ends the read
        return AddSnapshot(unfinished, known, tail)

    def placed_turns(self, user_id: str, turn_ids: Sequence[str]) -> list[tuple[Turn, int]]:
        """These stored turns of this user, in session order, each with its place in its
        session (how many of the session's turns were said before it): what a context of
        them reads, in one query that reads no other turn's text (a session may hold
        thousands of turns, and a context names a few)."""
        if not turn_ids:
            self._check_open()
            return []
        marks = ",".join("?" * len(turn_ids))
        rows = self._query(
            f"SELECT {_TURN_COLUMNS}, (SELECT COUNT(*) FROM turns AS p"
            " WHERE p.user_id = t.user_id AND p.session_id = t.session_id"
            " AND (p.at < t.at OR (p.at = t.at AND p.rowid < t.rowid)))"
            f" FROM turns AS t WHERE t.user_id = ? AND t.turn_id IN ({marks})",
            (user_id, *turn_ids),
        )  # no ORDER BY: with one, SQLite walks the user's whole session index to find them
        rows = sorted(rows, key=lambda r: (r[1], r[-1]))  # by session, then place in it
        return list(
            zip(_turns(user_id, (r[:-1] for r in rows)), (r[-1] for r in rows), strict=True)
        )

    def session_tail(
        self, user_id: str, session_id: str, n: int, before: Sequence[str] = ()
    ) -> list[Turn]:
        """The last ``n`` stored turns of one session of this user, oldest first, leaving
        out the turns ``before`` names (those being added)."""
        self._check_open()
        marks = ",".join("?" * len(before))
        rows = self._query(
            f"SELECT {_TURN_COLUMNS} FROM turns WHERE user_id = ? AND session_id = ?"
            + (f" AND turn_id NOT IN ({marks})" if before else "")
            + " ORDER BY at DESC, rowid DESC LIMIT ?",
            (user_id, session_id, *before, n),
        )
        return _turns(user_id, reversed(rows))

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
        """Whether a write or an erasure is unfinished (a pending compaction is not: it
        holds no write back, and runs when the memory next opens)."""
        return bool(self._query("SELECT 1 FROM intents WHERE kind != ? LIMIT 1", (COMPACT,)))

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

    def check_writable(self) -> None:
        """Whether the journal can take a write now: a write of a few pages, rolled back
        (nothing stays). Raises ``JournalUnavailableError`` on a full or read-only disk."""
        with self._lock:
            self._check_open()
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    self._conn.execute("INSERT INTO probe (pad) VALUES (zeroblob(?))", (_PROBE,))
                finally:
                    self._rollback()
            except sqlite3.Error as exc:
                raise audit_error("the journal cannot be written", exc) from exc

    def end_forget(self, job: int) -> int:
        """The erasure ``job`` is done but for the bytes: in one transaction it becomes a
        compaction job, which names no one. Returns the compaction's op id."""
        with self.transaction() as writer:
            self._conn.execute("DELETE FROM intents WHERE op_id = ?", (job,))
            return writer.intend("", COMPACT, {})

    def compact(self) -> None:
        """Rewrite the file from its live rows only (``VACUUM``), so that no fragment of a
        deleted row survives in a page's free space. It needs free disk space about the
        file's size; killed inside, SQLite's rollback journal restores the file as it was
        on the next open."""
        self._query("VACUUM", failed="cannot compact the journal")

    def close(self) -> None:
        """Close the database (idempotent); every later call raises ``ClosedError``."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._conn.close()
            if self._hold is not None:
                self._hold.release()
