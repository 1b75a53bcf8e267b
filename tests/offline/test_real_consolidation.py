"""A real MTM batch consolidated by a real local model, through ``tiermem consolidate --once``.
CI runs it with SmolLM2-135M: the assertions are about the job (every chunk answered or
counted, the watermark saved, nothing identifying in the graph), not the knowledge's quality."""

from __future__ import annotations

from pathlib import Path

import pytest
from tiermem import ManualClock, Memory
from tiermem.cli import main
from tiermem.offline_cli import cli_config

from tests.conftest import T0, chat

pytestmark = pytest.mark.real_model

TURNS = [
    "Hi, I'm Maya, reach me at maya.r@example.com.",
    "I started pottery classes last month; shaping clay calms me down.",
    "My dog Pixel is a border collie who loves the beach.",
    "We hiked the Lousa mountains with the kids on Saturday.",
    "I switched from coffee to green tea for better sleep.",
    "Call me on 555-201-3344 if the pottery class moves.",
    "Sourdough baking is my new weekend project.",
]


def test_consolidate_once_on_a_real_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    toml = tmp_path / "tiermem.toml"
    toml.write_text(
        '[embedder]\nkind = "hash"\nmodel = "hash-384"\n'
        "[ltm.consolidation]\nchunk_size = 8\nmax_tokens = 300\n"  # one call, kept short
    )
    data = tmp_path / "data"
    config = cli_config(toml, data, "smollm2", once=True)
    with Memory(config, clock=ManualClock(T0)) as memory:
        memory.add(chat(*[("user", t) for t in TURNS], speaker="Maya"), "maya-01")

    assert main(["consolidate", "--once", "--config", str(toml), "--data-dir", str(data),
                 "--model", "smollm2"]) == 0  # fmt: skip
    printed = capsys.readouterr().out
    assert "consolidation run" in printed

    with Memory(config) as memory:
        ltm = memory.components.ltm
        assert ltm is not None
        assert ltm.state("maya-01").runs >= 1
        again = memory.consolidate_now()
        assert again.entries == 0  # the watermark was saved: nothing is done twice
        stats = memory.meter.snapshot().get("consolidator", {"calls": 0})
        assert stats["calls"] == 0
    saved = b"".join(p.read_bytes() for p in (data / "ltm").rglob("*.json"))
    assert saved, "the graph was saved"
    for secret in (b"maya", b"example.com", b"555-201-3344", b"maya-01"):
        assert secret not in saved.lower()
