"""Property-based fuzzing of the published OpenAPI document (schemathesis): requests that fit
the schema and requests that break it, to every operation of a real ``tiermem serve``. No
answer may be a 5xx, and every answer must match the schema (errors included)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from tests.service.conftest import Served

pytestmark = pytest.mark.slow  # hundreds of generated requests

EXAMPLES = 25  # per operation and mode: about 750 requests, under a minute
_NOTHING_TO_BREAK = {"GET /healthz", "GET /readyz", "GET /metrics"}


def _fuzzer(
    operation: schemathesis.APIOperation, mode: GenerationMode, send: Callable[..., None]
) -> Callable[[], None]:
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,  # the same requests on every run: a CI failure replays
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def fuzz(case: schemathesis.Case) -> None:
        send(case)

    return fuzz  # type: ignore[no-any-return]


def test_no_generated_request_gets_a_server_error(served: Served) -> None:
    document = httpx.get(f"{served.url}/openapi.json", timeout=10).json()
    schema = schemathesis.openapi.from_dict(document)
    auth = {"Authorization": f"Bearer {served.keys.fuzz}"}
    sent: Counter[str] = Counter()
    statuses: Counter[int] = Counter()
    failures: list[str] = []
    unbreakable: list[str] = []
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 15  # every route of the contract is published
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            label = f"{operation.label} [{mode.value}]"

            def send(case: schemathesis.Case, label: str = label) -> None:
                sent[label] += 1
                try:
                    response = case.call_and_validate(
                        base_url=served.url,
                        headers=auth,
                        checks=[not_a_server_error, response_schema_conformance],
                    )
                    statuses[response.status_code] += 1
                except Exception as exc:  # noqa: BLE001 - each failure is listed, not the first
                    failures.append(f"{label}: {exc}"[:600])

            try:
                _fuzzer(operation, mode, send)()
            except Unsatisfiable:
                assert mode is GenerationMode.NEGATIVE, label
                unbreakable.append(operation.label)
    total = sum(sent.values())
    print(f"\nfuzz: {total} requests, {len(failures)} failures; statuses {dict(statuses)}")
    assert not failures, "\n".join(failures[:10])
    assert set(unbreakable) <= _NOTHING_TO_BREAK, unbreakable
    assert total >= len(operations) * EXAMPLES
    assert all(status < 500 for status in statuses)
    assert any(200 <= s < 300 for s in statuses)
    assert 422 in statuses


@pytest.mark.parametrize("path", ["/v1/search", "/v1/memories"])
def test_a_request_without_a_key_is_refused_before_its_body_is_read(
    served: Served, path: str
) -> None:
    response = httpx.post(f"{served.url}{path}", content=b"{not json", timeout=10)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json()["error"]["code"] == "authentication_failed"
