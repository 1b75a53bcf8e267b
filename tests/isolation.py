"""Runs every ``real_model`` test in a child pytest process.

A real model can kill its process: a llama.cpp build that uses an instruction the CPU or the
kernel does not allow dies with SIGILL, and in-process that would end the whole test run. In a
child, the fatal signal fails that one test, with the signal named, and the run goes on.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

CHILD = "TIERMEM_ISOLATED_CHILD"
MARKER = "real_model"


def _signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def _run_child(item: pytest.Item) -> tuple[str, object, float]:
    root = Path(str(item.config.rootpath))
    argv = [sys.executable, "-m", "pytest", item.nodeid, "-q", "-rs", "-p", "no:cacheprovider"]
    started = time.monotonic()
    done = subprocess.run(
        argv, cwd=root, env={**os.environ, CHILD: "1"}, capture_output=True, text=True
    )
    duration = time.monotonic() - started
    output = (done.stdout + done.stderr).strip()
    if done.returncode < 0:
        name = _signal_name(done.returncode)
        message = f"the test process was killed by {name}\n{output[-4000:]}"
        return "failed", message, duration
    summary = output.splitlines()[-1] if output else ""
    if done.returncode == 0 and " passed" in summary:
        return "passed", None, duration
    if done.returncode == 0 and " skipped" in summary:
        reason = next((ln for ln in output.splitlines() if ln.startswith("SKIPPED")), summary)
        return "skipped", (str(item.path), item.location[1] or 0, reason), duration
    return "failed", output[-8000:] or f"exit status {done.returncode}", duration


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    if os.environ.get(CHILD) or item.get_closest_marker(MARKER) is None:
        return None
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    outcome, longrepr, duration = _run_child(item)
    keywords = {name: 1 for name in item.keywords}
    for when in ("setup", "call", "teardown"):
        report = pytest.TestReport(
            item.nodeid,
            item.location,
            keywords,
            outcome if when == "call" else "passed",  # type: ignore[arg-type]
            longrepr if when == "call" else None,  # type: ignore[arg-type]
            when,  # type: ignore[arg-type]
            duration=duration if when == "call" else 0.0,
        )
        item.ihook.pytest_runtest_logreport(report=report)
    # The parent set up no fixture for this item, but the collectors of earlier in-process
    # items (a module, a class) are still on pytest's setup stack: tear down those the next
    # item does not share, as pytest's own teardown of this item would have.
    item.session._setupstate.teardown_exact(nextitem)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True
