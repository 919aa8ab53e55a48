"""Choice 0 of a chat completion chunk: where it sits, and a copy with it replaced.

Owns: the two chunk operations the text stages (thinking, textcalls) share,
since both rewrite only choice 0's delta. Must not: mutate a chunk or look
at deltas.
"""

from __future__ import annotations

from typing import Any

from proxy.types import Chunk


def choice_zero(chunk: Chunk) -> int | None:
    """Position in `choices` of the choice with index 0 (a missing index counts as 0)."""
    choices = chunk.get("choices")
    if not isinstance(choices, list):
        return None
    for i, choice in enumerate(choices):
        if isinstance(choice, dict) and choice.get("index", 0) == 0:
            return i
    return None


def replace_choice(chunk: Chunk, position: int, choice: dict[str, Any]) -> Chunk:
    """A copy of chunk whose choices[position] is choice."""
    choices = list(chunk["choices"])
    choices[position] = choice
    return {**chunk, "choices": choices}
