from __future__ import annotations

from typing import Any

from proxy.server_tools.kept import KeptCalls, history_call_ids
from proxy.server_tools.loop import SetAside


def _part(call_id: str, size: int = 10) -> SetAside:
    call: dict[str, Any] = {"id": call_id, "type": "function",
                            "function": {"name": "calc", "arguments": "x" * size}}
    return SetAside((call,), ({"role": "tool", "tool_call_id": call_id, "content": "42"},))


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_part_goes_only_to_its_owner_and_only_once() -> None:
    kept = KeptCalls()
    part = _part("s1")
    assert kept.keep("alice", ["c1", "c2"], part)
    assert kept.take("mallory", ["c1", "c2"]) == {}
    assert kept.take("alice", ["c2"]) == {"c1": part, "c2": part}
    assert kept.take("alice", ["c1", "c2"]) == {}
    assert len(kept) == 0 and kept.bytes == 0


def test_bounded_in_entries_bytes_and_time() -> None:
    clock = Clock()
    kept = KeptCalls(ttl=10, max_parts=3, max_bytes=2_000, clock=clock)
    for i in range(5):
        kept.keep("a", [f"c{i}"], _part(f"s{i}"))
    assert len(kept) == 3 and kept.take("a", ["c0", "c1"]) == {}
    assert not kept.keep("a", ["huge"], _part("s", 5_000))  # alone past the byte budget
    kept.keep("a", ["big"], _part("sb", 1_500))
    assert kept.bytes <= 2_000 and list(kept.take("a", ["big"])) == ["big"]
    kept.keep("a", ["late"], _part("sl"))
    clock.now = 11
    assert kept.take("a", ["late"]) == {} and len(kept) == 0


def test_history_call_ids() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "tool_calls": [{"id": "a"}, {"id": "b"}]},
        {"role": "tool", "tool_call_id": "a", "content": "x"},
        {"role": "assistant", "content": "ok"}]
    assert history_call_ids(messages) == ["a", "b"]
