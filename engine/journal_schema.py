"""The journal's SQLite file: its schema, the migration from older versions, the settings
every connection runs with, and how SQLite's errors become typed ones."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from tiermem.errors import AuditError, JournalUnavailableError

SCHEMA_VERSION = 2
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
CREATE TABLE IF NOT EXISTS probe (pad BLOB);
"""
# What SQLite says when a write may succeed later, once the disk or the lock holder lets it.
_TRANSIENT = frozenset(
    {
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
        sqlite3.SQLITE_READONLY,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_PERM,
    }
)


def audit_error(what: str, exc: sqlite3.Error) -> AuditError:
    """The typed error for SQLite's ``exc`` while doing ``what``: ``JournalUnavailableError``
    for a full or read-only disk, an I/O error or a lock (retrying later may work),
    ``AuditError`` for the rest (a corrupt file, a bug).

    >>> full = sqlite3.OperationalError("database or disk is full")
    >>> full.sqlite_errorcode = sqlite3.SQLITE_FULL
    >>> type(audit_error("write", full)).__name__
    'JournalUnavailableError'
    >>> type(audit_error("read", sqlite3.DatabaseError("file is not a database"))).__name__
    'AuditError'
    """
    code = getattr(exc, "sqlite_errorcode", None)
    transient = code is not None and code & 0xFF in _TRANSIENT
    cls = JournalUnavailableError if transient else AuditError
    return cls(f"{what}: {exc}")


# Version 1 had no intents (created above by IF NOT EXISTS) and no op_id columns.
_FROM_V1 = (
    "ALTER TABLE audit ADD COLUMN op_id INTEGER",
    "ALTER TABLE turns ADD COLUMN op_id INTEGER",
)


def prepare(conn: sqlite3.Connection) -> None:
    """Settings, schema and migration of a newly opened connection."""
    conn.execute("PRAGMA secure_delete = ON")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.executescript(_SCHEMA)
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version == 0:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    elif version == 1:
        _migrate(conn, _FROM_V1)
    elif version != SCHEMA_VERSION:
        raise AuditError(f"journal schema {version} is not {SCHEMA_VERSION}")


def _migrate(conn: sqlite3.Connection, statements: Sequence[str]) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in statements:
            conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
