"""Chat completion chunks -> Responses API stream events and response object. Pure, no I/O.

`ResponseBuilder` is fed the chunks the chat flow hands its client (after
every check, so a call appears only once it passed) and yields the events of
the Responses stream in the documented order, each with the next
`sequence_number`. A message's text and a reasoning summary are streamed as
they arrive; the same builder, fed the chunks of a whole answer, makes the
non-streaming response object.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from typing import Any

from proxy.api.responses.tools import CUSTOM, LOCAL_SHELL, chat_arguments, item_fields
from proxy.flow.translate import plain_content
from proxy.types import JSON, Chunk, Message

Event = dict[str, Any]


def new_id(prefix: str) -> str:
    """`resp_`, `msg_`, `fc_`... and 32 random hex digits (a third of uuid4's cost)."""
    return f"{prefix}_{secrets.token_hex(16)}"


class ResponseBuilder:
    """feed(chunk) -> events; finish() / fail() -> the closing events."""

    def __init__(self, echo: JSON, *, response_id: str | None = None,
                 id_factory: Callable[[str], str] = new_id,
                 kinds: dict[str, str] | None = None) -> None:
        self._new_id = id_factory
        self._kinds = kinds or {}
        """tool name -> custom / local_shell: such calls become those items."""
        self.response: JSON = {
            "id": response_id or id_factory("resp"), "object": "response",
            "created_at": int(time.time()), "status": "in_progress", "error": None,
            "incomplete_details": None, "output": [], "usage": None, **echo}
        self._seq = 0
        self._text: JSON | None = None
        """the open message item (its single output_text part is content[0])."""
        self._reasoning: JSON | None = None
        self._calls: dict[int, JSON] = {}
        """chat tool-call index -> open function_call item."""
        self._finish: str | None = None

    # --- events ------------------------------------------------------------

    def _event(self, kind: str, **fields: Any) -> Event:
        event = {"type": kind, "sequence_number": self._seq, **fields}
        self._seq += 1
        return event

    def _snapshot(self) -> JSON:
        return {**self.response, "output": [_copy(i) for i in self.response["output"]]}

    def start(self) -> list[Event]:
        return [self._event("response.created", response=self._snapshot()),
                self._event("response.in_progress", response=self._snapshot())]

    def feed(self, chunk: Chunk) -> list[Event]:
        events: list[Event] = []
        usage = chunk.get("usage")
        if usage and isinstance(usage, dict):
            self.response["usage"] = _usage(usage)
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0):
                continue  # n > 1 has no Responses equivalent: the first choice answers
            delta = choice.get("delta")
            if delta:
                self._take_delta(delta, events)
            if choice.get("finish_reason"):
                self._finish = choice["finish_reason"]
        return events

    def feed_all(self, chunks: list[Chunk]) -> list[Event]:
        """`feed` for a batch (the chunks of one upstream read), as one list.

        Chunks that are choice 0's text and nothing else (most of a stream) and
        follow each other make ONE delta event with their texts joined: they
        arrived together, so nobody waits for the later ones, and a client
        concatenates deltas anyway. A read of 64 tokens is then one event to
        build and encode, not 64. Any other chunk ends the run and goes through
        `feed` as it would alone, so the events are `feed`'s, chunk by chunk,
        with neighbouring text deltas merged.
        """
        events: list[Event] = []
        texts: list[str] = []
        for chunk in chunks:
            text = plain_content(chunk)  # the translator's own test of such a chunk
            if text:
                texts.append(text)
                continue
            if texts:
                self._add_text("".join(texts), events)
                texts = []
            events.extend(self.feed(chunk))
        if texts:
            self._add_text("".join(texts), events)
        return events

    def _take_delta(self, delta: JSON, events: list[Event]) -> None:
        if "reasoning_content" in delta or "reasoning" in delta:
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                self._add_reasoning(reasoning, events)
        content = delta.get("content")
        if content and isinstance(content, str):
            self._add_text(content, events)
        calls = delta.get("tool_calls")
        if calls:
            for call in calls:
                self._add_call(call, events)

    def finish(self) -> list[Event]:
        """Close every open item and end with response.completed or .incomplete."""
        incomplete = self._finish == "length"
        events = self._close_all("incomplete" if incomplete else "completed")
        if incomplete:
            self.response["status"] = "incomplete"
            self.response["incomplete_details"] = {"reason": "max_output_tokens"}
            events.append(self._event("response.incomplete", response=self._snapshot()))
        else:
            self.response["status"] = "completed"
            self.response["completed_at"] = int(time.time())
            events.append(self._event("response.completed", response=self._snapshot()))
        return events

    def fail(self, message: str, code: str = "server_error") -> list[Event]:
        """An upstream failure mid-stream: close what is open, end with response.failed."""
        events = self._close_all("incomplete")
        self.response["status"] = "failed"
        self.response["error"] = {"code": code, "message": message}
        events.append(self._event("response.failed", response=self._snapshot()))
        return events

    def assistant_message(self) -> Message | None:
        """The answer as a chat assistant turn, for a continuation's history."""
        text: list[str] = []
        calls: list[JSON] = []
        for item in self.response["output"]:
            if item["type"] == "message":
                text.extend(part["text"] for part in item["content"])
            elif item["type"] == "function_call":
                calls.append({"id": item["call_id"], "type": "function",
                              "function": {"name": item["name"],
                                           "arguments": item["arguments"]}})
            elif item["type"] in ("custom_tool_call", "local_shell_call"):
                name = item.get("name", LOCAL_SHELL)
                calls.append({"id": item["call_id"], "type": "function",
                              "function": {"name": name, "arguments": chat_arguments(item)}})
        if not text and not calls:
            return None
        message: Message = {"role": "assistant", "content": "".join(text) or None}
        if calls:
            message["tool_calls"] = calls
        return message

    # --- items -------------------------------------------------------------

    def _open(self, item: JSON, events: list[Event]) -> int:
        index = len(self.response["output"])
        self.response["output"].append(item)
        events.append(self._event("response.output_item.added", output_index=index,
                                  item=_copy(item)))
        return index

    def _add_reasoning(self, text: str, events: list[Event]) -> None:
        if self._reasoning is None:
            self._close_text(events, "completed")
            item: JSON = {"id": self._new_id("rs"), "type": "reasoning", "summary": [],
                    "status": "in_progress"}
            item["_index"] = self._open(item, events)
            item["summary"].append({"type": "summary_text", "text": ""})
            events.append(self._event(
                "response.reasoning_summary_part.added", item_id=item["id"],
                output_index=item["_index"], summary_index=0,
                part={"type": "summary_text", "text": ""}))
            item["_pieces"] = []
            self._reasoning = item
        item = self._reasoning
        assert item is not None
        item["_pieces"].append(text)  # joined once at the close: += would be quadratic
        events.append(self._event("response.reasoning_summary_text.delta", item_id=item["id"],
                                  output_index=item["_index"], summary_index=0, delta=text))

    def _add_text(self, text: str, events: list[Event]) -> None:
        item = self._text
        if item is None:
            item = self._open_text(events)
        item["_pieces"].append(text)  # joined once at the close
        # The hot path (one event per content delta): built in place, no helpers.
        events.append({"type": "response.output_text.delta", "sequence_number": self._seq,
                       "item_id": item["id"], "output_index": item["_index"],
                       "content_index": 0, "delta": text, "logprobs": []})
        self._seq += 1

    def _open_text(self, events: list[Event]) -> JSON:
        self._close_reasoning(events)
        item: JSON = {"id": self._new_id("msg"), "type": "message", "role": "assistant",
                      "status": "in_progress", "content": []}
        item["_index"] = self._open(item, events)
        item["_pieces"] = []
        part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        item["content"].append(part)
        events.append(self._event("response.content_part.added", item_id=item["id"],
                                  output_index=item["_index"], content_index=0,
                                  part=dict(part)))
        self._text = item
        return item

    def _add_call(self, call: JSON, events: list[Event]) -> None:
        index = call.get("index", 0)
        function = call.get("function") or {}
        item = self._calls.get(index)
        if item is None:
            self._close_reasoning(events)
            self._close_text(events, "completed")
            item = self._call_item(call.get("id") or self._new_id("call"),
                                   function.get("name") or "")
            item["_index"] = self._open(item, events)
            item["_pieces"] = []
            self._calls[index] = item
        elif function.get("name") and not item.get("name", LOCAL_SHELL):
            item["name"] = function["name"]
        arguments = function.get("arguments")
        if isinstance(arguments, str) and arguments:
            item["_pieces"].append(arguments)
            if item["type"] == "function_call":
                # A custom call's input is the raw text inside the JSON arguments: it
                # is streamed once whole, at the close (the flow releases a call only
                # once it is complete and checked, so nothing waits longer for it).
                events.append(self._event("response.function_call_arguments.delta",
                                          item_id=item["id"], output_index=item["_index"],
                                          delta=arguments))

    def _call_item(self, call_id: str, name: str) -> JSON:
        kind = self._kinds.get(name)
        if kind == CUSTOM:
            return {"id": self._new_id("ctc"), "type": "custom_tool_call",
                    "status": "in_progress", "call_id": call_id, "name": name, "input": ""}
        if kind == LOCAL_SHELL:
            return {"id": self._new_id("lsh"), "type": "local_shell_call",
                    "status": "in_progress", "call_id": call_id,
                    **item_fields(LOCAL_SHELL, "")}
        return {"id": self._new_id("fc"), "type": "function_call", "status": "in_progress",
                "call_id": call_id, "name": name, "arguments": ""}

    # --- closing -----------------------------------------------------------

    def _close_all(self, status: str) -> list[Event]:
        events: list[Event] = []
        self._close_reasoning(events)
        self._close_text(events, status)
        for index in sorted(self._calls):
            self._close_call(self._calls[index], events)
        self._calls.clear()
        return events

    def _close_reasoning(self, events: list[Event]) -> None:
        item, self._reasoning = self._reasoning, None
        if item is None:
            return
        item["summary"][0]["text"] = "".join(item.pop("_pieces"))
        part = dict(item["summary"][0])
        base = {"item_id": item["id"], "output_index": item["_index"], "summary_index": 0}
        events.append(self._event("response.reasoning_summary_text.done", **base,
                                  text=part["text"]))
        events.append(self._event("response.reasoning_summary_part.done", **base, part=part))
        self._done(item, "completed", events)

    def _close_text(self, events: list[Event], status: str) -> None:
        item, self._text = self._text, None
        if item is None:
            return
        item["content"][0]["text"] = "".join(item.pop("_pieces"))
        part = dict(item["content"][0])
        base = {"item_id": item["id"], "output_index": item["_index"], "content_index": 0}
        events.append(self._event("response.output_text.done", **base, text=part["text"],
                                  logprobs=[]))
        events.append(self._event("response.content_part.done", **base, part=part))
        self._done(item, status, events)

    def _close_call(self, item: JSON, events: list[Event]) -> None:
        arguments = "".join(item.pop("_pieces"))
        if item["type"] == "custom_tool_call":
            item.update(item_fields(CUSTOM, arguments))
            base = {"item_id": item["id"], "output_index": item["_index"]}
            if item["input"]:
                events.append(self._event("response.custom_tool_call_input.delta", **base,
                                          delta=item["input"]))
            events.append(self._event("response.custom_tool_call_input.done", **base,
                                      input=item["input"]))
            self._done(item, "completed", events)
            return
        if item["type"] == "local_shell_call":
            item.update(item_fields(LOCAL_SHELL, arguments))
            self._done(item, "completed", events)
            return
        item["arguments"] = arguments
        events.append(self._event("response.function_call_arguments.done", item_id=item["id"],
                                  output_index=item["_index"], name=item["name"],
                                  arguments=item["arguments"]))
        self._done(item, "completed", events)

    def _done(self, item: JSON, status: str, events: list[Event]) -> None:
        item["status"] = status
        index = item.pop("_index")
        events.append(self._event("response.output_item.done", output_index=index,
                                  item=_copy(item)))


def _copy(item: JSON) -> JSON:
    """An item as it goes out: our bookkeeping keys (`_...`) removed, parts copied."""
    out = {k: v for k, v in item.items() if k[0] != "_"}
    for key in ("content", "summary"):
        if key in out:
            out[key] = [dict(p) for p in out[key]]
    if "action" in out:
        out["action"] = dict(out["action"])
    return out


def _usage(usage: JSON) -> JSON:
    prompt = int(usage.get("prompt_tokens") or 0)
    completion = int(usage.get("completion_tokens") or 0)
    details = usage.get("completion_tokens_details") or {}
    return {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": int(details.get("reasoning_tokens")
                                                              or 0)},
            "total_tokens": int(usage.get("total_tokens") or prompt + completion)}
