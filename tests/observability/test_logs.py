"""Log lines: one JSON object per request, the fields promised, and never a secret."""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.fake_ollama import FakeOllama, Reply, tool_call
from support.polling import until
from support.servers import serve
from support.tools import WEATHER

from proxy.app import create_app
from proxy.observability.logs import (
    BatchingHandler,
    JsonFormatter,
    TextFormatter,
    escape_controls,
    setup_logging,
)
from proxy.observability.redact import MASK
from proxy.observability.telemetry import RequestRecord, Telemetry
from proxy.settings import Settings, redact_url

KEY = "tsk-live-0123456789abcdef"
UPSTREAM_KEY = "upstream-secret-987654321"
PROMPT = "my very private prompt about the merger"


def emit(formatter: logging.Formatter, msg: str, record: dict[str, Any] | None = None) -> str:
    rec = logging.LogRecord("toolshim", logging.INFO, __file__, 1, msg, None, None)
    if record is not None:
        rec.record = record
    return formatter.format(rec)


def test_json_line_merges_the_request_record() -> None:
    line = orjson.loads(emit(JsonFormatter(), "request", {"request_id": "r1", "status": 200}))
    assert line["msg"] == "request" and line["level"] == "info"
    assert line["request_id"] == "r1" and line["status"] == 200
    assert line["ts"].endswith("Z")


def test_secrets_are_masked_whatever_logged_them() -> None:
    formatter = JsonFormatter(secrets=[KEY, "short"])
    line = emit(formatter, f"upstream said: bad key {KEY}", {"error": f"Bearer {KEY}"})
    assert KEY not in line and line.count(MASK) == 2
    assert "short" not in emit(formatter, "x") and orjson.loads(line)
    text = TextFormatter([KEY]).format(logging.LogRecord("t", 20, "", 1, KEY, None, None))
    assert KEY not in text and MASK in text


def test_short_strings_are_never_treated_as_secrets() -> None:
    assert emit(JsonFormatter(secrets=["a", "info"]), "info about a").count(MASK) == 0


def test_text_format_appends_key_value_pairs() -> None:
    line = emit(TextFormatter(), "request", {"request_id": "r1", "status": 200})
    assert line.endswith("request request_id=r1 status=200")


def _logfmt_fields(text: str) -> dict[str, str]:
    """Split logfmt `k=v k="v w"` pairs (quotes with \\ escapes), as a log reader does."""
    fields: dict[str, str] = {}
    for match in re.finditer(r'(\w+)=("(?:[^"\\]|\\.)*"|\S*)', text):
        value = match.group(2)
        if value.startswith('"'):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        fields[match.group(1)] = value
    return fields


@given(st.text(max_size=40))
def test_a_text_field_value_cannot_pass_for_more_fields(value: str) -> None:
    # A client chooses the model name; on a text log line it stays one field.
    line = emit(TextFormatter(), "request", {"model": value, "status": 404})
    tail = line.split(" request ", 1)[1]
    assert "\n" not in line
    assert _logfmt_fields(tail) == {"model": escape_controls(value), "status": "404"}


def test_upstream_credentials_never_reach_the_record() -> None:
    record = RequestRecord("r", "models", upstream="https://user:pa55word@host:8000")
    assert record.as_log()["upstream"] == "https://host:8000"
    assert redact_url("http://host:11434") == "http://host:11434"


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    access = logging.getLogger("uvicorn.access").disabled
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    logging.getLogger("uvicorn.access").disabled = access


@pytest.mark.usefixtures("restore_logging")
def test_setup_logging_installs_one_handler_and_silences_access_lines() -> None:
    setup_logging("warning", "text", [KEY])
    root = logging.getLogger()
    assert len(root.handlers) == 1 and isinstance(root.handlers[0].formatter, TextFormatter)
    assert isinstance(root.handlers[0], BatchingHandler)
    assert root.level == logging.WARNING
    assert logging.getLogger("uvicorn.access").disabled


@pytest.fixture
def captured(restore_logging: None) -> Iterator[io.StringIO]:
    """Everything any logger writes during the test, as JSON lines, with no masking."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG)
    yield out


async def test_one_json_line_per_request_with_no_secret_in_any_line(
        captured: io.StringIO, fake: FakeOllama, fake_url: str,
        make_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_UPSTREAM_KEY", UPSTREAM_KEY)
    settings = make_settings(api_keys=(KEY,), probe=False,
                             upstream_key_envs=((fake_url, "TEST_UPSTREAM_KEY"),))
    fake.reply("qwen3:8b", Reply(tool_calls=[tool_call("nope", {"a": 1})]))
    fake.reply("qwen3:8b", Reply(content=["fine"]))
    app = create_app(settings, Telemetry(logging.getLogger("toolshim")))
    auth = {"authorization": f"Bearer {KEY}", "x-request-id": "req-one"}
    body = {"model": "qwen3:8b", "messages": [{"role": "user", "content": PROMPT}],
            "tools": [WEATHER]}
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
            first = await http.post("/v1/chat/completions", json=body, headers=auth)
            second = await http.post("/v1/chat/completions", json={**body, "stream": True},
                                     headers={"authorization": f"Bearer {KEY}"})
            await http.post("/v1/chat/completions", json=body,
                            headers={"authorization": f"Bearer {UPSTREAM_KEY}"})
    assert first.status_code == 200 and second.status_code == 200
    text = captured.getvalue()
    assert KEY not in text and UPSTREAM_KEY not in text and PROMPT not in text
    lines = [orjson.loads(line) for line in text.splitlines()]
    requests = [line for line in lines if line["msg"] == "request"]
    assert len(requests) == 3
    one, two, refused = requests
    assert refused["status"] == 401 and "model" not in refused  # it never got past auth
    assert one["request_id"] == "req-one" and two["request_id"] == second.headers["x-request-id"]
    for line in (one, two):
        assert line["model"] == "qwen3:8b" and line["upstream"] == fake_url
        assert line["status"] == 200 and line["endpoint"] == "chat.completions"
        assert line["duration_ms"] > 0 and "overhead_ms" in line and "upstream_ms" in line
    assert one["calls_dropped"] == 1
    assert two["stream"] is True and "ttft_ms" in two


async def test_text_format_line_per_request(restore_logging: None,
                                            make_settings: Callable[..., Settings]) -> None:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(TextFormatter())
    logger = logging.getLogger("toolshim.test.text")
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.setLevel(logging.INFO)
    app = create_app(make_settings(probe=False), Telemetry(logger))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
            await http.post("/v1/chat/completions", json={
                "model": "qwen3:8b", "messages": [{"role": "user", "content": PROMPT}]})
    lines = out.getvalue().splitlines()
    assert len(lines) == 1
    assert " request request_id=" in lines[0] and "model=qwen3:8b" in lines[0]
    assert "status=200" in lines[0] and PROMPT not in lines[0]


def test_prompts_are_logged_only_with_log_prompts_and_debug(
        caplog: pytest.LogCaptureFixture, make_settings: Any) -> None:
    secret_prompt = "the launch code is 0000"
    for log_prompts, level, expected in ((False, logging.DEBUG, False),
                                         (True, logging.INFO, False),
                                         (True, logging.DEBUG, True)):
        caplog.clear()
        with caplog.at_level(level, logger="toolshim"), \
                serve(create_app(make_settings(log_prompts=log_prompts))) as url:
            httpx.post(url + "/v1/chat/completions", json={
                "model": "qwen3:8b", "messages": [{"role": "user", "content": secret_prompt}]})
        logged = any(secret_prompt in str(getattr(r, "record", "")) for r in caplog.records)
        assert logged is expected, (log_prompts, level)


def test_refused_requests_get_a_log_line_without_the_key(
        caplog: pytest.LogCaptureFixture, make_settings: Any) -> None:
    wrong = "sk-wrong-key-that-must-not-appear"
    with caplog.at_level(logging.INFO, logger="toolshim"), \
            serve(create_app(make_settings(api_keys=("sk-right-key-0001",)))) as url:
        answer = httpx.post(url + "/v1/chat/completions",
                            headers={"authorization": f"Bearer {wrong}",
                                     "x-request-id": "req-401-check"},
                            json={"model": "qwen3:8b", "messages": []})
        metrics = httpx.get(url + "/metrics").text
    assert answer.status_code == 401
    lines = [r.record for r in caplog.records if isinstance(getattr(r, "record", None), dict)]
    refused = [line for line in lines if line.get("request_id") == "req-401-check"]
    assert refused and refused[0]["status"] == 401
    assert refused[0]["endpoint"] == "chat.completions"
    assert wrong not in caplog.text and all(wrong not in str(line) for line in lines)
    assert any('status="401"' in line and 'endpoint="chat.completions"' in line
               for line in metrics.splitlines() if line.startswith("toolshim_requests"))


async def test_text_logs_escape_control_characters_so_no_line_can_be_forged(
        restore_logging: None, make_settings: Callable[..., Settings]) -> None:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(TextFormatter())
    logger = logging.getLogger("toolshim.test.inject")
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.setLevel(logging.INFO)
    forged = "x\n2026-01-01 00:00:00,000 INFO toolshim request status=200\r\u2028"
    app = create_app(make_settings(probe=False), Telemetry(logger))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
            await http.post("/v1/chat/completions", json={
                "model": forged, "messages": [{"role": "user", "content": "hi"}]})
    logger.info("message with\na newline")
    lines = out.getvalue().splitlines()
    assert len(lines) == 2, lines
    # One line, and the forged text stays inside the one quoted model field.
    assert _logfmt_fields(lines[0].split(" request ", 1)[1])["model"] == escape_controls(forged)
    assert _logfmt_fields(lines[0].split(" request ", 1)[1])["status"] == "404"
    assert lines[1].endswith("message with\\x0aa newline")


def test_text_logs_keep_a_traceback_on_its_own_lines() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        import sys
        rec = logging.LogRecord("toolshim", logging.ERROR, __file__, 1, "failed\nhere", None,
                                sys.exc_info())
    line = TextFormatter().format(rec)
    first, _, trace = line.partition("\n")
    assert first.endswith("failed\\x0ahere")
    assert trace.startswith("Traceback") and "ValueError: boom" in trace


def _batched(name: str, interval: float) -> tuple[logging.Logger, BatchingHandler, io.StringIO]:
    """A logger of its own writing through a BatchingHandler into a string."""
    out = io.StringIO()
    handler = BatchingHandler(out, interval=interval)
    handler.setFormatter(TextFormatter())
    logger = logging.getLogger(name)
    logger.propagate, logger.handlers[:] = False, [handler]
    logger.setLevel(logging.INFO)
    return logger, handler, out


def test_info_lines_are_batched_and_a_warning_writes_everything_before_it_in_order() -> None:
    logger, handler, out = _batched("toolshim.test.batching", interval=60.0)
    logger.info("first")
    logger.info("second")
    assert out.getvalue() == ""  # waiting for the writer (60 s here)
    logger.warning("third")
    lines = out.getvalue().splitlines()
    assert [line.split(" ", 4)[-1] for line in lines] == ["first", "second", "third"]
    logger.info("fourth")
    handler.flush()  # what logging.shutdown does at exit
    assert out.getvalue().splitlines()[-1].endswith("fourth")


def test_the_writer_thread_writes_waiting_lines_soon() -> None:
    logger, _, out = _batched("toolshim.test.batching.soon", interval=0.01)
    logger.info("waiting")
    until(lambda: "waiting" in out.getvalue(), within=2, what="the writer thread's line")
    assert out.getvalue().rstrip().endswith("waiting")


@pytest.mark.parametrize("created", [1764020708.1234, 1764020708.9991, 1764020709.0004,
                                     1764020709.5, 86400.25])
def test_the_timestamp_is_the_records_time_to_the_millisecond(created: float) -> None:
    # The second is cached: records on either side of a second boundary, in any order.
    formatter = JsonFormatter()
    for when in (created, created - 1.0, created):
        record = logging.LogRecord("toolshim", logging.INFO, "", 0, "request", None, None)
        record.created, record.msecs = when, (when - int(when)) * 1000
        expected = datetime.fromtimestamp(when, UTC).isoformat(
            timespec="milliseconds").replace("+00:00", "Z")  # what it was before the cache
        assert orjson.loads(formatter.format(record))["ts"] == expected
