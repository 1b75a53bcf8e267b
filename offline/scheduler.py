"""When consolidation runs: an APScheduler ``BackgroundScheduler`` with a periodic job, an
event trigger (after enough new turns, or on MTM capacity pressure), and retries.

One run at a time: every job is ``max_instances=1`` and ``coalesce=True``, and all of them go
through one run lock. A trigger that arrives during a run is remembered and runs right after
it (it is not dropped, as APScheduler would drop a second instance). A failed run is retried
after ``retry_s``; it committed nothing past its last finished chunk, so the watermark is
never lost.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from apscheduler.schedulers.background import BackgroundScheduler
from tiermem.offline.consolidate import ConsolidationReport

logger = logging.getLogger(__name__)

PERIODIC, TRIGGERED, RETRY = "tiermem-consolidate", "tiermem-consolidate-now", "tiermem-retry"


@dataclass(frozen=True, slots=True)
class SchedulerState:
    """The scheduler as a user can inspect it."""

    started: bool = False
    running: bool = False
    pending: bool = False  # a trigger arrived during a run
    runs: int = 0
    failures: int = 0  # consecutive
    last_started: datetime | None = None
    last_finished: datetime | None = None
    last_error: str | None = None
    last_report: ConsolidationReport | None = None
    next_run_at: datetime | None = None


class ConsolidationScheduler:
    def __init__(
        self,
        run: Callable[[], ConsolidationReport],
        *,
        interval_minutes: float,
        retry_s: float,
        misfire_grace_s: int,
    ) -> None:
        self._run = run
        self._interval = interval_minutes
        self._retry_s = retry_s
        self._misfire_grace_s = misfire_grace_s
        self._run_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._state = SchedulerState()
        self._scheduler = BackgroundScheduler(timezone=UTC)

    def start(self) -> None:
        if self._interval > 0:
            self._scheduler.add_job(
                self._tick,
                "interval",
                minutes=self._interval,
                id=PERIODIC,
                max_instances=1,
                coalesce=True,
                misfire_grace_time=self._misfire_grace_s,
            )
        self._scheduler.start()
        self._set(started=True)

    def shutdown(self, wait: bool = True) -> None:
        if self._scheduler.running:
            self._scheduler.shutdown(wait=wait)
        self._set(started=False)

    def trigger(self) -> None:
        """Run as soon as possible (after the current run, if one is in flight)."""
        if self._run_lock.locked():
            self._set(pending=True)
            return
        self._once(TRIGGERED, datetime.now(UTC))

    def run_now(self, run: Callable[[], ConsolidationReport] | None = None) -> ConsolidationReport:
        """Run (the job, or ``run``) in the caller's thread, after any run in flight;
        exceptions propagate."""
        try:
            with self._run_lock:
                return self._guarded(run or self._run)
        finally:
            self._run_pending()

    def state(self) -> SchedulerState:
        nexts = [t for t in (getattr(j, "next_run_time", None) for j in self._jobs()) if t]
        with self._state_lock:
            return replace(self._state, next_run_at=min(nexts) if nexts else None)

    # -- internals -----------------------------------------------------------------------------
    def _jobs(self) -> list[object]:
        if not self._scheduler.running:
            return []
        return list(self._scheduler.get_jobs())

    def _set(self, **changes: object) -> None:
        with self._state_lock:
            self._state = replace(self._state, **changes)  # type: ignore[arg-type]

    def _once(self, job_id: str, when: datetime) -> None:
        if not self._scheduler.running:
            return
        self._scheduler.add_job(
            self._tick,
            "date",
            run_date=when,
            id=job_id,
            replace_existing=True,
            max_instances=1,
            coalesce=True,
            misfire_grace_time=self._misfire_grace_s,
        )

    def _tick(self) -> None:
        if not self._run_lock.acquire(blocking=False):
            self._set(pending=True)
            return
        try:
            self._guarded(self._run)
        except Exception as exc:  # noqa: BLE001 - reported in state, retried; nothing is lost
            logger.warning(
                "consolidation failed (%s); retrying in %.0f s", type(exc).__name__, self._retry_s
            )
            self._once(RETRY, datetime.now(UTC) + timedelta(seconds=self._retry_s))
        finally:
            self._run_lock.release()
        self._run_pending()

    def _run_pending(self) -> None:
        """A trigger that arrived during a run runs now."""
        with self._state_lock:
            pending = self._state.pending
            self._state = replace(self._state, pending=False)
        if pending:
            self._once(TRIGGERED, datetime.now(UTC))

    def _guarded(self, run: Callable[[], ConsolidationReport]) -> ConsolidationReport:
        self._set(running=True, last_started=datetime.now(UTC))
        try:
            report = run()
        except Exception as exc:
            with self._state_lock:
                self._state = replace(
                    self._state,
                    running=False,
                    failures=self._state.failures + 1,
                    last_error=f"{type(exc).__name__}: {exc}",
                    last_finished=datetime.now(UTC),
                )
            raise
        with self._state_lock:
            self._state = replace(
                self._state,
                running=False,
                runs=self._state.runs + 1,
                failures=0,
                last_error=None,
                last_report=report,
                last_finished=datetime.now(UTC),
            )
        return report
