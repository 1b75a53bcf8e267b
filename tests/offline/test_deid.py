"""De-identification: rules before the model and over its output; nothing planted survives
anywhere in the saved graph."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tiermem.offline.deid import Deidentifier
from tiermem.slm.base import SLMRequest

from tests.conftest import T0, chat
from tests.offline.conftest import edge, memories_in, node, scripted, units

PLANTED = {
    "names": ["Caroline", "Melanie"],
    "user_ids": ["user-7f3a9", "mel_k_1988"],
    "emails": ["caroline.j@example.org", "mk+news@mail.example.com"],
    "phones": ["+1 (555) 010-2345", "555-867-5309"],
    "addresses": ["42 Baker Street", "7 Rua das Flores"],
    "urls": ["https://social.example.com/u/caroline_j?ref=7"],
}
EVERYTHING = [x for group in PLANTED.values() for x in group]

CORPUS_CAROLINE = [
    "I went to the LGBTQ support group, it was so powerful",
    "Email me at caroline.j@example.org or call +1 (555) 010-2345",
    "My new place is 42 Baker Street, come by!",
    "Found my old profile https://social.example.com/u/caroline_j?ref=7",
    "Melanie said pottery helps her relax",
]
CORPUS_MELANIE = [
    "Painting is how I unwind after work, Caroline",
    "My number changed, it's 555-867-5309; write mk+news@mail.example.com",
    "We moved to 7 Rua das Flores last spring",
]


@pytest.mark.parametrize(
    ("text", "kinds"),
    [
        ("Caroline's kids love it", ["person"]),
        ("write to caroline.j@example.org", ["email"]),
        ("call 555-867-5309 now", ["phone"]),
        ("on 2023-05-08 I paid 1500 dollars", []),
        ("I live at 42 Baker Street", ["address"]),
        ("see https://x.example.com/u/123 or example.com", ["url"]),
        ("ping @caro_j", ["handle"]),
        ("user-7f3a9 logged in", ["user_id"]),
        ("pottery is calming", []),
    ],
)
def test_rules_find_each_kind_of_identifier(text: str, kinds: list[str]) -> None:
    d = Deidentifier(names=["Caroline", "Assistant"], user_ids=["user-7f3a9"])
    assert d.identifiers(text) == kinds
    assert d.identifiers(d.scrub(text).text) == []


def test_generic_speaker_labels_are_not_names() -> None:
    d = Deidentifier(names=["user", "Assistant"])
    assert d.scrub("the user asked the assistant").text == "the user asked the assistant"


def test_nothing_planted_reaches_the_model_or_the_saved_graph(
    make_ltm_memory: Any, tmp_path: Path
) -> None:
    def leaky_model(request: SLMRequest) -> str:
        # A model that copies its input and adds identifiers it should not know about.
        shown = memories_in(request)
        return units(
            [node("support group", shown[0])]
            + [node(name) for name in PLANTED["names"]]
            + [node("contact", f"write to {PLANTED['emails'][0]}")]
            + [node("[PERSON]", "a mark the model copied")],
            [edge("support group", "RelatedTo", "Caroline"), edge("pottery", "Implies", "calm")],
        )

    memory = make_ltm_memory(leaky_model, chunk_size=4)
    memory.add(chat(*[("user", t) for t in CORPUS_CAROLINE], speaker="Caroline"), "user-7f3a9")
    memory.add(
        chat(*[("user", t) for t in CORPUS_MELANIE], start=T0, speaker="Melanie"), "mel_k_1988"
    )
    report = memory.consolidate_now()
    assert report.entries == len(CORPUS_CAROLINE) + len(CORPUS_MELANIE)

    prompts = "\n".join(m.content for r in scripted(memory).requests for m in r.messages)
    for secret in EVERYTHING:
        assert secret.lower() not in prompts.lower(), secret
    assert report.scrubbed_identifiers["person"] >= 3
    assert report.scrubbed_identifiers["email"] == 2
    assert report.dropped_identifiers["person"] >= 2
    assert report.dropped_identifiers["email"] >= 1

    memory.close()
    saved = b"".join(p.read_bytes() for p in (tmp_path / "ltm").rglob("*") if p.is_file())
    assert b"support group" in saved
    assert b"a person" in saved
    for secret in EVERYTHING:
        assert secret.lower().encode() not in saved.lower(), secret
