"""Runs every ``real_model`` test in a child pytest process.

A real model can kill its process: a llama.cpp build that uses an instruction the CPU or the
kernel does not allow dies with SIGILL, and in-process that would end the whole test run. In a
child, the fatal signal fails that one test, with the signal named, and the run goes on.

A child that hangs (a model stuck in a call) is killed after ``TIERMEM_ISOLATED_TIMEOUT``
seconds (900 unless set): the test fails naming the timeout, and the run goes on. The child's
outcome is reported as it was: passed, failed, skipped, xfailed or xpassed.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tiermem.doctor import describe_exit

CHILD = "TIERMEM_ISOLATED_CHILD"
MARKER = "real_model"
TIMEOUT_ENV = "TIERMEM_ISOLATED_TIMEOUT"
DEFAULT_TIMEOUT_S = 900.0
_COUNT = re.compile(r"(\d+) (passed|failed|skipped|xfailed|xpassed|errors?)\b")

# (outcome, longrepr, duration, extra report attributes such as ``wasxfail``)
Outcome = tuple[str, object, float, dict[str, object]]


def _timeout_s() -> float:
    """The child's time limit, from ``TIERMEM_ISOLATED_TIMEOUT``; ``ValueError`` if unusable."""
    raw = os.environ.get(TIMEOUT_ENV)
    if raw is None:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"{TIMEOUT_ENV}={raw!r} is not a positive number of seconds")
    return value


def _text(output: str | bytes | None) -> str:
    if isinstance(output, bytes):  # what a timeout leaves, even in text mode
        return output.decode(errors="replace")
    return output or ""


def _reason(output: str, tag: str) -> str:
    """The reason on the child's short-summary line ``TAG nodeid - reason``."""
    line = next((ln for ln in output.splitlines() if ln.startswith(tag + " ")), "")
    return line.split(" - ", 1)[1] if " - " in line else ""


def _run_child(item: pytest.Item) -> Outcome:
    try:
        timeout = _timeout_s()
    except ValueError as exc:
        return "failed", str(exc), 0.0, {}
    root = Path(str(item.config.rootpath))
    argv = [sys.executable, "-m", "pytest", item.nodeid, "-q", "-rsxX", "-p", "no:cacheprovider"]
    started = time.monotonic()
    try:
        done = subprocess.run(
            argv,
            cwd=root,
            env={**os.environ, CHILD: "1"},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:  # run() has killed the child
        output = (_text(exc.stdout) + _text(exc.stderr)).strip()
        message = (
            f"the test process did not finish within {timeout:g} s ({TIMEOUT_ENV}) and was "
            f"killed\n{output[-4000:]}"
        )
        return "failed", message, time.monotonic() - started, {}
    duration = time.monotonic() - started
    output = (done.stdout + done.stderr).strip()
    if done.returncode < 0:
        message = f"the test process was {describe_exit(done.returncode)}\n{output[-4000:]}"
        return "failed", message, duration, {}
    summary = output.splitlines()[-1] if output else ""
    counts = {kind: int(n) for n, kind in _COUNT.findall(summary)}
    if done.returncode == 0 and counts.get("xfailed"):
        reason = _reason(output, "XFAIL")
        where = (str(item.path), item.location[1] or 0, f"XFAIL {reason}".strip())
        return "skipped", where, duration, {"wasxfail": reason}
    if done.returncode == 0 and counts.get("xpassed"):
        return "passed", None, duration, {"wasxfail": _reason(output, "XPASS")}
    if done.returncode == 0 and counts.get("passed"):
        return "passed", None, duration, {}
    if done.returncode == 0 and counts.get("skipped"):
        reason = next((ln for ln in output.splitlines() if ln.startswith("SKIPPED")), summary)
        return "skipped", (str(item.path), item.location[1] or 0, reason), duration, {}
    return "failed", output[-8000:] or f"exit status {done.returncode}", duration, {}


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    if os.environ.get(CHILD) or item.get_closest_marker(MARKER) is None:
        return None
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    outcome, longrepr, duration, extra = _run_child(item)
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
            **(extra if when == "call" else {}),
        )
        item.ihook.pytest_runtest_logreport(report=report)
    # The parent set up no fixture for this item, but the collectors of earlier in-process
    # items (a module, a class) are still on pytest's setup stack: tear down those the next
    # item does not share, as pytest's own teardown of this item would have.
    item.session._setupstate.teardown_exact(nextitem)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True
