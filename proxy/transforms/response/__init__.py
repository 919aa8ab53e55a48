"""Response stages, composed in one place.

Order matters: reasoning text is split off first (so recovery never looks
inside `<think>`), then tool calls written as text are recovered into
`tool_calls` deltas, then every call (native or recovered) is assembled,
checked against the client's tools and emitted in OpenAI's delta shape.
Each stage is sans-IO: `feed(chunk) -> chunks`, `flush() -> chunks`.
Must not: reorder the stages anywhere else, or let a stage do I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from proxy.formats import DEFAULT_EMULATE_FORMAT
from proxy.formats.base import tool_schemas
from proxy.transforms.request.rename import reverse_rename
from proxy.transforms.response.assembly import CallAssembly, CallCounts
from proxy.transforms.response.checks import SchemaCache
from proxy.transforms.response.hooks import PlainHooks
from proxy.transforms.response.textcalls import TextCallRecovery
from proxy.transforms.response.thinking import ThinkingSplit
from proxy.types import Chunk, Observation, Plan, Profile, Stage, ToolDef


class ResponsePipeline:
    """Feeds each chunk through the stages in order; flush cascades."""

    def __init__(self, stages: Sequence[Stage], assembly: CallAssembly) -> None:
        self.stages = [*stages, assembly]
        self.assembly = assembly
        """the last stage, whose call counts the flow reports."""
        self._hooked = cast("list[PlainHooks]", self.stages)
        """what the `passes_plain*` questions ask: the stages themselves when each has
        the hooks; a stage without them can vouch for nothing, so then one that
        refuses everything stands for them all."""
        for stage in self.stages:
            if not isinstance(stage, PlainHooks):
                self._hooked = [PlainHooks()]
                break

    def feed(self, chunk: Chunk) -> list[Chunk]:
        out = [chunk]
        for stage in self.stages:
            nxt: list[Chunk] = []
            for item in out:
                nxt.extend(stage.feed(item))
            out = nxt
            if not out:
                break
        return out

    def flush(self) -> list[Chunk]:
        carried: list[Chunk] = []
        for stage in self.stages:
            nxt: list[Chunk] = []
            for item in carried:
                nxt.extend(stage.feed(item))
            nxt.extend(stage.flush())
            carried = nxt
        return carried

    def passes_plain(self, chunk: Chunk, text: str) -> bool:
        """A content-only chunk no stage would change: noted by all of them, True;
        False (no state touched): it must go through `feed`."""
        stages = self._hooked
        for stage in stages:
            if not stage.plain_ok(text):
                return False
        for stage in stages:
            stage.take_plain(chunk, text)
        return True

    def passes_plain_run(self, chunks: list[Chunk], texts: list[str]) -> int:
        """`passes_plain` for content-only chunks in a row (`texts` their texts), judged
        and noted at once: how many, from the first, every stage passes (0: no state
        touched; the chunk after the last passed one must be asked alone)."""
        joined = "".join(texts)
        count = len(texts)
        for stage in self._hooked:
            count = min(count, stage.plain_run_ok(texts, joined))
            if not count:
                return 0
        if count < len(texts):
            joined = "".join(texts[:count])
        for stage in self._hooked:
            stage.take_plain(chunks[count - 1], joined)
        return count

    def passes_plain_end(self, finish_reason: str) -> bool:
        """The chunk ending the answer (choice 0 alone, an empty delta, this finish
        reason) no stage would change, with nothing to flush after it: noted by all of
        them (they are done), True; False: no state touched."""
        stages = self._hooked
        for stage in stages:
            if not stage.plain_end_ok(finish_reason):
                return False
        for stage in stages:
            stage.take_plain_end()
        return True

    @property
    def knows_plain(self) -> bool:
        """Every stage answers the fast paths' hooks itself: only then may a stream's
        plain events skip the stages unread (`FastSseTranslator(decode=False)`)."""
        own = PlainHooks.plain_ok
        return all(isinstance(stage, PlainHooks) and type(stage).plain_ok is not own
                   for stage in self.stages)

    @property
    def observations(self) -> list[Observation]:
        return [obs for stage in self.stages for obs in stage.observations]

    def call_counts(self) -> CallCounts:
        return self.assembly.counts()

    @property
    def splits_reasoning(self) -> bool:
        """A stage looks for `<think>` in content (reasoning: move or strip)."""
        return any(isinstance(stage, ThinkingSplit) for stage in self.stages)


def build_pipeline(
    *, client_tools: Sequence[ToolDef], profile: Profile, plan: Plan,
    parallel_tool_calls: bool | None, schema_cache: SchemaCache,
    id_factory: Callable[[], str],
) -> ResponsePipeline:
    offered = tool_schemas(client_tools)  # the client's schemas, as written
    reverse = reverse_rename(profile)
    forward = dict(profile.rename)
    stages: list[Stage] = []
    if profile.reasoning != "pass":
        stages.append(ThinkingSplit(profile.reasoning,
                                    starts_inside=profile.starts_in_reasoning))
    recover = plan.tools == "emulate" or (plan.tools == "native" and profile.recover_text_calls)
    if offered and recover:
        # The model saw (and writes) upstream names; assembly reverses the rename.
        upstream_offered: Mapping[str, Any] = {forward.get(n, n): s for n, s in offered.items()}
        default = DEFAULT_EMULATE_FORMAT if plan.tools == "emulate" else None
        preferred = profile.tool_format or default
        stages.append(TextCallRecovery(upstream_offered, preferred, profile.model, id_factory))
    assembly = CallAssembly(offered, profile.invalid_tool_calls, reverse,
                            parallel_tool_calls, schema_cache, id_factory)
    return ResponsePipeline(stages, assembly)
