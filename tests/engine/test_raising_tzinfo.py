"""A ``tzinfo`` whose ``utcoffset()`` raises is the caller's broken input: a typed error that
keeps the original as its cause, never the tzinfo's own exception escaping."""

from __future__ import annotations

from datetime import datetime, timedelta, tzinfo

import pytest
from tiermem import Memory, SearchFilters, TiermemConfig
from tiermem.errors import InvalidFilterError, InvalidMessageError


class RaisingTZ(tzinfo):
    def utcoffset(self, dt: datetime | None) -> timedelta | None:
        raise ZeroDivisionError("boom")

    def dst(self, dt: datetime | None) -> timedelta | None:
        return None


class RaisesOnSecondCallTZ(tzinfo):
    """Answers the first ``utcoffset()`` and raises on the next (inside ``astimezone``)."""

    def __init__(self) -> None:
        self.calls = 0

    def utcoffset(self, dt: datetime | None) -> timedelta | None:
        self.calls += 1
        if self.calls > 1:
            raise LookupError("no such zone any more")
        return timedelta(hours=1)

    def dst(self, dt: datetime | None) -> timedelta | None:
        return None


@pytest.mark.parametrize("zone", [RaisingTZ, RaisesOnSecondCallTZ])
def test_a_raising_tzinfo_in_a_message_timestamp_is_an_invalid_message(
    zone: type[tzinfo],
) -> None:
    when = datetime(2020, 1, 1, tzinfo=zone())
    with Memory(TiermemConfig.for_tests()) as memory:
        with pytest.raises(InvalidMessageError, match=r"utcoffset\(\) raised") as caught:
            memory.add([{"content": "hi there friend", "timestamp": when}], user_id="u")
        assert caught.value.index == 0
        assert isinstance(caught.value.__cause__, ZeroDivisionError | LookupError)
        assert memory.get_all("u") == []  # nothing was stored


@pytest.mark.parametrize("bound", ["since", "until"])
def test_a_raising_tzinfo_in_a_filter_is_an_invalid_filter(bound: str) -> None:
    when = datetime(2020, 1, 1, tzinfo=RaisingTZ())
    filters = SearchFilters(**{bound: when})
    with (
        Memory(TiermemConfig.for_tests()) as memory,
        pytest.raises(InvalidFilterError, match=rf"filters\.{bound} .*raised ZeroDivision"),
    ):
        memory.search("x", user_id="u", filters=filters)
