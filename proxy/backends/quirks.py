"""Recognise a backend quirk from what it did, and name the workaround.

Pure, like refusals.py: no I/O, no sending. Each quirk is recognised from the
backend's behaviour, never from its name: an empty 200 event stream where tools
were offered, a 5xx that only a `required` tool_choice gets, a 5xx on an
assistant tool-call turn with `content: null`. A Quirk says which profile field
to change for the retry; the observation that turns it into a learned fact is
made only once the rewritten request was answered (confirmed, not guessed).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from proxy.errors import upstream_error_body
from proxy.transforms.request.backend_quirks import has_null_call_turn
from proxy.transforms.request.choice import choice_kind
from proxy.types import ChatRequest, Observation, ObservationKind, Profile

EMPTY_STREAM_EVIDENCE = "HTTP 200 with an empty event stream when tools were offered"


@dataclass(frozen=True)
class Quirk:
    kind: ObservationKind
    """stream_tools_failed, required_choice_failed or null_content_failed."""
    field: str
    value: Any
    evidence: str

    def apply(self, profile: Profile) -> Profile:
        """The profile to retry with: the workaround switched on for this request."""
        return dataclasses.replace(profile, **{self.field: self.value})

    def observation(self, model: str) -> Observation:
        return Observation(model, self.kind, {"evidence": self.evidence})


EMPTY_STREAM = Quirk("stream_tools_failed", "stream_tools", False, EMPTY_STREAM_EVIDENCE)


def is_empty_stream(first_piece: bytes | None) -> bool:
    """The stream ended before sending anything but whitespace."""
    return first_piece is None or not first_piece.strip()


def quirk_for_error(status: int, raw: bytes, sent: ChatRequest, profile: Profile) -> Quirk | None:
    """The workaround a 5xx answer to `sent` calls for, or None (answer as it is).

    A `content: null` turn is tried first when the message points at it (or says
    nothing), then a `required` tool_choice; each is tried at most once per
    request since the retried profile has it switched on already.
    """
    if status < 500:
        return None
    message = str(upstream_error_body(status, raw)["error"]["message"])
    evidence = f"HTTP {status}: {first_line(message) or 'empty error message'}"
    null_turn = profile.null_content and has_null_call_turn(sent)
    required = profile.required_tool_choice != "rewrite" and bool(sent.get("tools")) \
        and choice_kind(sent.get("tool_choice")) == "required"
    if null_turn and (_mentions_null(message) or not required):
        return Quirk("null_content_failed", "null_content", False, evidence)
    if required:
        return Quirk("required_choice_failed", "required_tool_choice", "rewrite", evidence)
    return None


def _mentions_null(message: str) -> bool:
    lowered = message.lower()
    return not message.strip() or "none" in lowered or "null" in lowered


def first_line(message: str) -> str:
    """The first non-blank line of a message, stripped."""
    for line in message.splitlines():
        if line.strip():
            return line.strip()
    return ""
