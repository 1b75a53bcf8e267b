"""The context builder: what a generator reads, packed into a token budget.

Retrieval ranks *units* (a turn, a turn and its reply, a stored fact); the builder takes them
in that order and delivers as many as fit. Each turn's tokens are counted once, however many
units point at it. What is delivered is grouped by session, sessions in chronological order,
one date header per session, and adjacent turns read as one snippet:

    [3 June 2024]
    Ana: I adopted a cat called Tofu.
    Ben: What a lovely name!
    …
    Ana: My sister bakes bread in Lisbon.

The builder is pure: it sees turns and units, never a store. ``Memory.context()`` and the
benchmark's baselines deliver through it, so their token counts are comparable.

>>> from datetime import UTC, datetime
>>> t = datetime(2024, 6, 3, tzinfo=UTC)
>>> turns = {
...     "a": ContextTurn("a", "s1", 0, "Ana", "I adopted a cat.", t),
...     "b": ContextTurn("b", "s1", 1, "Ben", "What is its name?", t),
... }
>>> ctx = pack([Unit(("b",), 1.0), Unit(("a", "b"), 0.5)], turns, 100, ApproxTokenCounter())
>>> print(ctx.text)
[3 June 2024]
Ana: I adopted a cat.
Ben: What is its name?
>>> ctx.turn_ids, ctx.tokens
(('a', 'b'), 22)
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import pairwise

from tiermem.render import human_date
from tiermem.tokens import ApproxTokenCounter, TokenCounter
from tiermem.types import SearchHit, Turn

DEFAULT_BUDGET_TOKENS = 1200
GAP = "…"  # between two snippets of one session


@dataclass(frozen=True, slots=True)
class ContextTurn:
    """A stored turn as the builder sees it: where it sits in its session, who said what."""

    turn_id: str
    session_id: str
    position: int  # order within the session
    speaker: str
    text: str
    at: datetime

    @property
    def line(self) -> str:
        return f"{self.speaker}: {self.text}"


@dataclass(frozen=True, slots=True)
class Unit:
    """Something retrieval offers for delivery: turns (delivered together or not at all), or a
    free line (a fact with no source turn, general knowledge) placed before the sessions. A
    ``fallback`` line stands in for turns too long for what is left of the budget (the piece
    of a long document that matched)."""

    turn_ids: tuple[str, ...]
    value: float
    line: str | None = None
    fallback: str | None = None  # delivered as a line when the turns do not fit


@dataclass(frozen=True, slots=True)
class Snippet:
    """Adjacent turns of one session, delivered as one piece."""

    session_id: str
    date: str
    turn_ids: tuple[str, ...]
    text: str


@dataclass(frozen=True, slots=True)
class DeliveredContext:
    """What a generator is handed: the text, its snippets and turns, and what it costs.

    ``tokens`` is the count of ``text`` by the memory's token counter and never exceeds
    ``budget_tokens``; ``turn_ids`` are the delivered source turns in reading order, and
    ``source_turns`` the stored turns themselves, by id; ``hits`` are the delivered search
    hits (``hits`` and ``source_turns`` are set by ``Memory.context``; none for a bare
    ``pack``)."""

    text: str
    snippets: tuple[Snippet, ...]
    turn_ids: tuple[str, ...]
    tokens: int
    budget_tokens: int
    notes: tuple[str, ...] = ()
    hits: tuple[SearchHit, ...] = field(default=())
    source_turns: Mapping[str, Turn] = field(default_factory=dict)

    @property
    def lines(self) -> list[str]:
        return self.text.splitlines()


class LineCosts:
    """Each turn's line, token-counted once for one context: offering later statements,
    the units' length shares and packing all read the cost here.

    >>> costs = LineCosts(ApproxTokenCounter())
    >>> t = ContextTurn("a", "s1", 0, "Ana", "I adopted a cat.", datetime(2024, 6, 3))
    >>> costs(t), costs(t), len(costs)
    (7, 7, 1)
    """

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self._cost: dict[str, int] = {}

    def __call__(self, turn: ContextTurn) -> int:
        cost = self._cost.get(turn.turn_id)
        if cost is None:
            cost = self._cost[turn.turn_id] = self.counter.count(turn.line)
        return cost

    def __len__(self) -> int:
        return len(self._cost)


def _header(turn: ContextTurn) -> str:
    return f"[{human_date(turn.at)}]"


class _Layout:
    """The chosen turns per session and the notes, with the token cost of their rendering.

    Rendered lines are joined by newlines, which the counters do not count, so the cost of
    the text is the sum of its lines' costs, kept per session as turns are added."""

    def __init__(self, turns: Mapping[str, ContextTurn], costs: LineCosts) -> None:
        self._turns, self._counter, self.line_cost = turns, costs.counter, costs
        self.sessions: dict[str, dict[int, ContextTurn]] = {}
        self.notes: list[str] = []
        self._session_cost: dict[str, int] = {}
        self.total = 0
        self._gap = self._counter.count(GAP)

    def _cost(self, chosen: Mapping[int, ContextTurn]) -> int:
        if not chosen:
            return 0
        positions = sorted(chosen)
        first = chosen[positions[0]]
        gaps = sum(1 for a, b in pairwise(positions) if b != a + 1)
        lines = sum(self.line_cost(t) for t in chosen.values())
        return self._counter.count(_header(first)) + lines + gaps * self._gap

    def cost_with(self, unit: Unit) -> tuple[int, dict[str, dict[int, ContextTurn]]]:
        """The total cost if ``unit`` were added, and the sessions it changes."""
        if unit.line is not None:
            return self.total + self._counter.count(unit.line), {}
        changed: dict[str, dict[int, ContextTurn]] = {}
        for tid in unit.turn_ids:
            turn = self._turns[tid]
            before = self.sessions.get(turn.session_id, {})
            chosen = changed.setdefault(turn.session_id, dict(before))
            chosen[turn.position] = turn
        delta = sum(self._cost(c) - self._session_cost.get(s, 0) for s, c in changed.items())
        return self.total + delta, changed

    def apply(self, unit: Unit, total: int, changed: dict[str, dict[int, ContextTurn]]) -> None:
        if unit.line is not None:
            self.notes.append(unit.line)
        for session, chosen in changed.items():
            self.sessions[session] = chosen
            self._session_cost[session] = self._cost(chosen)
        self.total = total


_WORD = re.compile(r"[^\W_]+")
NEAR_DUPLICATE = 0.9  # word-set Jaccard above which a turn repeats one already delivered
MIN_WORDS = 4  # shorter turns ("ok", "thanks!") are too short to call repeats


def _words(text: str) -> frozenset[str]:
    return frozenset(_WORD.findall(text.lower()))


class _Repeats:
    """The word sets of delivered turns, to tell a turn that repeats one of them."""

    def __init__(self, turns: Mapping[str, ContextTurn]) -> None:
        self._turns = turns
        self._seen: dict[str, frozenset[str]] = {}

    def only_repeats(self, unit: Unit) -> bool:
        """Every turn of ``unit`` that is new nearly repeats a delivered turn."""
        new = [t for t in unit.turn_ids if t not in self._seen]
        return bool(new) and all(self._repeats(_words(self._turns[t].text)) for t in new)

    def _repeats(self, words: frozenset[str]) -> bool:
        n = len(words)
        if n < MIN_WORDS:
            return False
        for seen in self._seen.values():
            m = len(seen)
            # Jaccard is at most min / max of the two sizes: sets that far apart in size never
            # reach NEAR_DUPLICATE, and are not intersected (most of them, in a long context).
            if n < NEAR_DUPLICATE * m or m < NEAR_DUPLICATE * n:
                continue
            shared = len(words & seen)
            if shared >= NEAR_DUPLICATE * (n + m - shared):  # |A & B| / |A | B|
                return True
        return False

    def add(self, unit: Unit) -> None:
        for t in unit.turn_ids:
            self._seen.setdefault(t, _words(self._turns[t].text))


def pack(
    units: Iterable[Unit],
    turns: Mapping[str, ContextTurn],
    budget_tokens: int,
    counter: TokenCounter | None = None,
    costs: LineCosts | None = None,
) -> DeliveredContext:
    """Deliver ``units`` in the order given while they fit in ``budget_tokens``; a unit that
    does not fit is passed over (a smaller one after it may still fit). A unit naming a turn
    missing from ``turns`` is passed over too, and so is one whose new turns only repeat turns
    already delivered (the same words, said again). Turns already delivered cost nothing
    again. ``costs``: the turns' lines as already counted (by ``counter``'s count)."""
    if costs is None:
        costs = LineCosts(counter or ApproxTokenCounter())
    counter = costs.counter
    layout = _Layout(turns, costs)
    repeats = _Repeats(turns)
    for unit in units:
        if unit.line is None and (not unit.turn_ids or any(t not in turns for t in unit.turn_ids)):
            continue
        if unit.line is not None and unit.line in layout.notes:
            continue
        if repeats.only_repeats(unit):
            continue
        total, changed = layout.cost_with(unit)
        if total <= budget_tokens:
            layout.apply(unit, total, changed)
            repeats.add(unit)
        elif unit.fallback is not None and unit.fallback not in layout.notes:
            line = Unit((), unit.value, unit.fallback)
            total, changed = layout.cost_with(line)
            if total <= budget_tokens:
                layout.apply(line, total, changed)
    return render(layout.sessions, layout.notes, budget_tokens, counter)


def render(
    sessions: Mapping[str, Mapping[int, ContextTurn]],
    notes: Sequence[str],
    budget_tokens: int,
    counter: TokenCounter,
) -> DeliveredContext:
    """Notes first (they have no session), then each session oldest first under its date,
    its turns in order, adjacent turns as one snippet and ``…`` between snippets."""
    lines = list(notes)
    snippets: list[Snippet] = []
    order = sorted(
        (s for s in sessions if sessions[s]),
        key=lambda s: (min(t.at for t in sessions[s].values()), s),
    )
    for session in order:
        chosen = sessions[session]
        positions = sorted(chosen)
        header = _header(chosen[positions[0]])
        lines.append(header)
        run: list[ContextTurn] = []
        for pos in positions:
            if run and pos != run[-1].position + 1:
                snippets.append(_snippet(session, header, run))
                lines.append(GAP)
                run = []
            run.append(chosen[pos])
            lines.append(chosen[pos].line)
        snippets.append(_snippet(session, header, run))
    text = "\n".join(lines)
    return DeliveredContext(
        text,
        tuple(snippets),
        tuple(t for s in snippets for t in s.turn_ids),
        counter.count(text),
        budget_tokens,
        tuple(notes),
    )


def _snippet(session: str, header: str, run: Sequence[ContextTurn]) -> Snippet:
    return Snippet(
        session, header[1:-1], tuple(t.turn_id for t in run), "\n".join(t.line for t in run)
    )


__all__ = [
    "DEFAULT_BUDGET_TOKENS",
    "ContextTurn",
    "DeliveredContext",
    "LineCosts",
    "Snippet",
    "Unit",
    "pack",
    "render",
]
