"""The demo's conversations: two users over several weeks, with a changed preference, a plan
with details that later change, and facts a question can only find in the right user's
memory. Written for tiermem; no external data."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta


@dataclass(frozen=True, slots=True)
class DemoSession:
    session_id: str
    start: datetime
    turns: tuple[tuple[str, str], ...]  # (role, content)


@dataclass(frozen=True, slots=True)
class DemoQuestion:
    """A question and what its context must show: ``newest``, the statement that holds now
    (after ``older``, the one it changed, where that is delivered too); ``refused``: memory
    holds nothing about it."""

    text: str
    newest: str | None = None
    older: str | None = None
    refused: bool = False
    # what a written answer must say now (any one of them), and the stale value, if any, which
    # may only come before it ("it was 10 October, now 9 October")
    value: tuple[str, ...] = ()
    stale: str | None = None


@dataclass(frozen=True, slots=True)
class DemoUser:
    user_id: str
    name: str
    sessions: tuple[DemoSession, ...]
    questions: tuple[DemoQuestion, ...]


def _at(day: str, hour: int) -> datetime:
    return datetime.fromisoformat(day).replace(hour=hour, tzinfo=UTC)


MAYA = DemoUser(
    user_id="maya",
    name="Maya",
    sessions=(
        DemoSession(
            "maya-s1",
            _at("2026-08-04", 19),
            (
                ("user", "Hi! I'm Maya. I'm vegetarian, so please keep recipe ideas meat-free."),
                ("assistant", "Got it, Maya: vegetarian recipes only."),
                (
                    "user",
                    "I'm training for the Lisbon half-marathon on 11 October. "
                    "I run in the mornings before work.",
                ),
                ("assistant", "Great goal. Morning runs it is; we can plan your build-up."),
                ("user", "My sister Inês lives in Lisbon, she opened a bakery on Rua da Rosa."),
                ("assistant", "Lovely, you'll have someone to cheer for you at the race."),
            ),
        ),
        DemoSession(
            "maya-s2",
            _at("2026-08-19", 20),
            (
                (
                    "user",
                    "I booked the trip: TAP flight TP1351 from Amsterdam to Lisbon on "
                    "10 October, leaving at 07:25.",
                ),
                ("assistant", "Noted: TP1351 AMS to LIS, 10 October, 07:25."),
                (
                    "user",
                    "I'm staying six nights at the Casa Alfama guesthouse, room 4, "
                    "close to my sister's bakery.",
                ),
                ("assistant", "Six nights at Casa Alfama, room 4. Anything else to plan?"),
                ("user", "Thanks!"),
                ("assistant", "You're welcome."),
            ),
        ),
        DemoSession(
            "maya-s3",
            _at("2026-09-09", 18),
            (
                (
                    "user",
                    "Change of diet: I've started eating fish again. My doctor said I need "
                    "more protein for the training.",
                ),
                ("assistant", "Understood: pescatarian from now on, fish is fine in recipes."),
                (
                    "user",
                    "Also, it's getting dark early, so I switched my runs to the evenings "
                    "after work.",
                ),
                ("assistant", "Evening runs noted."),
            ),
        ),
        DemoSession(
            "maya-s4",
            _at("2026-09-30", 21),
            (
                (
                    "user",
                    "I moved my flight one day earlier to 9 October, same TP1351, because "
                    "race bib pickup closes on the 10th.",
                ),
                ("assistant", "Updated: TP1351 on 9 October now."),
                ("user", "I bought new running shoes for the race, Hoka Clifton 9 in blue."),
                ("assistant", "Nice choice. Break them in on a few evening runs first."),
            ),
        ),
    ),
    questions=(
        DemoQuestion(
            "What do I eat these days?",
            "started eating fish again",
            "vegetarian",
            value=("fish", "pescatarian"),
            stale="vegetarian",
        ),
        DemoQuestion(
            "When is my flight to Lisbon?",
            "flight one day earlier to 9 October",
            "on 10 October",
            value=("9 October",),
            stale="10 October",
        ),
        DemoQuestion("Where am I staying in Lisbon?", "Casa Alfama", value=("Casa Alfama",)),
        DemoQuestion("What does my sister do?", "opened a bakery", value=("bakery", "baker")),
        DemoQuestion(
            "When do I go running?",
            "switched my runs to the evenings",
            "in the mornings",
            value=("evening",),
            stale="morning",
        ),
    ),
)

LEO = DemoUser(
    user_id="leo",
    name="Leo",
    sessions=(
        DemoSession(
            "leo-s1",
            _at("2026-08-06", 9),
            (
                ("user", "I'm Leo, a nurse on night shifts at the children's hospital."),
                ("assistant", "Hi Leo! Night shifts must be tough."),
                ("user", "I'm learning Japanese for the JLPT N4 exam in December."),
                ("assistant", "Good luck with N4! Want a study plan?"),
                ("user", "Please remember I'm allergic to peanuts."),
                ("assistant", "Noted: peanut allergy."),
            ),
        ),
        DemoSession(
            "leo-s2",
            _at("2026-09-02", 10),
            (
                ("user", "Big news, I adopted a grey cat and named her Tofu."),
                ("assistant", "Welcome, Tofu!"),
                ("user", "We're moving to Utrecht in November, I found a flat near the canal."),
                ("assistant", "Exciting! Utrecht in November, noted."),
            ),
        ),
        DemoSession(
            "leo-s3",
            _at("2026-10-01", 8),
            (
                ("user", "Finally switched from night shifts to day shifts this week."),
                ("assistant", "That should help your sleep and your Japanese study."),
            ),
        ),
    ),
    questions=(
        DemoQuestion("What is my cat called?", "named her Tofu", value=("Tofu",)),
        DemoQuestion(
            "Do I still work nights?",
            "switched from night shifts to day shifts",
            "a nurse on night shifts",
            value=("day shift",),
            stale="night",
        ),
        DemoQuestion("Where am I staying in Lisbon?", refused=True),  # Maya's trip, not his
    ),
)

DEMO_USERS = (MAYA, LEO)


def session_messages(user: DemoUser, session: DemoSession) -> list[dict[str, object]]:
    """The session as ``add()`` messages, a minute apart, both speakers named."""
    return [
        {
            "role": role,
            "content": content,
            "speaker": user.name if role == "user" else "Assistant",
            "timestamp": session.start + timedelta(minutes=i),
        }
        for i, (role, content) in enumerate(session.turns)
    ]
