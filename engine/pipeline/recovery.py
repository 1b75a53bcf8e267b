"""Finishing what the journal holds unfinished: writes a crash interrupted, rollbacks that
failed, erasures that stopped half-way.

It runs when a ``Memory`` opens, before anything reads or writes, and before any write while
something is left (after a failed rollback). Erasures come first, to the end: they also take
the erased users' unfinished writes with them, which must never be re-applied. Then every
other intent in order: ``pending`` ones are applied to the store again (the journal already
has their audit rows and turns: roll forward), ``undoing`` ones are rolled back. A compaction
an earlier erasure left runs on open, not before a write.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from tiermem.components import Components
from tiermem.errors import AuditError
from tiermem.journal import COMPACT, FORGET
from tiermem.pipeline.commit import redo_intent, undo_intent
from tiermem.pipeline.forget import finish_compaction, finish_forget

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Recovery:
    erasures: int = 0
    redone: int = 0
    undone: int = 0


def recover(c: Components, *, compact: bool = True) -> Recovery:
    """Finish every unfinished intent (see the module docstring), and compact the journal
    after the erasures finished here; with ``compact``, also after those finished before (a
    compaction's failure is logged: it holds no write back, and is tried again on the next
    open or erasure)."""
    unfinished = c.journal.unfinished()
    erasures = [i for i in unfinished if i.kind == FORGET]
    compactions = [i.op_id for i in unfinished if i.kind == COMPACT]
    # first: an erasure also removes the erased user's other intents
    finished = [finish_forget(c, job.op_id, job.user_id)[1] for job in erasures]
    compactions += finished
    if (compact or finished) and compactions:  # an erasure finished now is compacted now
        try:
            finish_compaction(c, compactions)
        except AuditError as exc:
            logger.warning("the journal's compaction after an erasure failed again: %s", exc)
    erased = {job.user_id for job in erasures}
    redone = undone = 0
    for intent in unfinished:
        if intent.kind in (FORGET, COMPACT) or intent.user_id in erased:
            continue
        if intent.state == "undoing":
            undo_intent(c, intent)
            undone += 1
        else:
            redo_intent(c, intent)
            redone += 1
    report = Recovery(len(erasures), redone, undone)
    if report != Recovery():
        logger.info(
            "finished %d erasures, re-applied %d writes and rolled back %d after an interruption",
            report.erasures,
            report.redone,
            report.undone,
        )
    return report


def finish_unfinished(c: Components) -> bool:
    """Before a write: finish what an earlier failure left, if anything (then ``True``)."""
    if not c.journal.has_unfinished():
        return False
    recover(c, compact=False)
    return True
