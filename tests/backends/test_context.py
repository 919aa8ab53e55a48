"""num_ctx: auto sizing (pure): fits, raises along the ladder, caps, floors."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from proxy.backends.context import (
    LADDER,
    REPLY_RESERVE,
    Window,
    estimate_tokens,
    observed_chars_per_token,
    size_window,
)


def test_estimate_grows_with_the_prompt_and_reserves_the_reply() -> None:
    assert estimate_tokens(0, None, None) == REPLY_RESERVE
    assert estimate_tokens(32000, 100, 4.0) == 9300
    assert estimate_tokens(32000, 100, None) > estimate_tokens(32000, 100, 4.0)


def test_a_prompt_that_fits_is_left_alone() -> None:
    assert size_window(Window(needed=3000, current=4096)).num_ctx is None
    assert size_window(Window(needed=3000, current=4096, floor=16384)).num_ctx == 16384


@given(st.integers(1, 400_000), st.integers(512, 300_000),
       st.one_of(st.none(), st.integers(2048, 1_000_000)), st.sampled_from([0, *LADDER]))
def test_sizing_properties(needed: int, current: int, maximum: int | None, floor: int) -> None:
    window = Window(needed, current, maximum, floor)
    decision = size_window(window)
    have = max(current, floor)
    if decision.action == "fits":
        assert needed <= have
        assert decision.num_ctx in (None, have)
        return
    assert decision.num_ctx is not None and decision.num_ctx >= have
    if decision.action == "raise":
        assert decision.num_ctx >= needed
        assert decision.num_ctx in LADDER or decision.num_ctx in (have, maximum)
        if maximum is not None:
            assert decision.num_ctx <= max(maximum, have)
    else:
        assert decision.action == "trim" and needed > decision.num_ctx


def test_learned_ratio_ignores_cut_and_short_prompts() -> None:
    assert observed_chars_per_token(40000, 10000, 16384) == 4.0
    assert observed_chars_per_token(40000, 4096, 4096) is None
    assert observed_chars_per_token(400, 100, None) is None
    assert observed_chars_per_token(40000, 1000, None) is None
