"""System prompt edits and system text for models without a system role."""

from __future__ import annotations

import copy
from typing import Any

from proxy.transforms.request.content import add_text, content_text, join_contents
from proxy.transforms.request.system import (
    add_system_text,
    apply_system_prompt,
    move_system_to_user,
)
from proxy.types import Plan, Profile, SystemPrompt


def run_prompt(messages: list[dict[str, Any]], **edit: str) -> list[dict[str, Any]]:
    req = {"model": "m", "messages": messages}
    before = copy.deepcopy(req)
    out, _ = apply_system_prompt(req, Profile("m", system_prompt=SystemPrompt(**edit)), Plan())
    assert req == before
    result: list[dict[str, Any]] = out["messages"]
    return result


def test_prepend_and_append_on_first_system_message() -> None:
    messages = [{"role": "system", "content": "base"}, {"role": "system", "content": "second"}]
    out = run_prompt(messages, prepend="P", append="A")
    assert out == [{"role": "system", "content": "P\n\nbase\n\nA"}, messages[1]]


def test_replace_then_append_on_text_parts_and_developer_role() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "q"},
        {"role": "developer", "content": [{"type": "text", "text": "old"}]}]
    assert run_prompt(messages, append="A")[1]["content"] == [
        {"type": "text", "text": "old"}, {"type": "text", "text": "A"}]
    assert run_prompt(messages, replace="R", append="A")[1]["content"] == "R\n\nA"


def test_system_message_created_when_missing() -> None:
    out = run_prompt([{"role": "user", "content": "q"}], append="Use bash.")
    assert out == [{"role": "system", "content": "Use bash."}, {"role": "user", "content": "q"}]


def test_no_edit_is_identity() -> None:
    req = {"messages": [{"role": "user", "content": "q"}]}
    assert apply_system_prompt(req, Profile("m"), Plan())[0] is req


def test_system_text_moves_into_first_user_turn() -> None:
    req = {"messages": [
        {"role": "system", "content": "S1"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": [{"type": "image_url"}]},
        {"role": "system", "content": [{"type": "text", "text": "S2"}]},
        {"role": "user", "content": "later"},
    ]}
    before = copy.deepcopy(req)
    out, _ = move_system_to_user(req, Profile("m", system_role=False), Plan())
    assert req == before
    assert out["messages"] == [
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": [{"type": "text", "text": "S1\n\nS2"}, {"type": "image_url"}]},
        {"role": "user", "content": "later"},
    ]
    assert move_system_to_user(req, Profile("m"), Plan())[0] is req


def test_system_text_without_user_turn_becomes_one() -> None:
    req = {"messages": [{"role": "system", "content": "S"}]}
    out, _ = move_system_to_user(req, Profile("m", system_role=False), Plan())
    assert out["messages"] == [{"role": "user", "content": "S"}]
    req = {"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "q"}]}
    out, _ = move_system_to_user(req, Profile("m", system_role=False), Plan())
    assert out["messages"] == [{"role": "user", "content": "S\n\nq"}]


def test_add_system_text() -> None:
    assert add_system_text([], "N") == [{"role": "system", "content": "N"}]
    assert add_system_text([{"role": "system", "content": None}], "N") == [
        {"role": "system", "content": "N"}]


def test_content_helpers() -> None:
    parts = [{"type": "text", "text": "a"}, {"type": "image_url"}, {"type": "text", "text": "b"}]
    assert content_text(parts) == "a\nb"
    assert content_text(None) == ""
    assert add_text("x", "", "end") == "x"
    assert add_text("", "t", "start") == "t"
    assert join_contents("a", None) == "a"
    assert join_contents(None, parts) == parts
