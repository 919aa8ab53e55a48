"""The tool schemas coding agents really send go through every schema rewrite, the tool
budget, emulation in every format and the call checks without error (agent_tools.py)."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest
from agent_tools import SAFE, every_agent_tool, opencode_tools, qwen_code_tools
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.formats import FORMATS
from proxy.transforms.request import apply_request_steps
from proxy.transforms.response.checks import SchemaCache, check_call
from proxy.types import Plan, Profile, SchemaRewrite

REWRITES = [
    SchemaRewrite(),
    SchemaRewrite(drop_keywords=("$schema", "additionalProperties", "exclusiveMinimum",
                                 "minimum", "maximum", "format")),
    SchemaRewrite(inline_refs=True),
    SchemaRewrite(collapse_nullable=True),
    SchemaRewrite(max_description_chars=200),
    SchemaRewrite(("$schema",), True, True, 80),
]


def _request(tools: list[dict[str, Any]]) -> dict[str, Any]:
    return {"model": "m", "stream": True, "tools": tools, "messages": [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "assistant", "content": "How can I help?"},  # Qwen Code opens like this
        {"role": "user", "content": "Read /w/a.txt and write it to /w/b.txt"},
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": "read", "arguments": '{"filePath": "/w/a.txt"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "hello"}]}


@pytest.mark.parametrize("rewrite", REWRITES, ids=repr)
@pytest.mark.parametrize("max_tools", [None, 8, 64])
@pytest.mark.parametrize("plan", ["native", "emulate", "off"])
def test_every_rewrite_and_budget_takes_agent_schemas(rewrite: SchemaRewrite,
                                                      max_tools: int | None, plan: str) -> None:
    request = _request(every_agent_tool())
    before = copy.deepcopy(request)
    profile = Profile("m", schema=rewrite, max_tools=max_tools)
    out, _ = apply_request_steps(request, profile, Plan(plan))  # type: ignore[arg-type]
    assert request == before  # pure: the client's body is untouched
    orjson.dumps(out)  # still JSON (huge integers included)
    if plan == "native":
        kept = out["tools"]
        assert len(kept) == min(len(request["tools"]), max_tools or 10**6)
        assert "read" in {t["function"]["name"] for t in kept}  # used in history: kept first
        if rewrite.max_description_chars:
            assert all(len(t["function"].get("description", "")) <= 4 * 80 + 200
                       for t in kept)
    else:
        assert "tools" not in out
    if plan == "emulate":
        assert "bash" in out["messages"][0]["content"]


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_every_format_describes_agent_tools(fmt: str) -> None:
    out, _ = apply_request_steps(_request(every_agent_tool()), Profile(
        "m", tool_format=fmt, max_tools=None), Plan("emulate"))
    system = out["messages"][0]["content"]
    assert "write_file" in system and "apply_patch" in system


def test_zod_safe_integer_bounds_are_checked_not_choked_on() -> None:
    offered = {t["function"]["name"]: t["function"]["parameters"] for t in opencode_tools()}
    cache = SchemaCache()

    def verdict(arguments: dict[str, Any]) -> bool:
        return check_call("bash", orjson.dumps(arguments).decode(), offered, "drop", {},
                          cache).ok

    assert verdict({"command": "ls", "description": "list", "timeout": 120000})
    assert verdict({"command": "ls", "description": "list", "timeout": SAFE})
    assert not verdict({"command": "ls", "description": "list", "timeout": 0})  # exclusive
    assert not verdict({"command": "ls", "description": "list", "timeout": SAFE + 1})
    assert not verdict({"command": "ls", "description": "list", "extra": 1})  # additional: false
    assert check_call("skill", '{"name": "x", "anything": [1]}', offered, "drop", {}, cache).ok


@settings(max_examples=40, deadline=None)
@given(st.permutations(every_agent_tool()), st.integers(0, 40),
       st.sampled_from(REWRITES), st.sampled_from(["native", "emulate", "off"]))
def test_any_order_and_budget_of_agent_tools(tools: list[dict[str, Any]], budget: int,
                                             rewrite: SchemaRewrite, plan: str) -> None:
    profile = Profile("m", schema=rewrite, max_tools=budget)
    out, _ = apply_request_steps(_request(list(tools)), profile, Plan(plan))  # type: ignore[arg-type]
    if plan == "native":
        assert len(out.get("tools") or []) <= max(budget, 1)


def test_qwen_code_fifteen_tools_survive_the_default_budget() -> None:
    out, _ = apply_request_steps(_request(qwen_code_tools()), Profile("m"), Plan("native"))
    assert len(out["tools"]) == 15
