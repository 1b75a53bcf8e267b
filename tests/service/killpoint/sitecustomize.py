"""Loaded at start-up by a service under test that has this directory on ``PYTHONPATH``: when
``TIERMEM_TEST_KILL_AT`` names a step of ``tiermem.faults``, the process kills itself with
SIGKILL on reaching it, as a crash there would. Nothing of this ships with tiermem."""

import os

_STEP = os.environ.get("TIERMEM_TEST_KILL_AT")
if _STEP:
    import signal

    from tiermem import faults

    def _die(step: str) -> None:
        if step == _STEP:
            os.kill(os.getpid(), signal.SIGKILL)

    faults.set_hook(_die)
