"""The generated references are current, and every Python example in the docs runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from tiermem.docs import PAGES

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


@pytest.mark.parametrize("page", sorted(PAGES))
def test_the_generated_page_is_current(page: str) -> None:
    on_disk = (DOCS / page).read_text()
    assert on_disk == PAGES[page](), f"docs/{page} is stale: run `make docs`"


def test_the_configuration_reference_lists_every_section_and_default() -> None:
    text = (DOCS / "configuration-expert.md").read_text()
    for heading in (
        "`[slm]`",
        "`[delivery]`",
        "`[mtm]` kind `qdrant`",
        "`[slm.backend]` kind `ollama`",
    ):
        assert heading in text
    row = "| `selector_mode` | `Literal['fusion', 'listwise', 'pointwise', 'cross-encoder']` |"
    assert f"{row} `'fusion'` |" in text


def test_the_first_page_lists_the_settings_a_user_holds_and_no_more_than_30() -> None:
    from tiermem.config import TiermemConfig
    from tiermem.docs import setting_field

    text = (DOCS / "configuration.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert 20 <= len(rows) <= 30
    for line in rows:
        dotted = line.split("`")[1]
        owner, name = setting_field(dotted)  # a setting that exists
        assert name in owner.model_fields
    # every tuning knob is on the expert page only
    expert = (DOCS / "configuration-expert.md").read_text()
    for knob in ("member", "later", "long_share", "merge_threshold", "candidate_multiplier"):
        assert f"| `{knob}` |" in expert
        assert not any(r.startswith(f"| `delivery.{knob}`") for r in rows)
    # a default shown is the configuration's own
    assert f"| `default_k` | `int` | `{TiermemConfig().default_k}` |" in text


def test_the_cli_reference_lists_every_command() -> None:
    text = (DOCS / "cli.md").read_text()
    for command in ("## `tiermem demo`", "## `tiermem bench locomo`", "## `tiermem serve`"):
        assert command in text


def _python_blocks() -> list[tuple[str, int, str]]:
    blocks = []
    for path in sorted(DOCS.glob("*.md")):  # the README's own: tests/test_readme.py
        text = path.read_text()
        for match in re.finditer(r"```python\n(.*?)```", text, re.S):
            line = text[: match.start()].count("\n") + 1
            blocks.append((path.relative_to(ROOT).as_posix(), line, match.group(1)))
    return blocks


@pytest.mark.real_model  # an example may load MiniLM
@pytest.mark.parametrize(("where", "line", "code"), _python_blocks(), ids=lambda v: str(v)[:40])
def test_every_python_example_runs(where: str, line: int, code: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"{where}:{line}\n{done.stderr}"
    assert "Traceback" not in done.stderr, f"{where}:{line}: {done.stderr}"
