"""The generated reference pages: ``docs/configuration.md`` (from the pydantic models),
``docs/cli.md`` (from the argparse tree) and ``docs/presets.md`` (from ``tiermem.presets``).

``python -m tiermem.docs [DIR]`` writes them (``make docs``); a test fails when a page in the
repository differs from what this module renders, so the references cannot go stale.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import sys
import textwrap
import typing
from collections.abc import Callable, Iterator
from pathlib import Path

from pydantic import BaseModel, SecretStr
from pydantic_core import PydanticUndefined

_WIDTH = 100  # argparse's help width, fixed so the page does not depend on the terminal


def _field_notes(cls: type[BaseModel]) -> dict[str, tuple[str, str]]:
    """Each field's annotation as written and its comment (the block above it, or the
    comment at the end of its line), read from the class's source."""
    try:
        lines = inspect.getsource(cls).splitlines()
    except (OSError, TypeError):
        return {}
    tree = ast.parse(textwrap.dedent("\n".join(lines)))
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    notes: dict[str, tuple[str, str]] = {}
    for node in body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        above: list[str] = []
        row = node.lineno - 2
        while row >= 0 and lines[row].strip().startswith("#"):
            above.insert(0, lines[row].strip().lstrip("#").strip())
            row -= 1
        last = lines[(node.end_lineno or node.lineno) - 1]
        trailing = last.split("  # ", 1)[1].strip() if "  # " in last else ""
        comment = " ".join(above) or trailing
        notes[node.target.id] = (ast.unparse(node.annotation), comment)
    return notes


def _default(field: typing.Any) -> str:
    if field.default_factory is not None:
        return "(computed)"
    value = field.default
    if value is PydanticUndefined:
        return "required"
    if isinstance(value, BaseModel):
        return ""
    if isinstance(value, SecretStr):
        return "(secret)"
    if isinstance(value, Path):
        return f"`{value}`"
    return f"`{value!r}`"


def _kinds(annotation: object) -> list[type[BaseModel]]:
    """The config classes of a union field (the embedder, MTM and backend families)."""
    found: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            found.append(arg)
        else:
            found.extend(_kinds(arg))
    return list(dict.fromkeys(found))


def _kind_name(cls: type[BaseModel]) -> str:
    for name in ("kind", "provider"):
        field = cls.model_fields.get(name)
        if field is None:
            continue
        if field.default is not PydanticUndefined:
            return str(field.default)
        literal = typing.get_args(field.annotation)
        if literal:
            return str(literal[0])
    return cls.__name__


def _sections(
    cls: type[BaseModel], path: str, heading: str, seen: dict[tuple[type, ...], str]
) -> Iterator[tuple[str, type[BaseModel], list[str]]]:
    """``(heading, class, rows)`` for ``cls`` and every section nested in it. A family of
    kinds is listed in full where it first appears; ``seen`` maps it to that place."""
    notes = _notes_of(cls)
    rows: list[str] = []
    nested: list[tuple[str, typing.Any]] = []
    for name, field in cls.model_fields.items():
        annotation = field.annotation
        written, comment = notes.get(name, ("", ""))
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            nested.append((name, annotation))
            continue
        kinds = _kinds(annotation)
        if kinds and all(k.__name__.endswith("Config") for k in kinds):
            family = tuple(kinds)
            if family in seen:
                first = seen[family]
                rows.append(
                    f"| `{name}` | any kind of `[{first}]` | {_default(field)} | {comment} |"
                )
                continue
            default = type(field.default) if isinstance(field.default, BaseModel) else None
            kinds.sort(key=lambda k: k is not default)  # the default kind first
            seen[family] = f"{path}.{name}" if path else name
            nested.append((name, kinds))
            continue
        kind = (written or str(annotation)).replace("|", "\\|")
        rows.append(f"| `{name}` | `{kind}` | {_default(field)} | {comment.replace('|', '/')} |")
    yield heading, cls, rows
    for name, target in nested:
        sub = f"{path}.{name}" if path else name
        if isinstance(target, list):
            for kind_cls in target:
                kind = _kind_name(kind_cls)
                label = (
                    f"kind `{kind}`"
                    if kind != kind_cls.__name__
                    else "a kind registered at run time"
                )
                yield from _sections(
                    kind_cls, sub, f"`[{sub}]` {label} ({kind_cls.__name__})", seen
                )
        else:
            yield from _sections(target, sub, f"`[{sub}]` ({target.__name__})", seen)


def setting_field(dotted: str) -> tuple[type[BaseModel], str]:
    """The class that declares setting ``dotted`` (``slm.backend.host``: the first kind of
    the backend family that has ``host``), and the field's name.

    >>> setting_field("slm.backend.host")
    (<class 'tiermem.config.backends.OllamaConfig'>, 'host')
    """
    from tiermem.config import TiermemConfig

    classes: list[type[BaseModel]] = [TiermemConfig]
    *sections, name = dotted.split(".")
    for section in sections:
        fields = [c.model_fields[section] for c in classes if section in c.model_fields]
        if not fields:
            raise KeyError(dotted)
        annotation, default = fields[0].annotation, fields[0].default
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            classes = [annotation]
        else:
            classes = _kinds(annotation)
        classes.sort(key=lambda k: not isinstance(default, k))  # the default kind first

    def declares(cls: type[BaseModel]) -> bool:  # a kind's fixed ``model = ""`` is not it
        field = cls.model_fields.get(name)
        literal = field is not None and typing.get_origin(field.annotation) is typing.Literal
        fixed = literal and len(typing.get_args(field.annotation if field else None)) == 1
        return field is not None and (name == "kind" or not fixed)

    owner = next((c for c in classes if declares(c)), None)
    if owner is None:
        raise KeyError(dotted)
    return owner, name


def _notes_of(cls: type[BaseModel]) -> dict[str, tuple[str, str]]:
    notes = _field_notes(cls)
    for base in cls.__mro__[1:]:
        if isinstance(base, type) and issubclass(base, BaseModel) and base is not BaseModel:
            notes = {**_field_notes(base), **notes}
    return notes


def user_settings_markdown() -> str:
    """The first page: the settings a user holds (``tiermem.config.USER_SETTINGS``)."""
    from tiermem.config import USER_SETTINGS

    out = [
        "# Configuration reference",
        "",
        "Generated from `tiermem.config` (`make docs`); a test fails when this page is stale.",
        "A TOML file (`--config`) and `TIERMEM_*` variables set these; `tiermem config` prints",
        "the configuration in effect. The defaults need none of them: `Memory.from_defaults()`",
        "and `tiermem serve` keep everything under `~/.local/share/tiermem`.",
        "",
        "These are the settings a user holds. Each kind's connection details (timeouts,",
        "retries, threads) and the tuning knobs of the read and write paths, every one chosen by",
        "measurement (`docs/decisions.md`), are on [the expert page](configuration-expert.md):",
        "they can be set, and a change to a tuning knob is worth a `tiermem bench locomo --lodo`",
        "run.",
        "",
        "| setting | type | default | note |",
        "|---|---|---|---|",
    ]
    for dotted, note in USER_SETTINGS.items():
        owner, name = setting_field(dotted)
        field = owner.model_fields[name]
        written, _ = _notes_of(owner).get(name, ("", ""))
        kind = (written or str(field.annotation)).replace("|", "\\|")
        out.append(f"| `{dotted}` | `{kind}` | {_default(field)} | {note} |")
    return "\n".join(out) + "\n"


def configuration_markdown() -> str:
    """Every setting of ``TiermemConfig``: section, name, type, default and its note."""
    from tiermem.config import TiermemConfig

    out = [
        "# Configuration reference: every setting",
        "",
        "Generated from the pydantic models in `tiermem.config` (`make docs`); a test fails when",
        "this page is stale. The settings a user holds are on [the first page](configuration.md);",
        "this page adds each kind's connection details and the tuning knobs, each chosen by",
        "measurement (`docs/decisions.md`). Families that come in kinds (embedder, MTM store,",
        "model backend) list each kind's fields: set `kind` first.",
        "",
    ]
    for heading, cls, rows in _sections(TiermemConfig, "", "top level (TiermemConfig)", {}):
        out += [f"## {heading}", ""]
        doc = inspect.cleandoc(cls.__doc__ or "").split("\n\n")[0].replace("\n", " ")
        if doc:
            out += [doc, ""]
        if rows:
            out += ["| setting | type | default | note |", "|---|---|---|---|", *rows, ""]
    return "\n".join(out).rstrip() + "\n"


def _fixed_width(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = _formatter
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _fixed_width(sub)


def _formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.HelpFormatter(prog, width=_WIDTH)


def _commands(
    parser: argparse.ArgumentParser, name: str
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _commands(sub, f"{name} {sub_name}")


def cli_markdown() -> str:
    """Every command's ``--help``, in the order the tree lists them."""
    from tiermem.cli import _parser

    parser = _parser()
    _fixed_width(parser)
    out = [
        "# Command-line reference",
        "",
        "Generated from the argparse tree of `tiermem` (`make docs`); a test fails when this page",
        "is stale.",
        "",
    ]
    for name, command in _commands(parser, "tiermem"):
        out += [f"## `{name}`", "", "```text", command.format_help().rstrip(), "```", ""]
    return "\n".join(out).rstrip() + "\n"


def _presets() -> str:
    from tiermem.presets import presets_markdown

    return presets_markdown()


PAGES: dict[str, Callable[[], str]] = {
    "configuration.md": user_settings_markdown,
    "configuration-expert.md": configuration_markdown,
    "cli.md": cli_markdown,
    "presets.md": _presets,
}


def main(argv: list[str] | None = None) -> int:
    target = Path((argv or sys.argv[1:] or ["docs"])[0])
    target.mkdir(parents=True, exist_ok=True)
    for name, render in PAGES.items():
        (target / name).write_text(render(), encoding="utf-8")
        print(f"wrote {target / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
