"""deploy/compose.yaml against the files it names: every service can start, every file it
mounts exists, no secret is written into a tracked file, and the service addresses in the
config example are the ones compose gives the services. Offline: no Docker is needed."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml
from tiermem.config import OllamaEmbedderConfig
from tiermem.settings import load_config
from tiermem.training.export import OLLAMA_BASE

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
COMPOSE: dict[str, Any] = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
GPU_SERVICES = {"ollama", "vllm"}
# ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?error}, ${VAR?error}; "$$" is a literal "$".
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}")
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.I)
# What a pasted credential looks like: long hex or base64url runs, or a known token prefix.
_SECRET_VALUE = re.compile(
    r"\b(?:[0-9a-f]{32,}|[A-Za-z0-9_-]{40,}|(?:sk|hf|tmk)_[A-Za-z0-9_-]{8,})"
)
PLACEHOLDER = "0123456789abcdef" * 4  # a valid value for every secret (hex, 32 bytes)


def interpolate(text: str, env: Mapping[str, str]) -> str:
    """Compose's interpolation: a set variable, else the default (empty without one)."""

    def one(match: re.Match[str]) -> str:
        name, op, arg = match.groups()
        value = env.get(name)
        if op in (":-", ":?"):
            return value if value else (arg if op == ":-" else "")
        if op in ("-", "?"):
            return value if value is not None else (arg if op == "-" else "")
        return value or ""

    return _VAR.sub(one, text).replace("$$", "$")


def variables(text: str) -> set[str]:
    return {m.group(1) for m in _VAR.finditer(text)}


def environment(service: str) -> dict[str, str]:
    env = SERVICES[service].get("environment", {})
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return env


def command(service: str) -> list[str]:
    cmd = SERVICES[service].get("command", [])
    return shlex.split(cmd) if isinstance(cmd, str) else list(cmd)


def flags(argv: list[str]) -> dict[str, str]:
    """``--name=value`` and ``--name value`` options of a command line."""
    out: dict[str, str] = {}
    for i, arg in enumerate(argv):
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            nxt = argv[i + 1] if i + 1 < len(argv) else ""
            out[name] = value if eq else ("" if nxt.startswith("--") else nxt)
    return out


def bind_mounts(service: str) -> list[tuple[str, str]]:
    """(host source, container target) of each bind mount, with compose's defaults applied."""
    mounts = []
    for volume in SERVICES[service].get("volumes", []):
        if isinstance(volume, dict):
            if volume.get("type") == "bind":
                mounts.append((interpolate(volume["source"], {}), volume["target"]))
            continue
        source, target = interpolate(volume, {}).split(":")[:2]
        if source.startswith((".", "/")):
            mounts.append((source, target))
    return mounts


def env_example() -> dict[str, str]:
    lines = (DEPLOY / ".env.example").read_text().splitlines()
    pairs = [line.split("=", 1) for line in lines if line.strip() and not line.startswith("#")]
    return {key.strip(): value.strip() for key, value in pairs}


def dockerfile_instructions(name: str) -> list[tuple[str, str]]:
    text = (DEPLOY / name).read_text().replace("\\\n", " ")
    rows = [line.strip() for line in text.splitlines() if line.strip()]
    return [(r.split()[0].upper(), r.partition(" ")[2]) for r in rows if not r.startswith("#")]


def served_config() -> Path:
    """The host file mounted where ``tiermem serve --config`` reads."""
    target = flags(command("tiermem"))["--config"]
    sources = [DEPLOY / src for src, dst in bind_mounts("tiermem") if dst == target]
    assert len(sources) == 1, f"nothing (or more than one file) is mounted at {target}"
    return sources[0]


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_service_has_an_image_pinned_to_a_release(name: str) -> None:
    service = SERVICES[name]
    assert "image" in service or "build" in service
    image = service.get("image", "")
    assert "$" not in image, "an image named through a variable is not pinned"
    repository, _, tag = image.rpartition(":")
    assert repository, f"{image!r} has no tag"
    assert "/" not in tag, f"{image!r} has no tag"
    assert re.fullmatch(r"v?\d+\.\d+\.\d+", tag), f"{image!r} is not pinned to a release"


def test_built_image_has_its_dockerfile_and_the_package_version() -> None:
    build = SERVICES["tiermem"]["build"]
    context = (DEPLOY / build["context"]).resolve()
    dockerfile = context / build["dockerfile"]
    assert dockerfile == DEPLOY / "Dockerfile"
    assert Path(f"{dockerfile}.dockerignore").is_file()  # BuildKit's per-Dockerfile ignore file
    for op, args in dockerfile_instructions("Dockerfile"):
        if op == "FROM":
            image = args.split()[0]
            assert ":" in image, f"FROM {image}: no tag"
            assert not image.endswith(":latest"), f"FROM {image}: not pinned"
        if op == "COPY" and not args.startswith("--from"):
            for source in shlex.split(args)[:-1]:
                assert (context / source).exists(), f"COPY {source}: not in the build context"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert SERVICES["tiermem"]["image"] == f"tiermem:{project['version']}"
    installs = " ".join(args for op, args in dockerfile_instructions("Dockerfile") if op == "RUN")
    extras = re.findall(r'"\.\[([\w,-]+)\]"', installs)
    assert extras, "the Dockerfile does not pip install the package with its extras"
    for extra in ",".join(extras).split(","):
        assert extra in project["optional-dependencies"], f"pyproject.toml has no [{extra}] extra"


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_dependencies_exist_and_can_be_met(name: str) -> None:
    depends = SERVICES[name].get("depends_on", {})
    if isinstance(depends, list):
        depends = {dep: {"condition": "service_started"} for dep in depends}
    for dep, spec in depends.items():
        assert dep in SERVICES, f"{name} depends on {dep}, which is not a service"
        condition = spec["condition"]
        assert condition in ("service_started", "service_healthy", "service_completed_successfully")
        if condition == "service_healthy":
            assert "healthcheck" in SERVICES[dep], f"{dep} is awaited healthy but has no check"
        if condition == "service_completed_successfully":
            assert SERVICES[dep].get("restart") == "no", f"{dep} is awaited to finish"


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_long_running_services_have_a_healthcheck(name: str) -> None:
    service = SERVICES[name]
    if service.get("restart") == "no":
        return  # a one-shot is awaited by its exit status
    check = service.get("healthcheck", {})
    assert not check.get("disable", False)
    assert check.get("test"), f"{name} has no healthcheck"
    assert check["test"][0] in ("CMD", "CMD-SHELL"), f"{name}: a check runs a command"


def test_healthchecks_probe_the_ready_endpoints() -> None:
    probe = {name: " ".join(SERVICES[name]["healthcheck"]["test"]) for name in SERVICES
             if "healthcheck" in SERVICES[name]}  # fmt: skip
    assert "/readyz" in probe["qdrant"]
    assert "/dev/tcp/127.0.0.1/6333" in probe["qdrant"]
    assert probe["ollama"] == "CMD ollama list"  # the image has no curl; this GETs /api/tags
    assert "127.0.0.1:8000/health" in probe["vllm"]
    port = flags(command("tiermem"))["--port"]
    assert f"127.0.0.1:{port}/readyz" in probe["tiermem"]


def test_gpu_is_reserved_for_the_model_servers_on_one_card() -> None:
    reserved: dict[str, list[str]] = {}
    for name, service in SERVICES.items():
        devices = service.get("deploy", {}).get("resources", {}).get("reservations", {})
        for device in devices.get("devices", []):
            assert device["driver"] == "nvidia"
            assert "gpu" in device["capabilities"]
            reserved[name] = device.get("device_ids", [])
    assert set(reserved) == GPU_SERVICES, "the budget in README.md assumes exactly these"
    assert reserved["ollama"] == reserved["vllm"]
    assert len(reserved["vllm"]) == 1


def test_mounted_files_exist_and_named_volumes_are_declared() -> None:
    declared = set(COMPOSE.get("volumes") or {})
    for name, service in SERVICES.items():
        for source, _ in bind_mounts(name):
            assert not source.startswith("/"), f"{name}: host path {source} is not portable"
            assert (DEPLOY / source).exists(), f"{name} mounts {source}, missing in deploy/"
        for volume in service.get("volumes", []):
            source = volume.split(":")[0] if isinstance(volume, str) else volume.get("source")
            if source and not source.startswith((".", "/", "$")):
                assert source in declared, f"{name}: volume {source} is not declared"
        for env_file in service.get("env_file", []):
            path = env_file if isinstance(env_file, str) else env_file["path"]
            assert (DEPLOY / path).is_file(), f"{name}: env file {path} is missing"


def test_no_secret_is_written_into_a_tracked_file() -> None:
    for name in SERVICES:
        for key, value in environment(name).items():
            assert isinstance(value, str), f"{name}.{key}: quote it; YAML retypes bare values"
            if _SECRET_NAME.search(key) and not key.endswith("_FILE"):
                match = _VAR.fullmatch(value)
                assert match, f"{name}.{key} must be a ${{VAR}} reference, not a value"
                assert match.group(2) in (None, ":?", "?") or not match.group(3), (
                    f"{name}.{key} has a default value"
                )
        for arg in command(name):
            if _SECRET_NAME.search(arg.partition("=")[0]) and "=" in arg:
                assert _VAR.fullmatch(arg.partition("=")[2]), f"{name}: {arg} is inline"
    for file in ("compose.yaml", "tiermem.toml.example", ".env.example", "Dockerfile"):
        found = _SECRET_VALUE.findall((DEPLOY / file).read_text())
        assert not found, f"{file} holds what looks like a credential: {found}"
    for key, value in env_example().items():
        if _SECRET_NAME.search(key) and not key.endswith("_FILE"):
            assert value == "", f".env.example sets {key}; leave secrets empty"


def test_every_variable_compose_reads_is_documented_in_the_env_example() -> None:
    documented = env_example()
    used = variables((DEPLOY / "compose.yaml").read_text())
    assert used <= set(documented), f"not in .env.example: {sorted(used - set(documented))}"
    for name in used:  # the example's own values are the defaults compose falls back to
        for match in _VAR.finditer((DEPLOY / "compose.yaml").read_text()):
            if match.group(1) == name and match.group(2) in (":-", "-"):
                assert documented[name] == match.group(3), f"{name}: two different defaults"


def test_tiermem_service_runs_tiermem_serve_on_its_published_port() -> None:
    entrypoint = [
        json.loads(args) for op, args in dockerfile_instructions("Dockerfile") if op == "ENTRYPOINT"
    ][-1]
    argv = SERVICES["tiermem"].get("entrypoint", entrypoint) + command("tiermem")
    assert argv[:2] == ["tiermem", "serve"]
    options = flags(argv)
    assert options["--host"] == "0.0.0.0"
    published = [interpolate(p, {}).split(":")[-1] for p in SERVICES["tiermem"]["ports"]]
    assert published == [options["--port"]]
    assert served_config() == DEPLOY / "tiermem.toml.example"
    for name, service in SERVICES.items():
        if name != "tiermem":
            assert "ports" not in service, f"{name} is published; only the API should be"


def test_config_example_loads() -> None:
    config = load_config(DEPLOY / "tiermem.toml.example", {})
    assert config.mtm.location == "url"
    assert config.ltm.enabled


def test_config_example_with_the_service_environment_points_at_the_compose_services() -> None:
    # The environment compose gives the service, every variable set: a TIERMEM_ override that
    # names no field, or a value the field refuses, fails here as it would at startup.
    env = {key: interpolate(value, dict.fromkeys(variables(value), PLACEHOLDER))
           for key, value in environment("tiermem").items()}  # fmt: skip
    config = load_config(served_config(), env)
    assert config.mtm.api_key == PLACEHOLDER
    assert config.ltm.secret is not None

    qdrant = urlparse(config.mtm.url)
    assert (qdrant.hostname, qdrant.port) == ("qdrant", 6333)

    selector = config.slm.backend
    ollama = urlparse(selector.host)
    assert selector.kind == "ollama"
    assert (ollama.hostname, ollama.port) == ("ollama", 11434)
    assert config.slm.selector.enabled
    assert config.slm.selector_mode == "pointwise"
    created = re.search(r"^NAME=(\S+)", (DEPLOY / "ollama" / "init.sh").read_text(), re.M)
    assert created is not None
    assert selector.model == created.group(1)

    consolidation = config.ltm.consolidation.backend
    vllm = urlparse(consolidation.base_url or "")
    vllm_flags = flags(command("vllm"))
    assert consolidation.kind == "openai"
    assert vllm.hostname == "vllm"
    assert str(vllm.port) == vllm_flags["--port"]
    assert vllm.path == "/v1"
    assert consolidation.model == vllm_flags["--served-model-name"]


def test_config_example_embeds_with_nomic_embed_text_on_the_compose_ollama() -> None:
    config = load_config(served_config(), {})
    embedder = config.embedder
    assert isinstance(embedder, OllamaEmbedderConfig)
    assert (embedder.kind, embedder.model, embedder.dim) == ("ollama", "nomic-embed-text", 768)
    assert (embedder.query_prefix, embedder.document_prefix) == (
        "search_query: ",
        "search_document: ",
    )
    ollama = urlparse(embedder.host)
    assert (ollama.hostname, ollama.port) == ("ollama", 11434)
    pulled = re.search(r"^EMBEDDER=(\S+)", (DEPLOY / "ollama" / "init.sh").read_text(), re.M)
    assert pulled is not None
    assert pulled.group(1) == embedder.model  # ollama-init pulls the model the config names


def test_ollama_init_creates_the_selector_from_the_training_modelfile() -> None:
    init = SERVICES["ollama-init"]
    assert init["environment"]["OLLAMA_HOST"] == "http://ollama:11434"
    mounts = dict((target, DEPLOY / source) for source, target in bind_mounts("ollama-init"))
    script = init["entrypoint"][-1]
    folder, _, filename = script.rpartition("/")
    assert (mounts[folder] / filename).is_file()
    modelfile = (mounts[folder] / "Modelfile.selector").read_text()
    assert re.search(rf"^FROM {re.escape(OLLAMA_BASE)}$", modelfile, re.M)
    adapter = re.search(r"^ADAPTER (\S+)$", modelfile, re.M)
    assert adapter is not None
    # Relative to the Modelfile: the adapter the script looks for, beside it, and git-ignored.
    assert (mounts[folder] / adapter.group(1)).resolve() == mounts[folder] / "adapter.gguf"
    assert "adapter.gguf" in (mounts[folder] / ".gitignore").read_text().split()


def run_init(tmp_path: Path, *, adapter: bool, base_only: str) -> tuple[int, list[str]]:
    """deploy/ollama/init.sh against a fake ``ollama`` that logs its calls."""
    models = tmp_path / "models"
    models.mkdir()
    name = "Modelfile.selector"
    (models / name).write_text((DEPLOY / "ollama" / name).read_text())
    if adapter:
        (models / "adapter.gguf").write_bytes(b"GGUF")
    fake = tmp_path / "bin" / "ollama"
    fake.parent.mkdir()
    log = tmp_path / "calls"
    fake.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {log}\n'
        f'if [ "$1" = create ]; then sed "s/^/  /" "$4" >> {log}; fi\n'
    )
    fake.chmod(0o755)
    env = {
        "PATH": f"{fake.parent}:{os.environ['PATH']}",
        "MODELS_DIR": str(models),
        "TIERMEM_SELECTOR_BASE_ONLY": base_only,
    }
    done = subprocess.run(
        ["sh", str(DEPLOY / "ollama" / "init.sh")], env=env, capture_output=True, timeout=30
    )
    return done.returncode, log.read_text().splitlines() if log.exists() else []


def test_init_creates_the_adapter_model(tmp_path: Path) -> None:
    code, calls = run_init(tmp_path, adapter=True, base_only="0")
    assert code == 0
    assert calls[0] == f"pull {OLLAMA_BASE}"
    assert calls[1] == f"create tiermem-selector -f {tmp_path}/models/Modelfile.selector"
    assert "  ADAPTER ./adapter.gguf" in calls
    assert calls[-2] == "pull nomic-embed-text"
    assert calls[-1] == "show tiermem-selector"


def test_init_refuses_to_start_without_the_adapter(tmp_path: Path) -> None:
    code, calls = run_init(tmp_path, adapter=False, base_only="0")
    assert code == 1
    assert calls == [f"pull {OLLAMA_BASE}"]  # nothing named tiermem-selector was created


def test_init_serves_the_untuned_base_only_when_asked(tmp_path: Path) -> None:
    code, calls = run_init(tmp_path, adapter=False, base_only="1")
    assert code == 0
    assert calls[1].startswith("create tiermem-selector -f ")
    assert f"  FROM {OLLAMA_BASE}" in calls
    assert not any("ADAPTER" in c for c in calls)


def test_readme_budget_quotes_the_compose_settings() -> None:
    readme = (DEPLOY / "README.md").read_text()
    vllm_flags = flags(command("vllm"))
    for flag in ("--gpu-memory-utilization", "--max-model-len", "--max-num-seqs"):
        assert f"{flag}={vllm_flags[flag]}" in readme, f"README.md does not quote {flag}"
    ollama = environment("ollama")
    for key in ("OLLAMA_CONTEXT_LENGTH", "OLLAMA_NUM_PARALLEL"):
        assert f"{key}={ollama[key]}" in readme, f"README.md does not quote {key}"
