"""Wire the consolidation job and its scheduler to one ``Memory``'s components."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from tiermem.components import Components
from tiermem.config import TiermemConfig
from tiermem.offline.consolidate import ConsolidationJob, ConsolidationReport
from tiermem.offline.scheduler import ConsolidationScheduler
from tiermem.slm.registry import CONSOLIDATION
from tiermem.slm.roles.common import RoleRuntime


@dataclass(frozen=True, slots=True)
class Consolidation:
    job: ConsolidationJob
    scheduler: ConsolidationScheduler

    def run_for(self, user_id: str) -> ConsolidationReport:
        """One user's consolidation, in the caller's thread, never beside another run."""
        return self.scheduler.run_now(lambda: self.job.run_once(user_id))

    def stop(self) -> None:
        self.job.stop.set()
        self.scheduler.shutdown(wait=True)


def start_consolidation(
    config: TiermemConfig, components: Components, write_lock: threading.RLock
) -> Consolidation:
    """Build the job on the configured large model and start the scheduler. The model itself
    loads on the first run, not here."""
    if components.ltm is None or components.pool is None:
        raise ValueError("consolidation needs the LTM and the backend pool")
    cfg = config.ltm.consolidation
    runtime = RoleRuntime(
        components.pool.get(cfg.backend, owner=CONSOLIDATION),
        components.meter,
        cfg.timeout_s,
        0.0,
        cfg.max_tokens,
    )
    job = ConsolidationJob(components, components.ltm, runtime, cfg, write_lock)
    scheduler = ConsolidationScheduler(
        job.run_once,
        interval_minutes=cfg.interval_minutes,
        retry_s=cfg.retry_s,
        misfire_grace_s=cfg.misfire_grace_s,
    )
    scheduler.start()
    return Consolidation(job, scheduler)
