"""``tiermem demo``: ingest two users' conversations, then show, for each question, the
context an agent's model would read and where each line came from, and check it: the newest
statement of every changed fact is there (after any older one), and a question memory knows
nothing about is refused.

The recommended configuration runs, with no model. ``--model`` also runs every small-model
role on that model, beside it, with its answers, calls, tokens and time: how a user sees what
the small models do, and why they are not on by default (``tiermem.presets``)."""

from __future__ import annotations

import shutil
import tempfile
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from tiermem.bench.demo_data import DEMO_USERS, DemoQuestion, session_messages
from tiermem.config import TiermemConfig
from tiermem.generator import NOTHING_IN_MEMORY
from tiermem.memory import Memory
from tiermem.presets import ROLES, MeasuredToLoseWarning, defaults_config
from tiermem.render import human_date
from tiermem.types import AnswerResult, Tier


@dataclass(frozen=True, slots=True)
class Verdict:
    ok: bool
    detail: str


def check_answer(question: DemoQuestion, text: str) -> Verdict:
    """Whether an answer shows what ``question`` asks of it (``DemoQuestion``)."""
    refused = text.strip() == NOTHING_IN_MEMORY
    if question.refused:
        return Verdict(refused, "refused" if refused else "answered: memory holds nothing on it")
    if refused:
        return Verdict(False, "refused, though memory holds the answer")
    newest = question.newest or ""
    if newest not in text:
        return Verdict(False, f"the newest statement ({newest!r}) is missing")
    older = question.older
    if older is None or older not in text:
        return Verdict(True, "holds the statement" if older is None else "holds the newest")
    if text.rindex(older) < text.rindex(newest):
        return Verdict(True, "holds the newest statement, after the older one")
    return Verdict(False, f"the older statement ({older!r}) reads after the newest")


def check_value(question: DemoQuestion, answer: str) -> Verdict:
    """Whether a written answer (a model's) gives the value that holds now, the stale one at
    most before it."""
    refused = answer.strip() == NOTHING_IN_MEMORY
    if question.refused or refused:
        return check_answer(question, answer)
    low = answer.lower()
    found = [v for v in question.value if v.lower() in low]
    stale = question.stale.lower() if question.stale else None
    if not found:
        if stale and stale in low:
            return Verdict(False, f"states the stale value ({question.stale!r}) alone")
        return Verdict(False, f"does not say {' or '.join(map(repr, question.value))}")
    if stale and stale in low and low.rindex(stale) > max(low.rindex(v.lower()) for v in found):
        return Verdict(False, f"states the stale value ({question.stale!r}) as current")
    return Verdict(True, f"says {found[0]!r}")


@dataclass(frozen=True, slots=True)
class Run:
    """One configuration's answers to every demo question, and what they cost."""

    label: str
    answers: dict[tuple[str, str], AnswerResult]
    seconds: float
    calls: int
    tokens: int


def _ingest(memory: Memory, console: Console) -> None:
    for user in DEMO_USERS:
        written = skipped = 0
        for session in user.sessions:
            result = memory.add(session_messages(user, session), user.user_id, session.session_id)
            written += len(result.entries)
            skipped += len(result.skipped_turn_ids)
        console.print(
            f"[bold]{user.user_id}[/]: {len(user.sessions)} sessions ingested, "
            f"{written} new memories, {skipped} turns already known or skipped"
        )


def _run(label: str, config: TiermemConfig, console: Console) -> Run:
    started = time.perf_counter()
    with Memory(config) as memory:
        _ingest(memory, console)
        answers = {
            (user.user_id, q.text): memory.answer(q.text, user.user_id)
            for user in DEMO_USERS
            for q in user.questions
        }
        totals = memory.components.meter.totals()
    return Run(
        label,
        answers,
        time.perf_counter() - started,
        totals["calls"],
        totals["prompt_tokens"] + totals["completion_tokens"],
    )


def _show_provenance(result: AnswerResult, console: Console) -> None:
    """Every delivered turn, oldest first: which turn, whose, when; ``hit`` marks the turns
    the search found (the rest came with them: the reply, the turn before, the burst)."""
    if not result.source_turns:
        console.print("  provenance: none (nothing delivered)")
        return
    found = {tid for hit in result.hits for tid in hit.source_turn_ids}
    console.print("  provenance (every delivered turn, oldest first):")
    for turn in sorted(result.source_turns.values(), key=lambda t: t.timestamp):
        console.print(
            f"    {turn.turn_id} · {turn.session_id} · {human_date(turn.timestamp)} "
            f"{turn.timestamp:%H:%M} · {turn.speaker}{' · hit' if turn.turn_id in found else ''}",
            highlight=False,
        )
    for hit in result.hits:
        if hit.tier is Tier.LTM:  # shared knowledge: no owner, no source turns
            console.print(f"    knowledge {hit.id} ({hit.fact.kind})")


def _show(runs: list[Run], console: Console) -> bool:
    """Print each question's context and checks; True when the recommended run passes all."""
    passed = True
    for user in DEMO_USERS:
        for question in user.questions:
            console.rule(f"[bold]{user.user_id}[/] asks: {question.text}")
            for i, run in enumerate(runs):
                result = run.answers[(user.user_id, question.text)]
                if i == 0:  # the extractive answer is the context itself
                    verdict = check_answer(question, result.text)
                    console.print(
                        f"[bold]{run.label}[/] · {result.context_tokens} context tokens · "
                        f"check {_mark(verdict)}"
                    )
                    console.print(_indent(result.text), highlight=False, markup=False)
                    _show_provenance(result, console)
                    passed &= verdict.ok
                    continue
                turns = _turn_lines(result)
                in_context = check_answer(question, turns if result.source_turns else result.text)
                console.print(
                    f"[bold]{run.label}[/] · {result.context_tokens} context tokens · "
                    f"context check {_mark(in_context)}"
                )
                console.print("  context its roles delivered (turns, oldest first):")
                console.print(turns, highlight=False, markup=False)
                console.print(f"  its answer · check {_mark(check_value(question, result.text))}")
                console.print(_indent(result.text), highlight=False, markup=False)
    return passed


def _mark(verdict: Verdict) -> str:
    return f"{'[green]ok[/]' if verdict.ok else '[red]FAIL[/]'}: {verdict.detail}"


def _turn_lines(result: AnswerResult) -> str:
    turns = sorted(result.source_turns.values(), key=lambda t: t.timestamp)
    lines = [f"[{human_date(t.timestamp)}] {t.speaker}: {t.content}" for t in turns]
    return _indent("\n".join(lines) or "(none)")


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())


def _summary(runs: list[Run], console: Console) -> None:
    """Per run: its checks (the context's for the recommended run, whose answer is its
    context; the written answer's for a model's), time, model calls and tokens."""
    console.print()
    total = sum(len(u.questions) for u in DEMO_USERS)
    for i, run in enumerate(runs):
        check = check_answer if i == 0 else check_value
        passed = sum(
            check(q, run.answers[(u.user_id, q.text)].text).ok
            for u in DEMO_USERS
            for q in u.questions
        )
        what = "checks passed" if i == 0 else "answers give the current value"
        console.print(
            f"{run.label}: {passed} of {total} {what}, {run.seconds:.1f} s, "
            f"model calls: {run.calls}, model tokens: {run.tokens}"
        )


def demo_configs(data_dir: Path, embedder: str, model: str | None) -> list[TiermemConfig]:
    """The recommended configuration under ``data_dir``/recommended; with ``model``, every
    role on that model in-process under ``data_dir``/model too."""

    def embedded(config: TiermemConfig) -> TiermemConfig:
        return config.model_copy(
            update={"embedder": config.embedder.model_copy(update={"kind": embedder})}
        )

    configs = [embedded(defaults_config(data_dir / "recommended"))]
    if model is not None:
        configs.append(embedded(defaults_config(data_dir / "model", model=model, roles=ROLES)))
    return configs


def run_demo(data_dir: Path, embedder: str, model: str | None, console: Console) -> bool:
    """Run the demo under ``data_dir``; True when the recommended run passes every check."""
    configs = demo_configs(data_dir, embedder, model)
    console.print("[bold]recommended[/] (the default: hybrid retrieval, no model calls)")
    runs = [_run("recommended", configs[0], console)]
    if model is not None:
        console.print(f"[bold]every role on {model}[/] (measured to lose: docs/presets.md)")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MeasuredToLoseWarning)  # the demo says it above
            runs.append(_run(f"roles on {model}", configs[1], console))
    passed = _show(runs, console)
    _summary(runs, console)
    return passed


@contextmanager
def _directory(data_dir: Path | None) -> Iterator[Path]:
    if data_dir is not None:
        yield data_dir
        return
    temp = Path(tempfile.mkdtemp(prefix="tiermem-demo-"))
    try:
        yield temp
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def main(data_dir: Path | None, embedder: str, model: str | None, console: Console) -> bool:
    """Run the demo in ``data_dir``, or in a temporary directory removed afterwards."""
    with _directory(data_dir) as root:
        return run_demo(root, embedder, model, console)
