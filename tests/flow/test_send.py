"""The context guard's trim: the most tools that fit, tools already called kept first."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import assume, given
from hypothesis import strategies as st

from proxy.backends.context import estimate_tokens
from proxy.flow.send import _trim, wants_native
from proxy.types import Profile


def _tool(i: int, size: int) -> dict[str, Any]:
    return {"type": "function", "function": {"name": f"t{i}", "description": "d" * size}}


def _fits(body: dict[str, Any], cap: int) -> bool:
    return estimate_tokens(len(orjson.dumps(body)), None, None) <= cap


@given(st.lists(st.integers(10, 3000), min_size=1, max_size=30), st.integers(5, 99),
       st.lists(st.integers(0, 29), max_size=3))
def test_trim_keeps_the_most_tools_that_fit(sizes: list[int], share: int,
                                            called: list[int]) -> None:
    tools = [_tool(i, s) for i, s in enumerate(sizes)]
    used = [i for i in called if i < len(tools)]
    history = [{"role": "assistant", "content": "", "tool_calls": [
        {"id": f"c{i}", "type": "function", "function": {"name": f"t{i}", "arguments": "{}"}}
        for i in used]}] if used else []
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}, *history],
            "tools": tools}
    # The guard only trims what does not fit: the window is a share of what the
    # body needs (drawn as a share, not a size, so almost no draw is thrown away).
    cap = estimate_tokens(len(orjson.dumps(body)), None, None) * share // 100
    assume(not _fits(body, cap))
    kept = _trim(body, Profile("m"), cap).get("tools") or []
    assert len(kept) < len(tools)
    if kept:
        assert _fits({**body, "tools": kept}, cap)
    names = [t["function"]["name"] for t in kept]
    assert names == sorted(names, key=lambda n: int(n[1:]))  # the client's order stays
    # max_tools' budget: tools the conversation called come first (in the client's order).
    called_first = [f"t{i}" for i in sorted(set(used))][:len(names)]
    assert all(n in names for n in called_first)


def test_only_ollama_keys_send_a_model_native() -> None:
    assert not wants_native(Profile("m"))
    assert wants_native(Profile("m", num_ctx="auto"))
    assert wants_native(Profile("m", keep_alive="5m"))
    assert wants_native(Profile("m", ollama_options=(("num_gpu", 1),)))
