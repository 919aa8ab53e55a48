"""One real request of each agent (tests/fixtures/agent_requests.json, recorded from
opencode 1.18.33, Qwen Code 0.15.10, Continue CLI 1.5.47 and Codex 0.171.0 run headless
through toolshim) through the pure transforms: the Responses translation, every
request step on every rung, and emulation in the formats agents' models use."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.api.responses.request import to_chat, validate
from proxy.transforms.request import apply_request_steps
from proxy.types import Plan, Profile, SchemaRewrite

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "agent_requests.json"
AGENTS: dict[str, Any] = json.loads(FIXTURE.read_text())


def _chat(agent: str) -> dict[str, Any]:
    entry = AGENTS[agent]
    request = copy.deepcopy(entry["request"])
    if entry["api"] == "responses":
        return to_chat(validate(request), []).chat
    return request


def test_the_fixture_holds_each_agent() -> None:
    assert set(AGENTS) == {"opencode", "qwen", "cn", "codex"}
    assert len(AGENTS["qwen"]["request"]["tools"]) == 15
    assert AGENTS["qwen"]["request"]["messages"][1]["role"] == "user"


def test_codex_request_keeps_apply_patch_and_strips_hosted_tools() -> None:
    body = copy.deepcopy(AGENTS["codex"]["request"])
    kinds = [t["type"] for t in body["tools"]]
    assert "custom" in kinds and "namespace" in kinds and "web_search" in kinds
    translated = to_chat(validate(body), [])
    names = [t["function"]["name"] for t in translated.chat["tools"]]
    assert "apply_patch" in names and "exec_command" in names
    assert translated.kinds == {"apply_patch": "custom"}
    assert translated.stripped == kinds.count("namespace") + kinds.count("web_search")
    patch = next(t for t in translated.chat["tools"] if t["function"]["name"] == "apply_patch")
    assert "*** Begin Patch" in patch["function"]["description"]  # its Lark grammar


@pytest.mark.parametrize("agent", sorted(AGENTS))
@pytest.mark.parametrize("plan", ["native", "emulate", "off"])
@pytest.mark.parametrize("rewrite", [SchemaRewrite(), SchemaRewrite(
    ("$schema", "additionalProperties"), True, True, 120)], ids=["plain", "all-rewrites"])
def test_each_agent_request_through_every_step(agent: str, plan: str,
                                               rewrite: SchemaRewrite) -> None:
    request = _chat(agent)
    before = copy.deepcopy(request)
    out, _ = apply_request_steps(request, Profile("m", schema=rewrite, max_tools=12),
                                 Plan(plan))  # type: ignore[arg-type]
    assert request == before
    orjson.dumps(out)
    if plan == "native":
        assert 1 <= len(out["tools"]) <= 12
    else:
        assert "tools" not in out and "tool_choice" not in out


@pytest.mark.parametrize("agent", sorted(AGENTS))
@pytest.mark.parametrize("fmt", ["hermes", "qwen3_coder_xml", "json_block", "llama3_json"])
def test_emulation_describes_each_agents_tools(agent: str, fmt: str) -> None:
    request = _chat(agent)
    out, notes = apply_request_steps(request, Profile("m", tool_format=fmt, max_tools=None),
                                     Plan("emulate"))
    system = out["messages"][0]["content"]
    assert all(t["function"]["name"] in system for t in request["tools"])
    [emulated] = [n for n in notes if n.kind == "tools_emulated"]
    assert emulated.detail["chars"] > 0
