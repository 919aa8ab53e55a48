"""Running it for real: `python -m proxy` drained by SIGTERM, 429 under a burst, auth.

The proxy runs as a subprocess (the way a container runs it) or under uvicorn
on loopback, in front of the fake Ollama, and is driven with the openai SDK.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import openai
import orjson
import pytest
from openai.types.chat import ChatCompletionMessageParam
from support.fake_ollama import FakeOllama, Reply
from support.leaving import wait_for_cancel
from support.servers import free_port, serve, wait_until_ok

from proxy.app import create_app
from proxy.settings import Settings

MSG: list[ChatCompletionMessageParam] = [{"role": "user", "content": "hi"}]
KEY = "tsk-live-0123456789abcdef"


@contextmanager
def proxy_process(fake_url: str, caps: Path, log: Path, *args: str
                  ) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    port = free_port()
    env = {**os.environ, "TOOLSHIM_API_KEYS": KEY}
    cmd = [sys.executable, "-m", "proxy", "--host", "127.0.0.1", "--port", str(port),
           "--upstream", fake_url, "--capabilities", str(caps), "--no-probe", *args]
    with log.open("wb") as err:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err)
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_up(proc, url)
            yield proc, url
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)


def _wait_up(proc: subprocess.Popen[bytes], url: str) -> None:
    if not wait_until_ok(url + "/healthz", proc, what="the proxy"):
        raise RuntimeError(f"proxy exited with {proc.returncode}")


def test_sigterm_lets_an_open_stream_finish(fake: FakeOllama, fake_url: str, caps_path: Path,
                                           tmp_path: Path,
                                           new_sdk: Callable[..., openai.OpenAI]) -> None:
    pieces = [f"p{i} " for i in range(12)]
    fake.reply("qwen3:8b", Reply(content=pieces, delay=0.1))
    with proxy_process(fake_url, caps_path, tmp_path / "log", "--shutdown-grace", "10") \
            as (proc, url):
        stream = new_sdk(url, KEY).chat.completions.create(model="qwen3:8b", messages=MSG,
                                                          stream=True)
        got: list[str] = []
        finishes = []
        for chunk in stream:
            assert isinstance(chunk, openai.types.chat.ChatCompletionChunk)
            if not got:
                proc.send_signal(signal.SIGTERM)
            got.append(chunk.choices[0].delta.content or "")
            finishes.append(chunk.choices[0].finish_reason)
        assert proc.wait(10) == 0
    assert "".join(got) == "".join(pieces)
    assert finishes[-1] == "stop"
    log = (tmp_path / "log").read_bytes()
    assert KEY.encode() not in log
    lines = [orjson.loads(line) for line in log.splitlines() if line.startswith(b"{")]
    assert any(line.get("msg") == "request" and line.get("status") == 200 for line in lines)


def test_past_the_grace_a_stream_ends_with_an_error_event(
        fake: FakeOllama, fake_url: str, caps_path: Path, tmp_path: Path) -> None:
    fake.reply("qwen3:8b", Reply(content=[f"p{i} " for i in range(200)], delay=0.05))
    with proxy_process(fake_url, caps_path, tmp_path / "log", "--shutdown-grace", "0.5") \
            as (proc, url):
        started = time.monotonic()
        with httpx.stream("POST", url + "/v1/chat/completions",
                          headers={"authorization": f"Bearer {KEY}"},
                          json={"model": "qwen3:8b", "messages": MSG, "stream": True},
                          timeout=20) as response:
            lines: list[str] = []
            for line in response.iter_lines():
                if not lines:
                    proc.send_signal(signal.SIGTERM)
                lines.append(line)
        assert proc.wait(10) == 0
        took = time.monotonic() - started
    events = [line.removeprefix("data: ") for line in lines if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    assert orjson.loads(events[-2])["error"]["code"] == "shutting_down"
    assert took < 5  # cut at the grace, not at the end of the 10 s answer
    wait_for_cancel(fake)
    assert fake.abandoned == 1  # the backend request was closed too
    log = [orjson.loads(line) for line in (tmp_path / "log").read_bytes().splitlines()
           if line.startswith(b"{")]
    (request,) = [line for line in log if line.get("msg") == "request"]
    assert request["status"] == 503 and "shutdown" in request["error"]  # not a 499


def test_burst_past_the_bound_gets_429_with_retry_after(new_sdk: Callable[..., openai.OpenAI], 
        fake: FakeOllama, make_settings: Callable[..., Settings]) -> None:
    # Each answer takes 2 s and all six start together (a barrier), so the six are in
    # flight at once even on a loaded machine: 2 run, 1 waits in the queue, 3 are refused.
    fake.reply("qwen3:8b", Reply(content=["slow"], delay=2.0))
    settings = make_settings(probe=False, max_concurrency=2, max_queue=1, queue_timeout=10.0)
    results: list[int] = []
    retry_after: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(6)
    with serve(create_app(settings)) as url:
        sdk = new_sdk(url)
        sdk.models.list()  # connections and the app warm before the burst

        def one() -> None:
            start.wait(10)
            try:
                sdk.chat.completions.create(model="qwen3:8b", messages=MSG)
                status = 200
            except openai.RateLimitError as exc:
                status = exc.status_code
                with lock:
                    retry_after.append(exc.response.headers["retry-after"])
            with lock:
                results.append(status)

        threads = [threading.Thread(target=one) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(20)
        metrics = httpx.get(url + "/metrics").text
    assert sorted(results) == [200, 200, 200, 429, 429, 429]
    assert retry_after == ["1", "1", "1"]
    assert 'toolshim_requests_total{endpoint="chat.completions",model="qwen3:8b",status="429"}' \
        ' 3.0' in metrics


def test_hundreds_of_streams_fit_the_default_bounds(
        fake: FakeOllama, settings: Settings) -> None:
    assert settings.max_concurrency >= 512 and settings.max_queue >= 512
    assert settings.read_timeout >= 300  # a cold model load must not time out


def test_auth_with_the_sdk(new_sdk: Callable[..., openai.OpenAI],
                           make_settings: Callable[..., Settings]) -> None:
    with serve(create_app(make_settings(api_keys=(KEY,), probe=False))) as url:
        with pytest.raises(openai.AuthenticationError) as info:
            new_sdk(url, "wrong").chat.completions.create(model="qwen3:8b", messages=MSG)
        done = new_sdk(url, KEY).chat.completions.create(model="qwen3:8b", messages=MSG)
    assert info.value.status_code == 401
    assert done.choices[0].message.content == "Hello from qwen3:8b"
