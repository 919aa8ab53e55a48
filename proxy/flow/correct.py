"""`invalid_tool_calls: correct`: ask the model again, inside the same client request.

Owns: `CorrectingTurn`, a `Turn` that relays the first upstream turn's text at
once but holds its tool calls and its finish until they are judged; when a
call was refused by the checks (unknown tool, arguments not JSON after repair,
schema violation, cut off), came under `tool_choice: none`, or did not come
although `tool_choice` required one, it closes the first call, opens a further
turn with `correction.correction_messages(...)` (at most `max_corrections`
times), and gives the client the corrected calls. When every correction fails,
the first answer goes out as `drop` would have it (refused calls dropped,
forbidden calls removed, a missing call stays missing). The correction turns
never reach the client: only the calls they produce.

Text of a correction turn is relayed only when the first turn sent none (the
client already has the model's prose; a repeated paragraph would confuse it).
The finish chunk's `x_toolshim` says `corrected` (true/false) and how many
correction turns ran. A client that leaves cancels the correction's upstream
call: the turn is closed by `aclose()` whatever happens.

Must not: decide retries (open_turn does), or know the client's wire format.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from proxy.errors import ApiError
from proxy.flow.exchange import Exchange
from proxy.flow.run import UpstreamTurn
from proxy.flow.translate import ChunkOut, as_chunks
from proxy.flow.turn import DirectWriter, OpenTurn, Turn
from proxy.formats.base import tool_schemas
from proxy.transforms.response.correction import Problem, Rejected, correction_messages
from proxy.types import ChatRequest, Chunk, Observation, Profile


class CorrectingTurn(UpstreamTurn):
    """The first turn, its calls held until checked; corrections when they fail."""

    def __init__(self, ex: Exchange, chat: ChatRequest, profile: Profile, first: UpstreamTurn,
                 open_again: OpenTurn) -> None:
        super().__init__(first.call, first.pipeline, decode=first.decode, fast=first.fast,
                         tap=first.tap, usage=first.usage)
        self.ex, self.chat, self.profile = ex, chat, profile
        self._open_again = open_again
        self._offered = tool_schemas(chat.get("tools") or [])
        self._extra: list[Turn] = []
        self.corrections = 0
        self.corrected = False

    async def batches(self, direct: DirectWriter | None = None,
                      ) -> AsyncIterator[list[ChunkOut]]:
        # `direct` is not used: what this turn yields is decided after the pieces came.
        held: list[Chunk] = []
        text: list[str] = []
        try:
            async for batch in super().batches():
                out = _split_off(batch, held, text)
                if out:
                    yield out
        except ApiError:
            yield _out(held)  # a broken answer: what completed goes out, then the error
            raise
        problem = self._problem(self.pipeline.call_counts().rejected, held)
        if problem is None:
            yield _out(held)
            return
        await self.call.aclose()  # its limiter slot is the correction's
        reply = said = "".join(text)
        for _ in range(self.profile.max_corrections):
            fixed, problem, reply = await self._correct(problem, reply)
            if problem is None:
                first = [] if self.chat.get("tool_choice") == "none" else held
                yield _out(_corrected(first, fixed, relay_text=not said.strip(),
                                      tried=self.corrections))
                return
        self._observe()
        yield _out(_annotate(_dropped(held, self.chat), corrected=False, tried=self.corrections))

    def verbatim(self) -> None:
        return None  # what the client gets may be rebuilt from several turns

    def close_now(self) -> bool:
        return False  # several turns: aclose() closes them all

    async def aclose(self) -> None:
        try:
            for turn in self._extra:
                await turn.aclose()
        finally:
            await super().aclose()

    async def _correct(self, problem: Problem, reply: str) -> tuple[list[Chunk], Problem | None,
                                                                   str]:
        """One correction turn: its chunks, what is still wrong (None: fixed), its text."""
        self.corrections += 1
        again = {**self.chat, "messages": correction_messages(
            self.chat["messages"], reply, problem, self._offered)}
        chunks: list[Chunk] = []
        turn: Turn | None = None
        try:
            turn = await self._open_again(again)
            self._extra.append(turn)
            async for batch in turn.batches():
                chunks.extend(as_chunks(batch))
        except ApiError as exc:  # the backend failed the correction: the first answer stands
            self.ex.svc.telemetry.log.info("correction turn failed: %s", exc.settled().message, extra={
                "record": {"request_id": self.ex.record.request_id}})
            return [], problem, reply
        finally:
            if turn is not None:
                await turn.aclose()
                self.ex.observations.extend(turn.pipeline.observations)
        text = "".join(_content(c) for c in chunks)
        found = self._problem(turn.pipeline.call_counts().rejected, chunks)
        if found is None:
            self.corrected = True
            self._observe()
        return chunks, found, text

    def _observe(self) -> None:
        self.ex.observations.append(Observation(self.profile.model, "correction", {
            "tried": 1, "succeeded": int(self.corrected), "turns": self.corrections}))

    def _problem(self, rejected: tuple[tuple[str, str, str], ...],
                 chunks: list[Chunk]) -> Problem | None:
        names = [n for n, _ in _calls(chunks)]
        choice = self.chat.get("tool_choice")
        refused = tuple(Rejected(*r) for r in rejected)
        if choice == "none" and names:
            return Problem(refused, forbidden_calls=tuple(names))
        missing = None
        if not names and choice == "required":
            missing = "required"
        elif not names and isinstance(choice, dict):
            fn = choice.get("function")
            missing = fn.get("name") if isinstance(fn, dict) else None
        if refused or missing:
            return Problem(refused, missing_call=missing)
        return None


def _out(chunks: list[Chunk]) -> list[ChunkOut]:
    return [*chunks]


def _delta(chunk: Chunk) -> dict[str, Any]:
    choices = chunk.get("choices") or []
    delta = choices[0].get("delta") if choices and isinstance(choices[0], dict) else None
    return delta if isinstance(delta, dict) else {}


def _finish(chunk: Chunk) -> Any:
    choices = chunk.get("choices") or []
    return choices[0].get("finish_reason") if choices and isinstance(choices[0], dict) else None


def _content(chunk: Chunk) -> str:
    content = _delta(chunk).get("content")
    return content if isinstance(content, str) else ""


def _split_off(batch: list[ChunkOut], held: list[Chunk], text: list[str]) -> list[ChunkOut]:
    """What may go out now (text, reasoning); calls, the finish and what follows are held."""
    out: list[ChunkOut] = []
    for chunk in as_chunks(batch):
        if any(_finish(h) is not None for h in held):
            held.append(chunk)  # after the finish: usage chunks
        elif _delta(chunk).get("tool_calls") or _finish(chunk) is not None:
            rest = {k: v for k, v in _delta(chunk).items() if k != "tool_calls"}
            if rest and _finish(chunk) is not None:
                # The finish chunk's own text goes now; the finish itself waits.
                out.append(_with(chunk, rest, None))
                text.append(_content(chunk))
                chunk = _with(chunk, {}, _finish(chunk))
            held.append(chunk)
        else:
            out.append(chunk)
            text.append(_content(chunk))
    return out


def _with(chunk: Chunk, delta: dict[str, Any], finish: Any) -> Chunk:
    first = chunk["choices"][0]
    return {**chunk, "choices": [{**first, "delta": delta, "finish_reason": finish},
                                 *chunk["choices"][1:]]}


def _calls(chunks: list[Chunk]) -> list[tuple[str, str]]:
    """(name, arguments) of the calls in emitted chunks (assembly emits whole calls)."""
    found: list[tuple[str, str]] = []
    for chunk in chunks:
        for call in _delta(chunk).get("tool_calls") or []:
            fn = call.get("function") or {}
            found.append((str(fn.get("name") or ""), str(fn.get("arguments") or "")))
    return found


def _corrected(held: list[Chunk], fixed: list[Chunk], *, relay_text: bool,
               tried: int) -> list[Chunk]:
    """The correction's calls (after the first turn's valid ones), its finish, annotated."""
    kept = [c for c in held if _delta(c).get("tool_calls")]
    seen = set(_calls(kept))
    out, index = list(kept), len(_calls(kept))
    for chunk in fixed:
        delta = {k: v for k, v in _delta(chunk).items() if k != "role"}
        if not relay_text:
            delta = {k: v for k, v in delta.items() if k not in ("content", "reasoning_content")}
        calls = []
        for call in delta.pop("tool_calls", None) or []:
            fn = call.get("function") or {}
            if (fn.get("name"), fn.get("arguments")) in seen:
                continue
            calls.append({**call, "index": index})
            index += 1
        if calls:
            delta["tool_calls"] = calls
        finish = _finish(chunk)
        if finish in ("stop", "tool_calls"):
            finish = "tool_calls" if index else "stop"
        if delta or finish is not None or chunk.get("usage") is not None:
            out.append(_with(chunk, delta, finish) if chunk.get("choices") else chunk)
    return _annotate(out, corrected=True, tried=tried)


def _dropped(held: list[Chunk], chat: ChatRequest) -> list[Chunk]:
    """The first turn as `drop` leaves it; calls made under tool_choice none go too."""
    if chat.get("tool_choice") != "none" or not _calls(held):
        return held
    out: list[Chunk] = []
    for chunk in held:
        delta = {k: v for k, v in _delta(chunk).items() if k != "tool_calls"}
        finish = _finish(chunk)
        if not delta and finish is None and chunk.get("usage") is None:
            continue
        finish = "stop" if finish == "tool_calls" else finish
        out.append(_with(chunk, delta, finish) if chunk.get("choices") else chunk)
    return out


def _annotate(chunks: list[Chunk], *, corrected: bool, tried: int) -> list[Chunk]:
    """`x_toolshim.corrected` on the finish chunk (merged with assembly's counts)."""
    out = list(chunks)
    for i, chunk in enumerate(out):
        if _finish(chunk) is not None:
            note = dict(chunk.get("x_toolshim") or {})
            note.update({"corrected": corrected, "corrections": tried})
            out[i] = {**chunk, "x_toolshim": note}
    return out
