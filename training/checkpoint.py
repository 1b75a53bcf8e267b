"""Training checkpoints: the adapter, the optimiser and schedule, the step, the losses so far
and the random state, so that ``--resume`` continues exactly where a run stopped.

A checkpoint is ``checkpoints/step-NNNNNN/`` with ``adapter/`` (peft's own format) and
``state.pt``; it is written under a temporary name and renamed, so a run killed while writing
leaves the one before it intact. The last ``KEEP`` are kept.

>>> step_of(Path("out/checkpoints/step-000120"))
120
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

KEEP = 2
PREFIX = "step-"


@dataclass(frozen=True, slots=True)
class Restored:
    step: int
    losses: list[float]


def step_of(path: Path) -> int:
    return int(path.name.removeprefix(PREFIX))


def checkpoints(out: Path) -> list[Path]:
    """The complete checkpoints under ``out``, oldest first."""
    folder = out / "checkpoints"
    if not folder.is_dir():
        return []
    found = [p for p in folder.iterdir() if p.name.startswith(PREFIX) and p.name[5:].isdigit()]
    return sorted((p for p in found if (p / "state.pt").is_file()), key=step_of)


def save(
    out: Path,
    step: int,
    model: Any,
    optimizer: torch.optim.Optimizer,
    schedule: torch.optim.lr_scheduler.LRScheduler,
    losses: list[float],
    fingerprint: dict[str, object],
) -> Path:
    """Write the checkpoint of ``step`` and drop all but the last ``KEEP``."""
    target = out / "checkpoints" / f"{PREFIX}{step:06d}"
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    model.save_pretrained(partial / "adapter")
    state = {
        "step": step,
        "losses": losses,
        "optimizer": optimizer.state_dict(),
        "schedule": schedule.state_dict(),
        "rng": torch.get_rng_state(),
        "fingerprint": fingerprint,
    }
    torch.save(state, partial / "state.pt")
    shutil.rmtree(target, ignore_errors=True)
    partial.replace(target)
    for old in checkpoints(out)[:-KEEP]:
        shutil.rmtree(old, ignore_errors=True)
    return target


def fingerprint_of(path: Path) -> dict[str, object]:
    """What the run that wrote the checkpoint ``path`` was (settings, base, examples)."""
    return dict(torch.load(path / "state.pt", weights_only=False)["fingerprint"])


def restore(
    path: Path,
    model: Any,
    optimizer: torch.optim.Optimizer,
    schedule: torch.optim.lr_scheduler.LRScheduler,
) -> Restored:
    """Load ``path`` into the model, optimiser and schedule; return where it stood."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    weights = load_file(str(path / "adapter" / "adapter_model.safetensors"))
    set_peft_model_state_dict(model, weights)
    state = torch.load(path / "state.pt", weights_only=False)
    optimizer.load_state_dict(state["optimizer"])
    schedule.load_state_dict(state["schedule"])
    torch.set_rng_state(state["rng"])
    return Restored(int(state["step"]), list(state["losses"]))


def clear(out: Path) -> None:
    """Forget the checkpoints of an earlier run (a run that does not resume starts afresh)."""
    shutil.rmtree(out / "checkpoints", ignore_errors=True)


__all__ = [
    "KEEP",
    "Restored",
    "checkpoints",
    "clear",
    "fingerprint_of",
    "restore",
    "save",
    "step_of",
]
