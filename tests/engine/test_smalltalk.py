"""The rule filter in front of the writer: what it drops, and what it must never drop."""

from __future__ import annotations

import pytest
from tiermem import Memory
from tiermem.smalltalk import small_talk_reason
from tiermem.types import Role, Turn

from tests.conftest import T0, chat


def _turn(content: str, role: Role = Role.USER) -> Turn:
    return Turn("t", "u", "s", role, "Ana", content, T0)


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("Hi!", "greeting"),
        ("Hi, how are you doing?", "greeting"),
        ("Good night!", "greeting"),
        ("Bye, talk to you later!", "greeting"),
        ("Thanks a lot!", "acknowledgement"),
        ("ok", "acknowledgement"),
        ("Thanks for the help!", "acknowledgement"),
        ("...", "empty"),
    ],
)
def test_small_talk_is_dropped(content: str, reason: str) -> None:
    assert small_talk_reason(_turn(content), None) == reason


@pytest.mark.parametrize(
    "content",
    [
        "Thanks, I moved to Porto",
        "Good morning! I got the job!",
        "Yes, my sister is a nurse.",
        "Hey, I adopted a cat called Tofu.",
        "No, I'm allergic to peanuts.",
        "OK 42",
    ],
)
def test_content_is_never_dropped(content: str) -> None:
    assert small_talk_reason(_turn(content), None) is None


@pytest.mark.parametrize(
    ("reply", "previous", "dropped"),
    [
        ("Evening runs noted.", "I switched my runs to the evenings after work.", True),
        ("Updated: TP1351 on 9 October now.", "I moved my flight TP1351 to 9 October.", True),
        ("Noted.", "I teach maths.", True),
        ("Which grade do you teach?", "I teach maths.", False),
        ("Understood: pescatarian, fish is fine.", "I started eating fish again.", False),
    ],
)
def test_assistant_restatements_are_dropped(reply: str, previous: str, dropped: bool) -> None:
    reason = small_talk_reason(_turn(reply, Role.ASSISTANT), _turn(previous))
    assert (reason is not None) is dropped


def test_a_user_repeating_themselves_is_kept() -> None:
    """Only assistant echoes are restatements; a user saying it again may be an update."""
    assert (
        small_talk_reason(
            _turn("I moved my flight to 9 October."), _turn("I moved my flight to 9 October.")
        )
        is None
    )


def test_model_free_path_stores_no_memory_for_small_talk(memory: Memory) -> None:
    """The default (no model) extractor applies the same rules: "Thanks!" is a turn in the
    journal, never an MTM entry."""
    result = memory.add(
        chat(
            ("user", "I moved to Porto in May."),
            ("assistant", "Porto, noted."),
            ("user", "Thanks!"),
            ("assistant", "You're welcome."),
        ),
        user_id="ana",
    )
    assert [e.text for e in result.entries] == ["Ana: I moved to Porto in May."]
    assert result.skipped_turn_ids == tuple(t.turn_id for t in result.turns[1:])
    assert [e.text for e in memory.get_all("ana")] == ["Ana: I moved to Porto in May."]
    journal = memory.components.journal.turns("ana", [t.turn_id for t in result.turns])
    assert len(journal) == 4  # every turn is still the record
    assert memory.search("thanks", "ana", k=5)[0].entry.text == "Ana: I moved to Porto in May."


def test_model_free_path_keeps_content_that_starts_with_thanks(memory: Memory) -> None:
    result = memory.add(
        chat(("user", "Thanks, and my new address is 12 Rua Augusta.")), user_id="ana"
    )
    assert [e.text for e in result.entries] == [
        "Ana: Thanks, and my new address is 12 Rua Augusta."
    ]
    assert result.skipped_turn_ids == ()


@pytest.mark.parametrize(
    "content",
    ["Я переехала в Порту в мае.", "我五月搬到了波尔图。", "Μετακόμισα στο Πόρτο τον Μάιο."],
)
def test_a_message_in_another_script_is_not_small_talk(memory: Memory, content: str) -> None:
    # Not only ASCII letters are words: "I moved to Porto in May" in Russian, Chinese, Greek.
    result = memory.add(chat(("user", content)), "ana")
    assert result.skipped_turn_ids == ()
    assert [e.text for e in result.entries] == [f"Ana: {content}"]
