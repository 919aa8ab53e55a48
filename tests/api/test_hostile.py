"""The cheap nesting bound agrees with the walk it lets the common body skip."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.api.chat.request import parse_chat_request
from proxy.errors import ApiError
from proxy.nesting import depth_exceeds, may_nest_deeper

_leaves = (st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**63 - 1)
           | st.text(alphabet="ab[]{}\"\\", max_size=6))
_json = st.recursive(_leaves, lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(alphabet="k[{", max_size=3), inner, max_size=3),
                     max_leaves=40)


@given(value=_json, limit=st.integers(min_value=1, max_value=12))
def test_a_body_the_bound_clears_never_nests_past_the_limit(value: Any, limit: int) -> None:
    if not may_nest_deeper(orjson.dumps(value), limit):
        assert not depth_exceeds(value, limit)


def test_the_bound_lets_a_deep_body_through_to_the_walk() -> None:
    deep: Any = []
    for _ in range(150):
        deep = [deep]
    raw = orjson.dumps(deep)
    assert may_nest_deeper(raw) and depth_exceeds(deep)
    assert not may_nest_deeper(b'{"model":"m","messages":[{"role":"user","content":"hi"}]}')


def test_a_ref_cycle_spelled_with_escapes_is_still_refused() -> None:
    tool = (b'{"type":"function","function":{"name":"t","parameters":{"\\u0024defs":{"a":'
            b'{"\\u0024ref":"#/\\u0024defs/a"}},"\\u0024ref":"#/\\u0024defs/a"}}}')
    raw = (b'{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[' + tool + b"]}")
    assert b"$" not in raw
    with pytest.raises(ApiError) as refused:
        parse_chat_request(raw)
    assert refused.value.code == "invalid_tool_schema"
