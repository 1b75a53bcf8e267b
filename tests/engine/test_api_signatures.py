"""Every face of the client API has the declared signatures (``tiermem.api``): parameter
names, kinds, defaults and annotations, and the return annotation; the awaited faces are
coroutines; the service's ``Calls`` takes the same parameters (it returns a request)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest
from tiermem import AsyncMemory, Memory
from tiermem.api import AsyncMemoryAPI, MemoryAPI
from tiermem.remote import AsyncRemoteMemory, RemoteMemory
from tiermem.service.calls import Calls

METHODS = sorted(
    n for n, v in vars(MemoryAPI).items() if not n.startswith("_") and inspect.isfunction(v)
)
FACES: list[tuple[type, type]] = [
    (Memory, MemoryAPI),
    (RemoteMemory, MemoryAPI),
    (AsyncMemory, AsyncMemoryAPI),
    (AsyncRemoteMemory, AsyncMemoryAPI),
]


def _parameters(fn: Callable[..., Any]) -> list[tuple[str, object, object, object]]:
    return [
        (p.name, p.kind, p.default, p.annotation)
        for p in inspect.signature(fn).parameters.values()
        if p.name != "self"
    ]


def test_the_two_declarations_have_the_same_methods_and_parameters() -> None:
    assert len(METHODS) == 17
    for name in METHODS:
        sync, awaited = getattr(MemoryAPI, name), getattr(AsyncMemoryAPI, name)
        assert inspect.iscoroutinefunction(awaited), name
        assert _parameters(sync) == _parameters(awaited), name
        assert inspect.signature(sync).return_annotation == (
            inspect.signature(awaited).return_annotation
        ), name


@pytest.mark.parametrize(("face", "api"), FACES, ids=lambda c: c.__name__)
def test_each_face_has_the_declared_signatures(face: type, api: type) -> None:
    public = {n for n in dir(face) if not n.startswith("_") and callable(getattr(face, n))}
    assert set(METHODS) <= public
    for name in METHODS:
        declared, implemented = getattr(api, name), getattr(face, name)
        assert _parameters(implemented) == _parameters(declared), f"{face.__name__}.{name}"
        returns = inspect.signature(implemented).return_annotation
        assert returns == inspect.signature(declared).return_annotation, f"{face.__name__}.{name}"
        assert inspect.iscoroutinefunction(implemented) == (api is AsyncMemoryAPI), name


def test_the_services_calls_take_the_same_parameters() -> None:
    for name in METHODS:
        if name == "close":  # a connection's own, no request
            continue
        assert _parameters(getattr(Calls, name)) == _parameters(getattr(MemoryAPI, name)), name


def test_a_face_that_drifts_fails_the_check() -> None:
    """The check itself can fail: a default changed on one face is caught."""

    class Drifted(RemoteMemory):
        def get_all(self, user_id: str, filters: Any = None) -> Any:  # annotation drifted
            return super().get_all(user_id, filters)

    with pytest.raises(AssertionError, match=r"Drifted\.get_all"):
        test_each_face_has_the_declared_signatures(Drifted, MemoryAPI)
