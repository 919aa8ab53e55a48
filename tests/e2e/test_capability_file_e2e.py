"""The capability file seen from outside: first run, reload with no request, bounded
learning, odd names, case, facts waiting for a fixed file, repair by default."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest
from support.capfile import learned, learned_entry, replace_text
from support.fake_ollama import FakeOllama, Reply, tool_call
from support.polling import until
from support.servers import serve
from support.tools import WEATHER

from proxy.app import create_app
from proxy.capabilities.shipped import shipped_text
from proxy.settings import Settings

TOOLS: list[Any] = [WEATHER]
MSG: list[Any] = [{"role": "user", "content": "hi"}]
PERSON = "# mine\nversion: 1\nmodels:\n  \"qwen3*\":\n    max_tools: 10\n"


def _facts_written(url: str) -> float:
    for line in httpx.get(url + "/metrics").text.splitlines():
        if line.startswith("toolshim_learned_facts_written_total "):
            return float(line.split()[1])
    raise AssertionError("metric missing")


def test_first_run_outside_the_clone_creates_the_file_from_the_shipped_one(
        new_sdk: Callable[..., openai.OpenAI], fake: FakeOllama,
        make_settings: Callable[..., Settings], tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "elsewhere" / "capabilities.yaml"
    path.parent.mkdir()
    with caplog.at_level(logging.INFO), \
            serve(create_app(make_settings(capabilities=str(path), probe=False))) as url:
        new_sdk(url).chat.completions.create(model="gemma3:4b", messages=MSG, tools=TOOLS)
        # The shipped gemma3 entry (emulate) was in force from the first request on.
        assert "tools" not in fake.chat_requests()[-1]
        assert "get_weather" in str(fake.chat_requests()[-1]["messages"])
    assert path.read_text() == shipped_text()
    created = [r for r in caplog.records if "created" in r.getMessage()]
    assert len(created) == 1 and str(path) in created[0].getMessage()


def test_reload_and_errors_show_without_any_chat_request(
        fake: FakeOllama, make_settings: Callable[..., Settings], caps_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    caps_path.write_text(PERSON)
    with caplog.at_level(logging.WARNING), \
            serve(create_app(make_settings(reload_interval=0.05))) as url:
        def admin() -> dict[str, Any]:
            body: dict[str, Any] = httpx.get(url + "/admin/capabilities").json()
            return body

        replace_text(caps_path, PERSON.replace("10", "lots"))
        until(lambda: admin()["last_reload_error"] is not None, within=10,
              what="the bad edit reported as a reload error")
        assert "capabilities.yaml:5" in httpx.get(url + "/readyz").json()["capabilities"]
        time.sleep(0.3)  # several more checks of the same bad file: still one warning
        replace_text(caps_path, PERSON.replace("10", "12"))
        until(lambda: admin()["last_reload_error"] is None, within=10,
              what="the fixed file reloaded")
        assert httpx.get(url + "/readyz").json()["capabilities"] == "ok"
    assert fake.chat_requests() == []
    warned = [r for r in caplog.records if "max_tools" in r.getMessage()]
    assert len(warned) == 1 and warned[0].threadName == "toolshim-capabilities"


def test_fact_learned_while_the_file_is_invalid_is_written_once_it_is_fixed(
        new_sdk: Callable[..., openai.OpenAI], fake: FakeOllama,
        make_settings: Callable[..., Settings], caps_path: Path) -> None:
    broken = PERSON + "  oops: [\n"
    caps_path.write_text(broken)
    # Not a shipped family: a broken file at start serves the shipped entries, and
    # gemma3's there is `emulate` (no refusal to learn from).
    fake.add_model("refuser:1b", tools=False)
    with serve(create_app(make_settings(probe=False, reload_interval=0.05))) as url:
        raw = new_sdk(url).chat.completions.with_raw_response.create(
            model="refuser:1b", messages=MSG, tools=TOOLS)
        assert raw.headers["x-toolshim-rung"] == "emulate"
        time.sleep(0.3)
        assert caps_path.read_text() == broken  # never clobbered
        assert _facts_written(url) == 0  # nothing written yet, so nothing counted
        replace_text(caps_path, PERSON)  # the person fixes it; no request follows
        learned_entry(caps_path, "refuser:1b", within=10)
        assert caps_path.read_text().startswith(PERSON)
        until(lambda: _facts_written(url) == 1, within=10, what="one fact written")


def test_pending_facts_are_written_on_shutdown(
        new_sdk: Callable[..., openai.OpenAI], fake: FakeOllama,
        make_settings: Callable[..., Settings], caps_path: Path) -> None:
    caps_path.write_text(PERSON)
    # A long interval: the only chance to write the second fact is shutdown.
    with serve(create_app(make_settings(probe=False, reload_interval=3600))) as url:
        sdk = new_sdk(url)
        fake.add_model("other:1b", tools=False)
        sdk.chat.completions.create(model="gemma3:4b", messages=MSG, tools=TOOLS)
        sdk.chat.completions.create(model="other:1b", messages=MSG, tools=TOOLS)
    assert {"gemma3:4b", "other:1b"} <= set(learned(caps_path))


def test_long_and_odd_model_names_never_stop_learning(
        new_sdk: Callable[..., openai.OpenAI], fake: FakeOllama,
        make_settings: Callable[..., Settings], caps_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    caps_path.write_text(PERSON)
    long_name = "m" * 300 + ":1b"
    for name in (long_name, "refuse-x[", "plain:1b"):
        fake.add_model(name, tools=False)
    with caplog.at_level(logging.WARNING), \
            serve(create_app(make_settings(probe=False))) as url:
        sdk = new_sdk(url)
        # A name past 256 characters is refused at the door (400, param "model"), so no
        # table, the file included, ever sees it.
        with pytest.raises(openai.BadRequestError) as refused:
            sdk.chat.completions.create(model=long_name, messages=MSG, tools=TOOLS)
        assert refused.value.param == "model"
        for name in ("refuse-x[", "plain:1b"):
            reply = sdk.chat.completions.create(model=name, messages=MSG, tools=TOOLS)
            assert (reply.choices[0].message.content or "").startswith(f"Hello from {name}")
        learned_entry(caps_path, "plain:1b", within=10)
    assert set(learned(caps_path)) == {"plain:1b"}
    assert caps_path.read_text().startswith(PERSON)
    odd = [r.getMessage() for r in caplog.records if "refuse-x[" in r.getMessage()]
    assert len(odd) == 1 and "not learning" in odd[0] and "unclosed '['" in odd[0]


def test_learned_keys_keep_the_clients_spelling(
        new_sdk: Callable[..., openai.OpenAI], fake: FakeOllama,
        make_settings: Callable[..., Settings], caps_path: Path) -> None:
    name = "hf.co/Org/Model-GGUF:Q4_K_M"
    fake.add_model(name, tools=False)
    with serve(create_app(make_settings(probe=False))) as url:
        sdk = new_sdk(url)
        sdk.chat.completions.create(model=name, messages=MSG, tools=TOOLS)
        learned_entry(caps_path, name, within=10)
        models = httpx.get(url + "/admin/capabilities").json()["models"]
        assert models[name]["profile"]["tool_support"] == "refused"
        again = sdk.chat.completions.with_raw_response.create(model=name, messages=MSG,
                                                              tools=TOOLS)
        assert "x-toolshim-retries" not in again.headers
    assert f'"{name}":' in caps_path.read_text()


def test_learned_entries_are_capped_oldest_first(
        new_sdk: Callable[..., openai.OpenAI], fake: FakeOllama,
        make_settings: Callable[..., Settings], caps_path: Path) -> None:
    caps_path.write_text(PERSON + "learned:\n" + "".join(
        f'  "old{i}:1b":\n    tools: off\n    source: probe\n    at: "2026-01-0{i + 1}T00:00:00Z"\n'
        for i in range(3)))
    fake.add_model("new:1b", tools=False)
    with serve(create_app(make_settings(probe=False, max_learned=3))) as url:
        new_sdk(url).chat.completions.create(model="new:1b", messages=MSG, tools=TOOLS)
        learned_entry(caps_path, "new:1b", within=10)
    assert list(learned(caps_path)) == ["old1:1b", "old2:1b", "new:1b"]
    assert caps_path.read_text().startswith(PERSON)


def test_requests_are_answered_while_a_big_file_is_being_parsed(
        client: openai.OpenAI, fake: FakeOllama, make_settings: Callable[..., Settings],
        caps_path: Path) -> None:
    # A file of many comments once froze every request for seconds (11 MB: 4.4 s; ruamel's
    # comment handling grows faster than linearly); the parse now runs on the keeper
    # thread, and the last good version serves meanwhile.
    settings = make_settings(max_capabilities_bytes=64 * 1024 * 1024, reload_interval=0.05,
                             probe=False)
    app = create_app(settings)
    with serve(app) as url:
        sdk = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=20)
        try:
            store = app.state.services.store
            generation = store.generation
            replace_text(caps_path, PERSON + "# padding padding padding padding\n" * 40_000)
            until(lambda: bool(store.reloading), within=20, what="a reload to start")
            reply = sdk.chat.completions.create(model="qwen3:8b", messages=MSG)
            assert reply.choices[0].message.content == "Hello from qwen3:8b"
            assert store.reloading and store.generation == generation  # still parsing
            until(lambda: store.generation > generation, within=120,
                  what="the large file loaded")
        finally:
            sdk.close()


def test_a_file_over_the_size_limit_is_a_reload_error(
        fake: FakeOllama, make_settings: Callable[..., Settings], caps_path: Path) -> None:
    caps_path.write_text(PERSON)
    with serve(create_app(make_settings(reload_interval=0.05))) as url:
        replace_text(caps_path, PERSON + "# " + "x" * 8_500_000 + "\n")  # 8.5 MB
        until(lambda: httpx.get(url + "/readyz").json()["capabilities"] != "ok", within=10,
              what="/readyz to report the oversized file")
        error = httpx.get(url + "/readyz").json()["capabilities"]
        assert "over the limit" in error
        admin = httpx.get(url + "/admin/capabilities").json()
        assert admin["generation"] == 1 and admin["patterns"] == ["qwen3*"]  # last good


def test_invalid_tool_call_arguments_are_repaired_by_default(
        client: openai.OpenAI, fake: FakeOllama) -> None:
    fake.reply("qwen3:8b", Reply(tool_calls=[tool_call("get_weather", "{'city': 'Paris',}")]))
    reply = client.chat.completions.create(model="qwen3:8b", messages=MSG, tools=TOOLS)
    calls = reply.choices[0].message.tool_calls
    assert calls is not None and len(calls) == 1
    assert orjson.loads(calls[0].function.arguments) == {"city": "Paris"}

