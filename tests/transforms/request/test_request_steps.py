"""The whole request pipeline: order, purity and mode invariants."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.transforms.request import REQUEST_STEPS, apply_request_steps
from proxy.transforms.request.off import OFF_NOTE
from proxy.types import Observation, Plan, Profile, SchemaRewrite, SystemPrompt

names = st.text("abcde_", min_size=1, max_size=3)
tools = st.lists(names, max_size=8).map(
    lambda ns: [{"type": "function", "function": {"name": n, "parameters": {
        "type": "object", "properties": {"x": {"type": ["string", "null"]}}}}} for n in ns])
texts = st.none() | st.text(max_size=5) | st.just([{"type": "text", "text": "p"}])
tool_calls = st.lists(
    st.builds(lambda i, n: {"id": f"c{i}", "type": "function",
                            "function": {"name": n, "arguments": '{"a": 1}'}},
              st.integers(0, 3), names), max_size=3)
messages = st.lists(st.one_of(
    st.builds(lambda c: {"role": "user", "content": c}, texts),
    st.builds(lambda c: {"role": "system", "content": c}, texts),
    st.builds(lambda c, calls: {"role": "assistant", "content": c, "tool_calls": calls},
              texts, tool_calls),
    st.builds(lambda c: {"role": "assistant", "content": c}, texts),
    st.builds(lambda i, c: {"role": "tool", "tool_call_id": f"c{i}", "content": c},
              st.integers(0, 3), texts),
), max_size=8)
choices = st.sampled_from(["none", "auto", "required"]) | names.map(
    lambda n: {"type": "function", "function": {"name": n}})


@st.composite
def requests(draw: st.DrawFn) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "m", "messages": draw(messages)}
    for key, strategy in (("tools", tools), ("tool_choice", choices),
                          ("parallel_tool_calls", st.booleans()),
                          ("functions", st.just([{"name": "f"}]))):
        if draw(st.booleans()):
            body[key] = draw(strategy)
    return body


profiles = st.builds(
    Profile,
    model=st.just("m"),
    max_tools=st.none() | st.integers(0, 5),
    allow_tools=st.none() | st.lists(names, max_size=3).map(tuple),
    deny_tools=st.lists(names, max_size=3).map(tuple),
    rename=st.lists(st.tuples(names, names), max_size=2).map(tuple),
    schema=st.builds(SchemaRewrite, drop_keywords=st.just(("type",)) | st.just(()),
                     collapse_nullable=st.booleans()),
    system_prompt=st.builds(SystemPrompt, append=st.none() | st.just("A")),
    system_role=st.booleans(),
    drop_tool_choice=st.lists(st.sampled_from(["none", "auto", "required", "function"]),
                              max_size=2).map(tuple),
    parallel_tool_calls=st.none() | st.booleans(),
)


@settings(max_examples=150, deadline=None)
@given(requests(), profiles, st.sampled_from(["native", "off", "emulate"]), st.booleans())
def test_pipeline_invariants(
    request: dict[str, Any], profile: Profile, mode: Any, drop_choice: bool
) -> None:
    before = copy.deepcopy(request)
    out, observations = apply_request_steps(request, profile, Plan(mode, drop_choice))
    assert request == before
    assert all(isinstance(o, Observation) for o in observations)
    if mode in ("off", "emulate"):
        for key in ("tools", "tool_choice", "parallel_tool_calls", "functions", "function_call"):
            assert key not in out
        for message in out["messages"]:
            assert message["role"] not in ("tool", "function")
            assert "tool_calls" not in message and "function_call" not in message
        return
    sent = [t["function"]["name"] for t in out.get("tools", [])]
    if not profile.rename:
        assert not set(sent) & set(profile.deny_tools)
    if profile.max_tools is not None:
        assert len(sent) <= profile.max_tools
    if not sent:
        assert "tool_choice" not in out and "parallel_tool_calls" not in out
    if drop_choice:
        assert "tool_choice" not in out
    if not profile.system_role:
        assert all(m["role"] != "system" for m in out["messages"])


def test_steps_order() -> None:
    assert [step.__name__ for step in REQUEST_STEPS] == [
        "select_tools", "fill_tool_choice", "apply_choice", "rewrite_required",
        "apply_rename", "rewrite_schemas", "strip_tools_off", "emulate_tools",
        "apply_system_prompt", "move_system_to_user", "fill_null_content", "unstream_tools"]


def test_off_note_lands_in_first_user_turn_for_models_without_system_role() -> None:
    request = {"model": "m", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "1", "content": "r"},
    ], "tools": [{"type": "function", "function": {"name": "f"}}]}
    profile = Profile("m", system_role=False, system_prompt=SystemPrompt(append="A"))
    out, _ = apply_request_steps(request, profile, Plan("off"))
    assert out["messages"][0] == {"role": "user", "content": f"{OFF_NOTE}\n\nA\n\nhi"}
    assert [m["role"] for m in out["messages"]] == ["user", "assistant", "user"]


def test_native_selects_then_renames_then_rewrites() -> None:
    request = {"model": "m", "messages": [], "tool_choice": "required", "tools": [
        {"type": "function", "function": {"name": n, "parameters": {
            "type": "object", "additionalProperties": False}}} for n in ("Bash", "Read", "ls")]}
    profile = Profile("m", deny_tools=("Read",), rename=(("Bash", "bash"),),
                      schema=SchemaRewrite(drop_keywords=("additionalProperties",)),
                      drop_tool_choice=("required",))
    out, observations = apply_request_steps(request, profile, Plan())
    assert out == {"model": "m", "messages": [], "tools": [
        {"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
        for n in ("bash", "ls")]}
    assert [o.detail["names"] for o in observations] == [["Read"]]
