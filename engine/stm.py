"""STM: the recent turns of each (user, session), bounded in tokens and in turns."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence

from tiermem.config import STMConfig
from tiermem.tokens import TokenCounter
from tiermem.types import Turn


class ShortTermMemory:
    """Working memory. The newest turn is always kept, even if it alone exceeds the budget."""

    def __init__(self, config: STMConfig, counter: TokenCounter) -> None:
        self._config = config
        self._counter = counter
        self._windows: dict[tuple[str, str], deque[tuple[Turn, int]]] = {}
        self._lock = threading.Lock()

    def append(self, turns: Sequence[Turn]) -> None:
        with self._lock:
            for turn in turns:
                window = self._windows.setdefault((turn.user_id, turn.session_id), deque())
                window.append((turn, self._counter.count(f"{turn.speaker}: {turn.content}")))
                self._trim(window)

    def _trim(self, window: deque[tuple[Turn, int]]) -> None:
        total = sum(tokens for _, tokens in window)
        while len(window) > 1 and (
            total > self._config.max_tokens or len(window) > self._config.max_turns
        ):
            total -= window.popleft()[1]

    def window(self, user_id: str, session_id: str) -> tuple[Turn, ...]:
        """The kept turns of this session, oldest first."""
        with self._lock:
            return tuple(turn for turn, _ in self._windows.get((user_id, session_id), ()))

    def tokens(self, user_id: str, session_id: str) -> int:
        with self._lock:
            return sum(tokens for _, tokens in self._windows.get((user_id, session_id), ()))

    def forget_user(self, user_id: str) -> int:
        """Drop every session of this user; returns how many there were."""
        with self._lock:
            keys = [key for key in self._windows if key[0] == user_id]
            for key in keys:
                del self._windows[key]
            return len(keys)
