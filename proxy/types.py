"""Shapes every stage shares.

Wire data (OpenAI request bodies, chunks, messages) stay plain orjson dicts,
typed as aliases; our own values (Profile, Observation, Plan) are frozen
dataclasses. Must not: do I/O, or import any other toolshim module: every layer
imports this.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

# --- wire shapes (OpenAI) ---------------------------------------------------

JSON = dict[str, Any]
ChatRequest = dict[str, Any]
"""An OpenAI chat.completions request body as decoded from the client."""
Message = dict[str, Any]
ToolDef = dict[str, Any]
"""`{"type": "function", "function": {"name", "description", "parameters"}}`."""
Chunk = dict[str, Any]
"""One `chat.completion.chunk` object."""

ToolMode = Literal["auto", "native", "off", "emulate"]
InvalidPolicy = Literal["drop", "repair", "keep", "correct"]
ReasoningPolicy = Literal["pass", "strip", "move"]
Fallback = Literal["off", "emulate"]
ToolSupport = Literal["refused", "none"]
"""what toolshim found about a model's native tools: a backend refused them, or a probe
found none. A fact, not a policy: `fallback` decides what a request then gets."""
ImplicitToolChoice = Literal["auto", "required"]
RequiredChoice = Literal["pass", "rewrite"]
ContextGuard = Literal["trim", "reject", "off"]


# --- our values -------------------------------------------------------------


@dataclass(frozen=True)
class SchemaRewrite:
    """How tool parameter schemas are rewritten before they go upstream."""

    drop_keywords: tuple[str, ...] = ()
    inline_refs: bool = False
    collapse_nullable: bool = False
    max_description_chars: int | None = None


@dataclass(frozen=True)
class SystemPrompt:
    prepend: str | None = None
    append: str | None = None
    replace: str | None = None


@dataclass(frozen=True)
class Profile:
    """What the proxy does for one model: the resolved capabilities entry.

    `sources` maps each field name that did not come from the built-in
    default to where it came from ("models:qwen3*", "learned", "defaults").
    """

    model: str
    tools: ToolMode = "auto"
    max_tools: int | None = 64
    invalid_tool_calls: InvalidPolicy = "repair"
    allow_tools: tuple[str, ...] | None = None
    deny_tools: tuple[str, ...] = ()
    rename: tuple[tuple[str, str], ...] = ()
    """(client name, upstream name) pairs."""
    schema: SchemaRewrite = SchemaRewrite()
    system_prompt: SystemPrompt = SystemPrompt()
    system_role: bool = True
    drop_tool_choice: tuple[str, ...] = ()
    """tool_choice kinds the model can't honour: "none", "auto", "required", "function"."""
    parallel_tool_calls: bool | None = None
    """False: the model can't honour the parameter; it is not sent upstream."""
    tool_format: str | None = None
    fallback: Fallback = "emulate"
    """Where `auto` steps down to when the backend refuses tools: `emulate`, so a
    model without native tools can still call an agent's tools."""
    tool_support: ToolSupport | None = None
    """None: not known to lack native tools (send them, step down if refused)."""
    recover_text_calls: bool = True
    reasoning: ReasoningPolicy = "move"
    stream_tools: bool = True
    """False: the backend can't stream with tools; ask it whole and stream the answer."""
    implicit_tool_choice: ImplicitToolChoice | None = "auto"
    """Sent when the client offers tools without tool_choice (OpenAI's own default)."""
    required_tool_choice: RequiredChoice = "pass"
    """rewrite: `required` becomes the one tool by name, or `auto` plus a system note."""
    null_content: bool = True
    """False: assistant tool-call turns go upstream with `content: ""`, not null."""
    num_ctx: int | Literal["auto"] | None = None
    """Ollama only: a window to ask /api/chat for, or "auto" (sized per request)."""
    keep_alive: str | int | None = None
    ollama_options: tuple[tuple[str, Any], ...] | None = None
    context_guard: ContextGuard = "trim"
    """When even the largest allowed window is too small: trim tools, reject, or send."""
    chars_per_token: float | None = None
    starts_in_reasoning: bool = False
    """the model's replies start inside reasoning (its prompt opens `<think>`)."""
    max_corrections: int = 1
    """under invalid_tool_calls: correct, how many times the model is asked again."""
    server_tools: tuple[str, ...] = ()
    """names or globs of the server tools offered to this model (none by default)."""
    max_iterations: int = 5
    server_tools_budget: float = 120.0
    """seconds the whole server-tool loop may take."""
    max_server_tool_calls: int = 16
    """distinct server-tool calls one turn may run (a model may emit hundreds)."""
    sources: Mapping[str, str] = field(default_factory=dict)


ObservationKind = Literal[
    "tools_refused", "tool_choice_refused", "tool_choice_dropped", "tools_stripped",
    "tools_emulated",
    "text_calls_recovered", "call_dropped", "call_repaired", "probe",
    # backend quirks (quirks.py)
    "stream_tools_failed", "required_choice_failed", "null_content_failed",
    # Ollama's native path: characters per token seen in its prompt_eval_count
    "chars_per_token",
    # invalid_tool_calls: correct (counts), a reply that began inside reasoning
    "correction", "reasoning_open",
]


@dataclass(frozen=True)
class Observation:
    """A finding of a stage, handed to learning.py / metrics by the flow."""

    model: str
    kind: ObservationKind
    detail: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Plan:
    """How one upstream attempt treats tools: the rung of the retry ladder.

    native: tools go upstream (after rewrites); off: stripped, history flattened
    to text; emulate: described in the system prompt in `tool_format`.
    drop_tool_choice: the backend refused the client's tool_choice value.
    """

    tools: Literal["native", "off", "emulate"] = "native"
    drop_tool_choice: bool = False
    below_min_validation: bool = False
    """tools are off because the model's recorded validation is under --min-validation."""


class Stage(Protocol):
    """A sans-IO response stage (or a pipeline of them): chunks in, chunks out.

    All a stage needs. The translator's fast paths ask more of the stages that can
    vouch a chunk would pass unchanged: `transforms.response.hooks.PlainHooks`."""

    @property
    def observations(self) -> list[Observation]: ...

    def feed(self, chunk: Chunk) -> list[Chunk]: ...

    def flush(self) -> list[Chunk]: ...
