"""``forget_user`` through the service leaves no byte of the user in its data directory: with
data over many pages beside a user who stays, after a clean stop, and after the service was
killed with SIGKILL inside the erasure job and started again (it finishes the job on open)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tiermem.errors import ServiceUnavailableError
from tiermem.remote import RemoteMemory
from tiermem.service.launch import ServerProcess

from tests.conftest import MANY_PAGES_SECRET, many_pages
from tests.service.conftest import make_keys, write_config

pytestmark = pytest.mark.slow  # a service process per erasure step

VICTIM, BYSTANDER = "mira-5521", "otto-7310"
KILLPOINT = Path(__file__).parent / "killpoint"


def _leaks(root: Path) -> list[tuple[str, str]]:
    needles = (MANY_PAGES_SECRET, VICTIM, "Mira")
    return [
        (str(p.relative_to(root)), n)
        for p in root.rglob("*")
        if p.is_file()
        for n in needles
        if n.encode() in p.read_bytes()
    ]


@pytest.mark.parametrize("kill_at", [None, "forget:after-journal-delete", "forget:after-job-end"])
def test_forget_through_the_service_leaves_no_byte(tmp_path: Path, kill_at: str | None) -> None:
    keys = make_keys(tmp_path)
    env = {"PYTHONPATH": os.pathsep.join([str(KILLPOINT), os.environ.get("PYTHONPATH", "")])}
    if kill_at is not None:
        env["TIERMEM_TEST_KILL_AT"] = kill_at
    config = write_config(tmp_path)
    server = ServerProcess(config, keys.path, log_file=tmp_path / "serve.log", env=env)
    server.start()
    try:
        with RemoteMemory(server.url, keys.acme, timeout_s=60) as memory:
            kept = many_pages(memory, VICTIM, BYSTANDER)  # type: ignore[arg-type]
            assert _leaks(tmp_path / "data")
            if kill_at is None:
                assert memory.forget_user(VICTIM).entries > 0
            else:
                with pytest.raises(ServiceUnavailableError):
                    memory.forget_user(VICTIM)
                assert server.kill() == -9
                server.env.pop("TIERMEM_TEST_KILL_AT")
                server.start()  # the erasure job is finished as the memory opens
            assert memory.get_all(VICTIM) == []
            assert {e.id: e.text for e in memory.get_all(BYSTANDER)} == kept
    finally:
        server.stop()
    assert _leaks(tmp_path / "data") == []
