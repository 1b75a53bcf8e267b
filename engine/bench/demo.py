"""``tiermem demo``: ingest two users' conversations, then answer from memory, showing the
memories used and the source turns they came from."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from rich.console import Console
from tiermem.bench.demo_data import DEMO_USERS, session_messages
from tiermem.config import GeneratorConfig, LlamaCppConfig, SLMConfig, TiermemConfig
from tiermem.memory import Memory
from tiermem.render import human_date
from tiermem.types import Tier


def run_demo(config: TiermemConfig, console: Console) -> None:
    """Ingest every demo session for every user, then ask each user's questions."""
    started = time.perf_counter()
    with Memory(config) as memory:
        for user in DEMO_USERS:
            written = skipped = merged = superseded = 0
            for session in user.sessions:
                result = memory.add(
                    session_messages(user, session), user.user_id, session.session_id
                )
                written += len(result.entries)
                skipped += len(result.skipped_turn_ids)
                merged += len(result.merged)
                superseded += len(result.superseded)
            console.print(
                f"[bold]{user.user_id}[/]: {len(user.sessions)} sessions ingested, "
                f"{written} new memories, {merged} merged, {superseded} superseded, "
                f"{skipped} turns already known or skipped"
            )
            for entry in memory.get_all(user.user_id):
                console.print(f"  [dim]{entry.kind:10}[/] {entry.text}", highlight=False)
        for user in DEMO_USERS:
            for question in user.questions:
                _show_answer(memory, user.user_id, question, console)
        totals = memory.components.meter.totals()
    console.print(
        f"\ndemo finished in {time.perf_counter() - started:.1f} s; model calls: "
        f"{totals['calls']} ({totals['fallbacks']} fell back), "
        f"{totals['prompt_tokens']} prompt + {totals['completion_tokens']} completion tokens"
    )


def _show_answer(memory: Memory, user_id: str, question: str, console: Console) -> None:
    result = memory.answer(question, user_id)
    console.rule(f"[bold]{user_id}[/] asks: {question}")
    console.print(result.text, highlight=False)
    console.print(f"[dim]context: {result.context_tokens} tokens, {len(result.hits)} memories[/]")
    for hit in result.hits:
        if hit.tier is Tier.LTM:  # shared knowledge: no owner, no source turns
            console.print(f"  [cyan]{hit.score:.3f}[/] knowledge {hit.id} ({hit.fact.kind})")
            continue
        console.print(f"  [cyan]{hit.score:.3f}[/] memory {hit.id[:8]} ({hit.entry.kind})")
        for turn_id in hit.source_turn_ids:
            turn = result.source_turns.get(turn_id)
            if turn is None:
                console.print(f"      source {turn_id}: [red]missing from the journal[/]")
                continue
            console.print(
                f"      source {turn_id} · {turn.session_id} · {human_date(turn.timestamp)} "
                f"{turn.timestamp:%H:%M} · {turn.speaker}: {turn.content}",
                highlight=False,
            )


def demo_config(
    data_dir: Path, embedder: str, model: str | None, generator_adapter: Path | None = None
) -> TiermemConfig:
    """The embedded default under ``data_dir``; the SLM roles on ``model`` (an alias or a
    GGUF path) in-process, or model-free when ``model`` is ``None``. ``generator_adapter``:
    the answer generator's GGUF LoRA on ``model`` (``tiermem train generator``)."""
    config = TiermemConfig.for_data_dir(data_dir)
    slm = SLMConfig(backend=LlamaCppConfig(model=model)) if model else SLMConfig()
    tuned = LlamaCppConfig(model=model, lora_path=generator_adapter) if model else None
    backend = tuned if generator_adapter else None  # None: the SLM roles' backend
    generator = GeneratorConfig(
        kind="model" if model else "extractive", backend=backend, max_memories=3
    )
    return config.model_copy(
        update={
            "embedder": config.embedder.model_copy(update={"provider": embedder}),
            "slm": slm,
            "generator": generator,
        }
    )


def main(
    data_dir: Path | None,
    embedder: str,
    model: str | None,
    console: Console,
    generator_adapter: Path | None = None,
) -> None:
    """Run the demo in ``data_dir``, or in a temporary directory removed afterwards."""
    if data_dir is not None:
        run_demo(demo_config(data_dir, embedder, model, generator_adapter), console)
        return
    temp = Path(tempfile.mkdtemp(prefix="tiermem-demo-"))
    try:
        run_demo(demo_config(temp, embedder, model, generator_adapter), console)
    finally:
        shutil.rmtree(temp, ignore_errors=True)
