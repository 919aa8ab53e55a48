"""The retry ladder: where it starts, how it steps down, that it always stops."""

from __future__ import annotations

from typing import get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.backends.refusals import Refusal
from proxy.flow.retry import MAX_RETRIES, initial_plan, next_plan, rung_name, tool_mode
from proxy.types import Fallback, Plan, Profile, ToolMode

TOOLS = Refusal("tools", "ollama", "m does not support tools")
CHOICE = Refusal("tool_choice", "vllm", 'tool_choice="required" requires --tool-call-parser')


def profile(
    tools: ToolMode = "auto", fallback: Fallback = "off", tools_from: str | None = None
) -> Profile:
    sources = {"tools": tools_from} if tools_from else {}
    return Profile(model="m:latest", tools=tools, fallback=fallback, sources=sources)


@pytest.mark.parametrize(
    ("tools", "expected"),
    [("auto", Plan("native")), ("native", Plan("native")), ("off", Plan("off")),
     ("emulate", Plan("emulate"))],
)
def test_initial_plan_follows_tool_mode(tools: ToolMode, expected: Plan) -> None:
    assert initial_plan(profile(tools), has_tools=True) == expected


@pytest.mark.parametrize("tools", get_args(ToolMode))
def test_initial_plan_without_tools_is_native(tools: ToolMode) -> None:
    assert initial_plan(profile(tools), has_tools=False) == Plan("native")


@pytest.mark.parametrize("fallback", get_args(Fallback))
def test_tools_refusal_steps_to_fallback(fallback: Fallback) -> None:
    assert next_plan(Plan("native"), TOOLS, profile(fallback=fallback), 0) == Plan(fallback)


def test_tool_choice_refusal_drops_tool_choice_then_tools() -> None:
    p = profile(fallback="emulate")
    first = next_plan(Plan("native"), CHOICE, p, 0)
    assert first == Plan("native", drop_tool_choice=True)
    # vLLM defaults tool_choice to auto when tools remain, so it refuses again
    second = next_plan(first, TOOLS, p, 1)
    assert second == Plan("emulate")
    assert next_plan(second, TOOLS, p, 2) is None


def test_repeated_tool_choice_refusal_strips_tools() -> None:
    dropped = Plan("native", drop_tool_choice=True)
    assert next_plan(dropped, CHOICE, profile(), 1) == Plan("off")


def test_no_refusal_means_no_retry() -> None:
    assert next_plan(Plan("native"), None, profile(), 0) is None


@pytest.mark.parametrize("tools", ["native", "off", "emulate"])
def test_persons_explicit_mode_is_not_overruled(tools: ToolMode) -> None:
    p = profile(tools, tools_from="models:m*")
    assert next_plan(initial_plan(p, True), TOOLS, p, 0) is None


def test_learned_mode_may_still_step_down() -> None:
    p = profile("native", tools_from="learned")
    assert next_plan(Plan("native"), TOOLS, p, 0) == Plan("off")


def test_at_most_two_retries() -> None:
    assert next_plan(Plan("native"), CHOICE, profile(), MAX_RETRIES) is None
    assert MAX_RETRIES == 2


@pytest.mark.parametrize("rung", [Plan("off"), Plan("emulate")])
def test_stripped_rungs_are_final(rung: Plan) -> None:
    assert next_plan(rung, TOOLS, profile(), 0) is None


@given(
    st.sampled_from(get_args(ToolMode)),
    st.sampled_from(get_args(Fallback)),
    st.lists(st.sampled_from([TOOLS, CHOICE, None]), min_size=5, max_size=5),
    st.booleans(),
)
def test_ladder_always_terminates_and_only_goes_down(
    tools: ToolMode, fallback: Fallback, refusals: list[Refusal | None], learned: bool
) -> None:
    p = profile(tools, fallback, "learned" if learned else None)
    plan: Plan | None = initial_plan(p, has_tools=True)
    seen = []
    attempt = 0
    while plan is not None:
        seen.append(plan)
        plan = next_plan(plan, refusals[attempt], p, attempt)
        attempt += 1
    assert len(seen) <= MAX_RETRIES + 1
    assert len(set(seen)) == len(seen)
    order = ["native", "native-no-tool-choice", "off", "emulate"]
    ranks = [order.index(rung_name(s)) for s in seen]
    assert ranks == sorted(ranks)


def test_rung_names() -> None:
    assert [rung_name(p) for p in (Plan("native"), Plan("native", drop_tool_choice=True),
                                   Plan("off"), Plan("emulate"))] == [
        "native", "native-no-tool-choice", "off", "emulate"]


@pytest.mark.parametrize(("profile", "plan"), [
    (Profile("m", tool_support="refused"), "emulate"),  # the shipped fallback
    (Profile("m", tool_support="none", fallback="off"), "off"),
    (Profile("m", tool_support="refused", tools="native", sources={"tools": "models:m"}),
     "native"),  # a person's explicit native is never overruled
    (Profile("m", tool_support="refused", tools="off"), "off"),
    (Profile("m", tool_support="refused", tools="native", sources={"tools": "learned"}),
     "emulate"),  # a learned guess is
    (Profile("m"), "native"),  # mode auto: native first
])
def test_a_model_lacking_native_tools_starts_at_its_fallback(profile: Profile,
                                                             plan: str) -> None:
    assert initial_plan(profile, has_tools=True) == Plan(plan)  # type: ignore[arg-type]
    assert tool_mode(profile) == (plan if profile.tools != "auto" or profile.tool_support
                                  else "auto")
    assert initial_plan(profile, has_tools=False) == Plan("native")
