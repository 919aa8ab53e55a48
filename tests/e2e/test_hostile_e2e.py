"""Hostile request bodies through the real app: a 400 naming the problem, never a 500."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.fake_ollama import FakeOllama, Reply, tool_call

HEAD = b'{"model":"qwen3:8b","messages":[{"role":"user","content":"hi"}]'


def _with_tool(parameters: bytes) -> bytes:
    return HEAD + b',"tools":[{"type":"function","function":{"name":"f","parameters":' \
        + parameters + b"}}]}"


def _nested_content(depth: int) -> bytes:
    return b'{"model":"qwen3:8b","messages":[{"role":"user","content":' + b"[" * depth \
        + b'"x"' + b"]" * depth + b"}]}"


def _nested_schema(depth: int) -> bytes:
    return _with_tool(b'{"type":"object","properties":{"a":' * depth + b"{}" + b"}}" * depth)


CYCLES = {
    "mutual": {"type": "object", "$defs": {"a": {"$ref": "#/$defs/b"},
                                           "b": {"allOf": [{"$ref": "#/$defs/a"}]}},
               "properties": {"x": {"$ref": "#/$defs/a"}}},
    "root": {"$ref": "#"},
    "self": {"type": "object", "properties": {"x": {"$ref": "#/properties/x"}}},
}


@pytest.fixture(autouse=True)
def _calls(fake: FakeOllama) -> None:
    # Tool calls come back, so the arguments are checked against the schema.
    for _ in range(20):
        fake.reply("qwen3:8b", Reply(tool_calls=[tool_call("f", {"x": {"y": 1}})],
                                     finish="tool_calls"))


@pytest.mark.parametrize("name", sorted(CYCLES))
async def test_a_ref_cycle_in_a_tool_schema_is_a_400_naming_it(asgi: httpx.AsyncClient,
                                                               name: str) -> None:
    response = await asgi.post("/v1/chat/completions",
                               content=_with_tool(orjson.dumps(CYCLES[name])))
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_tool_schema"
    assert "$ref cycle" in error["message"] and "'f'" in error["message"]
    # The process goes on: the next request is served.
    ok = await asgi.post("/v1/chat/completions", content=HEAD + b"}")
    assert ok.status_code == 200


async def test_a_recursive_but_finite_schema_is_served(asgi: httpx.AsyncClient) -> None:
    tree = {"$defs": {"node": {"type": "object",
                               "properties": {"y": {"type": "integer"},
                                              "x": {"$ref": "#/$defs/node"}}}},
            "type": "object", "properties": {"x": {"$ref": "#/$defs/node"}}}
    response = await asgi.post("/v1/chat/completions", content=_with_tool(orjson.dumps(tree)))
    assert response.status_code == 200
    assert response.json()["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "f"


@pytest.mark.parametrize("body", [_nested_content(1000), _nested_content(300),
                                  _nested_content(254), _nested_content(120),
                                  _nested_schema(200)],
                         ids=["content-1000", "content-300", "content-254", "content-120",
                              "schema-200"])
async def test_deep_nesting_is_a_400(asgi: httpx.AsyncClient, body: bytes) -> None:
    response = await asgi.post("/v1/chat/completions", content=body)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "too_deeply_nested"
    assert "nested deeper than 100" in response.json()["error"]["message"]


async def test_moderate_nesting_is_served(asgi: httpx.AsyncClient) -> None:
    response = await asgi.post("/v1/chat/completions", content=_nested_schema(30))
    assert response.status_code == 200


@pytest.mark.parametrize("field", ["stream", "parallel_tool_calls"])
async def test_a_boolean_given_as_a_string_is_a_400(asgi: httpx.AsyncClient, field: str) -> None:
    body = orjson.loads(HEAD + b"}")
    body[field] = "false"
    response = await asgi.post("/v1/chat/completions", content=orjson.dumps(body))
    assert response.status_code == 400
    assert response.json()["error"]["param"] == field
    assert response.headers["content-type"].startswith("application/json")


_json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                       st.text(max_size=20))
_json = st.recursive(_json_leaf, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(
        ["model", "messages", "role", "content", "tools", "function", "name", "parameters",
         "type", "$ref", "properties", "items", "allOf", "stream", "tool_calls", "x"]),
        inner, max_size=5)), max_leaves=30)


def _hostile() -> st.SearchStrategy[Any]:
    message = st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "tool"]),
                                     "content": _json}, optional={"tool_calls": _json})
    tool = st.fixed_dictionaries({"type": st.just("function"), "function": st.fixed_dictionaries(
        {"name": st.text(min_size=1, max_size=8)}, optional={"parameters": _json})})
    return st.fixed_dictionaries(
        {"model": st.just("qwen3:8b"), "messages": st.lists(message, min_size=1, max_size=3)},
        optional={"tools": st.lists(tool, max_size=2), "stream": _json, "tool_choice": _json,
                  "parallel_tool_calls": _json})


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(body=_hostile(), depth=st.integers(0, 300))
async def test_generated_hostile_bodies_never_get_a_500(asgi: httpx.AsyncClient, body: Any,
                                                        depth: int) -> None:
    if depth:  # one message's content nested deep, spliced in as bytes
        body["messages"][0]["content"] = "__deep__"
    # json, not orjson: generated integers past 64 bits are hostile input too.
    raw = json.dumps(body).encode().replace(
        b'"__deep__"', b"[" * depth + b'"x"' + b"]" * depth)
    response = await asgi.post("/v1/chat/completions", content=raw)
    # The fake upstream is healthy: whatever the body, no 5xx of any kind.
    assert response.status_code < 500, response.text
    assert response.status_code == 200 or "error" in response.json()


async def test_refs_that_fan_out_exponentially_are_a_400(asgi: httpx.AsyncClient) -> None:
    # 30 definitions, each referring twice to the next: 2**30 nodes once inlined.
    defs: dict[str, Any] = {f"d{i}": {"type": "object", "properties": {
        "a": {"$ref": f"#/$defs/d{i + 1}"}, "b": {"$ref": f"#/$defs/d{i + 1}"}}}
        for i in range(30)}
    defs["d30"] = {"type": "string"}
    schema = {"type": "object", "$defs": defs, "properties": {"x": {"$ref": "#/$defs/d0"}}}
    started = time.perf_counter()
    response = await asgi.post("/v1/chat/completions", content=_with_tool(orjson.dumps(schema)))
    assert response.status_code == 400
    assert "once its $refs are expanded" in response.json()["error"]["message"]
    assert time.perf_counter() - started < 5
