"""What ``add()`` does with the messages agents really send: empty ones (a tool call has
``content: None``) and long ones (a pasted document)."""

from __future__ import annotations

import json

import pytest
from tiermem import EmptyMessagesError, Memory, MemoryKind
from tiermem.roles.extract import CHUNK_WORDS
from tiermem.validation import MAX_CONTENT_CHARS

from tests.conftest import chat


def test_empty_messages_are_left_out_and_reported(memory: Memory) -> None:
    messages = chat(
        ("assistant", "placeholder"),
        ("user", "I moved to Porto in May."),
        ("assistant", "   "),
        ("assistant", "\u200b"),
        ("assistant", "How do you like it there?"),
    )
    messages[0]["content"] = None  # an OpenAI tool-call message
    result = memory.add(messages, "ana")
    assert result.empty_messages == (0, 2, 3)
    assert [t.content for t in result.turns] == [
        "I moved to Porto in May.",
        "How do you like it there?",
    ]
    placed = memory.components.journal.placed_turns("ana", [t.turn_id for t in result.turns])
    assert [(t.content, place) for t, place in placed] == [
        (t.content, i) for i, t in enumerate(result.turns)
    ]
    # the two turns with content still pair up: the empty ones between them are no turn
    assert any(e.kind is MemoryKind.EXCHANGE for e in result.entries)


def test_a_call_with_nothing_to_say_is_refused_and_stores_nothing(memory: Memory) -> None:
    with pytest.raises(EmptyMessagesError):
        memory.add([{"role": "assistant", "content": None}, {"content": " "}], "ana")
    assert memory.get_all("ana") == []


_FILLER = ("the", "plan", "was", "to", "walk", "along", "the", "river", "and", "then", "home")


def _document(words: int) -> str:
    return " ".join(_FILLER[i % len(_FILLER)] for i in range(words - 1)) + " zeppelin"


def test_a_long_message_is_kept_whole_and_indexed_in_pieces(memory: Memory) -> None:
    text = _document(CHUNK_WORDS * 3 + 7)
    assert len(text) < MAX_CONTENT_CHARS
    result = memory.add(chat(("user", text)), "ana")
    (turn,) = result.turns
    assert memory.components.journal.turns("ana", [turn.turn_id])[turn.turn_id].content == text
    pieces = [e for e in result.entries if e.kind is MemoryKind.TURN]
    assert len(pieces) == 4
    assert all(e.source_turn_ids == (turn.turn_id,) for e in pieces)
    assert all(len(e.text.split()) <= CHUNK_WORDS + 1 for e in pieces)  # "Ana:" + words
    assert " ".join(e.text.removeprefix("Ana: ") for e in pieces) == text
    assert len({e.id for e in pieces}) == 4
    # The word at the end is found, in its piece, which points at the whole turn.
    (hit,) = memory.search("zeppelin", "ana", k=1)
    assert hit.entry.text.endswith("zeppelin")
    assert hit.source_turn_ids == (turn.turn_id,)


def test_a_turn_too_long_for_the_budget_delivers_the_piece_that_matched(memory: Memory) -> None:
    memory.add(chat(("user", _document(CHUNK_WORDS * 8))), "ana")
    whole = memory.context("zeppelin", "ana", budget_tokens=10_000)
    assert whole.turn_ids  # the whole turn fits: it is delivered, and no piece
    assert not whole.notes
    small = memory.context("zeppelin", "ana", budget_tokens=300)
    assert small.turn_ids == ()
    assert small.tokens <= 300
    # the best piece first, then what else fits; each piece's hit counts as delivered
    assert small.notes[0].endswith("zeppelin")
    assert len(small.hits) == len(small.notes)


def test_a_message_over_the_limit_is_refused_and_stores_nothing(memory: Memory) -> None:
    memory.add(chat(("user", "I keep bees.")), "ana")
    with pytest.raises(Exception, match="exceeds"):
        memory.add(chat(("user", "x" * (MAX_CONTENT_CHARS + 1))), "ana")
    assert [e.text for e in memory.get_all("ana")] == ["Ana: I keep bees."]


def test_a_long_message_without_spaces_is_indexed_in_pieces_too(memory: Memory) -> None:
    # A pasted config or log line (minified JSON, base64, a URL list) is one "word".
    settings = {f"setting_{i}": f"value_{i}" for i in range(6000)}
    settings["wifi_password"] = "zebracorn42"
    text = json.dumps(settings, separators=(",", ":"))
    assert len(text) < MAX_CONTENT_CHARS
    result = memory.add(
        chat(
            ("user", "Here is the router config, what is the wifi password?"), ("assistant", text)
        ),
        "ana",
    )
    exchange = next(e for e in result.entries if e.kind is MemoryKind.EXCHANGE)
    # each side of an exchange is capped (60 words): not 160,000 characters of one word
    assert len(exchange.text) < 10_000
    # the piece that holds the password can be delivered in a budget the service allows
    ctx = memory.context("wifi_password zebracorn42", "ana", budget_tokens=4_000)
    assert "zebracorn42" in ctx.text


def test_an_openai_tool_call_message_is_left_out(memory: Memory) -> None:
    messages = chat(
        ("user", "What is the weather in Porto?"),
        ("assistant", "placeholder"),
        ("assistant", "It is sunny in Porto, 24 degrees."),
    )
    # what an OpenAI chat completion returns for a tool call, as agents pass it on
    messages[1]["content"] = None
    messages[1]["tool_calls"] = [
        {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
    ]
    result = memory.add(messages, "ana")
    assert result.empty_messages == (1,)
    assert len(result.turns) == 2
