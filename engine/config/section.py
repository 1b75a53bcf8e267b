"""The base of every configuration section (frozen; a field it does not have is refused by
name), and ``validated``, which turns pydantic's refusal into the typed ``ConfigError``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, TypeAdapter
from tiermem.errors import ConfigError

T = TypeVar("T")


class DeprecatedSettingWarning(FutureWarning):
    """A setting read under an old name that a coming release stops reading (shown by
    default: configuration files are written by users, not only by developers)."""


class Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def validated(adapter: TypeAdapter[T], fields: Mapping[str, Any]) -> T:
    """``fields`` validated by ``adapter``; a refusal is a ``ConfigError`` with pydantic's
    message (which names the field)."""
    try:
        return adapter.validate_python(fields)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc


__all__ = ["DeprecatedSettingWarning", "Section", "validated"]
