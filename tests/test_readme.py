"""The README's Python example runs as written (on the embedded default)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_starts_with_the_install_and_test_commands() -> None:
    text = README.read_text()
    first_block = re.search(r"```bash\n(.*?)```", text, re.S)
    assert first_block is not None
    assert text.index("```bash") < 20
    commands = [line.split("#")[0].strip() for line in first_block.group(1).splitlines()]
    assert commands == ["make demo", "make test"]
    ci = (README.parent / ".ci" / "run").read_text()
    assert ci.strip().splitlines()[-1] == "make test"


def test_readme_is_short_and_its_quickstart_comes_early() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= 300
    assert lines.index("```python") < 80
    assert "pip install ." in README.read_text()


@pytest.mark.real_model
def test_readme_python_example_runs(tmp_path: Path) -> None:
    code = re.search(r"```python\n(.*?)```", README.read_text(), re.S)
    assert code is not None
    done = subprocess.run(
        [sys.executable, "-c", code.group(1)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    # both statements, the newer one after the older, under its date
    out = done.stdout
    assert out.index("10 October.") < out.index("[30 September 2026]") < out.index("9 October.")
    assert "Traceback" not in done.stderr
