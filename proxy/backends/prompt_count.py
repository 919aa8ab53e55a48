"""A /v1 answer's `usage.prompt_tokens`, read as the body passes, for learning.

The Ollama adapter learns a model's characters per token from what the backend
counted (routing.py); a native answer says `prompt_eval_count`, a /v1 answer the
same number as `usage.prompt_tokens` in its JSON or its last stream chunk. The body
is handed on byte for byte, pushed reads included (wire.py's `wait_pushed`), and
looked at only until the count is found: one `find` per read.
Must not: change, delay or buffer a byte of the body, or fail it when no count
comes.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable

import httpx

from proxy.backends.upstream import body_stream

_COUNT = re.compile(rb'"prompt_tokens"\s*:\s*(\d{1,9})\D')
_KEY = b'"prompt_tokens"'
_CARRY = 64
"""bytes of the last read kept, so a count split between two reads is still found."""


def watch_prompt_tokens(response: httpx.Response, found: Callable[[int], None]
                        ) -> httpx.Response:
    """`response` with a body that calls `found(count)` once, when the count passes."""
    return httpx.Response(response.status_code, headers=response.headers,
                          stream=_Watched(response, found))


class _Watched(httpx.AsyncByteStream):
    def __init__(self, original: httpx.Response, found: Callable[[int], None]) -> None:
        self._original = original
        self._found: Callable[[int], None] | None = found
        self._tail = b""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for piece in body_stream(self._original):
            self._look(piece)
            yield piece

    async def wait_pushed(self, push: Callable[[bytes], bool]) -> None:
        wait = getattr(body_stream(self._original), "wait_pushed", None)
        if wait is None:
            return

        def watched(piece: bytes) -> bool:
            self._look(piece)
            return push(piece)

        await wait(watched)

    def _look(self, piece: bytes) -> None:
        if self._found is None:
            return
        text = self._tail + piece
        self._tail = text[-_CARRY:]
        if text.find(_KEY) < 0:
            return
        match = _COUNT.search(text)
        if match is not None:
            found, self._found = self._found, None
            found(int(match.group(1)))

    async def aclose(self) -> None:
        await self._original.aclose()
