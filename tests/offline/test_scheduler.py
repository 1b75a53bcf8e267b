"""Scheduling: one run at a time, triggers from add(), retries, and add() never waits for a
run (the model call happens outside every lock the online path takes)."""

from __future__ import annotations

import threading
import time
from typing import Any

from tiermem.errors import SLMUnavailable
from tiermem.slm.base import SLMRequest

from tests.conftest import chat
from tests.offline.conftest import node, scripted, units
from tests.offline.test_consolidation import HOBBIES, add_lines


class BlockingModel:
    """Answers only when released; records how many calls were in flight at once."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()
        self._lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        self.calls = 0

    def __call__(self, request: SLMRequest) -> str:
        with self._lock:
            self.in_flight += 1
            self.calls += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        self.entered.set()
        assert self.release.wait(10), "the test never released the model"
        with self._lock:
            self.in_flight -= 1
        return units([node("pottery")])


def wait_for(condition: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_add_and_search_do_not_wait_for_a_run_and_runs_never_overlap(
    make_ltm_memory: Any,
) -> None:
    model = BlockingModel()
    memory = make_ltm_memory(model, trigger_turns=2, chunk_size=1)
    add_lines(memory, "alice", HOBBIES[:2])  # 2 turns: triggers a background run
    assert model.entered.wait(10)
    assert memory.consolidation_state().running

    # While the run is blocked inside the model call, the online path goes on.
    for i in range(6):
        memory.add(chat(("user", f"more news number {i}")), "alice")  # triggers again
    hits = memory.search("pottery", "alice", k=3)
    assert hits
    assert memory.consolidation_state().running
    assert model.in_flight == 1
    assert memory.consolidation_state().pending  # the triggers are remembered, not dropped

    model.release.set()
    wait_for(
        lambda: memory.consolidation_state().runs >= 2 and not memory.consolidation_state().running
    )
    wait_for(lambda: memory.consolidate_now().entries == 0)
    assert model.max_in_flight == 1
    # Every entry was consolidated (searched ones again, as re-activated), none lost.
    assert model.calls >= memory.components.store.count("alice") >= 3


def test_consolidate_now_waits_for_the_run_in_flight(make_ltm_memory: Any) -> None:
    model = BlockingModel()
    memory = make_ltm_memory(model, trigger_turns=1, chunk_size=8)
    add_lines(memory, "alice", HOBBIES[:1])
    assert model.entered.wait(10)
    result: dict[str, Any] = {}
    caller = threading.Thread(target=lambda: result.setdefault("r", memory.consolidate_now()))
    caller.start()
    time.sleep(0.2)
    assert caller.is_alive()
    assert model.max_in_flight == 1
    model.release.set()
    caller.join(10)
    assert result["r"].entries == 0
    assert model.max_in_flight == 1


def test_a_failed_background_run_is_retried(make_ltm_memory: Any) -> None:
    memory = make_ltm_memory(trigger_turns=1, retry_s=0.2, chunk_size=4)
    backend = scripted(memory)
    backend.push(SLMUnavailable("consolidator", "endpoint down"))
    backend.respond_with(lambda r: units([node("pottery")]))
    add_lines(memory, "alice", HOBBIES[:1])
    wait_for(lambda: memory.consolidation_state().runs >= 1)
    state = memory.consolidation_state()
    assert state.last_report is not None
    assert state.last_report.entries == 1
    assert len(backend.requests) == 2
    assert state.failures == 0


def test_periodic_job_is_scheduled_with_one_instance_and_coalescing(make_ltm_memory: Any) -> None:
    memory = make_ltm_memory(interval_minutes=30)
    state = memory.consolidation_state()
    assert state.started
    assert state.next_run_at is not None
    scheduler = memory._consolidation.scheduler._scheduler
    job = scheduler.get_job("tiermem-consolidate")
    assert (job.max_instances, job.coalesce, job.misfire_grace_time) == (1, True, 300)
    memory.close()
    assert not memory._consolidation.scheduler.state().started


def test_erasing_a_user_during_a_run_keeps_none_of_their_knowledge(
    make_ltm_memory: Any,
) -> None:
    model = BlockingModel()
    memory = make_ltm_memory(model, trigger_turns=1, chunk_size=8)
    add_lines(memory, "alice", HOBBIES[:1])
    assert model.entered.wait(10)
    memory.forget_user("alice")  # does not wait for the model either
    model.release.set()
    wait_for(lambda: not memory.consolidation_state().running)
    assert memory.components.ltm.node_count == 0  # type: ignore[union-attr]
    assert memory.consolidation_state().last_report.erased_during_run == 1  # type: ignore[union-attr]


def test_a_trigger_during_consolidate_now_runs_afterwards(make_ltm_memory: Any) -> None:
    model = BlockingModel()
    memory = make_ltm_memory(model, trigger_turns=1_000, chunk_size=8)
    add_lines(memory, "alice", HOBBIES[:1])
    caller = threading.Thread(target=memory.consolidate_now)
    caller.start()
    assert model.entered.wait(10)
    add_lines(memory, "alice", HOBBIES[1:2])  # new work while the run is in the model
    memory._consolidation.scheduler.trigger()
    assert memory.consolidation_state().pending
    model.release.set()
    caller.join(10)
    wait_for(lambda: memory.consolidation_state().runs >= 2)
    wait_for(lambda: not memory.consolidation_state().running)
    assert model.calls == 2  # the second entry was consolidated by the remembered trigger
