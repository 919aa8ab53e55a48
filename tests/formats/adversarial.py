"""Hostile model output for every text format, and how long recovery takes on it.

Model output is attacker-controlled (a prompt injection can make a model write
anything) and recovery runs on the event loop, so its cost must grow about
linearly with the answer. `inputs(fmt, size)` builds, for one format, answers of
about `size` characters that stress the scanners: runs of the format's own call
cut off or broken, many complete calls, deep nesting, runs of `{` / `[` at line
starts, unclosed strings, the format's markers repeated. `measure` times whole
recovery (`proxy.formats.recover`), streamed recovery (`StreamRecovery` fed in
small deltas) and the response stages (`build_pipeline` behind `FastSseTranslator`).

Run as a script for the table: `python tests/formats/adversarial.py [format ...]`
prints seconds per kind at 16, 64 and 256 KB and the 64->256 KB ratio (about 4
for linear work; 16 for quadratic).
"""

from __future__ import annotations

import functools
import itertools
import os
import sys
import time
from collections.abc import Callable, Iterator

import orjson

from proxy.flow.fast_stream import FastSseTranslator
from proxy.formats import FORMATS, recover
from proxy.formats.base import ParsedCall
from proxy.formats.stream import StreamRecovery
from proxy.transforms.response import build_pipeline
from proxy.transforms.response.checks import SchemaCache
from proxy.types import Plan, Profile

TOOL = "get_weather"
TOOLS = {TOOL: {"type": "object", "properties": {"city": {"type": "string"}}}}
CLIENT_TOOLS = [{"type": "function", "function": {"name": TOOL, "parameters": TOOLS[TOOL]}}]
SIZES = (16_000, 64_000, 256_000)
DELTA = 7  # characters per streamed delta: small, as tokens come


def _call(index: int) -> ParsedCall:
    return ParsedCall(TOOL, {"city": f"Paris {index}"})


def _repeat(unit: Callable[[int], str], size: int) -> str:
    pieces: list[str] = []
    total = 0
    for index in itertools.count():
        piece = unit(index)
        pieces.append(piece)
        total += len(piece)
        if total >= size:
            return "".join(pieces)
    raise AssertionError("unreachable")


def inputs(name: str, size: int) -> Iterator[tuple[str, str]]:
    """(kind, text) pairs of about size characters for format `name`."""
    fmt = FORMATS[name]
    rendered = fmt.render_calls([_call(0)])
    cut = rendered[: max(len(rendered) * 3 // 5, 1)]
    yield "cut", _repeat(lambda i: cut + "\n", size)
    yield "cut-inline", _repeat(lambda i: cut + " and ", size)
    yield "broken", _repeat(lambda i: rendered.replace("{", "{{", 1) + "\n", size)
    yield "complete", _repeat(lambda i: fmt.render_calls([_call(i)]) + "\n", size)
    yield "markers", _repeat(lambda i: " ".join(fmt.markers) + "\n", size)
    yield "markers-bare", _repeat(lambda i: "".join(fmt.markers), size)
    yield "nesting", "\n".join(m + '{"a":' * (size // 5) for m in fmt.markers[:1])
    yield "brace-lines", _repeat(lambda i: "{\n[\n", size)
    # A call-shaped value followed by prose, then an opener never closed: each
    # failed scan must not be redone after the next value is taken apart.
    yield "alternating", _repeat(lambda i: '{"name": "' + TOOL + '", "arguments": {}} x\n{\n', size)
    yield "unclosed-string", _repeat(lambda i: fmt.markers[0] + '{"name": "' + TOOL + '", "a": "x\n',
                                     size)


def _whole(name: str, text: str) -> None:
    recover(text, TOOLS, name)


def _stream(name: str, text: str) -> None:
    parser = StreamRecovery(TOOLS, name)
    for at in range(0, len(text), DELTA):
        parser.feed(text[at : at + DELTA])
    parser.flush()


def frames(text: str) -> bytes:
    """text as an SSE body of chat-completion chunks, DELTA characters each."""
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    chunks = [{**base, "choices": [{"index": 0, "delta": {"content": text[at : at + DELTA]},
                                    "finish_reason": None}]}
              for at in range(0, len(text), DELTA)]
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"


def pipeline_run(name: str, body: bytes) -> None:
    """The response stages with emulated tools in format `name`, fed SSE frames."""
    ids = (f"call_{i}" for i in itertools.count())
    profile = Profile(model="m", reasoning="move", tool_format=name)
    pipeline = build_pipeline(client_tools=CLIENT_TOOLS, profile=profile,
                              plan=Plan(tools="emulate"), parallel_tool_calls=None,
                              schema_cache=SchemaCache(), id_factory=lambda: next(ids))
    translator = FastSseTranslator(pipeline, decode=True)
    for at in range(0, len(body), 4096):
        translator.feed(body[at : at + 4096])
    translator.end()


def timed(run: Callable[[], None]) -> float:
    """CPU seconds one run takes (process time: the machine may be loaded)."""
    start = time.process_time()
    run()
    return time.process_time() - start


def measure(name: str, size: int, pipeline: bool = True) -> dict[tuple[str, str], float]:
    """(kind, path) -> CPU seconds for every input kind and path at this size."""
    out: dict[tuple[str, str], float] = {}
    for kind, text in inputs(name, size):
        out[kind, "whole"] = timed(functools.partial(_whole, name, text))
        out[kind, "stream"] = timed(functools.partial(_stream, name, text))
        if pipeline:
            out[kind, "pipeline"] = timed(functools.partial(pipeline_run, name, frames(text)))
    return out


def main(names: list[str], sizes: tuple[int, ...] = SIZES) -> None:
    for name in names or list(FORMATS):
        pipeline = not os.environ.get("ADVERSARIAL_NO_PIPELINE")
        table = {size: measure(name, size, pipeline) for size in sizes}
        for key in table[sizes[0]]:
            times = [table[size][key] for size in sizes]
            ratio = times[-1] / max(times[-2], 1e-3)
            flag = "  <-- super-linear" if ratio > 6 and times[-1] > 0.2 else ""
            print(f"{name:16} {key[0]:16} {key[1]:8} "
                  + " ".join(f"{t:8.3f}" for t in times) + f"  x{ratio:5.1f}{flag}", flush=True)


if __name__ == "__main__":
    # ADVERSARIAL_SIZES=4000,16000 and ADVERSARIAL_NO_PIPELINE=1 for a quicker screen.
    chosen = os.environ.get("ADVERSARIAL_SIZES")
    main(sys.argv[1:], tuple(int(s) for s in chosen.split(",")) if chosen else SIZES)
