"""The texts of a read of plain content events, taken without decoding each chunk.

Shared by the client dialects that turn the chat flow's fast-path reads (the
upstream's own SSE bytes, `ChatOutput.raw_batches`) into their own events: most of
a stream is content-only chunks, and decoding each one was most of a door's cost.
"""

from __future__ import annotations

from collections.abc import Iterator

import orjson

from proxy.sse import SseFrames
from proxy.types import Chunk

# A content-only chunk as Ollama writes it ends `"choices":[{"index":0,"delta":{"content":
# <string>},"finish_reason":null}]}`: one choice, a delta of content alone, finish null,
# choices the last key.
_HEAD = b'"choices":[{"index":0,"delta":{"content":'
_TAIL = b'},"finish_reason":null}]}\n\n'


def plain_head(read: SseFrames) -> tuple[int, list[str]]:
    """Where the events that open `read` and are each choice 0's content and nothing
    else (what `plain_content` accepts) end, and their texts; (0, []) when the read
    does not open so.

    In a stream's read every event starts with the same bytes up to its text (id,
    model, created: Ollama's shape). Cut at each plain ending, the pieces are that
    prefix and a string literal; the read rebuilt from them must be the read (one
    join and one comparison check every event), and the literals parse as one JSON
    array: no chunk is decoded. The read's last events (finish, usage) are left for
    decoding. A backend that wrote garbage before `choices` still has its text taken.
    """
    at = read.find(_HEAD)
    if at < 0:
        return 0, []
    start = at + len(_HEAD)
    prefix = read[:start]
    # The prefix must be the first event's own start: another event before it (a finish,
    # a role) is not plain and must not be taken as part of one.
    if prefix.find(b'"usage"') >= 0 or prefix.find(b"\n\n") >= 0:
        return 0, []
    # _TAIL holds raw quotes and a blank line: it cannot occur inside a JSON string.
    pieces = read.split(_TAIL)
    pieces.pop()  # what follows the last plain ending: the closing events, if any
    literals = [piece[start:] for piece in pieces]
    end = sum(map(len, pieces)) + len(_TAIL) * len(pieces)
    if not literals or prefix + (_TAIL + prefix).join(literals) + _TAIL != read[:end]:
        return 0, []
    try:
        texts = orjson.loads(b"[" + b",".join(literals) + b"]")
    except orjson.JSONDecodeError:
        return 0, []
    if len(texts) != len(literals) or not all(type(text) is str for text in texts):
        return 0, []
    return end, texts


def text_runs(chunks: list[Chunk]) -> Iterator[str | Chunk]:
    """`chunks` with each run of neighbouring content-only chunks (what `plain_content`
    accepts) joined into one text: they arrived together, and a client concatenates
    deltas anyway. Other chunks come as they are, in order; empty texts are dropped."""
    texts: list[str] = []
    for chunk in chunks:
        # plain_content's test, inline: it runs for every token of every stream.
        choices = chunk.get("choices")
        if type(choices) is list and len(choices) == 1 and chunk.get("usage") is None:
            choice = choices[0]
            delta = choice.get("delta") if type(choice) is dict else None
            if type(delta) is dict and len(delta) == 1 and \
                    choice.get("finish_reason") is None and not choice.get("index"):
                text = delta.get("content")
                if type(text) is str:
                    if text:
                        texts.append(text)
                    continue
        if texts:
            yield "".join(texts)
            texts = []
        yield chunk
    if texts:
        yield "".join(texts)
