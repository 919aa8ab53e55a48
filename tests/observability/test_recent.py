"""The console's memory of finished requests: bounded, O(1) per request, no prompts by default."""

from __future__ import annotations

from starlette.requests import Request

from proxy.observability.recent import CAPTURE_HEADER, ConsoleState
from proxy.observability.tap import Capture, Tap
from proxy.observability.telemetry import RequestRecord
from proxy.types import Observation


def _record(n: int, model: str = "m:1", **fields: object) -> RequestRecord:
    record = RequestRecord(f"id{n}", "chat.completions", model=model, status=200,
                           overhead_ms=float(n))
    for key, value in fields.items():
        setattr(record, key, value)
    return record


def _request(headers: dict[str, str]) -> Request:
    raw = [(k.encode(), v.encode()) for k, v in headers.items()]
    return Request({"type": "http", "method": "POST", "path": "/", "headers": raw})


def test_ring_keeps_the_newest_and_counters_add_up() -> None:
    state = ConsoleState(3)
    for n in range(5):
        state.finished(_record(n, calls_kept=2, calls_repaired=1), [
            Observation("m:1", "call_repaired", {"fixes": ["json"]}),
            Observation("m:1", "tools_refused", {"rung": "off"})], Tap())
    assert [e["request_id"] for e in state.recent()] == ["id4", "id3", "id2"]
    assert state.recent()[0]["notes"][0] == {"kind": "call_repaired",
                                             "detail": {"fixes": ["json"]}}
    assert "prompt" not in state.recent()[0]
    counters = state.counters["m:1"].as_json()
    assert counters["requests"] == 5 and counters["calls_passed"] == 5
    assert counters["calls_repaired"] == 5 and counters["refusals"] == 5
    assert counters["p50_overhead_ms"] == 2.0
    assert state.find("id3") is not None and state.find("id0") is None


def test_zero_capacity_keeps_no_requests_but_still_counts() -> None:
    state = ConsoleState(0)
    state.finished(_record(1), [], Tap())
    assert state.recent() == [] and state.counters["m:1"].requests == 1


def test_counters_stay_bounded_under_made_up_model_names() -> None:
    state = ConsoleState(0)
    for n in range(1005):
        state.finished(_record(n, model=f"made-up-{n}"), [], Tap())
    assert len(state.counters) == 1000 and "made-up-0" not in state.counters
    assert "made-up-1004" in state.counters


def test_a_model_in_use_outlives_a_flood_of_made_up_names() -> None:
    state = ConsoleState(0)
    state.finished(_record(0, model="qwen3:8b"), [], Tap())
    for n in range(1, 1200):
        state.finished(_record(n, model=f"made-up-{n}"), [], Tap())
        if n % 500 == 0:  # the real model keeps being asked
            state.finished(_record(n, model="qwen3:8b"), [], Tap())
    assert len(state.counters) == 1000 and state.counters["qwen3:8b"].requests == 3


def test_only_registered_capture_tokens_capture() -> None:
    state = ConsoleState()
    token, capture = state.new_capture()
    assert state.tap_for(_request({CAPTURE_HEADER: "made-up"})).capture is None
    assert state.tap_for(_request({CAPTURE_HEADER: token})).capture is capture
    assert state.tap_for(_request({CAPTURE_HEADER: token})).capture is None  # once only


def test_prompts_are_kept_only_when_asked() -> None:
    chat = {"messages": [{"role": "user", "content": "secret plan"}]}
    quiet, keeping = Tap(False), Tap(True)
    for tap in (quiet, keeping):
        tap.sent(chat, {})
    assert quiet.prompt is None
    assert keeping.prompt == {"messages": chat["messages"], "tools": []}


def test_capture_separates_attempts_and_caps_its_size() -> None:
    capture = Capture()
    tap = Tap(capture=capture)
    tap.sent({}, {"try": 1})
    tap.answered(400, b'{"error": "no tools"}')
    tap.sent({}, {"try": 2})
    tap.piece(b"data: a\n\n")
    tap.piece(b"data: b\n\n")
    assert capture.sent == [{"try": 1}, {"try": 2}]
    assert capture.answers == [{"status": 400, "body": '{"error": "no tools"}'},
                               {"status": 200, "body": "data: a\n\ndata: b\n\n"}]
    tap.piece(b"x" * (3 * 1024 * 1024))
    assert capture.size == 2 * 1024 * 1024


def test_corrections_are_counted_per_model() -> None:
    state = ConsoleState(5)
    for succeeded in (1, 0, 1):
        state.finished(_record(succeeded), [
            Observation("m:1", "correction", {"tried": 1, "succeeded": succeeded})], Tap())
    counters = state.counters["m:1"].as_json()
    assert counters["corrections_tried"] == 3 and counters["corrections_succeeded"] == 2
    assert state.recent()[0]["notes"][0]["kind"] == "correction"


def test_responses_requests_count_for_their_model() -> None:
    state = ConsoleState(10)
    state.finished(RequestRecord("r1", "responses", model="m:1", status=200), [], Tap())
    state.finished(RequestRecord("r2", "models", status=200), [], Tap())
    state.finished(RequestRecord("r3", "responses.retrieve", model="m:1", status=200), [],
                   Tap())
    assert state.counters["m:1"].requests == 1 and len(state.counters) == 1


def _prompted(text: str) -> Tap:
    tap = Tap(True)
    tap.sent({"messages": [{"role": "user", "content": text}]}, None)
    return tap


def test_the_ring_is_bounded_in_bytes_when_prompts_are_kept() -> None:
    state = ConsoleState(100_000, keep_prompts=True)
    big = "p" * 200_000  # under the per-prompt cap, so each entry keeps it whole
    for n in range(400):  # 80 MB of prompts offered
        state.finished(_record(n), [], _prompted(big))
    kept = state.recent(prompts=True)
    assert state.bytes <= 32 * 1024 * 1024 and 100 < len(kept) < 200
    assert kept[0]["request_id"] == "id399" and kept[0]["prompt"]["messages"][0]["content"] == big


def test_a_huge_prompt_is_kept_as_a_note_of_its_size() -> None:
    state = ConsoleState(10, keep_prompts=True)
    state.finished(_record(1), [], _prompted("h" * 3_000_000))
    prompt = state.recent(prompts=True)[0]["prompt"]
    assert "messages" not in prompt and "bytes" in prompt["omitted"]
    assert state.bytes < 10_000
