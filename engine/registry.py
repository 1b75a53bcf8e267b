"""One registry shape for every provider family: SLM backends, embedders, MTM stores and
selectors each keep a ``Registry`` of name -> lazy factory, with capability flags.

A factory imports what it builds when it is called, so an SDK a deployment does not use
never loads. An unknown name is ``UnknownProviderError`` naming the known ones; registering a
taken name is a ``ConfigError`` unless ``replace=True`` says it is on purpose; ``registered``
replaces an entry for the length of a block (tests register their fakes so). Capabilities
say what a kind can do (``"context-per-owner"``, ``"scores-tokens"``), so callers never test
a kind's name or an instance's class.

>>> shapes: Registry[type] = Registry("shape")
>>> shapes.register("box", lambda: dict, capabilities={"square"})
>>> shapes.factory("box")()
<class 'dict'>
>>> shapes.can("box", "square"), shapes.can("box", "round")
(True, False)
>>> shapes.register("box", lambda: list)
Traceback (most recent call last):
tiermem.errors.ConfigError: shape 'box' is registered already (replace=True replaces it)
>>> shapes.factory("ball")
Traceback (most recent call last):
tiermem.errors.UnknownProviderError: unknown shape provider 'ball'; known: box
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Generic, TypeVar

from tiermem.errors import ConfigError, UnknownProviderError

F = TypeVar("F", bound=Callable[..., object])


@dataclass(frozen=True, slots=True)
class Registered(Generic[F]):
    """One kind: how to build it, what configures it, and what it can do."""

    factory: F
    capabilities: frozenset[str] = frozenset()
    config: type | None = None  # the kind's configuration class, where the family has one


class Registry(Generic[F]):
    """The kinds of one provider family (``family`` names it in errors)."""

    def __init__(self, family: str, reserved: Mapping[str, str] | None = None) -> None:
        """``reserved``: names that mean something else, and what (``"none"``: no model)."""
        self.family = family
        self._reserved = dict(reserved or {})
        self._kinds: dict[str, Registered[F]] = {}

    def register(
        self,
        name: str,
        factory: F,
        *,
        capabilities: Iterable[str] = (),
        config: type | None = None,
        replace: bool = False,
    ) -> None:
        if name in self._reserved:
            meaning = self._reserved[name]
            raise ConfigError(f"{self.family} {name!r} means {meaning} and cannot be registered")
        if name in self._kinds and not replace:
            raise ConfigError(
                f"{self.family} {name!r} is registered already (replace=True replaces it)"
            )
        self._kinds[name] = Registered(factory, frozenset(capabilities), config)

    def unregister(self, name: str) -> None:
        """Forget ``name``; a configuration naming it is refused again."""
        self._kinds.pop(name, None)

    @contextmanager
    def registered(
        self,
        name: str,
        factory: F,
        *,
        capabilities: Iterable[str] = (),
        config: type | None = None,
    ) -> Iterator[None]:
        """``name`` builds with ``factory`` inside the block; what it built before comes
        back after (nothing, for a new name)."""
        previous = self._kinds.get(name)
        self.register(name, factory, capabilities=capabilities, config=config, replace=True)
        try:
            yield
        finally:
            if previous is None:
                self.unregister(name)
            else:
                self._kinds[name] = previous

    def names(self) -> list[str]:
        return sorted(self._kinds)

    def __contains__(self, name: object) -> bool:
        return name in self._kinds

    def get(self, name: str) -> Registered[F]:
        found = self._kinds.get(name)
        if found is None:
            raise UnknownProviderError(self.family, name, self.names())
        return found

    def factory(self, name: str) -> F:
        return self.get(name).factory

    def can(self, name: str, capability: str) -> bool:
        """Whether kind ``name`` has ``capability`` (``UnknownProviderError`` if unknown)."""
        return capability in self.get(name).capabilities


__all__ = ["Registered", "Registry"]
