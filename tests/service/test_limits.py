"""No tenant can starve the others, and no client can grow what the service keeps: a body that
never arrives frees its slot after ``body_timeout_s`` (408), one key holds at most its share
of the requests in flight (429 past it), ``/metrics`` stays the same size under junk methods
and needs an admin key; errors stay small, in the JSON shape, and name the tenant's limit."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import pytest
from tiermem import Memory, TiermemConfig
from tiermem.errors import InvalidUserIdError, TenantBusyError
from tiermem.remote import RemoteMemory
from tiermem.service.config import ServiceConfig

from tests.service.conftest import Keys, in_thread, make_keys, raw_request


def _stall(url: str, key: str) -> socket.socket:
    """A request whose headers arrive and whose body never does."""
    return raw_request(url, key, b"Content-Length: 100\r\n\r\n{")


def _answer(held: socket.socket) -> bytes:
    held.settimeout(10)
    data = b""
    while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
        chunk = held.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def _code(answer: bytes) -> str:
    return str(json.loads(answer.partition(b"\r\n\r\n")[2])["error"]["code"])


@contextmanager
def _service(tmp_path: Path, **limits: object) -> Iterator[tuple[str, Keys]]:
    keys = make_keys(tmp_path)
    with (
        Memory(TiermemConfig.for_tests()) as memory,
        in_thread(
            memory,
            keys,
            ServiceConfig(**limits),  # type: ignore[arg-type]
        ) as url,
    ):
        yield url, keys


def test_one_tenants_stalled_bodies_leave_the_others_served(tmp_path: Path) -> None:
    with (
        _service(tmp_path, max_in_flight=8, body_timeout_s=2.0) as (url, keys),
        ExitStack() as held,
    ):
        stalled = [held.enter_context(_stall(url, keys.acme)) for _ in range(8)]
        time.sleep(0.3)
        served = []
        with RemoteMemory(url, keys.beta) as beta:
            for _ in range(20):
                served.append(beta.get_all("ana") == [])
        assert served == [True] * 20  # beta holds no slot acme could take
        with RemoteMemory(url, keys.acme) as acme, pytest.raises(TenantBusyError):
            acme.get_all("ana")  # acme has its share (4 of 8) in flight
        answers = [_answer(s) for s in stalled]
        refused = [a for a in answers if b" 429 " in a.split(b"\r\n", 1)[0]]
        timed_out = [a for a in answers if b" 408 " in a.split(b"\r\n", 1)[0]]
        assert (len(refused), len(timed_out)) == (4, 4), answers
        assert {_code(a) for a in timed_out} == {"request_timeout"}
        assert {_code(a) for a in refused} == {"tenant_busy"}
        assert all(b"retry-after: 1" in a.lower() for a in refused)
        with RemoteMemory(url, keys.acme) as acme:
            assert acme.get_all("ana") == []  # the slots are free again
    print("\nstalled bodies: 4 refused (429), 4 timed out (408), beta served 20 of 20")


def test_the_tenant_share_cannot_exceed_the_limit() -> None:
    with pytest.raises(ValueError, match="over max_in_flight"):
        ServiceConfig(max_in_flight=4, max_in_flight_per_tenant=5)
    assert ServiceConfig(max_in_flight=8).tenant_share == 4
    assert ServiceConfig(max_in_flight=1).tenant_share == 1


def _metrics(url: str, keys: Keys) -> httpx.Response:
    return httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {keys.admin}"})


def test_metrics_stay_bounded_under_junk_methods(tmp_path: Path) -> None:
    with _service(tmp_path) as (url, keys):
        port = int(url.rsplit(":", 1)[1])
        before = len(_metrics(url, keys).content)
        for i in range(300):
            with socket.create_connection(("127.0.0.1", port)) as junk:
                junk.sendall(f"JUNK{i:06d} /healthz HTTP/1.1\r\nHost: x\r\n\r\n".encode())
                junk.recv(4096)
        page = _metrics(url, keys)
        assert page.status_code == 200
        assert b"JUNK" not in page.content
        assert len(page.content) < before + 4096  # one OTHER series at most, not 300
    print(f"\n/metrics: {before} bytes before 300 junk methods, {len(page.content)} after")


def test_metrics_need_an_admin_key_unless_public(tmp_path: Path) -> None:
    with _service(tmp_path) as (url, keys):
        assert httpx.get(f"{url}/metrics").status_code == 401
        tenant = {"Authorization": f"Bearer {keys.acme}"}
        assert httpx.get(f"{url}/metrics", headers=tenant).status_code == 403
        assert _metrics(url, keys).status_code == 200
        for open_path in ("/healthz", "/readyz", "/openapi.json"):
            assert httpx.get(f"{url}{open_path}").status_code == 200, open_path
    with _service(tmp_path / "public", public_metrics=True) as (url, _):
        assert httpx.get(f"{url}/metrics").status_code == 200


def test_an_error_detail_is_capped_in_the_body(tmp_path: Path) -> None:
    with _service(tmp_path) as (url, keys):
        response = httpx.post(
            f"{url}/v1/search",
            json={"query": "q", "user_id": "u" * 200_000},
            headers={"Authorization": f"Bearer {keys.acme}"},
            timeout=30,
        )
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "invalid_user_id"
    assert len(response.content) < 2_000


def test_a_tenants_user_id_limit_is_named_as_the_tenants(tmp_path: Path) -> None:
    with _service(tmp_path) as (url, keys), RemoteMemory(url, keys.acme) as acme:
        with pytest.raises(InvalidUserIdError, match="at most 123 characters"):
            acme.get_all("u" * 124)  # 127 - len("acme") = 123
        assert acme.get_all("u" * 123) == []
        response = httpx.post(  # past Memory's own 128 too: still the tenant's limit
            f"{url}/v1/search",
            json={"query": "q", "user_id": "u" * 200},
            headers={"Authorization": f"Bearer {keys.acme}"},
        )
        assert "at most 123 characters" in response.json()["error"]["message"]


def test_a_malformed_chunked_body_gets_the_json_error_shape(tmp_path: Path) -> None:
    broken = b"Transfer-Encoding: chunked\r\n\r\nZZ\r\n{}\r\n0\r\n\r\n"  # "ZZ": no hex size
    with _service(tmp_path) as (url, keys), raw_request(url, keys.acme, broken) as bad:
        answer = _answer(bad)
    head = answer.partition(b"\r\n\r\n")[0]
    assert head.startswith(b"HTTP/1.1 400"), answer
    assert b"application/json" in head.lower()
    assert _code(answer) == "invalid_request"


def test_a_schema_error_never_echoes_a_huge_field_name(tmp_path: Path) -> None:
    with _service(tmp_path) as (url, keys):
        response = httpx.post(
            f"{url}/v1/search",
            json={"query": "q", "user_id": "u", "x" * 200_000: 1},
            headers={"Authorization": f"Bearer {keys.acme}"},
            timeout=30,
        )
    assert (response.status_code, response.json()["error"]["code"]) == (422, "invalid_request")
    assert len(response.content) < 2_000
