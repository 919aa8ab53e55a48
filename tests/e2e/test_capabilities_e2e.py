"""capabilities.yaml applied live: edits take effect, broken edits keep the last good file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import openai
from support.capfile import edit_and_wait
from support.fake_ollama import FakeOllama

TOOLS: list[Any] = [
    {"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
    for n in ("bash", "read_file", "write_file")]
MSG: list[Any] = [{"role": "user", "content": "hi"}]


def _touch(path: Path, text: str, proxy_url: str) -> None:
    edit_and_wait(path, text, proxy_url)


def test_edit_while_running_is_followed(fake: FakeOllama, client: openai.OpenAI,
                                        caps_path: Path, proxy_url: str) -> None:
    client.chat.completions.create(model="qwen3:8b", messages=MSG, tools=TOOLS)
    assert len(fake.chat_requests()[-1]["tools"]) == 3

    _touch(caps_path, 'version: 1\nmodels:\n  "qwen3*":\n    tools: native\n'
                      "    deny_tools: [read_file, write_file]\n", proxy_url)
    raw = client.chat.completions.with_raw_response.create(model="qwen3:8b", messages=MSG,
                                                           tools=TOOLS)
    assert [t["function"]["name"] for t in fake.chat_requests()[-1]["tools"]] == ["bash"]
    assert raw.headers["x-toolshim-tools-stripped"] == "2"

    _touch(caps_path, 'version: 1\nmodels:\n  "qwen3*":\n    tools: off\n', proxy_url)
    raw = client.chat.completions.with_raw_response.create(
        model="qwen3:8b", messages=MSG, tools=TOOLS, tool_choice="auto", parallel_tool_calls=True)
    sent = fake.chat_requests()[-1]
    assert not {"tools", "tool_choice", "parallel_tool_calls"} & set(sent)
    assert raw.headers["x-toolshim-tools-stripped"] == "3"
    assert raw.headers["x-toolshim-rung"] == "off"


def test_broken_edit_keeps_last_good(fake: FakeOllama, client: openai.OpenAI,
                                     caps_path: Path, proxy_url: str) -> None:
    _touch(caps_path, 'version: 1\nmodels:\n  "qwen3*":\n    tools: off\n', proxy_url)
    client.chat.completions.create(model="qwen3:8b", messages=MSG, tools=TOOLS)
    assert "tools" not in fake.chat_requests()[-1]

    _touch(caps_path, 'version: 1\nmodels:\n  "qwen3*":\n    tools: sometimes\n', proxy_url)
    done = client.chat.completions.create(model="qwen3:8b", messages=MSG, tools=TOOLS)
    assert done.choices[0].message.content == "Hello from qwen3:8b"
    assert "tools" not in fake.chat_requests()[-1]  # still the last good file
    ready = httpx.get(proxy_url + "/readyz").json()
    assert "capabilities.yaml:4" in ready["capabilities"]

    _touch(caps_path, 'version: 1\nmodels:\n  "qwen3*":\n    tools: native\n', proxy_url)
    client.chat.completions.create(model="qwen3:8b", messages=MSG, tools=TOOLS)
    assert len(fake.chat_requests()[-1]["tools"]) == 3
    assert httpx.get(proxy_url + "/readyz").json()["capabilities"] == "ok"


def test_models_listing_shows_resolved_mode(fake: FakeOllama, caps_path: Path,
                                            proxy_url: str) -> None:
    _touch(caps_path, 'version: 1\nmodels:\n  "gemma3:*":\n    tools: emulate\n', proxy_url)
    listing = httpx.get(proxy_url + "/v1/models").json()["data"]
    gemma = next(m for m in listing if m["id"] == "gemma3:4b")
    assert gemma["toolshim"]["tools"] == "emulate"
    assert gemma["toolshim"]["source"] == "models:gemma3:*"
