"""keeper.py with the store: reloads and coalesced writes from a background thread."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from proxy.capabilities.learning import LearnedFact
from proxy.capabilities.load import parse_capabilities
from proxy.capabilities.store import CapabilityStore

BASE = "# mine\nversion: 1\nmodels:\n  \"qwen3*\":\n    max_tools: 10\n"


def fact(model: str) -> LearnedFact:
    return LearnedFact(model, {"tools": "off"}, "runtime_error", "2026-11-22T10:00:00Z")


def learned(path: Path) -> list[str]:
    caps = parse_capabilities(path.read_text())[0]
    assert caps is not None
    return list(caps.learned)


def wait_for(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_writes_are_coalesced_and_leave_the_callers_thread(tmp_path: Path) -> None:
    path = tmp_path / "capabilities.yaml"
    path.write_text(BASE)
    batches: list[tuple[int, str]] = []
    store = CapabilityStore(path, check_interval=0.05, on_written=lambda n: batches.append(
        (n, threading.current_thread().name)))
    store.start()
    try:
        for i in range(50):
            store.record([fact(f"m{i}:1b")])
            assert store.profile(f"m{i}:1b").tool_support == "refused"  # in force at once
        wait_for(lambda: sum(n for n, _ in batches) == 50)
    finally:
        store.close()
    assert len(batches) < 50
    assert {name for _, name in batches} == {"toolshim-capabilities"}
    assert learned(path) == [f"m{i}:1b" for i in range(50)]
    assert path.read_text().startswith(BASE)


def test_one_bad_fact_never_blocks_the_others(tmp_path: Path,
                                              caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "capabilities.yaml"
    path.write_text(BASE)
    store = CapabilityStore(path)
    with caplog.at_level(logging.WARNING):
        store.record([fact("refuse-x["), fact("m" * 300), fact("good:1b")])
        store.record([fact("refuse-x[")])
    assert learned(path) == ["good:1b"]
    assert len([r for r in caplog.records if "refuse-x[" in r.getMessage()]) == 1


def test_a_symlinked_file_is_written_through_its_target(tmp_path: Path) -> None:
    real = tmp_path / "data" / "capabilities.yaml"
    real.parent.mkdir()
    real.write_text(BASE)
    link = tmp_path / "capabilities.yaml"
    link.symlink_to(real)
    CapabilityStore(link).record([fact("a:1b")])
    assert link.is_symlink()
    assert learned(real) == ["a:1b"]


def test_read_only_file_gets_its_facts_once_writable_and_on_close(tmp_path: Path) -> None:
    path = tmp_path / "capabilities.yaml"
    path.write_text(BASE)
    path.chmod(0o444)
    store = CapabilityStore(path, check_interval=3600)
    store.start()
    try:
        store.record([fact("a:1b")])
        wait_for(lambda: not store.dirty)  # the keeper tried, and kept it in memory
        assert store.pending() == 1 and path.read_text() == BASE
        path.chmod(0o644)
    finally:
        store.close()  # shutdown: what is pending reaches the file
    assert learned(path) == ["a:1b"] and store.pending() == 0


def test_learned_in_memory_stays_bounded_when_nothing_can_be_written(tmp_path: Path) -> None:
    path = tmp_path / "capabilities.yaml"
    path.write_text(BASE)
    path.chmod(0o444)
    store = CapabilityStore(path, max_learned=5)
    for i in range(20):
        store.record([fact(f"m{i}:1b")])
    assert len(store.capabilities().learned) <= 5 and store.pending() <= 5
    assert store.profile("m19:1b").tool_support == "refused"
