"""Next-token scoring over the wire: the ``ollama`` backend through ``/api/chat`` and the
``openai`` backend through ``/v1/chat/completions``, both against the Ollama-protocol test server,
which lists the top log-probabilities of its vocabulary as a server lists the top of its own;
and the pure rule that turns such a list into choice log-probabilities."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pytest
from tiermem import ManualClock, Memory
from tiermem.config import OllamaConfig, QdrantConfig, SLMConfig
from tiermem.errors import SLMOutputInvalid, SLMUnavailable
from tiermem.slm.base import ChatMessage, NextTokenScorer, ScoreRequest, TokenScores
from tiermem.slm.meter import Meter
from tiermem.slm.ollama_backend import OllamaBackend
from tiermem.slm.openai_backend import OpenAIBackend
from tiermem.slm.scoring import check_scores, choice_logprobs, score_task
from tiermem.slm.scripted import ScriptedBackend

from tests.conftest import T0, chat, config_for
from tests.fakes.ollama_server import serving
from tests.slm.conftest import SISTER_AND_DOG

TAG = "llama3.2:1b-instruct-q4_K_M"
VOCABULARY = (" Yes", "yes", " No", "maybe")
PROBABILITIES = {" Yes": 0.5, "yes": 0.2, " No": 0.25, "maybe": 0.05}
REQUEST = ScoreRequest("relevance", [ChatMessage("user", "Is it? Memory: it is")])


def _ollama(url: str) -> NextTokenScorer:
    return OllamaBackend(TAG, host=url)


def _openai(url: str) -> NextTokenScorer:
    return OpenAIBackend(TAG, base_url=f"{url}/v1", api_key=None)


CLIENTS: dict[str, tuple[Callable[[str], NextTokenScorer], str]] = {
    "ollama": (_ollama, "/api/chat"),
    "openai": (_openai, "/v1/chat/completions"),
}


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_scores_sum_the_spellings_of_each_choice(client: str) -> None:
    backend = ScriptedBackend()
    backend.score_with(PROBABILITIES)
    make, path = CLIENTS[client]
    with serving(backend, TAG, vocabulary=VOCABULARY) as server:
        scores = make(server.url).score_next_token(REQUEST)
        sent = server.requests[-1]
    assert sent["path"] == path
    assert sent["logprobs"] is True
    assert sent["top_logprobs"] == 20
    limit = sent["options"]["num_predict"] if client == "ollama" else sent["max_tokens"]
    assert limit == 1
    assert "format" not in sent
    assert "response_format" not in sent
    assert math.exp(scores.logprobs["yes"]) == pytest.approx(0.7)
    assert math.exp(scores.logprobs["no"]) == pytest.approx(0.25)
    assert scores.floored == ()
    assert scores.prompt_tokens == len(REQUEST.messages[0].content.split())


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_a_choice_outside_the_listed_top_gets_the_smallest_listed(client: str) -> None:
    backend = ScriptedBackend()
    backend.score_with({" Yes": 0.9, "maybe": 0.01})
    make, _ = CLIENTS[client]
    with serving(backend, TAG, vocabulary=(" Yes", "maybe")) as server:
        scores = make(server.url).score_next_token(REQUEST)
    assert scores.floored == ("no",)
    assert math.exp(scores.logprobs["no"]) == pytest.approx(0.01)


def test_openai_counts_a_cached_prefix_as_not_evaluated() -> None:
    backend = ScriptedBackend()
    backend.score_with(PROBABILITIES)
    with serving(backend, TAG, vocabulary=VOCABULARY, cached_tokens=3) as server:
        scores = _openai(server.url).score_next_token(REQUEST)
    assert scores.evaluated_tokens == scores.prompt_tokens - 3


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_a_server_error_is_unavailable(client: str) -> None:
    backend = ScriptedBackend()
    backend.score_with(SLMUnavailable("fake", "model crashed"))
    make, _ = CLIENTS[client]
    with serving(backend, TAG) as server, pytest.raises(SLMUnavailable):
        make(server.url).score_next_token(REQUEST)


def test_the_read_path_scores_over_the_ollama_protocol(tmp_path: Path) -> None:
    backend = ScriptedBackend()
    backend.score_with(
        lambda r: {"yes": 0.9, "no": 0.1} if "bakery" in r.messages[-1].content else {"no": 1.0}
    )  # listed alone, "no" is the floor "yes" gets: p = 0.5 for the dog, an upper bound
    backend.respond_with({"queries": [], "since": "", "until": "", "kinds": []})
    with serving(backend, TAG) as server:
        slm = SLMConfig(
            backend=OllamaConfig(model=TAG, host=server.url),
            writer={"enabled": False},  # type: ignore[arg-type]
            selector_mode="pointwise",
            pointwise_weight=1.0,
        )
        config = config_for("memory", tmp_path).model_copy(
            update={"slm": slm, "mtm": QdrantConfig(location="memory")}
        )
        with Memory(config, clock=ManualClock(T0)) as memory:
            memory.add(chat(*SISTER_AND_DOG), user_id="maya")
            hits = memory.search("What does my sister do?", "maya", k=1)
            stats = memory.components.meter.snapshot()["relevance"]
        scored = [r for r in server.requests if r.get("logprobs")]
    assert "bakery" in hits[0].entry.text
    assert hits[0].explanation.components["relevance"] == pytest.approx(0.9)
    assert len(scored) == stats["calls"] == stats["ok"] == 2
    assert stats["fallbacks"] == 0


def test_choice_logprobs_counts_a_token_once_and_ignores_other_words() -> None:
    top = [("Yes", math.log(0.4)), ("Yes", math.log(0.4)), ("yesterday", math.log(0.3))]
    logprobs, floored = choice_logprobs(top, ("yes", "no"))
    assert math.exp(logprobs["yes"]) == pytest.approx(0.4)
    assert floored == ("no",)
    assert math.exp(logprobs["no"]) == pytest.approx(0.3)
    assert choice_logprobs([], ("yes",)) == ({"yes": -math.inf}, ("yes",))


def test_scores_that_cannot_be_probabilities_are_invalid_and_metered() -> None:
    meter = Meter()
    bad = [
        TokenScores({"yes": 0.5, "no": -1.0}, 10, 10, "m"),  # log-probability above zero
        TokenScores({"yes": math.nan, "no": -1.0}, 10, 10, "m"),
        TokenScores({"yes": -1.0, "no": -1.0}, 10, 11, "m"),  # evaluated more than it had
    ]
    for scores in bad:
        with pytest.raises(SLMOutputInvalid):
            check_scores(REQUEST, scores)

    class Fixed:
        model = "m"

        def score_next_token(self, request: ScoreRequest) -> TokenScores:
            return bad[0]

    with pytest.raises(SLMOutputInvalid):
        score_task(Fixed(), REQUEST, meter)
    stats = meter.snapshot()["relevance"]
    assert (stats["calls"], stats["invalid"], stats["prompt_tokens"]) == (1, 1, 10)
