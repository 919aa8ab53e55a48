"""Metrics: bounded labels, and the counts a scrape shows after scripted traffic."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families
from support.capfile import replace_text
from support.fake_ollama import FakeOllama, Reply, tool_call
from support.polling import until_async
from support.tools import WEATHER

from proxy.app import create_app
from proxy.observability.metrics import OTHER, BoundedLabels, reason_label
from proxy.observability.telemetry import RequestRecord, Telemetry
from proxy.settings import Settings
from proxy.types import Observation

MSG = [{"role": "user", "content": "hi"}]


@asynccontextmanager
async def running(settings: Settings, telemetry: Telemetry) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings, telemetry)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://toolshim") as http:
            yield http


def quiet() -> Telemetry:
    logger = logging.getLogger("toolshim.test.metrics")
    logger.propagate = False
    return Telemetry(logger)


async def scrape(http: httpx.AsyncClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = await http.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    out = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@given(st.lists(st.text(max_size=20), max_size=60), st.integers(1, 10))
def test_bounded_labels_never_exceed_their_limit(values: list[str], limit: int) -> None:
    bounded = BoundedLabels(limit)
    seen = {bounded(v) for v in values}
    assert len(seen - {OTHER, "none"}) <= limit
    for v in values:
        assert bounded(v) in (v, OTHER, "none")


def test_bounded_labels_keep_early_names_and_fold_late_ones() -> None:
    bounded = BoundedLabels(2)
    assert [bounded(v) for v in ["a", "b", "c", "a", None]] == ["a", "b", OTHER, "a", "none"]
    assert BoundedLabels(5, max_length=4)("toolong") == OTHER


@given(st.text(max_size=200))
def test_reason_labels_are_short_and_plain(reason: str) -> None:
    label = reason_label(reason)
    assert 0 < len(label) <= 48
    assert all(c.isascii() and not c.isspace() for c in label)


def test_reason_label_keeps_the_kind_of_schema_errors() -> None:
    assert reason_label("schema: 'city' is a required property") == "schema"
    assert reason_label("unknown_tool") == "unknown_tool"


def test_request_done_counts_each_observation_kind() -> None:
    telemetry = quiet()
    record = RequestRecord("r1", "chat.completions", model="m", status=200, upstream_ms=120.0,
                           ttft_ms=30.0, tools_stripped=3, overhead_ms=1.5)
    telemetry.request_done(record, [
        Observation("m", "call_dropped", {"name": "x", "reason": "schema: bad"}),
        Observation("m", "call_dropped", {"name": "y", "reason": "unknown_tool"}),
        Observation("m", "call_repaired", {"name": "x", "fixes": ["trailing_comma"]}),
        Observation("m", "text_calls_recovered", {"count": 2, "format": "hermes"}),
        Observation("m", "tools_refused", {"rung": "off"}),
        Observation("m", "tool_choice_refused", {"value": "required"}),
    ])
    reg = telemetry.metrics.registry
    get = reg.get_sample_value
    assert get("toolshim_requests_total",
               {"model": "m", "endpoint": "chat.completions", "status": "200"}) == 1
    assert get("toolshim_tools_stripped_total", {"model": "m"}) == 3
    for outcome, reason, count in [("dropped", "schema", 1), ("dropped", "unknown_tool", 1),
                                   ("repaired", "trailing_comma", 1),
                                   ("recovered", "hermes", 2)]:
        assert get("toolshim_tool_calls_total",
                   {"model": "m", "outcome": outcome, "reason": reason}) == count
    assert get("toolshim_retries_total", {"model": "m", "rung": "off"}) == 1
    assert get("toolshim_retries_total", {"model": "m", "rung": "native-no-tool-choice"}) == 1
    assert get("toolshim_upstream_latency_seconds_count", {"model": "m"}) == 1
    assert get("toolshim_upstream_latency_seconds_sum", {"model": "m"}) == 0.12
    assert get("toolshim_time_to_first_token_seconds_count", {"model": "m"}) == 1


def test_two_telemetries_do_not_share_a_registry() -> None:
    one, two = quiet(), quiet()
    one.facts_written(2)
    assert one.metrics.registry.get_sample_value("toolshim_learned_facts_written_total") == 2
    assert two.metrics.registry.get_sample_value("toolshim_learned_facts_written_total") == 0


async def test_scrape_after_scripted_traffic(fake: FakeOllama,
                                            make_settings: Callable[..., Settings]) -> None:
    fake.reply("qwen3:8b", Reply(tool_calls=[tool_call("launch_rockets", {"n": 1})]))
    fake.reply("qwen3:8b", Reply(content=[
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>']))
    fake.reply("qwen3:8b", Reply(content=["plain ", "answer"]))
    async with running(make_settings(probe=False), quiet()) as http:
        dropped = await http.post("/v1/chat/completions", json={
            "model": "qwen3:8b", "messages": MSG, "tools": [WEATHER]})
        recovered = await http.post("/v1/chat/completions", json={
            "model": "qwen3:8b", "messages": MSG, "tools": [WEATHER]})
        streamed = await http.post("/v1/chat/completions", json={
            "model": "qwen3:8b", "messages": MSG, "stream": True})
        retried = await http.post("/v1/chat/completions", json={
            "model": "gemma3:4b", "messages": MSG, "tools": [WEATHER]})
        missing = await http.post("/v1/chat/completions", json={"model": "nosuch",
                                                                "messages": MSG})
        # Learned facts are written by a background thread, shortly after the answer.
        samples = await scrape_until(
            http, lambda s: value(s, "toolshim_learned_facts_written_total") >= 1)
    assert [r.status_code for r in (dropped, recovered, streamed, retried, missing)] == \
        [200, 200, 200, 200, 404]
    assert recovered.json()["choices"][0]["message"]["tool_calls"][0]["function"]["name"] \
        == "get_weather"
    req = "toolshim_requests_total"
    assert value(samples, req, model="qwen3:8b", endpoint="chat.completions", status="200") == 3
    assert value(samples, req, model="gemma3:4b", endpoint="chat.completions", status="200") == 1
    assert value(samples, req, model="nosuch", endpoint="chat.completions", status="404") == 1
    calls = "toolshim_tool_calls_total"
    assert value(samples, calls, model="qwen3:8b", outcome="dropped", reason="unknown_tool") == 1
    assert value(samples, calls, model="qwen3:8b", outcome="recovered", reason="hermes") == 1
    assert value(samples, "toolshim_retries_total", model="gemma3:4b", rung="emulate") == 1  # the shipped fallback
    assert value(samples, "toolshim_learned_facts_written_total") >= 1
    assert value(samples, "toolshim_time_to_first_token_seconds_count", model="qwen3:8b") == 1
    assert value(samples, "toolshim_upstream_latency_seconds_count", model="qwen3:8b") == 3
    assert value(samples, "toolshim_open_streams") == 0
    active = [v for (name, _), v in samples.items() if name == "toolshim_upstream_active"]
    assert active == [0]


async def test_tools_stripped_by_a_deny_list(
        fake: FakeOllama, caps_path: Path, make_settings: Callable[..., Settings]) -> None:
    caps_path.write_text('version: 1\nmodels:\n  "qwen3:8b":\n    deny_tools: [get_weather]\n')
    async with running(make_settings(probe=False), quiet()) as http:
        await http.post("/v1/chat/completions", json={"model": "qwen3:8b", "messages": MSG,
                                                      "tools": [WEATHER]})
        samples = await scrape(http)
    assert value(samples, "toolshim_tools_stripped_total", model="qwen3:8b") == 1
    assert "tools" not in fake.chat_requests()[-1]


async def test_model_labels_fold_into_other_past_the_cap(
        make_settings: Callable[..., Settings]) -> None:
    telemetry = Telemetry(quiet().log, max_models=2)
    async with running(make_settings(probe=False), telemetry) as http:
        for name in ["qwen3:8b", "gemma3:4b", "made-up-1", "made-up-2", "made-up-3"]:
            await http.post("/v1/chat/completions", json={"model": name, "messages": MSG})
        samples = await scrape(http)
    models = {dict(labels).get("model") for (name, labels) in samples
              if name == "toolshim_requests_total"}
    assert models == {"qwen3:8b", "gemma3:4b", OTHER}
    assert value(samples, "toolshim_requests_total", model=OTHER, endpoint="chat.completions",
                 status="404") == 3


async def scrape_until(http: httpx.AsyncClient, done: Callable[[Any], bool]) -> Any:
    samples: Any = None

    async def scraped() -> bool:
        nonlocal samples
        samples = await scrape(http)
        return done(samples)
    await until_async(scraped, within=10, what="the reload to show in /metrics")
    return samples


async def test_capability_reloads_and_errors_are_counted(
        caps_path: Path, make_settings: Callable[..., Settings]) -> None:
    async with running(make_settings(probe=False), quiet()) as http:
        before = await scrape(http)
        # The file is reloaded in the background: no request needed, scrapes see it.
        replace_text(caps_path, "version: 1\nmodels:\n  qwen3:8b: {tools: sometimes}\n")
        broken = await scrape_until(http, lambda s: value(s, "toolshim_capabilities_error") == 1)
        replace_text(caps_path, "version: 1\nmodels:\n  qwen3:8b: {tools: native}\n")
        fixed = await scrape_until(http, lambda s: value(s, "toolshim_capabilities_error") == 0)
    loads = "toolshim_capabilities_loads_total"
    errors = "toolshim_capabilities_reload_errors_total"
    assert value(broken, errors) == 1 and value(broken, "toolshim_capabilities_error") == 1
    assert value(broken, loads) == value(before, loads)
    assert value(fixed, loads) == value(before, loads) + 1
    assert value(fixed, errors) == 1 and value(fixed, "toolshim_capabilities_error") == 0


class _Recording(Telemetry):
    def __init__(self, events: list[str]) -> None:
        super().__init__(quiet().log)
        self.events = events

    def request_done(self, record: RequestRecord, observations: Any = ()) -> None:
        self.events.append(f"reported {record.status}")
        super().request_done(record, observations)


async def test_a_whole_answer_is_sent_before_its_request_is_reported(
        fake: FakeOllama, make_settings: Callable[..., Settings]) -> None:
    # The log line, metrics and console entry of a non-streaming answer wait for the
    # answer to be written: the client does not wait for them. Failures report once.
    fake.reply("qwen3:8b", Reply(content=["plain ", "answer"]))
    events: list[str] = []
    app = create_app(make_settings(probe=False), _Recording(events))

    async def watched(scope: Any, receive: Any, send: Any) -> None:
        async def noted(message: Any) -> None:
            events.append(message["type"])
            await send(message)
        await app(scope, receive, noted)

    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=watched)
        async with httpx.AsyncClient(transport=transport, base_url="http://toolshim") as http:
            answer = await http.post("/v1/chat/completions", json={
                "model": "qwen3:8b", "messages": MSG, "tools": [WEATHER]})
            answered = list(events)
            events.clear()
            missing = await http.post("/v1/chat/completions", json={
                "model": "nosuch", "messages": MSG})
    assert answer.status_code == 200 and missing.status_code == 404
    assert answered == ["http.response.start", "http.response.body", "reported 200"]
    assert events.count("reported 404") == 1 and len(events) == 3
