"""Erasing one user, as a durable job that a crash cannot stop half-way.

The job is committed to the journal first (it names the user and nothing else). Then, in this
order: the user's support is withdrawn from the LTM graph (while the journal still knows
their entry ids), their MTM collection is dropped (its files removed), their audit rows,
turns and write intents are deleted (overwritten on disk), their STM sessions are dropped,
and the job becomes a compaction job that names no one. Every step is idempotent, so a job
found unfinished when the memory opens is run again from the top
(``tiermem.pipeline.recovery``) and ends the same way.

Last, the journal file is rewritten from its live rows (``Journal.compact``): overwriting
deleted rows is not enough, fragments of them stayed in the free space of pages shared with
other users' rows. A compaction that fails (too little disk space for the copy) raises; its job
stays and runs again when the memory next opens.
"""

from __future__ import annotations

from dataclasses import dataclass

from tiermem.components import Components
from tiermem.faults import reached
from tiermem.journal import COMPACT


@dataclass(frozen=True, slots=True)
class ForgetReport:
    """What ``forget_user`` removed. ``ltm_removed``: knowledge items supported only by this
    user, now gone; ``ltm_decremented``: shared items that lost this user's evidence. A job
    resumed after an interruption counts only what was left."""

    entries: int
    turns: int
    audit_rows: int
    stm_sessions: int
    ltm_removed: int = 0
    ltm_decremented: int = 0


def run_forget(c: Components, user_id: str) -> ForgetReport:
    job = c.journal.begin_forget(user_id)
    reached("forget:after-job-commit")
    report, _ = finish_forget(c, job, user_id)
    # this job's compaction, and any an earlier erasure left
    finish_compaction(c, [i.op_id for i in c.journal.unfinished() if i.kind == COMPACT])
    return report


def finish_forget(c: Components, job: int, user_id: str) -> tuple[ForgetReport, int]:
    """Run (or resume) the erasure job ``job`` of ``user_id`` to its compaction job (whose
    op id is returned beside what was removed)."""
    entries = c.store.count(user_id)
    ltm_removed = ltm_decremented = 0
    if c.ltm is not None:
        # Every entry the user ever had has an ADD row (evicted and deleted ones too). A
        # resumed job past the journal step finds none: the graph step was done before it.
        ids = c.journal.memory_ids(user_id)
        ltm_removed, ltm_decremented = c.ltm.forget_user(user_id, ids, c.clock.now())
    reached("forget:after-ltm-withdraw")
    c.store.drop_user(user_id)
    reached("forget:after-drop-collection")
    counts = c.journal.forget_user(user_id)
    reached("forget:after-journal-delete")
    sessions = c.stm.forget_user(user_id)
    reached("forget:after-stm")
    compaction = c.journal.end_forget(job)
    reached("forget:after-job-end")
    report = ForgetReport(
        entries, counts.turns, counts.audit_rows, sessions, ltm_removed, ltm_decremented
    )
    return report, compaction


def finish_compaction(c: Components, jobs: list[int]) -> None:
    """Rewrite the journal without the free space erasures left, then drop their jobs."""
    c.journal.compact()
    reached("forget:after-compact")
    for job in jobs:
        c.journal.finish(job)
