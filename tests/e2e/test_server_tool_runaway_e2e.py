"""No tool call freezes the proxy: a builtin that never ends is an error result at its timeout.

The builtin is `echo` with a worker whose `echo` spins forever when asked
(support/spinning_worker.py), so no evaluator bound can save it: only the
runner's rule (every builtin runs in a worker process, killed at its
timeout) does. In this process `echo` spins too, so running it on the event
loop would freeze `/healthz` and fail these tests.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from support import spinning_worker
from support.fake_ollama import FakeOllama, Reply, tool_call
from support.polling import until
from support.servers import free_port, wait_until_ok

from proxy.server_tools import local, sandbox

MSG: list[Any] = [{"role": "user", "content": "help"}]
TESTS = Path(__file__).resolve().parents[1]


@pytest.fixture
def caps_path(tmp_path: Path) -> Path:
    caps = {"version": 1, "server_tools": {
        "spin": {"kind": "builtin", "builtin": "echo", "timeout": 1},
        "spin_long": {"kind": "builtin", "builtin": "echo", "timeout": 120},
        "calc": {"kind": "builtin", "builtin": "calculator"}},
        "models": {"qwen3*": {"server_tools": ["*"]}}}
    path = tmp_path / "capabilities.yaml"
    path.write_bytes(orjson.dumps(caps))
    return path


@pytest.fixture
def spinning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox, "WORKER_MODULE", "support.spinning_worker")
    monkeypatch.setitem(local.BUILTINS, "echo", spinning_worker.spin_or_echo)


def _chat(url: str, out: list[httpx.Response], **headers: str) -> threading.Thread:
    def post() -> None:
        out.append(httpx.post(url + "/v1/chat/completions", headers=headers, timeout=60,
                              json={"model": "qwen3:8b", "messages": MSG}))

    thread = threading.Thread(target=post, daemon=True)
    thread.start()
    return thread


def _tool_results(fake: FakeOllama) -> list[str]:
    return [m["content"] for m in fake.chat_requests()[-1]["messages"] if m["role"] == "tool"]


def test_a_runaway_builtin_is_an_error_result_at_its_timeout_while_others_go_on(
        fake: FakeOllama, proxy_url: str, spinning: None) -> None:
    fake.reply("qwen3:8b", Reply(tool_calls=[tool_call("spin", {"spin": True})],
                                 finish="tool_calls"))
    fake.reply("qwen3:8b", Reply(content=["It did not finish."]))
    answers: list[httpx.Response] = []
    started = time.monotonic()
    thread = _chat(proxy_url, answers)
    health = []
    while thread.is_alive() and time.monotonic() - started < 20:
        health.append(httpx.get(proxy_url + "/healthz", timeout=0.5).status_code)
        time.sleep(0.05)
    thread.join(1)
    assert answers and answers[0].status_code == 200
    assert answers[0].json()["choices"][0]["message"]["content"] == "It did not finish."
    assert 0.9 < time.monotonic() - started < 10
    assert len(health) >= 3 and set(health) == {200}
    (result,) = _tool_results(fake)
    assert orjson.loads(result) == {"error": "the tool did not answer within 1 s"}
    # The killed worker is replaced: the next builtin call just works.
    fake.replies.clear()
    fake.reply("qwen3:8b", Reply(tool_calls=[tool_call("calc", {"expression": "6*7"})],
                                 finish="tool_calls"))
    fake.reply("qwen3:8b", Reply(content=["42."]))
    assert httpx.post(proxy_url + "/v1/chat/completions", timeout=30, json={
        "model": "qwen3:8b", "messages": MSG}).json()["choices"][0]["message"]["content"] == "42."
    assert _tool_results(fake) == ["42"]


def test_round_with_a_huge_ndigits_is_an_error_result(fake: FakeOllama,
                                                      proxy_url: str) -> None:
    fake.reply("qwen3:8b", Reply(tool_calls=[
        tool_call("calc", {"expression": "round(1, -10**8)"})], finish="tool_calls"))
    fake.reply("qwen3:8b", Reply(content=["No."]))
    started = time.monotonic()
    httpx.post(proxy_url + "/v1/chat/completions", timeout=30,
               json={"model": "qwen3:8b", "messages": MSG})
    assert time.monotonic() - started < 5
    (result,) = _tool_results(fake)
    assert "round takes a whole number of digits" in orjson.loads(result)["error"]


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _gone(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] \
            == "Z"
    except OSError:
        return True


@pytest.fixture
def proxy_process(fake_url: str, caps_path: Path, tmp_path: Path,
                  ) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """`toolshim` as a container runs it, with the spinning worker swapped in."""
    port = free_port()
    boot = ("import sys; import proxy.server_tools.sandbox as s; "
            "s.WORKER_MODULE = 'support.spinning_worker'; from proxy.cli import main; "
            "sys.argv[0] = 'toolshim'; raise SystemExit(main())")
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join([str(TESTS.parent), str(TESTS)])}
    err = (tmp_path / "stderr").open("wb")
    proc = subprocess.Popen([sys.executable, "-c", boot, "--host", "127.0.0.1", "--port",
                             str(port), "--upstream", fake_url, "--capabilities",
                             str(caps_path), "--no-probe", "--shutdown-grace", "1"],
                            env=env, stdout=subprocess.DEVNULL, stderr=err)
    url = f"http://127.0.0.1:{port}"
    try:
        assert wait_until_ok(url + "/healthz", proc, what="the proxy")
        yield proc, url
    finally:
        err.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


def test_sigterm_ends_the_proxy_and_its_worker_while_a_builtin_runs_away(
        fake: FakeOllama, proxy_process: tuple[subprocess.Popen[bytes], str]) -> None:
    proc, url = proxy_process
    fake.reply("qwen3:8b", Reply(tool_calls=[tool_call("spin_long", {"spin": True})],
                                 finish="tool_calls"))
    answers: list[httpx.Response] = []
    _chat(url, answers)
    until(lambda: _children(proc.pid), within=15, what="a worker process started")
    workers = _children(proc.pid)
    time.sleep(0.3)  # the worker is spinning now
    assert httpx.get(url + "/healthz", timeout=2).status_code == 200
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(15) == 0
    assert all(_gone(pid) for pid in workers)
