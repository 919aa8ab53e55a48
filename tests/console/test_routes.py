"""The console's JSON API and page, driven in process (ASGI) against the fake Ollama."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from ruamel.yaml import YAML
from support.battery import good_answers, script, weak_answers
from support.fake_ollama import FakeOllama, Reply, tool_call
from support.inprocess import InProcessApps
from support.tools import WEATHER

from proxy.settings import Settings
from tests.support.capfile import learned, replace_text

KEY = "sk-console-test-1234"
AUTH = {"authorization": f"Bearer {KEY}"}
FILE = """# my notes: keep this comment
version: 1
models:
  "qwen3:8b":   # exact entry
    rename: {get_weather: weather_now}
  "gemma*":
    max_tools: 4

learned:
  # what the proxy found out
  "gemma3:4b":
    tools: "off"
    source: "runtime_error"
    at: "2026-11-20T10:00:00Z"
    evidence: "registry.ollama.ai/library/gemma3:4b does not support tools"
"""
WEATHER_CALL = Reply(tool_calls=[tool_call("weather_now", {"city": "Paris"})])


@pytest.fixture
def caps_file(caps_path: Path) -> Path:
    caps_path.write_text(FILE)
    return caps_path


@pytest.fixture
async def console(make_settings: Callable[..., Settings], caps_file: Path
                  ) -> AsyncIterator[Callable[..., Any]]:
    """Make an in-process app with these settings; yields an httpx client factory."""
    apps = InProcessApps(make_settings)
    yield apps.open
    await apps.close()


def _chat(model: str, **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": "hi there"}], **extra}


async def test_page_is_public_self_contained_and_offline(console: Callable[..., Any]) -> None:
    http = await console(api_keys=(KEY,))
    page = await http.get("/ui")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assets = [a for a in re.findall(r'(?:src|href)="([^"#]+)"', page.text)]
    assert sorted(assets) == ["/ui/console.css", "/ui/console.js"]
    for asset in assets:
        got = await http.get(asset)
        assert got.status_code == 200
        assert not re.search(r"https?://", got.text), f"{asset} refers to another origin"
    missing = await http.get("/ui/../app.py")
    assert missing.status_code == 404
    assert (await http.get("/ui/secrets.txt")).json()["error"]["message"].startswith("no route")


@pytest.mark.parametrize(("method", "path"), [
    ("GET", "/admin/models"), ("GET", "/admin/requests"), ("GET", "/admin/bench"),
    ("POST", "/admin/bench"), ("POST", "/admin/validate"),
    ("POST", "/admin/learned/gemma3:4b/promote"), ("POST", "/admin/learned/gemma3:4b/forget")])
async def test_every_console_route_needs_the_key(console: Callable[..., Any], caps_file: Path,
                                                 method: str, path: str) -> None:
    http = await console(api_keys=(KEY,))
    refused = await http.request(method, path, json={})
    assert refused.status_code == 401
    assert refused.json()["error"]["type"] == "authentication_error"
    assert caps_file.read_text() == FILE
    allowed = await http.request(method, path, headers=AUTH, json={})
    assert allowed.status_code != 401


async def test_models_lists_upstream_and_file_models_with_provenance(
        console: Callable[..., Any], fake: FakeOllama) -> None:
    fake.add_model("llama3.2")
    http = await console()
    body = (await http.get("/admin/models")).json()
    models = {m["name"]: m for m in body["models"]}
    assert {"qwen3:8b", "gemma3:4b", "llama3.2:latest"} <= set(models)
    assert body["patterns"] == ["gemma*"] and body["last_reload_error"] is None
    qwen = models["qwen3:8b"]
    assert qwen["sources"]["rename"] == {"kind": "exact", "label": "qwen3:8b"}
    assert qwen["sources"]["tools"]["kind"] == "built-in"
    assert "models" in qwen["known_from"] and "upstream" in qwen["known_from"]
    gemma = models["gemma3:4b"]
    # Learned as the fact; the shipped fallback decides what requests get.
    assert gemma["tools"] == "emulate" and gemma["sources"]["tool_support"]["kind"] == "learned"
    assert gemma["sources"]["max_tools"] == {"kind": "glob", "label": "gemma*"}
    assert gemma["learned"]["source"] == "runtime_error" and gemma["validation"] is None
    assert models["llama3.2:latest"]["known_from"] == ["upstream"]


async def test_only_entries_with_behaviour_can_be_promoted(
        console: Callable[..., Any], caps_file: Path) -> None:
    # Correction counts (like validation) are bookkeeping: an entry with nothing
    # else has no behaviour to move under models:, so no Promote is offered.
    caps_file.write_text(FILE + """  "phi4:14b":
    source: "observed"
    at: "2026-11-24T10:00:00Z"
    correction: {tried: 3, succeeded: 2, at: "2026-11-24T10:00:00Z"}
""")
    http = await console()
    models = {m["name"]: m for m in (await http.get("/admin/models")).json()["models"]}
    assert models["gemma3:4b"]["promotable"] is True
    assert models["phi4:14b"]["promotable"] is False


async def test_models_shows_a_reload_error_and_keeps_the_last_good_version(
        console: Callable[..., Any], caps_file: Path) -> None:
    http = await console()
    replace_text(caps_file, FILE + "  \"qwen3:1b\":\n    tools: sometimes\n")
    for _ in range(500):  # the file is reloaded in the background, never on a request
        body = (await http.get("/admin/models")).json()
        if body["last_reload_error"]:
            break
        await asyncio.sleep(0.02)
    assert "tools" in body["last_reload_error"] and str(caps_file) in body["last_reload_error"]
    assert {m["name"]: m for m in body["models"]}["gemma3:4b"]["tools"] == "emulate"


async def test_requests_keeps_the_last_n_without_prompts(
        console: Callable[..., Any], fake: FakeOllama) -> None:
    fake.reply("qwen3:8b", WEATHER_CALL)
    http = await console(recent_requests=2)
    tools = [WEATHER]
    for _ in range(3):
        assert (await http.post("/v1/chat/completions",
                                json=_chat("qwen3:8b", tools=tools))).status_code == 200
    await http.post("/v1/chat/completions", json=_chat("gemma3:4b", tools=tools))
    body = (await http.get("/admin/requests")).json()
    assert body["capacity"] == 2 and len(body["requests"]) == 2
    newest, older = body["requests"]
    assert newest["model"] == "gemma3:4b" and newest["rung"] == "emulate"
    assert newest["tools_stripped"] == 0 and newest["status"] == 200
    assert older["model"] == "qwen3:8b" and older["calls_kept"] == 1
    assert older["upstream_ms"] > 0 and older["overhead_ms"] >= 0
    assert "hi there" not in orjson.dumps(body).decode()
    assert len((await http.get("/admin/requests?limit=1")).json()["requests"]) == 1
    assert (await http.get("/admin/requests?limit=x")).status_code == 400
    counters = {m["name"]: m["counters"] for m in (await http.get("/admin/models")).json()[
        "models"]}
    assert counters["qwen3:8b"]["requests"] == 3 and counters["qwen3:8b"]["calls_passed"] == 3
    assert counters["qwen3:8b"]["p50_overhead_ms"] is not None


async def test_requests_keep_prompts_only_with_log_prompts_and_show_them_to_admins(
        console: Callable[..., Any]) -> None:
    admin = {"authorization": "Bearer sk-admin-5678"}
    http = await console(log_prompts=True, api_keys=(KEY,), admin_keys=("sk-admin-5678",))
    await http.post("/v1/chat/completions", json=_chat("qwen3:8b"), headers=AUTH)
    shown = (await http.get("/admin/requests", headers=admin)).json()
    assert shown["prompts_shown"] and shown["prompts_kept"]
    entry = shown["requests"][0]
    assert entry["prompt"]["messages"] == [{"role": "user", "content": "hi there"}]


async def test_no_admin_key_configured_means_nobody_reads_prompts(
        console: Callable[..., Any]) -> None:
    """A client key (or, with no keys, anyone) opens /admin/requests, but not the prompts
    of other clients' conversations in it."""
    for keys in ((), (KEY,)):
        http = await console(log_prompts=True, api_keys=keys)
        await http.post("/v1/chat/completions", json=_chat("qwen3:8b"), headers=AUTH)
        got = await http.get("/admin/requests", headers=AUTH)
        assert got.status_code == 200
        body = got.json()
        assert body["prompts_kept"] and not body["prompts_shown"]
        assert body["requests"] and all("prompt" not in e for e in body["requests"])
        assert b"hi there" not in got.content


async def test_bench_shows_the_rewrite_upstream_and_the_client_view(
        console: Callable[..., Any], fake: FakeOllama) -> None:
    fake.reply("qwen3:8b", WEATHER_CALL)
    http = await console()
    got = await http.post("/admin/bench", json={
        "model": "qwen3:8b", "prompt": "weather in Paris?", "sample_tools": ["weather"]})
    body = got.json()
    assert got.status_code == 200
    assert body["client_sent"]["tools"][0]["function"]["name"] == "get_weather"
    [upstream] = body["upstream_sent"]
    assert upstream["tools"][0]["function"]["name"] == "weather_now"
    assert fake.chat_requests()[-1]["tools"] == upstream["tools"]
    [answer] = body["upstream_answers"]
    assert answer["status"] == 200 and '"weather_now"' in answer["body"]
    message = body["client_got"]["body"]["choices"][0]["message"]
    assert message["tool_calls"][0]["function"]["name"] == "get_weather"
    assert body["record"]["model"] == "qwen3:8b"


async def test_bench_streams_and_records_a_refusal_and_retry(
        console: Callable[..., Any], fake: FakeOllama) -> None:
    fake.add_model("mistral:7b", tools=False)
    http = await console()
    body = (await http.post("/admin/bench", json={
        "model": "mistral:7b", "prompt": "hi", "sample_tools": ["shell", "calculator"],
        "stream": True})).json()
    first, second = body["upstream_sent"]
    assert len(first["tools"]) == 2 and "tools" not in second
    refused, answered = body["upstream_answers"]
    assert refused["status"] == 400 and "does not support tools" in refused["body"]
    assert answered["body"].startswith("data: ") and answered["body"].endswith("[DONE]\n\n")
    assert "Hello from mistral:7b" not in answered["body"]  # pieces, not joined text
    assert body["client_got"]["headers"]["x-toolshim-rung"] == "emulate"
    assert body["client_got"]["body"].rstrip().endswith("data: [DONE]")
    assert {n["kind"] for n in body["notes"]} >= {"tools_refused"}  # then emulated: nothing stripped


@pytest.mark.parametrize(("payload", "param"), [
    ({"model": "qwen3:8b"}, "prompt"), ({"prompt": "hi"}, "model"),
    ({"model": "qwen3:8b", "prompt": "hi", "sample_tools": ["nope"]}, "sample_tools"),
    ({"model": "qwen3:8b", "prompt": "hi", "tools": {"a": 1}}, "tools")])
async def test_bench_rejects_bad_input_clearly(console: Callable[..., Any],
                                               payload: dict[str, Any], param: str) -> None:
    http = await console()
    got = await http.post("/admin/bench", json=payload)
    assert got.status_code == 400 and got.json()["error"]["param"] == param
    assert (await http.post("/admin/bench", content=b"[1")).status_code == 400


async def test_bench_lists_the_sample_tools(console: Callable[..., Any]) -> None:
    http = await console()
    tools = (await http.get("/admin/bench")).json()["sample_tools"]
    assert set(tools) == {"weather", "search", "read_file", "write_file", "shell", "calculator"}


async def test_capture_header_from_a_client_captures_nothing(
        console: Callable[..., Any]) -> None:
    http = await console()
    got = await http.post("/v1/chat/completions", json=_chat("qwen3:8b"),
                          headers={"x-toolshim-capture": "guess"})
    assert got.status_code == 200


async def test_validate_records_the_result_and_v1_models_shows_it(
        console: Callable[..., Any], fake: FakeOllama, caps_file: Path) -> None:
    script(fake, "qwen3:8b", good_answers())
    http = await console()
    result = (await http.post("/admin/validate", json={"model": "qwen3:8b"})).json()
    assert (result["passed"], result["total"], result["failed"]) == (6, 6, [])
    assert result["rung"] == "native"
    recorded = learned(caps_file)["qwen3:8b"]["validation"]
    assert recorded["passed"] == 6 and recorded["at"] == result["at"]
    assert caps_file.read_text().startswith(FILE.split("learned:")[0])
    listed = {m["id"]: m for m in (await http.get("/v1/models")).json()["data"]}
    assert listed["qwen3:8b"]["toolshim"]["validation"]["passed"] == 6
    models = {m["name"]: m for m in (await http.get("/admin/models")).json()["models"]}
    assert models["qwen3:8b"]["validation"]["total"] == 6


async def test_validate_keeps_the_learned_provenance_of_the_entry(
        console: Callable[..., Any], fake: FakeOllama, caps_file: Path) -> None:
    http = await console()
    result = (await http.post("/admin/validate", json={"model": "gemma3:4b"})).json()
    entry = learned(caps_file)["gemma3:4b"]
    assert entry["source"] == "runtime_error" and "does not support" in entry["evidence"]
    assert entry["validation"]["failed"] == result["failed"]
    assert "# what the proxy found out" in caps_file.read_text()


async def test_min_validation_turns_tools_off_for_a_weak_model(
        console: Callable[..., Any], fake: FakeOllama) -> None:
    script(fake, "qwen3:8b", weak_answers())
    http = await console(min_validation=0.8)
    result = (await http.post("/admin/validate", json={"model": "qwen3:8b"})).json()
    assert result["passed"] == 1 and "single_call" in result["failed"]
    # the invalid call (bad enum, no `when`) never reaches the client: the proxy drops it
    assert "create_event" in next(c["reason"] for c in result["checks"]
                                  if c["name"] == "enum_nested_schema")
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    answer = await http.post("/v1/chat/completions", json=_chat("qwen3:8b", tools=tools))
    assert answer.status_code == 200
    assert answer.headers["x-toolshim-rung"] == "off-min-validation"
    assert "tools" not in fake.chat_requests()[-1]
    plain = await http.post("/v1/chat/completions", json=_chat("qwen3:8b"))
    assert plain.headers["x-toolshim-rung"] == "native"


async def test_min_validation_finds_a_learned_key_spelled_another_way(
        console: Callable[..., Any], caps_file: Path, fake: FakeOllama) -> None:
    # Learned keys keep the spelling they were written with; the gate matches them
    # as the resolver does (case, the :latest tag), or a weak model keeps its tools.
    caps_file.write_text(FILE + """  "Llama3.2":
    source: "observed"
    at: "2026-11-24T10:00:00Z"
    validation: {at: "2026-11-24T10:00:00Z", passed: 1, total: 6, failed: [single_call]}
""")
    fake.add_model("llama3.2")
    http = await console(min_validation=0.8)
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    for name in ("llama3.2:latest", "llama3.2"):
        answer = await http.post("/v1/chat/completions", json=_chat(name, tools=tools))
        assert answer.status_code == 200
        assert answer.headers["x-toolshim-rung"] == "off-min-validation"
        assert "tools" not in fake.chat_requests()[-1]


async def test_validate_rejects_a_missing_model(console: Callable[..., Any]) -> None:
    http = await console()
    got = await http.post("/admin/validate", json={"model": ""})
    assert got.status_code == 400 and got.json()["error"]["param"] == "model"


@pytest.mark.parametrize("listed", [True, False], ids=["listing-says", "upstream-says"])
async def test_validate_of_a_model_no_upstream_has_is_a_404_and_writes_nothing(
        console: Callable[..., Any], caps_file: Path, fake: FakeOllama, listed: bool) -> None:
    if not listed:  # an upstream that lists nothing may serve unlisted models: it is asked
        fake.models.clear()
    http = await console()
    before = caps_file.read_bytes()
    got = await http.post("/admin/validate", json={"model": "does-not-exist-anywhere"})
    assert got.status_code == 404
    assert got.json() == {"error": {
        "message": "The model `does-not-exist-anywhere` does not exist or you do not have "
                   "access to it.",
        "type": "invalid_request_error", "param": "model", "code": "model_not_found"}}
    assert caps_file.read_bytes() == before
    asked = [r["model"] for r in fake.chat_requests()]
    assert asked == ([] if listed else ["does-not-exist-anywhere"] * 6)


async def test_promote_moves_the_entry_and_keeps_every_other_byte(
        console: Callable[..., Any], caps_file: Path) -> None:
    http = await console()
    got = await http.post("/admin/learned/gemma3:4b/promote")
    assert got.status_code == 200 and got.json()["status"] == "promoted"
    text = caps_file.read_text()
    assert "# my notes: keep this comment" in text and "# exact entry" in text
    assert "# what the proxy found out" in text
    assert "promoted from learned: on " in text and "source: runtime_error" in text
    data = YAML(typ="safe").load(text)
    assert data["models"]["gemma3:4b"] == {"tools": "off"} and not data["learned"]
    models = {m["name"]: m for m in (await http.get("/admin/models")).json()["models"]}
    assert models["gemma3:4b"]["sources"]["tools"] == {"kind": "exact", "label": "gemma3:4b"}
    again = await http.post("/admin/learned/gemma3:4b/promote")
    assert again.status_code == 409 and again.json()["error"]["code"] == "edit_refused"


async def test_forget_removes_the_entry_only(console: Callable[..., Any],
                                             caps_file: Path) -> None:
    http = await console()
    assert (await http.post("/admin/learned/gemma3:4b/forget")).status_code == 200
    assert caps_file.read_text() == FILE.split('  "gemma3:4b":')[0]
    missing = await http.post("/admin/learned/gemma3:4b/forget")
    assert missing.status_code == 409 and "no learned entry" in missing.json()["error"]["message"]


async def test_edits_refuse_a_broken_file_and_leave_it_alone(
        console: Callable[..., Any], caps_file: Path) -> None:
    http = await console()
    broken = FILE.replace("max_tools: 4", "max_tools: [")
    caps_file.write_text(broken)
    got = await http.post("/admin/learned/gemma3:4b/promote")
    assert got.status_code == 409
    assert caps_file.read_text() == broken
