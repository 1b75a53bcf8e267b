"""Every bad input raises a clear, typed error and stores nothing."""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone, tzinfo

import pytest
from tiermem import (
    EmptyMessagesError,
    InvalidFilterError,
    InvalidInputError,
    InvalidLimitError,
    InvalidMessageError,
    InvalidQueryError,
    InvalidSessionIdError,
    InvalidUserIdError,
    Memory,
    MemoryKind,
    MemoryNotFoundError,
    NaiveTimestampError,
    SearchFilters,
    TiermemError,
    UnknownRoleError,
)
from tiermem.errors import InvalidMemoryIdError
from tiermem.validation import MAX_CONTENT_CHARS, MAX_MEMORY_TEXT_CHARS

from tests.conftest import T0, chat


def stored_state(memory: Memory, user_id: str) -> tuple[int, int, tuple[str, ...]]:
    c = memory.components
    return (
        c.store.count(user_id),
        c.journal.count_audit(user_id),
        tuple(t.turn_id for t in memory.working_memory(user_id)),
    )


@pytest.fixture
def seeded(memory: Memory) -> Memory:
    memory.add(
        chat(
            ("user", "I keep bees on my roof."),
            ("assistant", "How many hives?"),
            ("user", "Two hives, since 2024."),
        ),
        user_id="ana",
    )
    return memory


@pytest.mark.parametrize(
    "bad_user",
    ["", "   ", " ana", "ana\n", "a\x00b", "x" * 129, None, 42, b"ana", "a\u2028b", "a\ud800b"],
)
def test_bad_user_ids_are_refused_everywhere(seeded: Memory, bad_user: object) -> None:
    before = stored_state(seeded, "ana")
    calls = [
        lambda: seeded.add("hello there", user_id=bad_user),  # type: ignore[arg-type]
        lambda: seeded.search("bees", user_id=bad_user),  # type: ignore[arg-type]
        lambda: seeded.answer("bees", user_id=bad_user),  # type: ignore[arg-type]
        lambda: seeded.get_all(user_id=bad_user),  # type: ignore[arg-type]
        lambda: seeded.forget_user(bad_user),  # type: ignore[arg-type]
    ]
    for call in calls:
        with pytest.raises(InvalidUserIdError):
            call()
    assert stored_state(seeded, "ana") == before


@pytest.mark.parametrize(
    ("messages", "error"),
    [
        ([{"content": "hi", 1: "x", "mood": "happy"}], InvalidMessageError),
        ([], EmptyMessagesError),
        ([{"role": "user", "content": "   "}], EmptyMessagesError),
        ([{"role": "user"}], InvalidMessageError),
        ([{"role": "robot", "content": "beep"}], UnknownRoleError),
        (
            [{"role": "user", "content": "hi", "timestamp": datetime(2026, 1, 1)}],
            NaiveTimestampError,
        ),
        (
            [{"role": "user", "content": "hi", "timestamp": "2026-01-01T10:00:00"}],
            NaiveTimestampError,
        ),
        ([{"role": "user", "content": "hi", "timestamp": "yesterday"}], InvalidMessageError),
        ([{"role": "user", "content": "hi", "mood": "happy"}], InvalidMessageError),
        ([{"role": "user", "content": "hi", "speaker": ""}], InvalidMessageError),
        ([{"role": "user", "content": "x" * 300_000}], InvalidMessageError),
        ([{"role": "user", "content": 7}], EmptyMessagesError),
        ([3.5], InvalidMessageError),
        (None, InvalidMessageError),
    ],
)
def test_bad_messages_store_nothing(
    seeded: Memory, messages: object, error: type[Exception]
) -> None:
    before = stored_state(seeded, "ana")
    with pytest.raises(error) as caught:
        seeded.add(messages, user_id="ana")  # type: ignore[arg-type]
    assert isinstance(caught.value, InvalidInputError)
    assert stored_state(seeded, "ana") == before


def test_one_bad_message_in_a_batch_stores_none_of_the_batch(seeded: Memory) -> None:
    before = stored_state(seeded, "ana")
    batch = [*chat(("user", "I also grow tomatoes.")), {"role": "wizard", "content": "zap"}]
    with pytest.raises(UnknownRoleError) as caught:
        seeded.add(batch, user_id="ana")
    assert caught.value.index == 1
    assert stored_state(seeded, "ana") == before
    assert not [e for e in seeded.get_all("ana") if "tomatoes" in e.text]


def test_bad_session_id_is_refused(seeded: Memory) -> None:
    with pytest.raises(InvalidSessionIdError):
        seeded.add("hello", user_id="ana", session_id="")
    with pytest.raises(InvalidSessionIdError):
        seeded.answer("bees", user_id="ana", session_id="s\t1")


@pytest.mark.parametrize("k", [0, -1, 2.5, "3", True, None])
def test_bad_k_is_refused(seeded: Memory, k: object) -> None:
    if k is None:  # None means the configured default
        assert seeded.search("bees", user_id="ana", k=None)
        return
    with pytest.raises(InvalidLimitError):
        seeded.search("bees", user_id="ana", k=k)  # type: ignore[arg-type]


@pytest.mark.parametrize("query", ["", "   ", None, "q" * 5000])
def test_bad_queries_are_refused(seeded: Memory, query: object) -> None:
    with pytest.raises(InvalidQueryError):
        seeded.search(query, user_id="ana")  # type: ignore[arg-type]


def test_bad_filters_are_refused(seeded: Memory) -> None:
    with pytest.raises(InvalidFilterError):
        seeded.search("bees", "ana", filters=SearchFilters(since=T0, until=T0 - timedelta(days=1)))
    with pytest.raises(InvalidFilterError):
        seeded.search("bees", "ana", filters=SearchFilters(since=datetime(2026, 1, 1)))
    with pytest.raises(InvalidFilterError):
        seeded.search("bees", "ana", filters=SearchFilters(kinds=("gossip",)))  # type: ignore[arg-type]


@pytest.mark.parametrize("memory_id", ["no-such-id", "00000000-0000-4000-8000-000000000000", ""])
def test_unknown_memory_ids_raise_not_found(seeded: Memory, memory_id: str) -> None:
    before = stored_state(seeded, "ana")
    for call in (
        lambda: seeded.get(memory_id, "ana"),
        lambda: seeded.update(memory_id, "new text", "ana"),
        lambda: seeded.delete(memory_id, "ana"),
        lambda: seeded.history(memory_id, "ana"),
    ):
        with pytest.raises(MemoryNotFoundError) as caught:
            call()
        assert isinstance(caught.value, TiermemError)
        assert caught.value.memory_id == memory_id
    assert stored_state(seeded, "ana") == before


def test_update_with_empty_text_is_refused_and_keeps_the_entry(seeded: Memory) -> None:
    entry = seeded.get_all("ana")[0]
    with pytest.raises(InvalidQueryError):
        seeded.update(entry.id, "  ", "ana")
    assert seeded.get(entry.id, "ana").text == entry.text


def test_error_messages_say_what_is_wrong(memory: Memory) -> None:
    with pytest.raises(UnknownRoleError, match="unknown role 'robot'"):
        memory.add([{"role": "robot", "content": "x"}], user_id="ana")
    with pytest.raises(NaiveTimestampError, match="no time zone"):
        memory.add([{"content": "x", "timestamp": datetime(2026, 1, 1)}], user_id="ana")


# -- hostile input: every refusal is a TiermemError, and what was stored stays ------------------

SURROGATE = "a\ud800b"
UTC_PLUS_14 = timezone(timedelta(hours=14))
UTC_MINUS_14 = timezone(timedelta(hours=-14))


class NoOffset(tzinfo):
    """A tzinfo that does not know its offset: a datetime with it is naive in all but name."""

    def utcoffset(self, dt: datetime | None) -> timedelta | None:
        return None

    def dst(self, dt: datetime | None) -> timedelta | None:
        return None

    def tzname(self, dt: datetime | None) -> str | None:
        return type(self).__name__


class ImpossibleOffset(NoOffset):
    """A tzinfo whose offset is more than a day: ``datetime`` itself refuses it."""

    def utcoffset(self, dt: datetime | None) -> timedelta | None:
        return timedelta(hours=30)


class BrokenOffset(NoOffset):
    """A tzinfo whose offset is not a timedelta at all."""

    def utcoffset(self, dt: datetime | None) -> timedelta | None:
        return "+01:00"  # type: ignore[return-value]


def entry_texts(memory: Memory, user_id: str) -> dict[str, str]:
    return {e.id: e.text for e in memory.get_all(user_id)}


def refuses(call: Callable[[], object], error: type[TiermemError] = TiermemError) -> str:
    """Run ``call``, check that it raises ``error`` (a TiermemError) and return the message."""
    with pytest.raises(TiermemError) as caught:
        call()
    assert isinstance(caught.value, error), repr(caught.value)
    return str(caught.value)


def test_lone_surrogates_are_refused_everywhere(seeded: Memory) -> None:
    before, texts = stored_state(seeded, "ana"), entry_texts(seeded, "ana")
    entry_id = next(iter(texts))
    calls: list[tuple[Callable[[], object], type[TiermemError]]] = [
        (lambda: seeded.add(SURROGATE, user_id="ana"), InvalidMessageError),
        (
            lambda: seeded.add([{"content": f"bees {SURROGATE}"}], user_id="ana"),
            InvalidMessageError,
        ),
        (lambda: seeded.search(SURROGATE, user_id="ana"), InvalidQueryError),
        (lambda: seeded.answer(SURROGATE, user_id="ana"), InvalidQueryError),
        (lambda: seeded.update(entry_id, SURROGATE, "ana"), InvalidQueryError),
        (lambda: seeded.get(SURROGATE, "ana"), InvalidMemoryIdError),
        (lambda: seeded.update(SURROGATE, "new text", "ana"), InvalidMemoryIdError),
        (lambda: seeded.delete(SURROGATE, "ana"), InvalidMemoryIdError),
        (lambda: seeded.history(SURROGATE, "ana"), InvalidMemoryIdError),
        (lambda: seeded.knowledge_history(SURROGATE), InvalidMemoryIdError),
        (lambda: seeded.add("hello", user_id=SURROGATE), InvalidUserIdError),
        (lambda: seeded.add("hello", user_id="ana", session_id=SURROGATE), InvalidSessionIdError),
    ]
    for call, error in calls:
        assert "surrogate" in refuses(call, error)
    assert stored_state(seeded, "ana") == before
    assert entry_texts(seeded, "ana") == texts


def test_an_invalid_memory_id_is_still_a_memory_not_found(seeded: Memory) -> None:
    with pytest.raises(MemoryNotFoundError) as caught:
        seeded.get(SURROGATE, "ana")
    assert isinstance(caught.value, InvalidInputError)
    assert caught.value.memory_id == SURROGATE


@pytest.mark.parametrize(
    "timestamp",
    [
        datetime(1, 1, 1, tzinfo=UTC_PLUS_14),
        datetime(9999, 12, 31, 23, 0, tzinfo=UTC_MINUS_14),
        "0001-01-01T00:00:00+14:00",
        "9999-12-31T23:59:59-14:00",
        datetime(2026, 1, 1, tzinfo=ImpossibleOffset()),
        datetime(2026, 1, 1, tzinfo=BrokenOffset()),
    ],
    ids=["min+14", "max-14", "iso-min+14", "iso-max-14", "offset-30h", "offset-str"],
)
def test_timestamps_with_no_utc_equivalent_are_refused(seeded: Memory, timestamp: object) -> None:
    before, texts = stored_state(seeded, "ana"), entry_texts(seeded, "ana")
    message = refuses(
        lambda: seeded.add([{"content": "I moved to Porto.", "timestamp": timestamp}], "ana"),
        InvalidMessageError,
    )
    assert "timestamp" in message
    assert stored_state(seeded, "ana") == before
    assert entry_texts(seeded, "ana") == texts


def test_timestamps_at_the_ends_of_the_utc_range_are_kept(seeded: Memory) -> None:
    earliest, latest = datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC)
    result = seeded.add(
        [
            {"content": "The oldest thing I own is a coin.", "timestamp": earliest},
            {"content": "The newest thing I own is a phone.", "timestamp": latest.isoformat()},
        ],
        user_id="ana",
    )
    assert [t.timestamp for t in result.turns] == [earliest, latest]
    window = SearchFilters(since=earliest, until=latest)
    assert len(seeded.get_all("ana", window)) == len(seeded.get_all("ana"))
    assert seeded.search("coin", "ana", filters=window)


@pytest.mark.parametrize(
    "bound",
    [
        datetime(1, 1, 1, tzinfo=UTC_PLUS_14),
        datetime(9999, 12, 31, 23, 0, tzinfo=UTC_MINUS_14),
        datetime(2026, 1, 1, tzinfo=NoOffset()),
        datetime(2026, 1, 1, tzinfo=ImpossibleOffset()),
        datetime(2026, 1, 1, tzinfo=BrokenOffset()),
        "2026-01-01T00:00:00+00:00",
    ],
    ids=["min+14", "max-14", "no-offset", "offset-30h", "offset-str", "string"],
)
@pytest.mark.parametrize("side", ["since", "until"])
def test_filter_bounds_without_a_utc_instant_are_refused(
    seeded: Memory, bound: object, side: str
) -> None:
    before, texts = stored_state(seeded, "ana"), entry_texts(seeded, "ana")
    other = {"until": T0 + timedelta(days=1)} if side == "since" else {"since": T0}
    filters = SearchFilters(**{side: bound, **other})  # type: ignore[arg-type]
    for call in (
        lambda: seeded.search("bees", "ana", filters=filters),
        lambda: seeded.answer("bees", "ana", filters=filters),
        lambda: seeded.get_all("ana", filters),
    ):
        assert side in refuses(call, InvalidFilterError)
    assert stored_state(seeded, "ana") == before
    assert entry_texts(seeded, "ana") == texts


@pytest.mark.parametrize(
    "kinds", [None, 5, "fact", MemoryKind.FACT, (5,), ([],), b"fact"], ids=repr
)
def test_kinds_must_be_a_collection_of_known_kinds(seeded: Memory, kinds: object) -> None:
    filters = SearchFilters(kinds=kinds)  # type: ignore[arg-type]
    assert "kinds" in refuses(
        lambda: seeded.search("bees", "ana", filters=filters), InvalidFilterError
    )
    assert "kinds" in refuses(lambda: seeded.get_all("ana", filters), InvalidFilterError)


def test_kinds_may_be_any_collection_of_kind_names(seeded: Memory) -> None:
    as_list = seeded.get_all("ana", SearchFilters(kinds=["turn"]))  # type: ignore[arg-type]
    as_set = seeded.get_all("ana", SearchFilters(kinds=frozenset({MemoryKind.TURN})))  # type: ignore[arg-type]
    assert as_list == as_set == seeded.get_all("ana", SearchFilters(kinds=(MemoryKind.TURN,)))
    assert as_list


@pytest.mark.parametrize("flag", ["yes", "", 1, 0, None])
def test_include_superseded_must_be_a_bool(seeded: Memory, flag: object) -> None:
    filters = SearchFilters(include_superseded=flag)  # type: ignore[arg-type]
    message = refuses(lambda: seeded.search("bees", "ana", filters=filters), InvalidFilterError)
    assert "include_superseded" in message
    refuses(lambda: seeded.get_all("ana", filters), InvalidFilterError)


HUGE = "x" * 10_000_000


def test_error_messages_do_not_repeat_huge_input(seeded: Memory) -> None:
    before = stored_state(seeded, "ana")
    calls: list[Callable[[], object]] = [
        lambda: seeded.add("hello", user_id=HUGE),
        lambda: seeded.add("hello", user_id="ana", session_id=HUGE),
        lambda: seeded.get(HUGE, "ana"),
        lambda: seeded.update(HUGE, "new text", "ana"),
        lambda: seeded.delete(HUGE, "ana"),
        lambda: seeded.history(HUGE, "ana"),
        lambda: seeded.knowledge_history(HUGE),
        lambda: seeded.add([{"role": HUGE, "content": "hi"}], user_id="ana"),
        lambda: seeded.add([{"speaker": HUGE, "content": "hi"}], user_id="ana"),
        lambda: seeded.add([{"turn_id": HUGE, "content": "hi"}], user_id="ana"),
        lambda: seeded.add([{"timestamp": HUGE, "content": "hi"}], user_id="ana"),
        lambda: seeded.add([{"content": HUGE}], user_id="ana"),
        lambda: seeded.add([{"content": "hi", HUGE: 1}], user_id="ana"),
        lambda: seeded.add([{"content": "hi", **{f"k{i}": i for i in range(100_000)}}], "ana"),
        lambda: seeded.search(HUGE, "ana"),
        lambda: seeded.search("bees", "ana", k=[0] * 1_000_000),  # type: ignore[arg-type]
        lambda: seeded.search("bees", "ana", filters=SearchFilters(kinds=(HUGE,))),  # type: ignore[arg-type]
        lambda: seeded.search("bees", "ana", filters=SearchFilters(session_id=HUGE)),
    ]
    for call in calls:
        message = refuses(call)
        assert len(message) < 300, message[:400]
    assert "10000000 characters" in refuses(calls[0])
    assert stored_state(seeded, "ana") == before


def test_update_and_add_refuse_texts_over_their_limits(seeded: Memory) -> None:
    entry_id = seeded.get_all("ana")[0].id
    longest = "bees " * (MAX_MEMORY_TEXT_CHARS // 5)
    assert seeded.update(entry_id, longest, "ana").text == longest.strip()
    assert seeded.get(entry_id, "ana").text == longest.strip()
    # a message may be a whole document, up to MAX_CONTENT_CHARS characters exactly
    document = ("hive " * (MAX_CONTENT_CHARS // 5 + 1))[: MAX_CONTENT_CHARS - 1] + "s"
    added = seeded.add([{"content": document}], user_id="ana")
    assert added.turns[0].content == document.strip()
    before = stored_state(seeded, "ana")
    refuses(lambda: seeded.add([{"content": document + "x"}], user_id="ana"), InvalidMessageError)
    refuses(lambda: seeded.update(entry_id, longest + "x", "ana"), InvalidQueryError)
    assert seeded.get(entry_id, "ana").text == longest.strip()
    assert stored_state(seeded, "ana") == before


INVISIBLE = ["\u200b", "\u200c\u200d", " \u2060 ", "\ufeff\n", "\u00ad\u180e\u2061", "\u3164"]


@pytest.mark.parametrize("text", INVISIBLE, ids=ascii)
def test_text_of_only_invisible_characters_is_blank(seeded: Memory, text: str) -> None:
    before, texts = stored_state(seeded, "ana"), entry_texts(seeded, "ana")
    entry_id = next(iter(texts))
    refuses(lambda: seeded.add(text, user_id="ana"), EmptyMessagesError)
    refuses(lambda: seeded.add([{"content": text}], user_id="ana"), EmptyMessagesError)
    refuses(lambda: seeded.search(text, "ana"), InvalidQueryError)
    refuses(lambda: seeded.update(entry_id, text, "ana"), InvalidQueryError)
    assert stored_state(seeded, "ana") == before
    assert entry_texts(seeded, "ana") == texts


def test_text_with_invisible_characters_and_words_is_kept(seeded: Memory) -> None:
    result = seeded.add("\u200bI keep wasps too.", user_id="ana")
    assert result.turns[0].content == "\u200bI keep wasps too."


@pytest.mark.parametrize("separator", ["\u2028", "\u2029"], ids=ascii)
def test_line_and_paragraph_separators_are_refused_in_ids(seeded: Memory, separator: str) -> None:
    before = stored_state(seeded, "ana")
    refuses(lambda: seeded.add("hello", user_id=f"a{separator}b"), InvalidUserIdError)
    refuses(lambda: seeded.forget_user(f"ana{separator}x"), InvalidUserIdError)
    refuses(lambda: seeded.add("hello", "ana", session_id=f"s{separator}1"), InvalidSessionIdError)
    refuses(lambda: seeded.working_memory("ana", f"s{separator}1"), InvalidSessionIdError)
    assert stored_state(seeded, "ana") == before


JOSE_NFC = unicodedata.normalize("NFC", "Jos\u00e9")
JOSE_NFD = unicodedata.normalize("NFD", "Jos\u00e9")


def test_user_ids_are_one_user_in_any_unicode_normal_form(memory: Memory) -> None:
    assert JOSE_NFC != JOSE_NFD
    memory.add("I play the cello.", user_id=JOSE_NFD)
    assert [e.user_id for e in memory.get_all(JOSE_NFC)] == [JOSE_NFC]
    assert memory.search("cello", JOSE_NFC)
    report = memory.forget_user(JOSE_NFC)
    assert (report.entries, report.turns) == (1, 1)
    assert memory.get_all(JOSE_NFD) == []
    assert memory.search("cello", JOSE_NFD) == []
    assert memory.working_memory(JOSE_NFD) == ()


def test_session_ids_are_one_session_in_any_unicode_normal_form(memory: Memory) -> None:
    memory.add("I play the cello.", user_id="ana", session_id=f"trip-{JOSE_NFD}")
    assert [t.session_id for t in memory.working_memory("ana", f"trip-{JOSE_NFC}")] == [
        f"trip-{JOSE_NFC}"
    ]
    only_this_session = SearchFilters(session_id=f"trip-{JOSE_NFD}")
    assert len(memory.get_all("ana", only_this_session)) == 1
