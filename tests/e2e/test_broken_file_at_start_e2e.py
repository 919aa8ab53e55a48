"""A broken capabilities.yaml at start-up: the shipped entries serve, one line says why,
and the person's file is never written while broken (docs/capabilities.md)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from support.capfile import replace_text
from support.fake_ollama import FakeOllama
from support.polling import until
from support.servers import serve
from support.tools import WEATHER

from proxy.app import create_app
from proxy.settings import Settings

TOOLS: list[Any] = [WEATHER]
MSG: list[Any] = [{"role": "user", "content": "hi"}]
BROKEN = 'version: 1\nmodels:\n  "qwen3*":\n    tools: sometimes\n'


def test_a_broken_file_at_start_serves_the_shipped_entries(
        caplog: pytest.LogCaptureFixture, new_sdk: Callable[..., openai.OpenAI],
        fake: FakeOllama, make_settings: Callable[..., Settings], caps_path: Path) -> None:
    caplog.set_level(logging.INFO)
    caps_path.write_text(BROKEN)
    fake.add_model("refuser:1b", tools=False)
    with serve(create_app(make_settings(probe=False))) as url:
        sdk = new_sdk(url)
        # gemma3:* is shipped as `emulate`: no native tools sent, no refusal, no retry.
        raw = sdk.chat.completions.with_raw_response.create(
            model="gemma3:4b", messages=MSG, tools=TOOLS)
        assert "x-toolshim-retries" not in raw.headers
        assert "tools" not in fake.chat_requests()[-1]
        assert "get_weather" in str(fake.chat_requests()[-1]["messages"])
        # What is learned meanwhile applies, but the broken file is not written.
        first = sdk.chat.completions.with_raw_response.create(
            model="refuser:1b", messages=MSG, tools=TOOLS)
        assert first.headers["x-toolshim-retries"] == "1"
        again = sdk.chat.completions.with_raw_response.create(
            model="refuser:1b", messages=MSG, tools=TOOLS)
        assert "x-toolshim-retries" not in again.headers
        ready = httpx.get(f"{url}/readyz", timeout=10).json()
        assert ready["capabilities"].startswith(f"{caps_path}:4: ")
        time.sleep(1.5)  # past the keeper's write gap
        assert caps_path.read_text() == BROKEN
        # Fixed: the file is in force and the facts waiting in memory are written.
        replace_text(caps_path, BROKEN.replace("sometimes", "native"))
        until(lambda: "refuser:1b" in caps_path.read_text(), within=10,
              what="the waiting fact written")
        assert caps_path.read_text().startswith(BROKEN.replace("sometimes", "native"))
    lines = [r for r in caplog.records if str(caps_path) in r.getMessage()
             and r.levelno >= logging.WARNING]
    assert len(lines) == 1, [r.getMessage() for r in lines]
    message = lines[0].getMessage()
    assert message.startswith(f"{caps_path}:4: ") and "shipped entries" in message
    assert "\n" not in message and "keeping the last good version" not in message
