from __future__ import annotations

from typing import Any

import pytest

from proxy.transforms.response.choices import choice_zero, replace_choice
from proxy.types import Chunk


@pytest.mark.parametrize(
    ("choices", "expected"),
    [
        ([{"index": 0, "delta": {}}], 0),
        ([{"index": 1, "delta": {}}, {"index": 0, "delta": {}}], 1),
        ([{"delta": {}}], 0),  # llama.cpp may leave the index out
        ([{"index": 1, "delta": {}}], None),
        ([], None),
        (None, None),
        (["not a choice", {"index": 0}], 1),
    ],
)
def test_choice_zero_finds_the_index_0_choice(choices: Any, expected: int | None) -> None:
    assert choice_zero({"id": "c", "choices": choices}) == expected


def test_replace_choice_copies_and_keeps_the_rest() -> None:
    chunk: Chunk = {"id": "c", "choices": [{"index": 1}, {"index": 0, "delta": {"content": "a"}}]}
    out = replace_choice(chunk, 1, {"index": 0, "delta": {}})
    assert out == {"id": "c", "choices": [{"index": 1}, {"index": 0, "delta": {}}]}
    assert chunk["choices"][1] == {"index": 0, "delta": {"content": "a"}}
