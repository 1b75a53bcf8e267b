"""Named steps of the write path where a test can stop the process, as a crash would.

The kill -9 suite (``tests/engine/test_crash_recovery.py``) installs a hook that kills the
process with SIGKILL at one named step, such as ``"add:after-journal-commit"``. Without a hook,
``reached`` is a global lookup and a ``None`` check.

>>> seen: list[str] = []
>>> set_hook(seen.append)
>>> reached("add:after-journal-commit")
>>> set_hook(None)
>>> reached("add:after-store-apply")
>>> seen
['add:after-journal-commit']
"""

from __future__ import annotations

from collections.abc import Callable

_hook: Callable[[str], None] | None = None


def reached(step: str) -> None:
    """The write path is at ``step``."""
    if _hook is not None:
        _hook(step)


def set_hook(hook: Callable[[str], None] | None) -> None:
    """Call ``hook`` with the name of every step reached from now on (``None``: stop)."""
    global _hook
    _hook = hook
