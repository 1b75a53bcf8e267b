"""What each configuration turns on, and the measurement that chose it.

The defaults follow the verdicts: a small-model role runs only where it was measured to beat
its model-free stage on that model, unless a caller names it. ``docs/presets.md`` is generated
from this module (``presets_markdown``) and a test keeps it current.

>>> measured_winners("qwen0.5b")
()
>>> verdict("writer", "qwen0.5b").beats_model_free
False
>>> verdict("writer", "some-unmeasured-model") is None
True
"""

from __future__ import annotations

import inspect
import logging
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tiermem.errors import ConfigError

if TYPE_CHECKING:
    from tiermem.config import TiermemConfig

logger = logging.getLogger(__name__)

ROLES = ("controller", "selector", "writer", "generator")
"""The small-model roles ``Memory.from_defaults(model=..., roles=...)`` can turn on."""


class MeasuredToLoseWarning(UserWarning):
    """A role was asked for on a model where it was measured not to beat its model-free stage."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """One role on one model, against its model-free stage, as measured."""

    role: str
    model: str  # a ``tiermem models`` alias
    beats_model_free: bool
    measurement: str
    command: str


_BENCH_ROLES = (
    "tiermem bench locomo --data locomo10.json --out OUT --model qwen0.5b --conversations 0 "
    "--max-questions 40"
)

VERDICTS: tuple[Verdict, ...] = (
    Verdict(
        "controller",
        "qwen0.5b",
        False,
        "every role on qwen0.5b: 44.9 % evidence recall against 59.0 % model-free on the first "
        "40 LoCoMo conv-26 questions, 10.2 s a query; its LoRA lost 16.7 points at 300 tokens "
        "on LongMemEval-S",
        _BENCH_ROLES,
    ),
    Verdict(
        "selector",
        "qwen0.5b",
        False,
        "listwise kept exactly what rank fusion keeps on all 120 questions of LoCoMo 8-9, at "
        "8.9 s a query; pointwise moved recall -0.3 points at 300 tokens (7.2 s)",
        "tiermem bench selector --data locomo10.json --out OUT --questions 60",
    ),
    Verdict(
        "writer",
        "qwen0.5b",
        False,
        "writer entries alone delivered 5.4 % of LoCoMo conv-26's evidence at k = 10, verbatim "
        "turns 53.8 %; beside them it costs 0.146 calls a turn and resolved no update",
        _BENCH_ROLES,
    ),
    Verdict(
        "generator",
        "qwen0.5b",
        False,
        "gave the old value for 75 % of changed facts on `bench updates --generator` (f526abb); "
        "on the demo 3 of its 8 answers miss the current value; the extractive answer quotes "
        "the dated context, newest last",
        "tiermem demo --model qwen0.5b",
    ),
    Verdict(
        "writer",
        "qwen1.5b",
        False,
        "asked whether a newer message makes an older one untrue, it told real changes from "
        "look-alikes barely better than chance (AUC 0.59 on 72 changes of `bench updates`)",
        "tiermem bench updates --out OUT --model qwen1.5b",
    ),
    Verdict(
        "generator",
        "qwen1.5b",
        False,
        "on the demo it answered the flight with the old date (10 October, not 9) when both "
        "statements were shown",
        "tiermem demo --model qwen1.5b",
    ),
)


def _alias(model: str) -> str:
    """The ``tiermem models`` alias a model string names: the alias itself, or the GGUF file
    an alias installs (by file name); anything else as given."""
    from tiermem.slm.models import MODELS

    if model in MODELS:
        return model
    name = Path(model).name
    return next((alias for alias, spec in MODELS.items() if spec.filename == name), model)


def verdict(role: str, model: str) -> Verdict | None:
    """The measurement of ``role`` on ``model``, or ``None`` where it was never measured."""
    alias = _alias(model)
    return next((v for v in VERDICTS if v.role == role and v.model == alias), None)


def measured_winners(model: str) -> tuple[str, ...]:
    """The roles measured to beat their model-free stage on ``model``."""
    return tuple(role for role in ROLES if (v := verdict(role, model)) and v.beats_model_free)


def check_roles(roles: str | Iterable[str]) -> tuple[str, ...]:
    """``roles`` as a tuple (one name alone is one role), each a known role (``ConfigError``
    names the known ones)."""
    chosen = (roles,) if isinstance(roles, str) else tuple(dict.fromkeys(roles))
    unknown = [role for role in chosen if role not in ROLES]
    if unknown:
        raise ConfigError(f"unknown role(s) {unknown}; the roles are {list(ROLES)}")
    return chosen


def warn_losing_roles(roles: Iterable[tuple[str, str]]) -> None:
    """One ``MeasuredToLoseWarning`` naming each (role, model) pair measured to lose."""
    losing = [v for role, model in roles if (v := verdict(role, model)) and not v.beats_model_free]
    if not losing:
        return
    lines = "; ".join(f"{v.role} on {v.model}: {v.measurement} (`{v.command}`)" for v in losing)
    warnings.warn(
        f"running role(s) measured not to beat their model-free stage: {lines}",
        MeasuredToLoseWarning,
        stacklevel=_caller_level(),
    )


def _caller_level() -> int:
    """The ``stacklevel`` of the first frame outside tiermem: the warning points at the
    caller's line (``Memory(...)``, ``from_defaults``), not at tiermem's own."""
    package = str(Path(__file__).resolve().parent)
    level, frame = 1, inspect.currentframe()
    while frame is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    return level - 1


def defaults_config(
    data_dir: str | Path, *, model: str | None = None, roles: str | Iterable[str] | None = None
) -> TiermemConfig:
    """The embedded default under ``data_dir``; with ``model``, the roles ``roles`` names
    (default: those measured to win on it) on that model in-process, model-free the rest."""
    from tiermem.config import LlamaCppConfig, TiermemConfig

    config = TiermemConfig.for_data_dir(data_dir)
    if model is None:
        if roles:
            raise ConfigError(f"roles {list(roles)} need a model: pass model=")
        return config
    chosen = check_roles(measured_winners(model) if roles is None else roles)
    if not chosen:
        logger.info(
            "no role was measured to beat its model-free stage on %s: all model-free", model
        )
    slm = config.slm
    selector_mode = slm.selector_mode
    if "selector" in chosen and selector_mode == "fusion":
        selector_mode = "pointwise"  # the selector a LoRA tunes (tiermem train selector)
    slm = slm.model_copy(
        update={
            "backend": LlamaCppConfig(model=model),
            "selector_mode": selector_mode,
            **{
                role: getattr(slm, role).model_copy(update={"enabled": role in chosen})
                for role in ("controller", "selector", "writer")
            },
        }
    )
    kind = "model" if "generator" in chosen else "extractive"
    generator = config.generator.model_copy(update={"kind": kind})
    return config.model_copy(update={"slm": slm, "generator": generator})


def running_roles(config: TiermemConfig) -> tuple[tuple[str, str], ...]:
    """The (role, model) pairs that call a small model under ``config``."""
    from tiermem.slm.registry import NO_MODEL
    from tiermem.slm.roles.selectors import CALLS_SLM, SELECTORS

    slm = config.slm
    pairs: list[tuple[str, str]] = []
    for role in ("controller", "selector", "writer"):
        section = getattr(slm, role)
        backend = section.backend or slm.backend
        if not section.enabled or backend.kind == NO_MODEL:
            continue
        if role == "selector" and not SELECTORS.can(slm.selector_mode, CALLS_SLM):
            continue
        pairs.append((role, backend.model))
    if config.generator.kind == "model":
        backend = config.generator.backend or slm.backend
        if backend.kind != NO_MODEL:
            pairs.append(("generator", backend.model))
    return tuple(pairs)


@dataclass(frozen=True, slots=True)
class Preset:
    """A named configuration: how to get it, what it turns on, and why."""

    name: str
    call: str
    turns_on: str
    measurement: str
    command: str


PRESETS: tuple[Preset, ...] = (
    Preset(
        "recommended (the default)",
        'Memory.from_defaults("./data")',
        "hybrid first stage (MiniLM cosine + BM25, fused by rank), verbatim turns, sentences, "
        "pieces and exchanges, rank-fusion selection, extractive answer; no model calls",
        "the first 40 LoCoMo conv-26 questions: 59.0 % evidence recall against 44.9 % with every "
        "role on qwen0.5b (10.2 s a query), and no model call",
        _BENCH_ROLES + " (and without --model)",
    ),
    Preset(
        "a model, measured roles only",
        'Memory.from_defaults("./data", model="qwen0.5b")',
        "the roles measured to beat their model-free stage on that model (on qwen0.5b and "
        "qwen1.5b: none), model-free stages for the rest",
        "the role verdicts below",
        "see each verdict",
    ),
    Preset(
        "named roles",
        'Memory.from_defaults("./data", model="qwen0.5b", roles=("selector",))',
        "the named roles on the model (a losing one with one MeasuredToLoseWarning), "
        "model-free stages for the rest",
        "the role verdicts below",
        "see each verdict",
    ),
    Preset(
        "cross-encoder selector",
        '[slm] selector_mode = "cross-encoder", cross_encoder = DIR',
        "a fine-tuned two-layer MiniLM cross-encoder reorders the first stage's pool on the "
        "CPU (49-84 ms a pool); needs a directory from `tiermem train selector --arch "
        "cross-encoder`",
        "tune split, k = 10 of 20: +0.6 / +0.2 / +1.4 points at 300 / 600 / 1,200 tokens on "
        "LoCoMo 7, +1.1 / +1.3 / +2.1 on bursty LoCoMo 7, 0 / 0 / +8.3 on LongMemEval-S",
        "tiermem bench selector --data locomo10.json --out OUT --split tune --cross-encoder DIR",
    ),
)


def presets_markdown() -> str:
    """``docs/presets.md``: the presets and the role verdicts, from this module."""
    out = [
        "# Presets and the measurements that chose them",
        "",
        "Generated from `tiermem.presets` (`python -m tiermem.docs`); a test fails when this",
        "page is stale. Figures were measured on a 2-core CPU; see `benchmarks.md`.",
        "",
        "| preset | how | turns on | measured | reproduce |",
        "|---|---|---|---|---|",
    ]
    for p in PRESETS:
        out.append(f"| {p.name} | `{p.call}` | {p.turns_on} | {p.measurement} | `{p.command}` |")
    out += [
        "",
        "## Small-model roles against their model-free stages",
        "",
        "`model=` turns on only the roles marked *beats*; a role named in `roles=` on a model",
        "where it loses still runs, with one `MeasuredToLoseWarning` that names the row.",
        "",
        "| role | model | verdict | measured | reproduce |",
        "|---|---|---|---|---|",
    ]
    for v in VERDICTS:
        word = "beats" if v.beats_model_free else "loses"
        out.append(f"| {v.role} | {v.model} | {word} | {v.measurement} | `{v.command}` |")
    return "\n".join(out) + "\n"
