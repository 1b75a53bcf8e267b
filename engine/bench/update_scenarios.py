"""``tiermem bench updates``' conversations: users whose facts change over weeks of chats.

Written for tiermem, no dataset copied. Each user has twenty weekly sessions of
user/assistant chat, about 2,500 tokens. The first three state some facts (where they live,
their job, their diet, ...); the last ten change three of them (a move, a new job, a
rescheduled date), one in between is corrected in the same breath, and some messages look
like a change but are not: a friend's move, a "maybe one day". Small talk, from templates,
fills every session. Every question names its evidence by turn id
(``D<session>:<turn>``, as LoCoMo does), and the last of it is the statement the answer
needs now:

- ``update``: the current value; evidence is the old statement, then the new one;
- ``before``: the value before the change; evidence is the old statement;
- ``unchanged``: a fact that only a distractor seemed to change; evidence is its one
  statement.

With the conversations come, per user, the turns that state a change and the older turn each
makes stale (``Update``): the labels a writer's supersede decisions are scored against.

>>> convs, updates = update_scenarios(seed=7, users=2)
>>> [len(c.sessions) for c in convs], sorted({q.group for c in convs for q in c.questions})
([20, 20], ['before', 'unchanged', 'update'])
>>> [len(u) for u in updates.values()]  # a correction and three changes each
[4, 4]
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from tiermem.bench.datasets.conversation import Conversation, DialogueTurn, Question, Session

ASSISTANT = "Assistant"


@dataclass(frozen=True, slots=True)
class Family:
    """One kind of fact that changes: how it is first said, how it changes, how it is asked
    about, and what only looks like a change."""

    name: str
    values: tuple[str, ...]
    first: str  # {v}: the value
    change: tuple[str, ...]  # {old}, {new}: ways to say it, one picked per user
    current: str  # the question about the value now
    before: str  # the question about the value before the change
    distractor: str  # {v}: a value that is not the user's, or not yet
    echo: str = "Noted."  # the assistant's reply to the first statement ({v})


FAMILIES: tuple[Family, ...] = (
    Family(
        "home",
        ("Leeds", "Porto", "Ghent", "Malmö", "Tartu", "Bologna", "Cork", "Graz"),
        "I live in {v}, in a small flat near the station.",
        (
            "Big news: we moved! I live in {new} now, we left {old} last weekend.",
            "Finally got the keys to our new flat in {new}. Goodbye {old}!",
        ),
        "Which city do I live in?",
        "Which city did I live in before I moved?",
        "My friend Sam just moved to {v}, lucky him.",
        "{v} sounds lovely.",
    ),
    Family(
        "job",
        ("a pharmacist", "a bus driver", "a data analyst", "a primary teacher", "a baker"),
        "I work as {v} at a place in town.",
        (
            "I quit being {old}. Started my new job this week, I'm {new} now.",
            "First week as {new} done, so different from being {old}.",
        ),
        "What is my job?",
        "What was my job before the current one?",
        "My brother just started working as {v}.",
        "Working as {v} must keep you busy.",
    ),
    Family(
        "diet",
        ("vegetarian", "vegan", "pescatarian", "gluten-free"),
        "Heads up for recipe ideas: I'm {v}.",
        (
            "Diet update: I'm not {old} any more, I'm {new} since my last check-up.",
            "Dropped the {old} thing, my doctor put me on a {new} plan.",
        ),
        "What diet do I follow?",
        "What diet did I follow before?",
        "I might try going {v} some day, who knows.",
        "Got it, {v} recipes only.",
    ),
    Family(
        "dentist",
        ("3 March", "14 March", "22 March", "9 April", "17 April"),
        "My dentist appointment is on {v} at nine.",
        (
            "The dentist rang: my appointment moved from {old} to {new}, same time.",
            "Dentist's office called and pushed me from {old} to {new}.",
        ),
        "When is my dentist appointment?",
        "When was my dentist appointment first booked for?",
        "My sister's dentist appointment is on {v}.",
        "Dentist on {v}, noted.",
    ),
    Family(
        "partner",
        ("Alex", "Robin", "Jamie", "Noor", "Kai"),
        "I've been dating {v} for a few months now.",
        (
            "{old} and I broke up. I'm seeing {new} now, it's going well.",
            "Me and {old} split up. {new} and I have been going out since the party.",
        ),
        "Who am I dating?",
        "Who was I dating before?",
        "My cousin is dating someone called {v}.",
        "How nice, {v} sounds great.",
    ),
    Family(
        "coffee",
        ("a flat white", "an espresso", "an oat latte", "a cold brew", "a cappuccino"),
        "My go-to coffee order is {v}.",
        (
            "I've gone off {old}. These days I always order {new}.",
            "Switched to {new}, can't stand {old} anymore.",
        ),
        "What coffee do I order?",
        "What coffee did I order before?",
        "My colleague swears by {v}.",
        "Good choice.",
    ),
    Family(
        "team",
        ("payments", "search", "billing", "mobile", "platform"),
        "At work I'm on the {v} team.",
        (
            "I switched teams this month: I left {old} and joined the {new} team.",
            "Moved over to {new} this month, left {old} behind.",
        ),
        "Which team am I on at work?",
        "Which team was I on before?",
        "They might put me on the {v} team next year, nothing decided.",
        "The {v} team, noted.",
    ),
    Family(
        "car",
        ("Fiat Panda", "Toyota Yaris", "VW Golf", "Renault Zoe", "Skoda Fabia"),
        "I drive a {v}, old but reliable.",
        (
            "Sold the {old} at last! I drive a {new} now.",
            "Picked up my {new} today, said goodbye to the old {old}.",
        ),
        "What car do I drive?",
        "What car did I drive before?",
        "My neighbour just bought a {v}.",
        "A {v}, nice.",
    ),
)

CORRECTIONS: tuple[tuple[str, str, str, str], ...] = (
    # (statement, correction in the next message, question, answer): the later message holds
    (
        "The team offsite is on Tuesday.",
        "Sorry, I meant Thursday: the offsite is on Thursday, not Tuesday.",
        "What day is the team offsite?",
        "Thursday",
    ),
    (
        "My mum's birthday dinner is at 7.",
        "Wait, no, I got that wrong: the dinner is at 8, not 7.",
        "What time is my mum's birthday dinner?",
        "8",
    ),
    (
        "The plumber comes on Monday morning.",
        "Correction, the plumber comes Wednesday morning, not Monday.",
        "When does the plumber come?",
        "Wednesday morning",
    ),
)
# Small talk, made from templates so that no two users' weeks read alike; some of it names
# the words the facts use (a coffee with a friend, a visit from another city).
_TALK = (
    "Went to the {place} with {person} on {day}, it was {adj}.",
    "Cooked {food} for dinner tonight, {adj} if I say so myself.",
    "{person} lent me a book about {topic}.",
    "Grabbed a coffee with {person} before the {event}.",
    "My {relative} visited from {city} for the {event}.",
    "Thinking about taking an evening class in {topic}.",
    "Watched a documentary about {topic} last night, {adj}.",
    "It rained all {day} so I stayed in and cooked {food}.",
    "Booked tickets for the {event} in {month}.",
    "Ran into {person} at the {place}, we talked for ages.",
    "Work was {adj} today, the {event} ran late.",
    "My {relative} keeps sending me videos about {topic}.",
)
_SLOTS = {
    "place": ("market", "museum", "park", "cinema", "library", "beach", "climbing gym"),
    "person": ("Mira", "Tom", "Priya", "Lukas", "Zoe", "Omar", "Hana"),
    "day": ("Saturday", "Sunday", "Friday evening", "Wednesday"),
    "adj": ("lovely", "exhausting", "a bit boring", "great fun", "strange", "perfect"),
    "food": ("a curry", "lasagne", "a big salad", "soup", "tacos", "risotto"),
    "topic": ("volcanoes", "the Romans", "bees", "jazz", "space", "chess", "old maps"),
    "event": ("quiz night", "team meeting", "concert", "book club", "football match"),
    "relative": ("aunt", "cousin", "uncle", "grandma", "nephew"),
    "city": ("Lyon", "Krakow", "Seville", "Oslo", "Dublin", "Turin"),
    "month": ("May", "June", "July", "August"),
}
_REPLIES = (
    "Sounds fun!",
    "Oh, how was it?",
    "Nice.",
    "Enjoy it!",
    "Ha, I can imagine.",
    "That sounds like a good week.",
)


def _small_talk(rng: random.Random) -> tuple[str, str]:
    template = rng.choice(_TALK)
    slots = {k: rng.choice(v) for k, v in _SLOTS.items()}
    return template.format(**slots), rng.choice(_REPLIES)


SESSIONS = 20  # weekly: facts stated in the first three, changed in the last ten

NAMES = ("Ada", "Bruno", "Chloe", "Dev", "Elif", "Farid", "Greta", "Hugo", "Ines", "Jonas")


@dataclass(frozen=True, slots=True)
class Update:
    """A labelled change: the turn that states it, and the older turn it makes stale."""

    new_turn: str
    old_turn: str
    family: str


class _Builder:
    def __init__(self) -> None:
        self.sessions: list[list[DialogueTurn]] = []
        self.speaker = ""

    def session(self) -> None:
        self.sessions.append([])

    def say(self, text: str, reply: str) -> str:
        """A user message and the assistant's reply; the user's turn id."""
        turns = self.sessions[-1]
        d = len(self.sessions)
        turn_id = f"D{d}:{len(turns) + 1}"
        turns.append(DialogueTurn(turn_id, self.speaker, text))
        turns.append(DialogueTurn(f"D{d}:{len(turns) + 1}", ASSISTANT, reply))
        return turn_id


@dataclass(frozen=True, slots=True)
class Scenario:
    conversation: Conversation
    updates: list[Update]


def _scenario(user: int, rng: random.Random) -> Scenario:
    b = _Builder()
    b.speaker = f"{NAMES[user % len(NAMES)]}{user // len(NAMES) or ''}"
    families = rng.sample(FAMILIES, 4)
    changed, steady = families[:3], families[3]
    values = {f.name: rng.sample(f.values, 3) for f in families}  # old, new, distractor
    said: set[str] = set()
    first: dict[str, str] = {}
    questions: list[Question] = []
    updates: list[Update] = []

    def small_talk(n: int) -> None:
        for _ in range(n):
            line, reply = _small_talk(rng)
            while line in said:
                line, reply = _small_talk(rng)
            said.add(line)
            b.say(line, reply)

    # what happens in which session: facts first, a correction, distractors, then changes
    plan: dict[int, list[tuple[str, Family | None]]] = {i: [] for i in range(1, SESSIONS + 1)}
    for i, fam in enumerate(families):
        plan[1 + i % 3].append(("first", fam))
    plan[4].append(("correction", None))
    plan[rng.randint(5, 10)].append(("distractor", steady))
    for fam, session in zip(changed, rng.sample(range(11, SESSIONS + 1), 3), strict=True):
        plan[session].append(("change", fam))
    for session in range(1, SESSIONS + 1):
        b.session()
        small_talk(rng.randint(3, 5))
        for what, f in plan[session]:
            if what == "first" and f is not None:
                v = values[f.name][0]
                first[f.name] = b.say(f.first.format(v=v), f.echo.format(v=v))
            elif what == "correction":
                statement, correction, question, answer = CORRECTIONS[user % len(CORRECTIONS)]
                wrong = b.say(statement, "Noted.")
                right = b.say(correction, "No problem, corrected.")
                updates.append(Update(right, wrong, "correction"))
                evidence = (wrong, right)
                questions.append(Question(question, answer, evidence, "single-hop", "update"))
            elif what == "distractor" and f is not None:
                v = values[f.name][2]
                b.say(f.distractor.format(v=v), "Oh, interesting.")
            elif f is not None:  # a change, and a look-alike about someone else
                old, new, other = values[f.name]
                change = rng.choice(f.change).format(old=old, new=new)
                turn = b.say(change, "Thanks for the update!")
                updates.append(Update(turn, first[f.name], f.name))
                small_talk(1)
                b.say(f.distractor.format(v=other), "Ha, small world.")
            small_talk(rng.randint(0, 2))
    for u in updates[1:]:
        family = next(x for x in FAMILIES if x.name == u.family)
        old, new, _ = values[family.name]
        questions.append(
            Question(family.current, new, (u.old_turn, u.new_turn), "single-hop", "update")
        )
        questions.append(Question(family.before, old, (u.old_turn,), "single-hop", "before"))
    questions.append(
        Question(
            steady.current,
            values[steady.name][0],
            (first[steady.name],),
            "single-hop",
            "unchanged",
        )
    )
    start = datetime(2026, 1, 5, 19, tzinfo=UTC) + timedelta(days=user)
    sessions = tuple(
        Session(i + 1, start + timedelta(weeks=i), tuple(turns))
        for i, turns in enumerate(b.sessions)
    )
    conv = Conversation(f"updates-{user}", b.speaker, ASSISTANT, sessions, tuple(questions))
    return Scenario(conv, updates)


def scenarios(seed: int = 7, users: int = 24) -> list[Scenario]:
    """``users`` scenarios, the same for the same seed, each with its labelled changes. The
    user's number picks the name, the start date and the correction."""
    rng = random.Random(seed)
    return [_scenario(user, rng) for user in range(users)]


def update_scenarios(
    seed: int = 7, users: int = 24
) -> tuple[list[Conversation], dict[str, list[Update]]]:
    """``users`` scenarios, the same for the same seed; and each one's labelled changes."""
    made = scenarios(seed, users)
    return [s.conversation for s in made], {s.conversation.sample_id: s.updates for s in made}
