"""The knowledge graph on its own: index in step, atomic saves, schema checks, erasure."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from tiermem.errors import ConfigError, LTMCorruptError, LTMError
from tiermem.ltm import LongTermMemory, NodeKind, Provenance, Relation, UserState
from tiermem.ltm.graph import DecayPolicy
from tiermem.ltm.index import VectorIndex
from tiermem.ltm.provenance import load_or_create_secret
from tiermem.ltm.update import Action, EdgeUnit, NodeUnit

T0 = datetime(2026, 3, 2, tzinfo=UTC)
DIM = 8
PROV = Provenance(b"k" * 32)


def vec(*hot: int) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float32)
    v[list(hot)] = 1.0
    return v


def n(name: str, *hot: int, key: str = "k1", action: Action = Action.INSERT) -> NodeUnit:
    return NodeUnit(name, NodeKind.CONCEPT, f"about {name}", action, vec(*hot), key)


def commit(ltm: LongTermMemory, user: str, nodes: list[NodeUnit], edges=(), when=T0):  # type: ignore[no-untyped-def]
    ticket = ltm.begin(user)
    state = UserState(("2026-03-02T00:00:00+00:00", "m1"), frozenset(), ticket.state.runs + 1)
    return ltm.commit(ticket, nodes, list(edges), state, when)


def test_index_stays_in_step_with_inserts_updates_and_removals() -> None:
    index = VectorIndex(DIM)
    for i in range(20):  # past the initial capacity
        index.upsert(f"n:{i}", vec(i % DIM))
    assert len(index) == 20
    index.remove("n:0")
    index.remove("n:19")
    index.upsert("n:1", vec(7))
    top = index.search(vec(7), 3)
    assert top[0] == ("n:1", pytest.approx(1.0))
    assert "n:0" not in dict(index.search(vec(0), 20))
    assert len(index) == 18


def test_save_load_round_trip_keeps_graph_index_and_state(tmp_path: Path) -> None:
    ltm = LongTermMemory(tmp_path, DIM, PROV)
    edge = EdgeUnit(
        "pottery", Relation.HAS_PROPERTY, "calm", "is calming", Action.INSERT, vec(2), "k1"
    )
    commit(ltm, "alice", [n("pottery", 0), n("calm", 1)], [edge])
    again = LongTermMemory(tmp_path, DIM, PROV, read_only=True)  # what is on disk
    assert sorted(again.facts()) == sorted(ltm.facts())
    assert again.state("alice").watermark == ("2026-03-02T00:00:00+00:00", "m1")
    found = again.search(vec(0), 5, T0)
    assert [f.text for f in found][:2] == [
        "pottery (Concept): about pottery",
        "pottery has the property calm: is calming",
    ]
    assert found[1].hops == 1
    assert found[1].score == pytest.approx(0.5)
    raw = (tmp_path / "graph.json").read_text()
    assert "alice" not in raw
    assert json.loads(raw)["version"] == 1


@pytest.mark.parametrize("crash_at", ["write", "fsync", "replace"])
def test_a_crash_mid_save_leaves_the_previous_graph_readable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, crash_at: str
) -> None:
    ltm = LongTermMemory(tmp_path, DIM, PROV)
    commit(ltm, "alice", [n("pottery", 0)])
    before = (tmp_path / "graph.json").read_bytes()

    import tiermem.ltm.persist as persist

    def boom(*args: object, **kwargs: object) -> None:
        raise OSError(f"injected crash at {crash_at}")

    if crash_at == "write":  # half the bytes reach the temporary file, then the process dies
        real_fdopen = os.fdopen

        class HalfFile:
            def __init__(self, fd: int, mode: str) -> None:
                self._f = real_fdopen(fd, mode)

            def __enter__(self) -> HalfFile:
                return self

            def __exit__(self, *exc: object) -> None:
                self._f.close()

            def write(self, data: bytes) -> None:
                self._f.write(data[: len(data) // 2])
                self._f.flush()
                raise OSError("injected crash at write")

        monkeypatch.setattr(persist.os, "fdopen", HalfFile)
    else:
        monkeypatch.setattr(persist.os, crash_at, boom)
    with pytest.raises(LTMError, match="injected"):  # typed: a full disk is such a crash
        commit(ltm, "alice", [n("hiking", 3)], when=T0 + timedelta(days=1))
    monkeypatch.undo()

    assert (tmp_path / "graph.json").read_bytes() == before
    reloaded = LongTermMemory(tmp_path, DIM, PROV, read_only=True)
    assert reloaded.facts() == ["pottery (Concept): about pottery"]
    assert not (tmp_path / "graph.json.tmp").exists()


def test_unreadable_or_foreign_graph_files_raise_a_typed_error(tmp_path: Path) -> None:
    (tmp_path / "graph.json").write_text("{not json")
    with pytest.raises(LTMCorruptError, match="cannot be loaded"):
        LongTermMemory(tmp_path, DIM, PROV)
    (tmp_path / "graph.json").write_text(json.dumps({"schema": "tiermem-ltm", "version": 99}))
    with pytest.raises(LTMCorruptError, match="schema version 99"):
        LongTermMemory(tmp_path, DIM, PROV)
    ok = tmp_path / "ok"
    written = LongTermMemory(ok, DIM, PROV)
    commit(written, "a", [n("x", 0)])
    written.close()
    with pytest.raises(LTMCorruptError, match="embedding dim"):
        LongTermMemory(ok, DIM * 2, PROV)


def test_erasure_removes_sole_support_and_decrements_shared(tmp_path: Path) -> None:
    ltm = LongTermMemory(tmp_path, DIM, PROV)
    a1, a2 = PROV.entry_key("alice", "m1"), PROV.entry_key("alice", "m2")
    b1 = PROV.entry_key("bob", "m9")
    commit(ltm, "alice", [n("pottery", 0, key=a1), n("hiking", 1, key=a2)])
    commit(ltm, "bob", [n("pottery", 0, key=b1)])
    edge = EdgeUnit("pottery", Relation.RELATED_TO, "hiking", "", Action.INSERT, vec(0, 1), a2)
    commit(ltm, "alice", [], [edge])
    removed, decremented = ltm.forget_user("alice", ["m1", "m2"], T0)
    assert (removed, decremented) == (2, 1)  # hiking and the edge; pottery keeps bob's
    assert [(f.text, f.evidence) for f in ltm.inventory(T0)] == [
        ("pottery (Concept): about pottery", 1)
    ]
    saved = (tmp_path / "graph.json").read_text()
    assert a1 not in saved
    assert a2 not in saved
    assert b1 in saved


def test_a_commit_after_erasure_is_refused(tmp_path: Path) -> None:
    ltm = LongTermMemory(tmp_path, DIM, PROV)
    ticket = ltm.begin("alice")
    ltm.forget_user("alice", [], T0)
    state = UserState(None, frozenset(), 1)
    assert ltm.commit(ticket, [n("pottery", 0)], [], state, T0) is None
    assert ltm.node_count == 0


def test_decay_prunes_edges_with_their_nodes(tmp_path: Path) -> None:
    ltm = LongTermMemory(tmp_path, DIM, PROV, decay=DecayPolicy(0.5, 10.0, 0.25))
    edge = EdgeUnit("a", Relation.IS_A, "b", "", Action.INSERT, vec(0, 1), "k1")
    commit(ltm, "u", [n("a", 0), n("b", 1)], [edge])
    everything = sorted(f.id for f in ltm.inventory(T0))
    assert ltm.decay_now(T0 + timedelta(days=9)) == []  # 0.5 * 0.5**0.9 = 0.268
    assert sorted(ltm.decay_now(T0 + timedelta(days=11))) == everything  # 0.233
    assert (ltm.node_count, ltm.edge_count) == (0, 0)
    assert LongTermMemory(tmp_path, DIM, PROV, read_only=True).node_count == 0


def test_provenance_keys_are_stable_opaque_and_unlinkable(tmp_path: Path) -> None:
    secret = load_or_create_secret(tmp_path / "secret.key")
    assert load_or_create_secret(tmp_path / "secret.key") == secret
    assert oct(os.stat(tmp_path / "secret.key").st_mode & 0o777) == "0o600"
    p = Provenance(secret)
    k1, k2 = p.entry_key("alice", "m1"), p.entry_key("alice", "m2")
    assert k1 != k2
    assert k1[:8] != k2[:8]
    assert "alice" not in k1
    assert Provenance(b"x" * 32).entry_key("alice", "m1") != k1
    with pytest.raises(ConfigError):
        Provenance(b"short")
