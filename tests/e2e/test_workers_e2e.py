"""Several worker processes share what they learn through capabilities.yaml."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import openai
import pytest
from support.capfile import learned
from support.fake_ollama import FakeOllama
from support.polling import until
from support.servers import free_port, wait_until_ok
from support.tools import WEATHER

TOOLS: list[Any] = [WEATHER]
MSG: list[Any] = [{"role": "user", "content": "hi"}]
REFUSING = ["gemma3:4b", "phi3:mini", "llama2:7b", "tinyllama:1b"]


@pytest.fixture
def workers_url(fake: FakeOllama, fake_url: str, caps_path: Path) -> Iterator[str]:
    for name in REFUSING[1:]:
        fake.add_model(name, tools=False)
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "proxy", "--workers", "2", "--port", str(port),
         "--upstream", fake_url, "--capabilities", str(caps_path), "--no-probe",
         "--reload-interval", "0.1", "--log-level", "warning"],
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    url = f"http://127.0.0.1:{port}"
    try:
        assert wait_until_ok(url + "/healthz", proc, what="the workers"), "toolshim exited"
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_workers_learn_together(new_sdk: Callable[..., openai.OpenAI],
                                fake: FakeOllama, workers_url: str, caps_path: Path) -> None:
    sdk = new_sdk(workers_url)

    def ask(model: str) -> str | None:
        return sdk.chat.completions.create(model=model, messages=MSG,
                                           tools=TOOLS).choices[0].message.content

    with ThreadPoolExecutor(8) as pool:  # both workers learn different models at once
        answers = list(pool.map(ask, REFUSING * 2))
    assert answers == [f"Hello from {m}" for m in REFUSING * 2]

    until(lambda: set(learned(caps_path)) == set(REFUSING), within=10,
          what=f"learned: to hold {REFUSING}")
    assert all(e["tool_support"] == "refused" for e in learned(caps_path).values())
    time.sleep(0.5)  # every worker notices the file changed

    before = len(fake.chat_requests())
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(ask, REFUSING * 4))
    sent = fake.chat_requests()[before:]
    assert len(sent) == len(REFUSING) * 4  # no refusal, no retry, in either worker
    assert not any("tools" in body for body in sent)
