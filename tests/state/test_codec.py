"""Facts as Redis values: round trip, and anything else refused with a reason."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.capabilities.learning import LearnedFact
from proxy.state.codec import (
    MAX_VALUE_BYTES,
    SCHEMA_VERSION,
    Malformed,
    Refused,
    decode,
    encode,
    field_key,
    refusal,
)

facts = st.builds(
    LearnedFact,
    model=st.from_regex(r"[a-z][a-z0-9.\-]{0,12}(:[a-z0-9]{1,6})?", fullmatch=True),
    fields=st.one_of(
        st.sampled_from(["native", "off", "emulate"]).map(lambda v: {"tools": v}),
        st.sampled_from(["refused", "none"]).map(lambda v: {"tool_support": v}),
        st.lists(st.sampled_from(["none", "auto", "required", "function"]), min_size=1,
                 unique=True).map(lambda v: {"drop_tool_choice": v}),
        st.sampled_from(["hermes", "llama3_json"]).map(lambda v: {"tool_format": v})),
    source=st.sampled_from(["runtime_error", "probe", "observed"]),
    at=st.just("2026-11-24T10:00:00Z"),
    evidence=st.none() | st.text(max_size=40),
    upstream=st.none() | st.just("http://127.0.0.1:11434"),
    tag_default=st.booleans())


@given(facts)
def test_round_trip(fact: LearnedFact) -> None:
    shared = decode(encode(fact, "host:1:ab"))
    assert shared.replica == "host:1:ab"
    assert shared.fact == fact
    assert field_key(shared.fact) == field_key(fact)


def test_a_fact_without_its_tag_flag_keeps_ollamas_default() -> None:
    # Values written before the flag existed decode as before: the key gets `:latest`.
    old = orjson.loads(encode(LearnedFact("m", {"tools": "off"}, "probe", "2026-11-24T10:00:00Z"),
                              "r"))
    del old["tag"]
    assert decode(orjson.dumps(old)).fact.tag_default is True


def test_credentials_in_the_upstream_stay_home() -> None:
    fact = LearnedFact("m", {"tools": "off"}, "runtime_error", "2026-11-24T10:00:00Z",
                       upstream="http://user:s3cret@gpu:8000")
    raw = encode(fact, "r")
    assert b"s3cret" not in raw
    assert decode(raw).fact.upstream == "http://gpu:8000"


GOOD: dict[str, Any] = {"v": SCHEMA_VERSION, "model": "m", "fields": {"tools": "off"},
                        "source": "runtime_error", "at": "2026-11-24T10:00:00Z",
                        "evidence": None, "upstream": None, "replica": "r"}


@pytest.mark.parametrize(("raw", "reason"), [
    (b"not json", "not JSON"),
    (b"[1, 2]", "not a JSON object"),
    (orjson.dumps({**GOOD, "v": 2}), "schema version 2"),
    (orjson.dumps({k: v for k, v in GOOD.items() if k != "v"}), "schema version None"),
    (orjson.dumps({**GOOD, "model": ""}), "'model'"),
    (orjson.dumps({**GOOD, "fields": {}}), "'fields'"),
    (orjson.dumps({**GOOD, "fields": {"tools": "sideways"}}), "not a valid learned entry"),
    (orjson.dumps({**GOOD, "fields": {"rm_rf": True}}), "not a valid learned entry"),
    (orjson.dumps({**GOOD, "source": "rumour"}), "'source'"),
    (orjson.dumps({**GOOD, "at": "yesterday"}), "not a valid learned entry"),
    (orjson.dumps({**GOOD, "evidence": 7}), "'evidence'"),
    (orjson.dumps({**GOOD, "replica": None}), "'replica'"),
])
def test_malformed_values_are_refused(raw: bytes, reason: str) -> None:
    with pytest.raises(Malformed, match=reason):
        decode(raw)
    assert decode(orjson.dumps(GOOD)).fact.fields == {"tools": "off"}


@pytest.mark.parametrize("fields", [
    {"server_tools": ["http_get"]}, {"system_prompt": {"append": "x"}},
    {"rename": {"a": "b"}}, {"allow_tools": ["bash"]}, {"ollama_options": {"num_ctx": 8}},
    {"tools": "off", "max_tools": 2},
])
def test_configuration_is_refused_not_decoded(fields: dict[str, Any]) -> None:
    raw = orjson.dumps({**GOOD, "fields": fields})
    with pytest.raises(Refused, match="configuration"):
        decode(raw)
    fact = LearnedFact("m", fields, "observed", "2026-11-24T10:00:00Z")
    assert refusal(fact) is not None


def test_long_names_and_huge_values_are_refused() -> None:
    with pytest.raises(Refused, match="257 characters"):
        decode(orjson.dumps({**GOOD, "model": "m" * 257}))
    assert decode(orjson.dumps({**GOOD, "model": "m" * 256})).fact.model == "m" * 256
    with pytest.raises(Malformed, match="bytes"):
        decode(orjson.dumps({**GOOD, "evidence": "e" * MAX_VALUE_BYTES}))


def test_long_evidence_is_cut_to_fit() -> None:
    fact = LearnedFact("m", {"tools": "off"}, "runtime_error", "2026-11-24T10:00:00Z",
                       evidence="why " * 5000)
    shared = decode(encode(fact, "r"))
    assert shared.fact.evidence is not None and len(shared.fact.evidence) <= 2000


@pytest.mark.parametrize("value", ["refused", "none"])
def test_a_tool_support_fact_may_cross(value: str) -> None:
    # What a refusal or a probe teaches is shared across replicas like any learned fact.
    fact = LearnedFact("gemma3:4b", {"tool_support": value}, "runtime_error",
                       "2026-11-24T10:00:00Z")
    assert refusal(fact) is None
    assert decode(encode(fact, "host:1:ab")).fact == fact
