"""Authentication, tenant isolation and limits, against a real ``tiermem serve`` (and, where a
limit must be set low, a uvicorn server in this process)."""

from __future__ import annotations

import stat
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tiermem import Memory, MemoryNotFoundError, TiermemConfig
from tiermem.errors import (
    AuthenticationError,
    ConfigError,
    InvalidLimitError,
    InvalidMessageError,
    PermissionDeniedError,
    RequestTooLargeError,
    ServiceOverloadedError,
    ServiceUnavailableError,
)
from tiermem.remote import RemoteMemory
from tiermem.service.config import ServiceConfig
from tiermem.service.keys import add_key

from tests.service.conftest import MAX_BODY_BYTES, Served, in_thread, make_keys, raw_request


@pytest.fixture
def acme(served: Served) -> Iterator[RemoteMemory]:
    with RemoteMemory(served.url, served.keys.acme) as client:
        yield client


@pytest.fixture
def beta(served: Served) -> Iterator[RemoteMemory]:
    with RemoteMemory(served.url, served.keys.beta) as client:
        yield client


@pytest.mark.parametrize(
    "header",
    [None, "Bearer", "Bearer tmk_not-a-key", "Basic dXNlcjpwYXNz", "bearer tmk_", "tmk_x"],
)
def test_a_missing_or_bad_key_gets_401(served: Served, header: str | None) -> None:
    headers = {} if header is None else {"Authorization": header}
    response = httpx.get(
        f"{served.url}/v1/memories", params={"user_id": "ana"}, headers=headers, timeout=10
    )
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json()["error"]["code"] == "authentication_failed"


def test_the_client_raises_authentication_error(served: Served) -> None:
    with (
        RemoteMemory(served.url, "tmk_wrong") as client,
        pytest.raises(AuthenticationError, match="unknown API key"),
    ):
        client.get_all("ana")


def test_another_tenants_memory_is_not_found_and_its_users_are_not_theirs(
    acme: RemoteMemory, beta: RemoteMemory, served: Served
) -> None:
    added = acme.add("Ana's bank PIN hint is the cat's name.", user_id="iso-ana")
    entry = added.entries[0].id
    assert acme.get(entry, "iso-ana").text == added.entries[0].text
    for attempt in (
        lambda: beta.get(entry, "iso-ana"),
        lambda: beta.update(entry, "overwritten", "iso-ana"),
        lambda: beta.delete(entry, "iso-ana"),
        lambda: beta.history(entry, "iso-ana"),
    ):
        with pytest.raises(MemoryNotFoundError):  # 404, never 403: nothing leaks
            attempt()
    raw = httpx.get(
        f"{served.url}/v1/memories/{entry}",
        params={"user_id": "iso-ana"},
        headers={"Authorization": f"Bearer {served.keys.beta}"},
        timeout=10,
    )
    assert raw.status_code == 404
    # beta's "iso-ana" is another user; naming acme's stored id does not reach it either
    for user in ("iso-ana", "acme:iso-ana"):
        assert beta.get_all(user) == []
        assert beta.search("bank PIN cat", user) == []
        assert beta.forget_user(user).entries == 0
    assert [e.id for e in acme.get_all("iso-ana")] == [entry]
    assert acme.get(entry, "iso-ana").text == added.entries[0].text  # untouched


def test_responses_name_the_callers_user_never_the_stored_one(served: Served) -> None:
    auth = {"Authorization": f"Bearer {served.keys.acme}"}
    with httpx.Client(base_url=served.url, headers=auth, timeout=10) as http:
        added = http.post("/v1/memories", json={"messages": "I ride a red bike.", "user_id": "u1"})
        entry = added.json()["entries"][0]["id"]
        bodies = [
            added.text,
            http.post("/v1/search", json={"query": "bike", "user_id": "u1"}).text,
            http.post("/v1/answer", json={"query": "what do I ride", "user_id": "u1"}).text,
            http.get(f"/v1/memories/{entry}/history", params={"user_id": "u1"}).text,
            http.get("/v1/memories/nope", params={"user_id": "u1"}).text,
        ]
    assert all('"user_id": "u1"' in body for body in bodies)
    assert not any("acme" in body for body in bodies)


def test_an_oversized_body_gets_413(served: Served, acme: RemoteMemory) -> None:
    big = ["x" * 30_000] * (MAX_BODY_BYTES // 30_000 + 1)  # each message within Memory's limit
    with pytest.raises(RequestTooLargeError, match="over the service's limit"):
        acme.add(big, user_id="big")
    auth = {"Authorization": f"Bearer {served.keys.acme}"}

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        yield b'{"messages": "'
        for _ in range(MAX_BODY_BYTES // 4096 + 2):
            yield b"y" * 4096
        yield b'", "user_id": "big"}'

    chunked = httpx.post(f"{served.url}/v1/memories", content=chunks(), headers=auth, timeout=30)
    assert chunked.status_code == 413
    assert chunked.json()["error"]["code"] == "request_too_large"
    assert acme.get_all("big") == []


def test_k_over_the_service_limit_is_refused(acme: RemoteMemory) -> None:
    with pytest.raises(InvalidLimitError, match="at most 50") as refused:
        acme.search("anything", "ana", k=51)
    assert refused.value.maximum == 50


def test_service_wide_operations_need_an_admin_key(served: Served, acme: RemoteMemory) -> None:
    with pytest.raises(PermissionDeniedError):
        acme.consolidation_state()
    with pytest.raises(PermissionDeniedError):
        acme.consolidate_now()
    with RemoteMemory(served.url, served.keys.admin) as admin, pytest.raises(ConfigError):
        admin.consolidation_state()  # allowed; LTM is off in this service


def test_keys_are_stored_hashed_and_a_new_key_works_without_a_restart(served: Served) -> None:
    text = served.keys.path.read_text()
    assert served.keys.acme not in text
    assert stat.S_IMODE(served.keys.path.stat().st_mode) == 0o600
    time.sleep(0.01)  # a later mtime than the file the service read
    key = add_key(served.keys.path, "newcomer")
    with RemoteMemory(served.url, key) as newcomer:
        assert newcomer.add("I keep two goats.", user_id="n1").entries


@pytest.mark.parametrize("tenant", ["acme:ana", "", 7])
def test_a_keys_file_entry_with_a_bad_tenant_keeps_the_last_good_keys(
    tmp_path: Path, tenant: object, caplog: pytest.LogCaptureFixture
) -> None:
    """An entry written by hand with a tenant the service refuses must not turn every tenant's
    requests into 500s: the service keeps the keys it read before, says why, and reads the
    file again once it is fixed."""
    import json

    keys = make_keys(tmp_path)
    good = keys.path.read_text()
    with (
        Memory(TiermemConfig.for_tests()) as memory,
        in_thread(memory, keys, ServiceConfig()) as url,
        RemoteMemory(url, keys.acme) as acme,
        RemoteMemory(url, keys.beta) as beta,
    ):
        acme.add("I keep two goats.", user_id="ana")
        data = json.loads(good)
        data["keys"].append({"tenant": tenant, "sha256": "0" * 64, "admin": False})
        time.sleep(0.01)  # a later mtime than the file the service read
        keys.path.write_text(json.dumps(data))
        with caplog.at_level("WARNING", logger="tiermem.service.keys"):
            assert acme.get_all("ana")  # served, with the last good keys
            assert beta.get_all("bob") == []
            assert acme.get_all("ana")  # the same bad version: not read, nor logged, again
        assert caplog.text.count("keeping the keys read before") == 1
        assert "key 4" in caplog.text  # which entry, and why
        time.sleep(0.01)
        keys.path.write_text(good)
        assert len(acme.get_all("ana")) == 1


def test_a_text_over_the_service_limit_is_the_memory_error(tmp_path: Path) -> None:
    keys = make_keys(tmp_path)
    limits = ServiceConfig(max_text_chars=100)
    with (
        Memory(TiermemConfig.for_tests()) as memory,
        in_thread(memory, keys, limits) as url,
        RemoteMemory(url, keys.acme) as client,
    ):
        client.add("x" * 100, user_id="ana")
        with pytest.raises(InvalidMessageError, match="exceeds 100 characters"):
            client.add(["ok", "x" * 101], user_id="ana")


def test_requests_over_the_in_flight_limit_get_503_with_retry_after(tmp_path: Path) -> None:
    keys = make_keys(tmp_path)
    with (
        Memory(TiermemConfig.for_tests()) as memory,
        in_thread(memory, keys, ServiceConfig(max_in_flight=1)) as url,
        RemoteMemory(url, keys.acme) as client,
    ):
        # a request whose body never finishes holds the one slot
        with raw_request(url, keys.acme, b"Content-Length: 100\r\n\r\n{"):
            time.sleep(0.3)
            response = httpx.get(
                f"{url}/v1/memories",
                params={"user_id": "ana"},
                headers={"Authorization": f"Bearer {keys.acme}"},
            )
            assert response.status_code == 503
            assert response.headers["retry-after"] == "1"
            with pytest.raises(ServiceOverloadedError):
                client.get_all("ana")
            assert httpx.get(f"{url}/healthz").status_code == 200  # operations stay open
        time.sleep(0.3)
        assert client.get_all("ana") == []


def test_an_unreachable_service_is_service_unavailable() -> None:
    with (
        RemoteMemory("http://127.0.0.1:9", "tmk_x", timeout_s=2) as client,
        pytest.raises(ServiceUnavailableError, match=r"127\.0\.0\.1:9"),
    ):
        client.get_all("ana")


def test_metrics_label_routes_by_template(served: Served, acme: RemoteMemory) -> None:
    entry = acme.add("I sail on Sundays.", user_id="metrics-user").entries[0].id
    acme.get(entry, "metrics-user")
    admin = {"Authorization": f"Bearer {served.keys.admin}"}
    text = httpx.get(f"{served.url}/metrics", headers=admin, timeout=10).text
    assert 'route="/v1/memories/{memory_id:path}",status="200"' in text
    assert "tiermem_request_duration_seconds_bucket" in text
    assert entry not in text  # no raw path: bounded label values
    assert httpx.get(f"{served.url}/readyz", timeout=10).json() == {"status": "ready"}
