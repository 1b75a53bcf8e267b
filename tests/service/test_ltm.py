"""With LTM on, consolidation runs on the service's own scheduler: triggered through the API
(one tenant's user, or every user with an admin key), its state and its knowledge's history
read through ``RemoteMemory`` as through ``Memory``, its runs counted in ``/metrics``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from tiermem import ManualClock, Memory
from tiermem.errors import PermissionDeniedError
from tiermem.remote import RemoteMemory
from tiermem.types import Tier

from tests.conftest import T0
from tests.fakes.scripted import ScriptedModels
from tests.offline.conftest import ltm_config, one_node_per_memory
from tests.service.conftest import in_thread, make_keys

SENTENCES = ("Ana bakes sourdough every Sunday.", "Ana's sourdough uses rye flour.")


def _run(face: Any, user: str) -> list[object]:
    for sentence in SENTENCES:
        face.add(sentence, user_id=user)
    report = face.consolidate_now(user)
    state = face.consolidation_state()
    hits = face.search("rye flour", user, 5)
    knowledge = [h for h in hits if h.tier is Tier.LTM]
    history = face.knowledge_history(knowledge[0].id) if knowledge else []
    summary = {k: v for k, v in report.summary().items() if k != "seconds"}
    return [summary, state.runs, state.failures, [h.text for h in knowledge], history]


@pytest.fixture
def consolidator(scripted_models: ScriptedModels) -> str:
    scripted_models.serve("scripted", one_node_per_memory)
    return "scripted"


def test_consolidation_through_the_service_matches_the_memory(
    tmp_path: Path, consolidator: str
) -> None:
    keys = make_keys(tmp_path)
    with Memory(ltm_config(tmp_path / "local", consolidator), clock=ManualClock(T0)) as local:
        embedded = _run(local, "ana")
    config = ltm_config(tmp_path / "served", consolidator)
    with (
        Memory(config, clock=ManualClock(T0)) as served,
        in_thread(served, keys) as url,
        RemoteMemory(url, keys.admin) as remote,
    ):
        over_http = _run(remote, "ana")
        admin = {"Authorization": f"Bearer {keys.admin}"}
        metrics = httpx.get(f"{url}/metrics", headers=admin, timeout=10).text
        with RemoteMemory(url, keys.acme) as tenant, pytest.raises(PermissionDeniedError):
            tenant.consolidate_now()  # every user's run: an admin's
    assert over_http == embedded  # the same scrubbing too: acme:ana's "Ana" is scrubbed
    assert embedded[0]["scrubbed_identifiers"] == 2
    assert embedded[0]["entries"] >= 2
    assert embedded[1] == 1
    assert embedded[3]  # the knowledge is found again
    runs = re.search(r"^tiermem_consolidation_runs_total (\S+)$", metrics, re.MULTILINE)
    assert runs is not None
    assert float(runs.group(1)) == 1.0
