"""Observations -> learned facts, and which facts are news."""

from __future__ import annotations

from typing import Any, get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.capabilities.learning import (
    LEARNED_FIELDS,
    LearnedFact,
    fact_is_news,
    facts_from,
    merge_fact,
)
from proxy.types import Observation, ObservationKind

AT = "2026-11-22T10:00:00Z"
MSG = "registry.ollama.ai/library/gemma3:4b does not support tools"


def test_tools_refused_becomes_runtime_error_fact() -> None:
    obs = Observation("gemma3:4b", "tools_refused", {"rung": "off", "evidence": MSG})
    assert facts_from([obs], AT, "http://ollama:11434") == [
        LearnedFact("gemma3:4b", {"tool_support": "refused"}, "runtime_error", AT, MSG,
                    "http://ollama:11434")
    ]


def test_tools_refused_to_emulate_is_the_same_fact() -> None:
    # What was refused is learned, not the rung the fallback chose: a person's later
    # `fallback:` then decides for this model too.
    obs = Observation("m", "tools_refused", {"rung": "emulate", "evidence": MSG})
    [fact] = facts_from([obs], AT, None)
    assert fact.fields == {"tool_support": "refused"}
    assert fact.upstream is None


def test_a_refusal_retires_an_older_learned_rung_and_a_probe_the_refusal() -> None:
    old = {"tools": "off", "reasoning": "strip", "source": "runtime_error", "at": AT}
    refused = LearnedFact("m", {"tool_support": "refused"}, "runtime_error", AT, MSG)
    assert fact_is_news(old, refused)
    merged = merge_fact(old, refused)
    assert "tools" not in merged and merged["tool_support"] == "refused"
    assert merged["reasoning"] == "strip"
    found = LearnedFact("m", {"tools": "native"}, "probe", AT)
    assert "tool_support" not in merge_fact(merged, found)


def test_tool_choice_refused_records_the_value() -> None:
    obs = Observation("m", "tool_choice_refused", {"value": "required", "evidence": "x"})
    [fact] = facts_from([obs], AT, None)
    assert (fact.fields, fact.source, fact.evidence) == (
        {"drop_tool_choice": ["required"]}, "runtime_error", "x")


def test_recovered_text_format_is_observed() -> None:
    obs = Observation("m", "text_calls_recovered", {"format": "hermes", "count": 2})
    [fact] = facts_from([obs], AT, None)
    assert (fact.fields, fact.source, fact.evidence) == ({"tool_format": "hermes"}, "observed", None)


@pytest.mark.parametrize(("tools", "fields"), [
    (True, {"tools": "native"}), (False, {"tool_support": "none"})])
def test_probe_answer(tools: bool, fields: dict[str, str]) -> None:
    obs = Observation("m", "probe", {"tools": tools, "evidence": "/api/show capabilities: []"})
    [fact] = facts_from([obs], AT, None)
    assert (fact.fields, fact.source, fact.evidence) == (
        fields, "probe", "/api/show capabilities: []")


@pytest.mark.parametrize(
    "obs",
    [
        Observation("m", "call_dropped", {"name": "x"}),
        Observation("m", "call_repaired", {}),
        Observation("m", "tools_stripped", {"count": 3}),
        Observation("m", "rung_used", {"rung": "off"}),
        Observation("m", "tools_refused", {"rung": "native"}),
        Observation("m", "tools_refused", {}),
        Observation("m", "tool_choice_refused", {"value": ""}),
        Observation("m", "tool_choice_refused", {"value": "get_weather"}),
        Observation("m", "text_calls_recovered", {"format": None}),
        Observation("m", "probe", {"tools": "yes"}),
        Observation("m", "something_new", {"tools": True}),
    ],
)
def test_counts_and_malformed_details_are_not_facts(obs: Observation) -> None:
    assert facts_from([obs], AT, None) == []


def test_duplicates_collapse_but_models_stay_apart() -> None:
    a = Observation("a", "tools_refused", {"rung": "off", "evidence": "1"})
    a2 = Observation("a", "tools_refused", {"rung": "off", "evidence": "2"})
    b = Observation("b", "tools_refused", {"rung": "off", "evidence": "1"})
    c = Observation("a", "tool_choice_refused", {"value": "required"})
    facts = facts_from([a, a2, b, c, c], AT, None)
    assert [(f.model, dict(f.fields), f.evidence) for f in facts] == [
        ("a", {"tool_support": "refused"}, "1"),
        ("b", {"tool_support": "refused"}, "1"),
        ("a", {"drop_tool_choice": ["required"]}, None),
    ]


def test_input_is_not_mutated() -> None:
    detail: dict[str, Any] = {"value": "required"}
    facts_from([Observation("m", "tool_choice_refused", detail)], AT, None)
    assert detail == {"value": "required"}


def fact(**fields: Any) -> LearnedFact:
    return LearnedFact("m", fields, "runtime_error", AT)


class _Entry:
    """Stands in for a pydantic LearnedEntry."""

    def __init__(self, **data: Any) -> None:
        self._data = data

    def model_dump(self, **options: Any) -> dict[str, Any]:
        assert options == {"exclude_unset": True, "by_alias": True}
        return dict(self._data)


def test_fact_is_news() -> None:
    assert fact_is_news(None, fact(tools="off"))
    assert fact_is_news({"tools": "emulate"}, fact(tools="off"))
    assert not fact_is_news({"tools": "off", "at": "old", "evidence": "old"}, fact(tools="off"))
    assert not fact_is_news(_Entry(tools="off", source="probe"), fact(tools="off"))
    assert fact_is_news(_Entry(tools="native"), fact(tools="off"))


def test_list_fields_are_news_only_for_new_values() -> None:
    assert not fact_is_news({"drop_tool_choice": ["required", "function"]},
                            fact(drop_tool_choice=["required"]))
    assert not fact_is_news(_Entry(drop_tool_choice=("required",)),
                            fact(drop_tool_choice=["required"]))
    assert fact_is_news({"drop_tool_choice": ["function"]}, fact(drop_tool_choice=["required"]))
    assert fact_is_news({"drop_tool_choice": None}, fact(drop_tool_choice=["required"]))


@given(st.lists(st.sampled_from([
    Observation("a", "tools_refused", {"rung": "off", "evidence": "e"}),
    Observation("b", "probe", {"tools": True}),
    Observation("a", "text_calls_recovered", {"format": "hermes"}),
    Observation("a", "call_dropped", {}),
]), max_size=12))
def test_facts_are_distinct_and_each_is_news_to_an_empty_entry(obs: list[Observation]) -> None:
    facts = facts_from(obs, AT, None)
    keys = [(f.model, tuple(sorted(f.fields.items()))) for f in facts]
    assert len(keys) == len(set(keys))
    assert all(fact_is_news(None, f) for f in facts)
    assert all(not fact_is_news(dict(f.fields), f) for f in facts)


def test_merge_fact_unions_lists_and_puts_latest_provenance_last() -> None:
    entry = {"drop_tool_choice": ["required"], "source": "probe", "at": "old",
             "evidence": "stale", "tool_format": "hermes"}
    later = LearnedFact("m", {"drop_tool_choice": ["function", "required"]}, "runtime_error",
                        AT, None, "http://u")
    merged = merge_fact(entry, later)
    assert list(merged.items()) == [
        ("drop_tool_choice", ["required", "function"]), ("tool_format", "hermes"),
        ("source", "runtime_error"), ("at", AT), ("upstream", "http://u")]
    assert entry["drop_tool_choice"] == ["required"] and entry["evidence"] == "stale"


def test_merge_fact_into_nothing() -> None:
    assert merge_fact(None, fact(tools="off")) == {
        "tools": "off", "source": "runtime_error", "at": AT}
    assert merge_fact(_Entry(tools="native", at="x"), fact(tools="off"))["tools"] == "off"


def test_correction_becomes_a_running_count() -> None:
    tried = Observation("m", "correction", {"tried": 1, "succeeded": 1, "turns": 1})
    [fact] = facts_from([tried], AT, None)
    assert fact.fields == {"correction": {"tried": 1, "succeeded": 1}}
    first = merge_fact(None, fact)
    assert first["correction"] == {"tried": 1, "succeeded": 1, "at": AT}
    assert first["source"] == "observed"
    later = "2026-11-23T09:00:00Z"
    failed = facts_from([Observation("m", "correction", {"tried": 1, "succeeded": 0})],
                        later, None)[0]
    assert fact_is_news(first, failed), "every count changes the running total"
    second = merge_fact(first, failed)
    assert second["correction"] == {"tried": 2, "succeeded": 1, "at": later}
    assert second["at"] == AT, "a count leaves the entry's provenance alone"


def test_correction_count_keeps_a_learned_behaviour_and_its_evidence() -> None:
    entry = {"tools": "off", "source": "runtime_error", "at": AT, "evidence": MSG}
    fact = facts_from([Observation("m", "correction", {"tried": 1, "succeeded": 0})],
                      "2026-11-23T09:00:00Z", None)[0]
    merged = merge_fact(entry, fact)
    assert merged["tools"] == "off" and merged["source"] == "runtime_error"
    assert merged["evidence"] == MSG and merged["correction"]["tried"] == 1


@pytest.mark.parametrize("detail", [{}, {"tried": 0, "succeeded": 0}, {"tried": "1"}])
def test_malformed_correction_observations_are_ignored(detail: dict[str, Any]) -> None:
    assert facts_from([Observation("m", "correction", detail)], AT, None) == []


def test_reply_opening_inside_reasoning_is_learned() -> None:
    [fact] = facts_from([Observation("m", "reasoning_open", {})], AT, None)
    assert fact.fields == {"starts_in_reasoning": True} and fact.source == "observed"


_KINDS = list(get_args(ObservationKind))
_DETAIL_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-2, 5),
                           st.floats(0.1, 70, allow_nan=False),
                           st.sampled_from(["off", "emulate", "native", "hermes", "auto",
                                            "required", "none", "function", "x"]))


@given(st.lists(st.builds(
    Observation, st.just("m"), st.sampled_from(_KINDS),
    st.dictionaries(st.sampled_from(["rung", "value", "format", "tools", "tried", "succeeded",
                                     "evidence", "server_tools", "system_prompt"]),
                    _DETAIL_VALUES, max_size=4)), max_size=10))
def test_every_fact_sets_only_learned_fields(obs: list[Observation]) -> None:
    for fact in facts_from(obs, AT, None):
        assert set(fact.fields) <= LEARNED_FIELDS


def test_learned_fields_are_what_the_learners_write_and_nothing_a_person_owns() -> None:
    assert LEARNED_FIELDS == {
        "tools", "tool_support", "drop_tool_choice", "tool_format", "stream_tools", "required_tool_choice",
        "null_content", "chars_per_token", "correction", "starts_in_reasoning", "validation"}
    person_owned = {"server_tools", "system_prompt", "rename", "allow_tools", "deny_tools",
                    "ollama_options", "max_tools", "schema", "aliases"}
    assert not LEARNED_FIELDS & person_owned
