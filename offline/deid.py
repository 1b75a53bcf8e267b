"""Rule-based de-identification: the first and last layer around the consolidation model.

Before the model sees a memory, identifiers are replaced by marks (``[PERSON]``, ``[EMAIL]``,
...). After it answers, the same rules run over its output: a unit that still contains an
identifier is dropped (and counted); marks the model copied are turned into neutral words.

What counts as an identifier: the names known to the memory space (the speakers of its
turns), every user id, emails, phone numbers, street addresses, @handles, and URLs that carry
a path or query (a bare domain such as ``github.com`` is kept).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
_URL = re.compile(r"\b(?:https?://|www\.)[^\s<>\"']+|\b[\w-]+(?:\.[\w-]+)+/[^\s<>\"']+", re.I)
_PHONE = re.compile(r"(?<![\w.])\+?\(?\d[\d ()./-]{5,}\d(?![\w])")
_DATE = re.compile(r"^\d{4}[-/.]\d{1,2}[-/.]\d{1,2}$|^\d{1,2}[-/.]\d{1,2}[-/.]\d{2,4}$")
_STREET = (
    r"(?:street|st|avenue|ave|road|rd|lane|ln|boulevard|blvd|drive|dr|way|court|ct|place|pl|"
    r"terrace|square|sq|rua|calle|strasse|straße)"
)
_ADDRESS = re.compile(
    rf"\b\d{{1,5}}[a-z]?,?\s+(?:[A-Z][\w'-]*\.?\s+){{1,4}}{_STREET}\b\.?", re.IGNORECASE
)
# Street-type-first forms: "7 Rua das Flores", "Calle Mayor 12", "rue de la Paix".
_ADDRESS_PREFIX = re.compile(
    r"(?:\b\d{1,5},?\s+)?\b(?i:rua|rue|calle|avenida|via|viale|piazza|praça|largo|travessa)"
    r"\s+(?:(?i:d[aoe]s?|de la|del|di|della)\s+)?[A-Z][\w'-]+(?:\s+[A-Z][\w'-]+)*"
    r"(?:,?\s+\d{1,5}\b)?"
)
_HANDLE = re.compile(r"(?<![\w.])@[A-Za-z_][\w.]{1,30}")

MARKS = {
    "person": "[PERSON]",
    "user_id": "[USER]",
    "email": "[EMAIL]",
    "phone": "[PHONE]",
    "address": "[ADDRESS]",
    "url": "[URL]",
    "handle": "[HANDLE]",
}
NEUTRAL = {
    "[PERSON]": "a person",
    "[USER]": "a user",
    "[EMAIL]": "an email address",
    "[PHONE]": "a phone number",
    "[ADDRESS]": "an address",
    "[URL]": "a link",
    "[HANDLE]": "an account",
}
# Speaker labels that name a role, not a person.
GENERIC_SPEAKERS = frozenset({"user", "assistant", "system", "bot", "ai", "me", "you"})


def _is_phone(candidate: str) -> bool:
    digits = sum(ch.isdigit() for ch in candidate)
    return digits >= 7 and not _DATE.match(candidate.strip())


@dataclass(frozen=True, slots=True)
class Scrubbed:
    text: str
    found: Counter[str] = field(default_factory=Counter)


class Deidentifier:
    """The rules for one memory space: its known names and user ids, and the fixed patterns.

    >>> d = Deidentifier(names=["Caroline"], user_ids=["u-42"])
    >>> d.scrub("Caroline (u-42) wrote to caro@example.com from 555-201-3344").text
    '[PERSON] ([USER]) wrote to [EMAIL] from [PHONE]'
    >>> d.identifiers("pottery is calming")
    []

    A user id scoped by ``tiermem serve`` (tenant ``acme``'s ``ana`` is ``acme:ana``) is
    scrubbed as the text says it too:

    >>> Deidentifier(user_ids=["acme:ana"]).scrub("Ana bakes; acme:ana logged it").text
    '[USER] bakes; [USER] logged it'
    """

    def __init__(self, names: Iterable[str] = (), user_ids: Iterable[str] = ()) -> None:
        self._names = _alternation(
            n for n in names if n.strip().lower() not in GENERIC_SPEAKERS and len(n.strip()) > 1
        )
        self._user_ids = _alternation(_id_forms(user_ids))

    def _rules(self) -> list[tuple[str, re.Pattern[str]]]:
        rules = [
            ("email", _EMAIL),
            ("url", _URL),
            ("address", _ADDRESS),
            ("address", _ADDRESS_PREFIX),
            ("handle", _HANDLE),
        ]
        if self._user_ids is not None:
            rules.insert(0, ("user_id", self._user_ids))
        if self._names is not None:
            rules.append(("person", self._names))
        rules.append(("phone", _PHONE))
        return rules

    def scrub(self, text: str) -> Scrubbed:
        """``text`` with every identifier replaced by its mark, and what was found."""
        found: Counter[str] = Counter()
        for kind, pattern in self._rules():

            def sub(m: re.Match[str], kind: str = kind) -> str:
                if kind == "phone" and not _is_phone(m.group(0)):
                    return m.group(0)
                found[kind] += 1
                return MARKS[kind]

            text = pattern.sub(sub, text)
        return Scrubbed(text, found)

    def identifiers(self, text: str) -> list[str]:
        """The kinds of identifier still present in ``text`` (marks do not count)."""
        return sorted(self.scrub(text).found)

    @staticmethod
    def neutralise(text: str) -> str:
        """Marks the model copied become neutral words."""
        for mark, word in NEUTRAL.items():
            text = text.replace(mark, word)
        return " ".join(text.split())


def _id_forms(user_ids: Iterable[str]) -> Iterator[str]:
    """Each user id, and the user's own part of a scoped one (after its last ``:``)."""
    for uid in user_ids:
        yield uid
        own = uid.rpartition(":")[2]
        if own != uid and len(own.strip()) > 1:
            yield own


def _alternation(words: Iterable[str]) -> re.Pattern[str] | None:
    unique = sorted({w.strip() for w in words if w and w.strip()}, key=len, reverse=True)
    if not unique:
        return None
    body = "|".join(re.escape(w) for w in unique)
    return re.compile(rf"(?<![\w]){body}(?![\w])", re.IGNORECASE)
