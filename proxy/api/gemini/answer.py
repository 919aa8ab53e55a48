"""Chat completion chunks -> Gemini `GenerateContentResponse`s. Pure, sans-IO.

`AnswerBuilder` is fed the chunks the chat flow hands its client (after every
check, so a function call appears only once it passed, whole) and makes the
stream's chunks: each batch (one upstream read) is at most one chunk, text as it
arrived; a function call leaves whole, once, with `args` as an object and an id.
Every stream ends with a chunk that carries `finishReason` (`STOP` also after
function calls, as Gemini answers) and the usage; no chunk is empty of both
parts and finish, since Gemini CLI rejects and retries such a stream. A failure
after the stream started is an error chunk, never a clean finish. Fed a whole
answer's chunks, the same builder makes the non-streaming response.
"""

from __future__ import annotations

import secrets
from itertools import groupby
from typing import Any

import orjson

from proxy.api.gemini.errors import envelope
from proxy.api.plain_events import plain_head, text_runs
from proxy.flow.translate import ChunkOut, as_chunks
from proxy.sse import SseFrames
from proxy.types import JSON, Chunk

_FINISH = {"length": "MAX_TOKENS", "content_filter": "SAFETY"}


def new_id() -> str:
    return secrets.token_urlsafe(16)


class AnswerBuilder:
    """feed_all(batch) -> stream chunks; finish() / fail() -> the closing chunk."""

    def __init__(self, model: str, *, thoughts: bool, prompt_tokens: int,
                 response_id: str | None = None) -> None:
        self.model = model
        self.thoughts = thoughts
        """show the model's reasoning as `thought: true` parts (`includeThoughts`)."""
        self.response_id = response_id or new_id()
        self._all: list[JSON] = []
        """every part so far, in order (joined once, by `whole`: += would be quadratic)."""
        self._calls: dict[int, list[Any]] = {}
        """chat call index -> [id, name, argument fragments], until the call is whole."""
        self._finish: str | None = None
        self._usage = {"promptTokenCount": prompt_tokens, "candidatesTokenCount": 0,
                       "totalTokenCount": prompt_tokens}

    def feed_all(self, chunks: list[Chunk]) -> list[JSON]:
        """The stream chunk for one batch: none when it carried no part."""
        parts: list[JSON] = []
        self._feed_chunks(chunks, parts)
        return self._batch_response(parts)

    def feed_batch(self, batch: list[ChunkOut]) -> list[JSON]:
        """`feed_all` for a batch as the flow hands it (dicts, or the upstream's bytes).

        The plain content events that open a whole read in Ollama's shape (most of a
        stream) are read for their texts alone (`plain_head`), without building every
        chunk's dicts; the rest is decoded and fed as usual. The chunk is the same.
        """
        parts: list[JSON] = []
        for item in batch:
            if not isinstance(item, SseFrames):
                self._feed_chunks(as_chunks([item]), parts)
                continue
            end, texts = plain_head(item)
            text = "".join(texts)
            if text:
                _add_text(parts, text, thought=False)
            if end < len(item):
                self._feed_chunks(as_chunks([SseFrames(item[end:])]), parts)
        return self._batch_response(parts)

    def _feed_chunks(self, chunks: list[Chunk], parts: list[JSON]) -> None:
        for item in text_runs(chunks):
            if isinstance(item, str):
                _add_text(parts, item, thought=False)
            else:
                self._feed(item, parts)

    def _batch_response(self, parts: list[JSON]) -> list[JSON]:
        self._whole_calls(parts, final=False)
        if not parts:
            return []
        self._all.extend(parts)
        return [self._response(parts)]

    def finish(self) -> JSON:
        """The last chunk: calls still open, `finishReason` and the usage."""
        parts: list[JSON] = []
        self._whole_calls(parts, final=True)
        self._all.extend(parts)
        return self._response(parts, self._reason())

    def whole(self) -> JSON:
        """The finished answer as one response: thoughts, text, then function calls."""
        rank = {"thought": 0, "text": 1, "functionCall": 2}
        ordered = sorted(self._all, key=lambda p: rank[_kind(p)])  # stable: text keeps order
        parts: list[JSON] = []
        for kind, group in groupby(ordered, key=_kind):
            if kind == "functionCall":
                parts.extend(group)
            else:
                _add_text(parts, "".join(p["text"] for p in group), thought=kind == "thought")
        return self._response(parts, self._reason())

    def fail(self, code: int, message: str) -> JSON:
        """A failure after the stream started: Google's error object, as a chunk."""
        return envelope(code, message)

    def _reason(self) -> str:
        return _FINISH.get(self._finish or "stop", "STOP")

    def _response(self, parts: list[JSON], finish: str | None = None) -> JSON:
        candidate: JSON = {"content": {"role": "model", "parts": parts}, "index": 0}
        response: JSON = {"candidates": [candidate]}
        if finish is not None:
            candidate["finishReason"] = finish
            response["usageMetadata"] = dict(self._usage)
        response["modelVersion"] = self.model
        response["responseId"] = self.response_id
        return response

    def _feed(self, chunk: Chunk, parts: list[JSON]) -> None:
        usage = chunk.get("usage")
        if usage and isinstance(usage, dict):
            self._take_usage(usage)
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict) or choice.get("index", 0):
                continue  # one candidate: the first choice answers
            delta = choice.get("delta") or choice.get("message")
            if isinstance(delta, dict):
                self._take_delta(delta, parts)
            if choice.get("finish_reason"):
                self._finish = choice["finish_reason"]

    def _take_delta(self, delta: JSON, parts: list[JSON]) -> None:
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if reasoning and isinstance(reasoning, str) and self.thoughts:
            _add_text(parts, reasoning, thought=True)
        content = delta.get("content")
        if content and isinstance(content, str):
            self._whole_calls(parts, final=True)  # a call before the text is done
            _add_text(parts, content, thought=False)
        for call in delta.get("tool_calls") or ():
            if isinstance(call, dict):
                self._take_call(call, parts)

    def _take_call(self, call: JSON, parts: list[JSON]) -> None:
        function = call.get("function") or {}
        index = call.get("index", 0)
        if index not in self._calls:
            self._whole_calls(parts, final=True)  # the flow sends one call after another
            self._calls[index] = [call.get("id") or f"call_{new_id()}",
                                  function.get("name") or "", []]
        arguments = function.get("arguments")
        if isinstance(arguments, str) and arguments:
            self._calls[index][2].append(arguments)

    def _whole_calls(self, parts: list[JSON], *, final: bool) -> None:
        """Calls whose arguments are complete leave as parts (all of them when `final`)."""
        for index in list(self._calls):
            call_id, name, fragments = self._calls[index]
            args = _arguments("".join(fragments))
            if args is None and not final:
                continue
            del self._calls[index]
            parts.append({"functionCall": {"id": call_id, "name": name,
                                           "args": args if args is not None else
                                           {"_raw_arguments": "".join(fragments)}}})

    def _take_usage(self, usage: JSON) -> None:
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        details = usage.get("completion_tokens_details")
        thinking = details.get("reasoning_tokens") if isinstance(details, dict) else None
        u = self._usage
        if isinstance(prompt, int):
            u["promptTokenCount"] = prompt
        if isinstance(completion, int):
            if isinstance(thinking, int) and 0 < thinking <= completion:
                u["thoughtsTokenCount"] = thinking
                completion -= thinking
            u["candidatesTokenCount"] = completion
        u["totalTokenCount"] = u["promptTokenCount"] + u["candidatesTokenCount"] + \
            u.get("thoughtsTokenCount", 0)


def _arguments(text: str) -> JSON | None:
    """A call's arguments as the object `args` must be; None while not (yet) one."""
    if not text:
        return {}
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _kind(part: JSON) -> str:
    if "functionCall" in part:
        return "functionCall"
    return "thought" if part.get("thought") else "text"


def _add_text(parts: list[JSON], text: str, *, thought: bool) -> None:
    _add_part(parts, {"text": text, "thought": True} if thought else {"text": text})


def _add_part(parts: list[JSON], part: JSON) -> None:
    """`part` after `parts`, joined to the last one when both are text of one kind."""
    if parts and "text" in part and "text" in parts[-1] and \
            bool(parts[-1].get("thought")) == bool(part.get("thought")):
        parts[-1] = {**parts[-1], "text": parts[-1]["text"] + part["text"]}
    else:
        parts.append(part)


def sse_frame(response: JSON) -> bytes:
    """One `data:` line per whole response, a blank line after it (no `event:`, no [DONE])."""
    return b"data: " + orjson.dumps(response) + b"\r\n\r\n"
