"""What the fast paths recognise as plain: chunk bytes and chunk dicts no stage needs.

Owns the tests the fast paths (`fast_stream`, `fast_answer`) run before they
skip work: on undecoded bytes (a `data:` line shaped like a JSON object with no
tool call and no error in it) and on decoded chunks (choice 0's content and
nothing else; a chunk that only ends choice 0). Each test is conservative: a
chunk it does not pass goes the reference decoder's way (`translate`).

Must not: decode what it can judge from bytes (the relay would lose most of its
advantage), or change anything it is given.
"""

from __future__ import annotations

from typing import Any

from proxy.sse import one_line_events
from proxy.transforms.response import ResponsePipeline
from proxy.types import Chunk


# Byte tests here use find(), not `in`: CPython 3.11 first tries a bytes needle as an
# integer, making and dropping a TypeError on every test (bench/README.md).
def relay_as_is(data: bytes) -> bool:
    """An event's data shaped like a JSON object, with nothing for the stages.

    Byte tests at both ends catch a non-JSON `data:` line (HTML, plain text,
    a cut object) without decoding anything that passes; decoding every chunk
    would cost the fast path most of its advantage. A line that opens like an
    object and closes like one is relayed unread.
    """
    return (data[:2] == b'{"' and data[-1:] == b"}" and nothing_for_stages(data)
            and data.find(b"\n") < 0)  # one `data:` line out


def nothing_for_stages(data: bytes) -> bool:
    """Undecoded chunk bytes (or a read of them) with no tool call and no error in them."""
    return data.find(b'"tool_calls"') < 0 and data.find(b'"error"') < 0


def says_finish(data: bytes) -> bool:
    """Whether undecoded chunk bytes hold a finish reason (a string, not null)."""
    return data.find(b'"finish_reason":"') >= 0 or data.find(b'"finish_reason": "') >= 0


def plain_frames(body: bytes) -> int:
    """How many whole events a read is, if each is one `data: {...}` line (`sse.
    one_line_events`) that `relay_as_is` would pass: no tool call, no error. Else 0."""
    events = one_line_events(body)
    return events if events and nothing_for_stages(body) else 0


def plain_content(chunk: dict[str, Any], role_ok: bool = False) -> str | None:
    """The text of a chunk that is choice 0's content and nothing else, or None.

    `role_ok`: the delta may also say `"role": "assistant"` (a whole answer's message
    as completion_to_chunks makes it). Checks every type it relies on: a chunk it
    accepts needs no `translate.chunk_problem`.
    """
    choice = _sole_choice(chunk)
    if choice is None or choice.get("finish_reason") is not None:
        return None
    delta = choice.get("delta")
    if type(delta) is not dict or len(delta) != 1 + (role_ok and "role" in delta):
        return None
    if role_ok and delta.get("role", "assistant") != "assistant":
        return None
    text = delta.get("content")
    return text if type(text) is str else None


def bare_finish(chunk: dict[str, Any]) -> str | None:
    """The finish reason of a chunk that only ends choice 0 (its delta empty, no usage,
    no other choice; other fields of the choice may ride along), or None."""
    choice = _sole_choice(chunk)
    if choice is None or choice.get("delta") != {}:
        return None
    reason = choice.get("finish_reason")
    return reason if type(reason) is str else None


def _sole_choice(chunk: dict[str, Any]) -> dict[str, Any] | None:
    """Choice 0 of a chunk that has no other choice and no usage, or None."""
    choices = chunk.get("choices")
    if type(choices) is not list or len(choices) != 1 or chunk.get("usage") is not None:
        return None
    choice = choices[0]
    return choice if type(choice) is dict and choice.get("index", 0) == 0 else None


def as_merged(completion: dict[str, Any]) -> bool:
    """Whether merging the answer's chunks back (`chunks_to_completion`) would make this
    same completion: it says what it is, keeps no null usage, and each choice has its
    index, its finish reason and a message that is exactly the assistant's text."""
    return completion.get("object") == "chat.completion" \
        and completion.get("usage", True) is not None \
        and all("index" in choice and "finish_reason" in choice
                and _assistant_text(choice.get("message")) for choice in completion["choices"])


def _assistant_text(message: Any) -> bool:
    return type(message) is dict and len(message) == 2 \
        and message.get("role") == "assistant" and type(message.get("content")) is str


Plain = tuple[bytes, Chunk, str]
"""a content-only chunk: its upstream bytes, decoded, and its text."""


def vouched_end(pipeline: ResponsePipeline, chunk: Chunk) -> bool:
    """A chunk that only ends the answer (`bare_finish`) which every stage vouches
    would pass unchanged (`passes_plain_end`): noted by them, to be relayed as it is."""
    reason = bare_finish(chunk)
    return reason is not None and pipeline.passes_plain_end(reason)
