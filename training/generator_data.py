"""The answer generator's training set: what ``answer()`` hands its model, and the answer.

For each conversation of a split, the conversation is ingested into a model-free
``tiermem.Memory`` exactly as ``tiermem bench locomo`` ingests it
(:class:`tiermem.bench.systems.Tiermem`), and each question is asked through ``answer()``
with a generator that records what it is handed (:class:`ContextRecorder`): the context at
``generator.max_memories`` hits within ``delivery.answer_budget_tokens``, with the later
statements ``answer()`` offers. The prompt is rendered as the model generator serves it
(:func:`tiermem.slm.roles.generator.generator_input`, then
:func:`tiermem.slm.prompts.generator.build_messages`), and the target is the schema's JSON:

- a question with evidence whose context holds an evidence turn (for LongMemEval's
  ``knowledge-update`` questions, the last one: the newest statement): the data set's answer.
  One whose context holds none is left out: its answer is not in what the model reads, and
  teaching it would teach invention;
- an adversarial question (LoCoMo's category 5: it asks about what was never said, most
  often something the *other* speaker did): ``NOTHING_IN_MEMORY``, only with
  ``adversarial_refusals``. Off by default: their contexts are about the question's subject,
  and a LoRA taught them (312 of 1,635 examples) refused a third of LoCoMo's answerable test
  questions and 23 % of ``bench updates``' (docs/decisions.md, "Generator");
- a question whose context is empty (``answer()`` refuses it without asking the model): no
  example, as no call is made;
- LongMemEval's ``single-session-preference`` questions: none, as their "answer" describes
  the response a user would like ("the user would prefer suggestions that..."), not an answer.

The update scenarios of users the benchmark never has (:data:`UPDATE_FIRST_USER` on, another
seed than ``bench updates``' 7), of :data:`GENERATOR_FAMILIES` only (``bench updates``' other
families stay unseen), add what LoCoMo seldom asks: the current value of a changed fact,
answered ``"<new>; it was <old> before."`` when the context holds the old statement too (the
form the prompt asks for), the value before the change, a fact only a look-alike touched, a
corrected plan, and questions about facts the user never mentioned (``NOTHING_IN_MEMORY``).

Splits are the fixed ones (:data:`tiermem.training.dataset.SPLITS`); the scenarios join the
train split only.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tiermem.bench.datasets import load_dataset
from tiermem.bench.datasets.conversation import ADVERSARIAL, Conversation, Question
from tiermem.bench.embed_cache import CachedEmbedder
from tiermem.bench.systems import Tiermem
from tiermem.bench.update_scenarios import FAMILIES, Scenario, scenarios
from tiermem.config import EmbedderConfig, TiermemConfig
from tiermem.context import DeliveredContext
from tiermem.embedding import Embedder, build_embedder
from tiermem.generator import NOTHING_IN_MEMORY
from tiermem.slm.prompts import generator as prompt
from tiermem.slm.roles.generator import generator_input
from tiermem.training import TrainingInputError
from tiermem.training.dataset import SPLITS, split_samples
from tiermem.training.role_example import RoleExample, RoleMeta
from tiermem.training.roles import drop_leaks
from tiermem.training.writer_data import UPDATE_FIRST_USER, UPDATE_SEED, WRITER_FAMILIES
from tiermem.types import Turn

GENERATOR_FAMILIES = WRITER_FAMILIES  # the scenario families it learns; the rest stay unseen
GENERATOR_UPDATE_USERS = 96
NO_ANSWER_TYPES = ("single-session-preference",)  # question types whose answer is a rubric
UPDATE_TYPE = "knowledge-update"  # LongMemEval's: evidence is the old statement, then the new
CORRECTION = "correction"


class ContextRecorder:
    """A generator that keeps what ``answer()`` hands it and answers nothing."""

    name = "context-recorder"

    def __init__(self) -> None:
        self.last: DeliveredContext | None = None

    def generate(self, query: str, stm: Sequence[Turn], context: DeliveredContext) -> str:
        self.last = context
        return ""


@dataclass(frozen=True, slots=True)
class GeneratorDataConfig:
    embedder: EmbedderConfig = field(default_factory=EmbedderConfig)
    embed_cache: Path | None = None
    update_users: int = GENERATOR_UPDATE_USERS
    adversarial_refusals: bool = False  # teach LoCoMo's adversarial questions as refusals


@dataclass
class GeneratorDataStats:
    conversations: int = 0
    questions: int = 0
    examples: int = 0
    refusals: int = 0  # examples whose target is NOTHING_IN_MEMORY
    adversarial_left_out: int = 0  # without ``adversarial_refusals``
    no_evidence: int = 0  # answerable questions left out: no evidence turn in the context
    leaks_dropped: int = 0
    update_examples: int = 0


def _example(ctx: DeliveredContext, question: str, answer: str, meta: RoleMeta) -> RoleExample:
    messages = prompt.build_messages(generator_input(question, (), ctx))
    target = json.dumps({"answer": answer}, ensure_ascii=False)
    prompt.GeneratorOutput.model_validate_json(target)  # the schema it serves with
    return RoleExample(tuple(messages), target, meta)


def asked(
    sample: Conversation,
    config: GeneratorDataConfig,
    state: Path,
    embedder: Embedder | None,
    questions: Sequence[str],
) -> Iterator[DeliveredContext | None]:
    """``sample`` ingested model-free; for each question, the context ``answer()`` hands its
    generator (``None``: empty, refused without a call)."""
    recorder = ContextRecorder()
    system = Tiermem(
        TiermemConfig(embedder=config.embedder), state, 10, embedder, generator=recorder
    )
    try:
        system.build(sample)
        memory = system.memory
        assert memory is not None
        for question in questions:
            recorder.last = None
            memory.answer(question, sample.sample_id)
            ctx = recorder.last
            yield ctx if ctx is not None and ctx.text else None
    finally:
        system.close()


def in_scope(question: Question) -> bool:
    """Adversarial, or with evidence and an answer, and not of :data:`NO_ANSWER_TYPES`: the
    questions ``bench generator`` asks, and the set teaches (adversarial ones only with
    ``adversarial_refusals``)."""
    if question.question_type in NO_ANSWER_TYPES:
        return False
    return question.category == ADVERSARIAL or bool(question.evidence and question.answer.strip())


def conversation_examples(
    position: int,
    sample: Conversation,
    split: str,
    config: GeneratorDataConfig,
    state: Path,
    embedder: Embedder | None,
    stats: GeneratorDataStats,
) -> list[RoleExample]:
    """The examples of one data-set conversation (see the module's rules)."""
    out = []
    questions = list(sample.questions)
    contexts = asked(sample, config, state, embedder, [q.question for q in questions])
    for index, (question, ctx) in enumerate(zip(questions, contexts, strict=True)):
        stats.questions += 1
        if ctx is None or not in_scope(question):
            continue
        adversarial = question.category == ADVERSARIAL
        if adversarial and not config.adversarial_refusals:
            stats.adversarial_left_out += 1
            continue
        held = set(ctx.source_turns)
        # a changed fact's answer is its newest statement: that one must be there
        needed = (
            question.evidence[-1:] if question.question_type == UPDATE_TYPE else question.evidence
        )
        if not adversarial and not set(needed) & held:
            stats.no_evidence += 1
            continue
        answer = NOTHING_IN_MEMORY if adversarial else question.answer.strip()
        meta = RoleMeta(
            "generator", split, sample.sample_id, position, index, question.category,
            tuple(question.evidence), prompt.VERSION, question.question_type,
        )  # fmt: skip
        out.append(_example(ctx, question.question, answer, meta))
    return out


def _family_of(scenario: Scenario) -> dict[str, str]:
    """Each statement's family by turn id (``correction`` for the corrected plan)."""
    return {f.turn_id: f.family for f in scenario.facts}


def scenario_questions(scenario: Scenario) -> list[tuple[Question, str]]:
    """The scenario's questions about :data:`GENERATOR_FAMILIES` (and its correction), each
    with the answer taught when the context holds all of its evidence, plus questions about
    families the user never mentioned, answered ``NOTHING_IN_MEMORY``."""
    family = _family_of(scenario)
    conv = scenario.conversation
    before = {q.evidence: q.answer for q in conv.questions if q.group == "before"}
    out = []
    for q in conv.questions:
        families = {family.get(turn, "") for turn in q.evidence}
        if not families <= {*GENERATOR_FAMILIES, CORRECTION}:
            continue
        answer = q.answer
        old = before.get(q.evidence[:1]) if q.group == "update" else None
        if old is not None:
            answer = f"{q.answer}; it was {old} before."
        out.append((q, answer))
    said = " ".join(t.text for s in conv.sessions for t in s.turns)
    for f in FAMILIES:
        if f.name in GENERATOR_FAMILIES and not any(v in said for v in f.values):
            out.append((Question(f.current, NOTHING_IN_MEMORY, (), ADVERSARIAL, "absent"), ""))
    return out


def update_examples(
    config: GeneratorDataConfig, embedder: Embedder | None, stats: GeneratorDataStats
) -> list[RoleExample]:
    """The scenario questions' examples (train split only; see the module)."""
    out = []
    made = scenarios(UPDATE_SEED, config.update_users, UPDATE_FIRST_USER)
    for position, scenario in enumerate(made):
        conv = scenario.conversation
        pairs = scenario_questions(scenario)
        with tempfile.TemporaryDirectory(prefix="tiermem-dataset-") as state:
            asks = [q.question for q, _ in pairs]
            contexts = list(asked(conv, config, Path(state), embedder, asks))
        for index, ((q, answer), ctx) in enumerate(zip(pairs, contexts, strict=True)):
            stats.questions += 1
            if ctx is None:
                continue
            if q.evidence and not set(q.evidence) <= set(ctx.source_turns):
                # the old value alone, or neither: what to answer is not all there
                if not set(q.evidence[-1:]) & set(ctx.source_turns):
                    stats.no_evidence += 1
                    continue
                answer = q.answer  # the newest statement is there, the old one not
            meta = RoleMeta(
                "generator", "train", conv.sample_id, position, index, q.category,
                tuple(q.evidence), prompt.VERSION, q.group,
            )  # fmt: skip
            out.append(_example(ctx, q.question, answer or NOTHING_IN_MEMORY, meta))
    return out


def write_generator_dataset(
    files: Sequence[Path],
    split: str,
    out: Path,
    config: GeneratorDataConfig,
    on_conversation: Callable[[str], None] | None = None,
) -> GeneratorDataStats:
    """The generator's examples of ``split`` of each file (each split by its own positions),
    held-out leaks dropped and the update scenarios added when the split is train."""
    if split not in SPLITS:
        raise TrainingInputError(f"--split takes one of {', '.join(SPLITS)}, got {split!r}")
    stats = GeneratorDataStats()
    examples: list[RoleExample] = []
    cache = config.embed_cache
    embedder = CachedEmbedder(build_embedder(config.embedder), cache) if cache else None
    try:
        for path in files:
            samples, _quirks = load_dataset(path)
            found: list[RoleExample] = []
            for position, sample in split_samples(samples, split):
                if on_conversation is not None:
                    on_conversation(sample.sample_id)
                stats.conversations += 1
                with tempfile.TemporaryDirectory(prefix="tiermem-dataset-") as state:
                    found += conversation_examples(
                        position, sample, split, config, Path(state), embedder, stats
                    )
            if split == "train":
                held = [s for i, s in enumerate(samples) if i % 10 not in SPLITS["train"]]
                found, leaks = drop_leaks(found, held)
                stats.leaks_dropped += leaks
            examples += found
        if split == "train" and examples:
            if on_conversation is not None:
                on_conversation("update scenarios")
            updates = update_examples(config, embedder, stats)
            stats.update_examples = len(updates)
            examples += updates
    finally:
        if embedder is not None:
            embedder.close()
    if not examples:
        raise TrainingInputError(f"no generator example in the {split} split of the files given")
    stats.examples = len(examples)
    stats.refusals = sum(json.loads(e.target)["answer"] == NOTHING_IN_MEMORY for e in examples)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(e.to_json() + "\n" for e in examples), encoding="utf-8")
    return stats


__all__ = [
    "GENERATOR_FAMILIES",
    "ContextRecorder",
    "GeneratorDataConfig",
    "GeneratorDataStats",
    "in_scope",
    "scenario_questions",
    "write_generator_dataset",
]
