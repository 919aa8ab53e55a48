"""What /api/show says about a model's window (docs/backends.md 1b), and a native
stream handed on from the upstream's read callback."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import httpx
import orjson
import pytest

from proxy.backends.ollama import _Translated, parse_show
from proxy.backends.ollama_stream import NativeStream
from proxy.errors import ApiError


def test_context_length_of_the_architecture_and_the_modelfile_num_ctx() -> None:
    found = parse_show({"model_info": {"general.architecture": "qwen3",
                                       "qwen3.context_length": 40960,
                                       "qwen3.embedding_length": 4096},
                        "parameters": 'num_ctx                        16384\nstop "<|im_end|>"'})
    assert (found.maximum, found.modelfile_ctx) == (40960, 16384)


def test_missing_or_odd_answers_know_nothing() -> None:
    assert parse_show(None).maximum is None
    assert parse_show({"model_info": {}}).modelfile_ctx is None
    guessed = parse_show({"model_info": {"llama.context_length": 131072}})
    assert guessed.maximum == 131072


# --- a native stream pushed from the read callback (_Translated) ---------------------


class _PushingBody(httpx.AsyncByteStream):
    """A body that hands its reads to the relay's callback while it waits (as the wire's
    `_Body.wait_pushed` does), and what is left to the task's reads."""

    def __init__(self, pushed: list[bytes], read: list[bytes]) -> None:
        self.pushed, self.read = pushed, read
        self.waits = 0

    async def wait_pushed(self, push: Callable[[bytes], bool]) -> None:
        self.waits += 1
        while self.pushed:
            if not push(self.pushed.pop(0)):
                return

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self.read:
            yield piece


def _translated(body: _PushingBody, reported: list[int | None]) -> _Translated:
    stream = NativeStream("qwen3:8b", 1755000000, "chatcmpl-1", include_usage=False,
                          id_factory=lambda: "call_1")
    return _Translated(httpx.Response(200, stream=body), stream, reported.append)


def _native(content: str, done: bool = False) -> bytes:
    return orjson.dumps({"model": "qwen3:8b", "message": {"role": "assistant",
                                                          "content": content},
                         "done": done, "prompt_eval_count": 9}) + b"\n"


async def test_a_bad_line_pushed_in_a_read_comes_after_the_lines_before_it() -> None:
    body = _PushingBody([_native("a") + _native("b") + b"<html>\n" + _native("c")], [])
    reported: list[int | None] = []
    translated = _translated(body, reported)
    out: list[bytes] = []
    await translated.wait_pushed(lambda frames: out.append(frames) is None)
    assert b"".join(out).count(b"data: ") == 2 and b'"c"' not in b"".join(out)
    with pytest.raises(ApiError) as caught:
        await anext(aiter(translated))
    assert caught.value.status == 502 and reported == []


async def test_an_ended_native_body_is_not_asked_to_push_again() -> None:
    # Its last line came without a newline: the tail comes out at the end, after the
    # wire's body (and with it the connection) is done with.
    body = _PushingBody([], [_native("a") + _native("b").rstrip(b"\n")])
    reported: list[int | None] = []
    translated = _translated(body, reported)
    pieces = [piece async for piece in translated]
    assert b"".join(pieces).count(b"data: ") == 2
    await translated.wait_pushed(lambda frames: pytest.fail("pushed after the end"))
    assert body.waits == 0


async def test_a_pushed_stream_reports_its_prompt_count_once() -> None:
    body = _PushingBody([_native("a"), _native("", done=True)], [])
    reported: list[int | None] = []
    translated = _translated(body, reported)
    out: list[bytes] = []
    await translated.wait_pushed(lambda frames: out.append(frames) is None)
    assert out[-1].endswith(b"data: [DONE]\n\n") and reported == [9]
    assert [piece async for piece in translated] == [] and reported == [9]
