"""The server-tool loop: upstream turns until the model stops calling server tools.

Owns the I/O around the pure policy in `proxy.server_tools.loop`: offering a
model's server tools (appended to the request's tools, so budgets, renames,
schema rewrites and emulate treat them like the client's), holding every
tool-call delta until a turn ends, running the server calls (concurrently,
with SSE keep-alives while they run), asking again, and letting through only
the final turn: its content as it arrives, its client calls after the
response checks. `LoopTurn` quacks like `proxy.flow.run.Turn`, so `ChatRun`
drives it unchanged.

Must not: send a server-tool call to the client, or log arguments or results
(only names, outcomes and durations).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from proxy.backends.upstream import Upstream
from proxy.flow.exchange import Exchange
from proxy.flow.run import ChatRun, DirectWriter, Turn
from proxy.flow.translate import ChunkOut, as_chunks
from proxy.server_tools.host import ToolHost
from proxy.server_tools.kept import history_call_ids
from proxy.server_tools.loop import (
    LoopGuard,
    next_messages,
    plan_calls,
    put_back,
    set_aside,
    split_calls,
    spread,
)
from proxy.server_tools.runner import ToolOutcome
from proxy.sse import KEEPALIVE
from proxy.transforms.response import ResponsePipeline
from proxy.types import ChatRequest, Chunk, Profile

OpenTurn = Callable[[Exchange, ChatRequest, Profile, Upstream], Awaitable[Turn]]
KEEPALIVE_EVERY = 5.0
"""seconds between keep-alives while server tools run (clients and proxies time out ~30-60 s)."""


def offered_server_tools(host: ToolHost | None, chat: ChatRequest,
                         profile: Profile) -> list[dict[str, Any]]:
    """The model's server tools for this request; a client tool of the same name wins."""
    if host is None or profile.tools == "off" or not profile.server_tools:
        return []
    client = {(t.get("function") or {}).get("name") for t in chat.get("tools") or []}
    return [t for t in host.offered(profile.server_tools) if t["function"]["name"] not in client]


async def server_tool_run(ex: Exchange, chat: ChatRequest, profile: Profile, upstream: Upstream,
                          host: ToolHost, server: list[dict[str, Any]],
                          open_turn: OpenTurn) -> ChatRun:
    loop = LoopTurn(ex, chat, profile, upstream, host, server, open_turn)
    await loop.start()
    return ServerToolRun(ex, loop)  # type: ignore[arg-type]


class ServerToolRun(ChatRun):
    def headers(self) -> dict[str, str]:
        headers = super().headers()
        rec = self.ex.record
        headers["x-toolshim-server-tool-calls"] = str(rec.server_tool_calls)
        headers["x-toolshim-server-tool-iterations"] = str(rec.server_tool_iterations)
        return headers


class LoopTurn:
    """Several upstream turns read as one (`batches()`, `aclose()`, `pipeline`, `own_s`)."""

    def __init__(self, ex: Exchange, chat: ChatRequest, profile: Profile, upstream: Upstream,
                 host: ToolHost, server: list[dict[str, Any]], open_turn: OpenTurn) -> None:
        self.ex, self.profile, self.upstream, self.host = ex, profile, upstream, host
        self.open_turn = open_turn
        self.server_names = {t["function"]["name"] for t in server}
        # Only this client's set-aside parts, each used once: another key naming
        # the same call ids gets nothing back.
        self.owner = ex.owner()
        kept = host.set_aside.take(self.owner, history_call_ids(chat["messages"]))
        self.messages = put_back(chat["messages"], kept)
        self.chat: ChatRequest = {**chat, "messages": self.messages,
                                  "tools": [*(chat.get("tools") or []), *server]}
        self.guard = LoopGuard(profile.max_iterations,
                               time.monotonic() + profile.server_tools_budget)
        self.turn: Turn | None = None
        self.closed_own_s = 0.0

    @property
    def pipeline(self) -> ResponsePipeline:
        assert self.turn is not None
        return self.turn.pipeline

    @property
    def own_s(self) -> float:
        return self.closed_own_s + (self.turn.own_s if self.turn is not None else 0.0)

    async def start(self) -> None:
        self.turn = await self.open_turn(self.ex, self.chat, self.profile, self.upstream)

    def verbatim(self) -> None:
        return None  # the client's answer is built from several turns (`Turn.verbatim`)

    def close_now(self) -> bool:
        return self.turn is None or self.turn.close_now()

    async def aclose(self) -> None:
        if self.turn is not None:
            await self.turn.aclose()

    async def batches(self, direct: DirectWriter | None = None,
                      ) -> AsyncIterator[list[ChunkOut]]:
        # `direct` is not used: what this turn yields is decided after the pieces came.
        first = True
        while True:
            assert self.turn is not None
            held = _Held(first)
            async for batch in self.turn.batches():
                out = held.take(batch)
                if out:
                    yield out
            server, client = split_calls(held.calls(), self.server_names)
            if not server:
                yield held.ending(client, self._counts())
                return
            stop = self.guard.stop_reason(server, time.monotonic())
            if stop is not None:
                yield held.stopped(stop, self._counts())
                return
            plan = plan_calls(server, self.profile.max_server_tool_calls)
            ran: list[ToolOutcome] = []
            async for keepalive in self._run(plan.run, ran):
                yield keepalive
            outcomes = spread(plan, server, ran)
            if client:  # a mixed turn: the client runs its calls; ours wait in the cache
                self.host.set_aside.keep(self.owner, [str(c.get("id", "")) for c in client],
                                         set_aside(server, outcomes))
                yield held.ending(client, self._counts())
                return
            self.messages = next_messages(self.messages, held.text, server, outcomes)
            await self._next_turn()
            first = False

    async def _run(self, calls: list[dict[str, Any]],
                   outcomes: list[ToolOutcome]) -> AsyncIterator[list[ChunkOut]]:
        """Run the calls; keep-alives while they run; a client that leaves cancels them."""
        task = asyncio.ensure_future(self.host.runner.run_all(calls))
        try:
            while not task.done():
                await asyncio.wait({task}, timeout=KEEPALIVE_EVERY)
                if not task.done() and self.ex.record.stream:
                    yield [KEEPALIVE]
            outcomes.extend(task.result())
        finally:
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        self._account(outcomes)

    def _account(self, outcomes: list[ToolOutcome]) -> None:
        rec = self.ex.record
        metrics = self.ex.svc.telemetry.metrics
        rec.server_tool_iterations += 1
        for o in outcomes:
            rec.server_tool_calls += 1
            outcome = "ok" if o.ok else "error"
            rec.server_tools.append(f"{o.name}:{outcome}:{o.duration_ms:.0f}ms")
            label = metrics.server_tool(o.name if o.name in self.server_names else "unknown")
            metrics.server_tool_calls.labels(label, outcome).inc()
            metrics.server_tool_latency.labels(label).observe(o.duration_ms / 1000)

    async def _next_turn(self) -> None:
        assert self.turn is not None
        old = self.turn
        await old.aclose()
        self.chat = {**self.chat, "messages": self.messages}
        # The old turn stays in place (closed, idempotent) if opening the next one fails.
        self.turn = await self.open_turn(self.ex, self.chat, self.profile, self.upstream)
        self.ex.observations.extend(old.pipeline.observations)
        self.closed_own_s += old.own_s

    def _counts(self) -> dict[str, int]:
        rec = self.ex.record
        return {"server_tool_calls": rec.server_tool_calls,
                "server_tool_iterations": rec.server_tool_iterations}


class _Held:
    """One turn's chunks: text and reasoning pass, tool-call deltas and the ending wait."""

    def __init__(self, first: bool) -> None:
        self.first = first
        self.text = ""
        self.parts: dict[int, dict[str, Any]] = {}
        self.tail: list[Chunk] = []
        self.template: Chunk = {}

    def take(self, batch: list[ChunkOut]) -> list[ChunkOut]:
        out: list[ChunkOut] = []
        for chunk in as_chunks(batch):
            choices = chunk.get("choices") or []
            if not choices:
                self.tail.append(chunk)  # usage
                continue
            self.template = {k: v for k, v in chunk.items() if k not in ("choices", "usage")}
            choice = choices[0]
            delta = dict(choice.get("delta") or {})
            for call in delta.pop("tool_calls", None) or []:
                self._add(call)
            if not self.first:
                delta.pop("role", None)
            self.text += delta.get("content") or ""
            if choice.get("finish_reason"):
                self.tail.append({**chunk, "choices": [{**choice, "delta": delta}]})
            elif any(v for v in delta.values()):
                out.append({**chunk, "choices": [{**choice, "delta": delta}]})
        return out

    def _add(self, delta: dict[str, Any]) -> None:
        call = self.parts.setdefault(int(delta.get("index", 0)), {
            "id": "", "type": "function", "function": {"name": "", "arguments": ""}})
        if delta.get("id"):
            call["id"] = delta["id"]
        function = delta.get("function") or {}
        call["function"]["name"] += function.get("name") or ""
        call["function"]["arguments"] += function.get("arguments") or ""

    def calls(self) -> list[dict[str, Any]]:
        return [self.parts[i] for i in sorted(self.parts)]

    def ending(self, client: list[dict[str, Any]], counts: dict[str, int]) -> list[ChunkOut]:
        out: list[ChunkOut] = []
        if client:
            calls = [{**call, "index": i} for i, call in enumerate(client)]
            out.append({**self.template, "choices": [
                {"index": 0, "delta": {"tool_calls": calls}, "finish_reason": None}]})
        finish = "tool_calls" if client else "stop"
        for chunk in self.tail:
            if chunk.get("choices"):
                choice = chunk["choices"][0]
                reason = finish if choice.get("finish_reason") in ("tool_calls", "stop") \
                    else choice.get("finish_reason")
                chunk = {**chunk, "choices": [{**choice, "finish_reason": reason}],
                         "x_toolshim": {**chunk.get("x_toolshim", {}), **counts}}
            out.append(chunk)
        if not any(c.get("choices") for c in self.tail):
            out.insert(len(out) - len(self.tail), self._finish(finish, counts))
        return out

    def stopped(self, message: str, counts: dict[str, int]) -> list[ChunkOut]:
        text = ("\n\n" if self.text else "") + message
        out: list[ChunkOut] = [{**self.template, "choices": [
            {"index": 0, "delta": {"content": text}, "finish_reason": None}]},
            self._finish("stop", counts)]
        out.extend(c for c in self.tail if not c.get("choices"))
        return out

    def _finish(self, reason: str, counts: dict[str, int]) -> Chunk:
        return {**self.template, "choices": [{"index": 0, "delta": {}, "finish_reason": reason}],
                "x_toolshim": counts}
