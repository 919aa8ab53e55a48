"""Upstream faults map to the right status: a reset is a 502, only a timeout is a 504;
a passed-through body the upstream cuts reaches the client cut."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import httpx
import openai
import pytest
from support.fake_ollama import FakeOllama, Reply
from support.log_lines import request_lines
from support.polling import until
from support.resetting import resetting_upstream
from support.servers import serve

from proxy.app import create_app
from proxy.settings import Settings


@pytest.mark.parametrize("when", ["before", "during", "during-error"])
def test_a_reset_during_a_non_streamed_answer_is_a_502(
        when: Literal["before", "during", "during-error"], caps_path: Path,
        new_sdk: Callable[..., openai.OpenAI]) -> None:
    with resetting_upstream(when) as upstream:
        settings = Settings(upstreams=(upstream,), capabilities=str(caps_path), probe=False,
                            reload_interval=0.0)
        with serve(create_app(settings)) as proxy:
            client = new_sdk(proxy)
            with pytest.raises(openai.APIStatusError) as failure:
                client.chat.completions.create(
                    model="qwen3:8b", messages=[{"role": "user", "content": "hi"}])
    assert failure.value.status_code == 502
    body = failure.value.body
    assert isinstance(body, dict)
    assert body["code"] == "upstream_unavailable" and body["type"] == "api_error"


def test_an_upstream_answer_nested_too_deep_is_a_502_not_a_500(
        fake: FakeOllama, client: openai.OpenAI) -> None:
    deep = b"[" * 300 + b"1" + b"]" * 300
    fake.reply("qwen3:8b", Reply(body=b'{"id":"x","object":"chat.completion","choices":[{"index":0,'
                                      b'"message":{"role":"assistant","content":"hi","extra":'
                                      + deep + b"},\"finish_reason\":\"stop\"}]}"))
    with pytest.raises(openai.APIStatusError) as failure:
        client.chat.completions.create(model="qwen3:8b",
                                       messages=[{"role": "user", "content": "hi"}])
    assert failure.value.status_code == 502
    assert isinstance(failure.value.body, dict)
    assert failure.value.body["code"] == "upstream_invalid"


def test_an_unreachable_upstream_is_logged_as_a_warning(
        caps_path: Path, new_sdk: Callable[..., openai.OpenAI],
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    with resetting_upstream("before") as upstream:
        settings = Settings(upstreams=(upstream,), capabilities=str(caps_path), probe=False,
                            reload_interval=0.0)
        with serve(create_app(settings)) as proxy, pytest.raises(openai.APIStatusError):
            new_sdk(proxy).chat.completions.create(
                model="qwen3:8b", messages=[{"role": "user", "content": "hi"}])
    (line,) = [r for r in caplog.records if r.getMessage() == "request"]
    assert line.levelno == logging.WARNING
    assert line.record["status"] == 502  # type: ignore[attr-defined]


def test_the_retry_line_carries_the_request_id(
        fake: FakeOllama, client: openai.OpenAI, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    fake.add_model("plain:1b", tools=False, show=False)  # refuses tools; no metadata
    reply = client.chat.completions.with_raw_response.create(
        model="plain:1b", messages=[{"role": "user", "content": "hi"}],
        tools=[{"type": "function", "function": {"name": "f", "parameters": {}}}])
    request_id = reply.headers["x-request-id"]
    (retry,) = [r for r in caplog.records if "one rung down" in r.getMessage()]
    assert retry.record["request_id"] == request_id  # type: ignore[attr-defined]


def test_waiting_for_an_upstream_that_times_out_is_not_counted_as_overhead(
        fake: FakeOllama, make_settings: Callable[..., Settings],
        new_sdk: Callable[..., openai.OpenAI], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    fake.reply("qwen3:8b", Reply(content=["late"], delay=3.0))  # no headers for 3 s
    with serve(create_app(make_settings(read_timeout=0.5, probe=False))) as proxy, \
            pytest.raises(openai.APIStatusError) as failure:
        new_sdk(proxy).chat.completions.create(
            model="qwen3:8b", messages=[{"role": "user", "content": "hi"}])
    assert failure.value.status_code == 504
    overhead = failure.value.response.headers["x-toolshim-overhead-ms"]
    (line,) = [r for r in caplog.records if r.getMessage() == "request"]
    record = line.record  # type: ignore[attr-defined]
    assert record["upstream_ms"] >= 450  # the half second went to the upstream
    assert record["overhead_ms"] < 250 and float(overhead) < 250


def test_a_passed_through_body_cut_by_the_upstream_reaches_the_client_cut(
        caps_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # The status line is sent before the upstream breaks off: a short body with a clean
    # end would pass for a whole one, so the client must see the connection cut.
    caplog.set_level(logging.INFO, logger="toolshim")
    caplog.set_level(logging.INFO, logger="uvicorn.error")
    with resetting_upstream("during") as upstream:
        settings = Settings(upstreams=(upstream,), capabilities=str(caps_path), probe=False,
                            reload_interval=0.0)
        with serve(create_app(settings)) as proxy, httpx.Client(base_url=proxy,
                                                                 timeout=10) as http:
            with http.stream("POST", "/v1/embeddings",
                             json={"model": "qwen3:8b", "input": "x"}) as answer:
                assert answer.status_code == 200
                with pytest.raises(httpx.RemoteProtocolError, match="incomplete"):
                    answer.read()
            until(lambda: request_lines(caplog), what="the request line")
    (line,) = request_lines(caplog)
    assert line["endpoint"] == "embeddings" and line["status"] == 502
    assert "closed the connection" in line["error"]
    # Logged once: the server's own "returned without completing response" line about
    # the body we left unfinished on purpose is dropped.
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []

