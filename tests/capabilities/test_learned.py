"""learned.py: what may be learned, and facts applied in memory."""

from __future__ import annotations

from proxy.capabilities.learned import MAX_NAME_CHARS, apply_facts, trim_learned, unlearnable
from proxy.capabilities.learning import LearnedFact
from proxy.capabilities.schema import Capabilities


def fact(model: str, at: str = "2026-11-22T10:00:00Z") -> LearnedFact:
    return LearnedFact(model, {"tools": "off"}, "runtime_error", at, None, None)


def test_names_past_the_limit_are_never_learned() -> None:
    assert unlearnable(fact("m" * (MAX_NAME_CHARS - 7) + ":latest")) is None
    reason = unlearnable(fact("m" * (MAX_NAME_CHARS + 1)))
    assert reason is not None and "limit 256" in reason


def test_a_name_that_is_not_a_valid_key_is_refused_with_the_reason() -> None:
    reason = unlearnable(fact("refuse-x["))
    assert reason is not None and "unclosed '['" in reason
    assert unlearnable(fact("x[ab]")) is None
    bad = LearnedFact("m", {"tool_format": "no-such"}, "observed", "2026-11-22T10:00:00Z")
    assert unlearnable(bad) is not None


def test_apply_keeps_the_spelling_and_merges_other_spellings() -> None:
    caps, touched = apply_facts(Capabilities(), [fact("Org/Model:Q4")])
    assert touched == {"org/model:q4": "Org/Model:Q4"}
    caps, _ = apply_facts(caps, [LearnedFact("org/model:q4", {"drop_tool_choice": ["required"]},
                                             "runtime_error", "2026-11-23T00:00:00Z")])
    assert list(caps.learned) == ["Org/Model:Q4"]
    assert caps.learned["Org/Model:Q4"].drop_tool_choice == ["required"]


def test_trim_drops_the_oldest() -> None:
    caps, _ = apply_facts(Capabilities(), [fact("a", "2026-01-03T00:00:00Z"),
                                           fact("b", "2026-01-01T00:00:00Z"),
                                           fact("c", "2026-01-02T00:00:00Z")])
    assert list(trim_learned(caps, 2).learned) == ["a:latest", "c:latest"]
    assert trim_learned(caps, 5) is caps
