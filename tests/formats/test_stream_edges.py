"""The string tests streaming recovery asks on every delta (formats/stream_edges.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from proxy.formats.stream_edges import PARTIAL_FENCE, functionary_lead, partial_fence


@given(st.text(alphabet="ab `~\t\n{[", max_size=40))
def test_the_partial_fence_search_from_the_last_line_finds_what_a_full_search_finds(
        text: str) -> None:
    full = PARTIAL_FENCE.search(text)
    fast = partial_fence(text)
    assert (fast.span() if fast else None) == (full.span() if full else None)


def test_functionary_first_line_holds_only_while_it_can_still_lead_to_a_call() -> None:
    leads = ("all", "get_weather")
    assert functionary_lead("all\nIt is sunny", leads) == "marker"
    assert functionary_lead("get_weather\n{\"city\": 1}", leads) == "marker"
    assert functionary_lead("get_wea", leads) == "partial"
    assert functionary_lead("get_weather\n  ", leads) == "partial"
    assert functionary_lead("get_weather\nSunny", leads) is None
    assert functionary_lead("Sure, here", leads) is None
