"""splice.py: learned facts merged into the text; every byte outside `learned:` kept."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.capabilities.learning import LearnedFact
from proxy.capabilities.load import parse_capabilities
from proxy.capabilities.splice import oldest_first, splice_checked, splice_learned

HEAD = "# mine\nversion: 1\nmodels:\n  \"qwen3*\":   # why\n    max_tools: 10\n\n"
TAIL = "\n# after learned: still mine\ndefaults:\n  tools: auto\n"


def fact(model: str, at: str = "2026-11-22T10:00:00Z", **fields: Any) -> LearnedFact:
    return LearnedFact(model, fields or {"tools": "off"}, "runtime_error", at, None, None)


def entry(key: str, at: str) -> str:
    return f'  "{key}":\n    tools: off\n    source: probe\n    at: "{at}"\n'


def test_new_key_keeps_the_clients_case() -> None:
    new = splice_learned(HEAD, [fact("hf.co/Org/Model-GGUF:Q4_K_M")])
    assert '  "hf.co/Org/Model-GGUF:Q4_K_M":\n' in new
    caps = parse_capabilities(new)[0]
    assert caps is not None and list(caps.learned) == ["hf.co/Org/Model-GGUF:Q4_K_M"]


def test_a_fact_under_another_spelling_updates_the_existing_entry() -> None:
    text = HEAD + "learned:\n" + entry("hf.co/org/model:q4", "2026-01-01T00:00:00Z") + TAIL
    new = splice_learned(text, [fact("hf.co/Org/Model:Q4", drop_tool_choice=["required"])])
    caps = parse_capabilities(new)[0]
    assert caps is not None and list(caps.learned) == ["hf.co/org/model:q4"]
    assert caps.learned["hf.co/org/model:q4"].drop_tool_choice == ["required"]
    assert new.startswith(HEAD + "learned:\n") and new.endswith(TAIL)


def test_max_entries_removes_the_least_recently_learned() -> None:
    text = HEAD + "learned:\n" + "".join(
        entry(f"m{i}:1b", f"2026-01-0{9 - i}T00:00:00Z") for i in range(4)) + TAIL
    new = splice_learned(text, [fact("new:1b", at="2026-02-01T00:00:00Z")], max_entries=3)
    caps = parse_capabilities(new)[0]
    assert caps is not None and list(caps.learned) == ["m0:1b", "m1:1b", "new:1b"]
    assert new.startswith(HEAD) and new.endswith(TAIL)


def test_oldest_first_orders_by_time_then_position() -> None:
    entries = {"a": {"at": "2026-01-02T00:00:00Z"}, "b": {"at": "2026-01-01T00:00:00+00:00"},
               "c": {"at": "not a time"}, "d": {"at": "2026-01-01T00:00:00Z"}}
    assert oldest_first(entries) == ["c", "b", "d", "a"]


def test_splice_checked_refuses_a_key_the_file_cannot_hold() -> None:
    current = parse_capabilities(HEAD)[0]
    assert current is not None
    assert splice_checked(HEAD, current, [fact("refuse-x[")], 10) is None
    done = splice_checked(HEAD, current, [fact("fine:1b")], 10)
    assert done is not None and list(done[1].learned) == ["fine:1b"]


_NAME = st.text(st.sampled_from("abcXYZ019-._/:"), min_size=1, max_size=20).filter(
    lambda n: n.strip(" /:") == n and "//" not in n)
_AT = st.dates().map(lambda d: f"{d.isoformat()}T00:00:00Z")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_NAME, _AT), min_size=1, max_size=6),
       st.integers(1, 8), st.booleans())
def test_every_byte_outside_learned_is_kept(
        facts: list[tuple[str, str]], cap: int, with_learned: bool) -> None:
    text = HEAD + ("learned:\n" + entry("kept:1b", "2026-01-01T00:00:00Z") if with_learned
                   else "") + TAIL
    before = parse_capabilities(text)[0]
    assert before is not None
    new = splice_learned(text, [fact(m, at=at) for m, at in facts], max_entries=cap)
    after = parse_capabilities(new)[0]
    assert after is not None, new
    assert new.startswith(HEAD)
    if with_learned:
        assert new.endswith(TAIL)
    else:
        assert new.startswith(HEAD + TAIL)
    assert after.model_copy(update={"learned": {}}) == before.model_copy(update={"learned": {}})
    assert len(after.learned) <= cap
