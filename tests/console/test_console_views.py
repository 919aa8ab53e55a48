"""What the console's views show: Responses traffic counted, the Requests view's endpoint
column, no model for a request that names none, and rows whose text reads as words.

The row markup is checked by running the shipped console.js under node with a small DOM
(elements, text nodes, textContent): the text a screen reader reads off a cell is its
textContent, so two pieces side by side must have a space between them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import openai
import pytest
from support.inprocess import InProcessApps

from proxy.console.routes import STATIC
from proxy.settings import Settings

NODE = shutil.which("node")

_DOM = """
class N { constructor() { this.childNodes = []; }
  get textContent() { return this.childNodes.map((c) => c.textContent).join(""); } }
class T extends N { constructor(t) { super(); this.data = t; } get textContent() { return this.data; } }
class E extends N {
  constructor(tag) { super(); this.tagName = tag.toUpperCase(); this.attrs = {}; this.className = ""; }
  setAttribute(k, v) { this.attrs[k] = String(v); }
  addEventListener() {}
  append(...nodes) { for (const n of nodes) this.childNodes.push(typeof n === "string" ? new T(n) : n); }
  get cells() { return this.childNodes.filter((c) => c.tagName === "TD"); }
}
globalThis.Node = N;
globalThis.document = { createElement: (t) => new E(t), createTextNode: (t) => new T(t),
  addEventListener() {}, getElementById() { return null; } };
globalThis.sessionStorage = { getItem() { return null; } };
globalThis.window = { addEventListener() {} };
globalThis.location = { hash: "" };
"""


def _cells(call: str) -> list[str]:
    """Each cell's textContent of the (first) row `call` builds in console.js."""
    return _texts(f"[{call}].flat()[0].cells")


def _texts(nodes: str) -> list[str]:
    """The textContent of each node of the list the expression `nodes` gives."""
    script = _DOM + (STATIC / "console.js").read_text() + f"""
process.stdout.write(JSON.stringify(({nodes}).map((c) => c.textContent)));
"""
    assert NODE is not None
    done = subprocess.run([NODE, "-"], input=script, capture_output=True, text=True,
                          timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    cells: list[str] = json.loads(done.stdout)
    return cells


MODEL = {
    "name": "qwen3:8b", "known_from": ["listed", "models:"], "upstream": "http://ollama:11434",
    "tools": "emulate", "tool_format": "hermes", "validation": None, "learned": {"x": 1},
    "promotable": True,
    "sources": {"tools": {"kind": "exact", "label": "qwen3:8b"},
                "tool_format": {"kind": "learned", "label": "learned"}},
    "counters": {"requests": 3, "errors": 1, "calls_passed": 2, "calls_repaired": 1,
                 "calls_dropped": 0, "calls_recovered": 4, "refusals": 0, "retries": 0,
                 "corrections_tried": 0, "corrections_succeeded": 0, "p50_overhead_ms": 1.5},
}


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_model_row_cells_read_as_separate_words() -> None:
    cells = _cells(f"modelRows({json.dumps(MODEL)})")
    assert cells[0] == "qwen3:8b listed · models: · http://ollama:11434"
    assert cells[1] == "emulate exact"
    assert cells[2] == "hermes learned"
    assert cells[3] == "not validated"
    assert cells[5] == "✓ 2 ⟳ 1 ✗ 0 ↺ 4"
    assert cells[8] == "Validate Promote Forget"


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_the_opened_rows_fields_read_as_separate_words() -> None:
    model = {**MODEL, "profile": {"tools": "emulate", "max_tools": 64},
             "sources": {**MODEL["sources"], "max_tools": {"kind": "built-in", "label": ""}}}
    script = f"modelFields({json.dumps(model)})[0].childNodes"
    fields = _texts(script)
    assert fields == ["tools emulate exact", "max_tools 64 built-in"]


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_requests_rows_name_the_endpoint_and_no_model_when_none() -> None:
    base = {"at": 0, "status": 200, "stream": False, "retries": 0, "overhead_ms": 0.1,
            "upstream_ms": 2, "request_id": "r"}
    listing = _cells(f"requestRow({json.dumps({**base, 'endpoint': 'models', 'model': None})})")
    assert listing[1:3] == ["/v1/models", "–"]
    chat = {**base, "endpoint": "chat.completions", "model": "qwen3:8b", "stream": True}
    assert _cells(f"requestRow({json.dumps(chat)})")[1:3] == ["chat", "qwen3:8b stream"]
    responses = {**base, "endpoint": "responses", "model": "qwen3:8b"}
    assert _cells(f"requestRow({json.dumps(responses)})")[1:3] == ["responses", "qwen3:8b"]
    embeddings = {**base, "endpoint": "embeddings", "model": None}
    assert _cells(f"requestRow({json.dumps(embeddings)})")[1] == "/v1/embeddings"


def test_requests_table_has_an_endpoint_column_beside_the_model() -> None:
    page = (STATIC / "index.html").read_text()
    assert "<th>Time</th><th>Endpoint</th><th>Model</th>" in page


@pytest.fixture
async def apps(make_settings: Callable[..., Settings]) -> AsyncIterator[InProcessApps]:
    made = InProcessApps(make_settings)
    yield made
    await made.close()


async def test_responses_traffic_counts_for_its_model(apps: InProcessApps) -> None:
    http = await apps.open()
    sdk = openai.AsyncOpenAI(base_url="http://toolshim/v1", api_key="unused", http_client=http,
                             max_retries=0)
    await sdk.responses.create(model="qwen3:8b", input="hi")
    await sdk.chat.completions.create(model="qwen3:8b",
                                      messages=[{"role": "user", "content": "hi"}])
    await sdk.models.list()
    await sdk.embeddings.create(model="qwen3:8b", input="hi")
    counters = {m["name"]: m["counters"] for m in
                (await http.get("/admin/models")).json()["models"]}
    assert counters["qwen3:8b"]["requests"] == 2
    recent = (await http.get("/admin/requests")).json()["requests"]
    listing = next(r for r in recent if r["endpoint"] == "models")
    assert listing["model"] is None
    embedded = next(r for r in recent if r["endpoint"] == "embeddings")
    assert embedded["model"] == "qwen3:8b"  # a passed-through body that names one shows it


async def test_a_huge_prompt_shows_as_its_size(apps: InProcessApps, tmp_path: Path) -> None:
    # Prompts are shown to an admin key only (docs/security.md).
    http = await apps.open(log_prompts=True, admin_keys=("admin-k",))
    text = "x" * 400_000
    admin = {"Authorization": "Bearer admin-k"}
    answer = await http.post("/v1/chat/completions", headers=admin, json={
        "model": "qwen3:8b", "messages": [{"role": "user", "content": text}]})
    assert answer.status_code == 200
    entry: Any = (await http.get("/admin/requests", headers=admin)).json()["requests"][0]
    assert "bytes" in entry["prompt"]["omitted"] and text not in json.dumps(entry)
