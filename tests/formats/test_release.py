"""Where a held block may be cut (formats/release.py), on plain strings."""

from __future__ import annotations

from proxy.formats.detect import marker_set
from proxy.formats.release import closed_end, settled_line_starts, squash

MARKERS = marker_set(("<tool_call>",))


def test_only_line_starts_followed_by_a_finished_line_with_ink_are_settled() -> None:
    text = '{"a": 1}\nprose\n\nmore'
    assert settled_line_starts(text, 0) == [9]
    assert settled_line_starts('{"a": 1}\n  \n', 0) == []


def test_a_json_value_or_a_fence_ends_where_it_closes_and_an_open_one_does_not() -> None:
    assert closed_end('{"a": [1]} then', MARKERS, {}) == 10
    assert closed_end('{"a": [1', MARKERS, {}) is None
    assert closed_end("```json\n{}\n```\nafter", MARKERS, {}) == 14
    assert closed_end("```json\n{}\n", MARKERS, {}) is None


def test_prose_is_compared_with_blank_runs_as_one_space() -> None:
    assert squash(" a \n\n b\t") == "a b"
