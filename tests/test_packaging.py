"""The installed distribution exposes one import package, ``tiermem``, and a console script;
no bare ``engine`` or ``slm`` module leaks into a user's environment."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest


def test_only_tiermem_is_importable_outside_the_checkout(tmp_path: Path) -> None:
    probe = (
        "import importlib.util as u, json;"
        "print(json.dumps({n: u.find_spec(n) is not None for n in "
        "['tiermem', 'tiermem.slm', 'tiermem.offline', 'tiermem.training', "
        "'engine', 'slm', 'offline', 'training']}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == (
        '{"tiermem": true, "tiermem.slm": true, "tiermem.offline": true, '
        '"tiermem.training": true, "engine": false, "slm": false, "offline": false, '
        '"training": false}'
    )


def test_console_script_is_installed() -> None:
    script = Path(sys.executable).parent / "tiermem"
    assert script.exists() or shutil.which("tiermem")
    done = subprocess.run(
        [sys.executable, "-m", "tiermem.cli", "--help"], capture_output=True, text=True, check=True
    )
    assert "demo" in done.stdout
    assert "bench" in done.stdout


def test_import_is_cheap_and_loads_no_model() -> None:
    probe = (
        "import sys, tiermem; print('torch' in sys.modules, 'sentence_transformers' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


ROOT = Path(__file__).resolve().parents[1]


def _setuptools() -> dict[str, Any]:
    import tomllib

    return dict(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"])


def _mapped_packages() -> list[str]:
    """The packages pyproject maps to folders of their own (``tiermem.slm`` = ``slm/``):
    walking ``tiermem``'s own path would miss them."""
    return sorted(p for p in _setuptools()["package-dir"] if p)


def _modules() -> list[str]:
    names = set(_mapped_packages())
    for package in _mapped_packages():
        path = importlib.import_module(package).__path__
        names.update(m.name for m in pkgutil.walk_packages(path, f"{package}."))
    return sorted(names)


def test_the_doctests_reach_every_mapped_package() -> None:
    packages = _mapped_packages()
    assert {"tiermem", "tiermem.slm", "tiermem.offline", "tiermem.training"} <= set(packages)
    for package in packages:
        assert any(m.startswith(f"{package}.") for m in _modules()), package


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples_run(name: str) -> None:
    module = importlib.import_module(name)
    failures, _ = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert failures == 0


def test_every_subpackage_folder_is_declared_and_a_built_wheel_holds_it(tmp_path: Path) -> None:
    import zipfile

    root = ROOT
    config = _setuptools()
    mapping = config["package-dir"]
    folders = {}
    for package, folder in mapping.items():
        for init in (root / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(root / folder).parts
            folders[".".join((package, *relative))] = init.parent
    assert set(config["packages"]) == set(folders)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(root),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("tiermem-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for package in folders:
        assert f"{package.replace('.', '/')}/__init__.py" in names, package
    assert "tiermem/py.typed" in names
    assert "tiermem/service/static/inspect.js" in names  # the inspector page, as package data
    assert not any(n.startswith(("engine/", "slm/", "tests/")) for n in names)


def test_a_plain_install_is_lean_and_the_bench_extra_carries_its_own_dependencies() -> None:
    import tomllib

    project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    core = " ".join(project["project"]["dependencies"])
    bench = " ".join(project["project"]["optional-dependencies"]["bench"])
    for heavy in ("nltk", "matplotlib"):
        assert heavy not in core
        assert heavy in bench
    # the model-free default installs without a compiler: llama.cpp is the llamacpp extra
    assert "llama-cpp-python" not in core
    assert "llama-cpp-python" in " ".join(project["project"]["optional-dependencies"]["llamacpp"])
    probe = (
        "import sys\n"
        "from tiermem import Memory, TiermemConfig\n"
        "with Memory(TiermemConfig.for_tests()) as m:\n"
        "    m.add('I keep bees on the roof.', user_id='u')\n"
        "    m.answer('what do I keep?', user_id='u')\n"
        "heavy = ('nltk', 'matplotlib', 'tiermem.bench', 'llama_cpp')\n"
        "print(sorted(n for n in heavy if n in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_benchmark_without_its_extra_says_how_to_install_it() -> None:
    from tiermem.bench import bench_dependency
    from tiermem.errors import ConfigError

    with pytest.raises(ConfigError, match=r"tiermem\[bench\]"):
        bench_dependency("a_module_that_is_not_installed")
