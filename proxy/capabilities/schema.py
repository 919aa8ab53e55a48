"""The capabilities.yaml model: what a person (or the proxy) may write, and nothing else.

Owns validation only: unknown keys, wrong types, bad enums and bad globs are
pydantic errors, which `load.py` maps back to YAML lines. It never reads files
and never decides precedence (that is `resolve.py`).

Every entry field defaults to None, meaning "not set here, inherit". Whether a
key was written at all is `model_fields_set`: an explicit `null` is allowed
only where the built-in default itself is "nothing" (`max_tools: null` lifts
the tool budget, `parallel_tool_calls: null` lets the client decide, ...);
elsewhere `null` is an error, since it would silently mean "inherit".
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

from proxy.capabilities.server_tools import ServerToolDefinition, check_tool_name
from proxy.formats import FORMATS
from proxy.types import (
    ContextGuard,
    Fallback,
    ImplicitToolChoice,
    InvalidPolicy,
    ReasoningPolicy,
    RequiredChoice,
    ToolMode,
    ToolSupport,
)

# Every registered text format is a valid tool_format: adding a format module is enough.
TOOL_FORMATS: frozenset[str] = frozenset(FORMATS)
"""Names `tool_format` accepts; formats/__init__.py maps each to its module."""

GLOB_CHARS = frozenset("*?[")

ToolChoiceKind = Literal["none", "auto", "required", "function"]
LearnedSource = Literal["runtime_error", "probe", "observed"]


def is_glob(name: str) -> bool:
    """True when `name` is an fnmatch pattern rather than an exact model name."""
    return any(c in GLOB_CHARS for c in name)


def bracket_end(pattern: str, start: int) -> int | None:
    """Index of the ']' closing the class opened at `start`, by fnmatch's rules.

    As in fnmatch, a ']' right after '[' or '[!' is a literal member.
    """
    j = start + 1
    if pattern[j : j + 1] == "!":
        j += 1
    if pattern[j : j + 1] == "]":
        j += 1
    end = pattern.find("]", j)
    return None if end < 0 else end


def glob_error(pattern: str) -> str | None:
    """Why `pattern` is not a usable glob, or None when it is.

    fnmatch itself never rejects a pattern: an unclosed '[' silently becomes a
    literal, so "qwen[3*" would match nothing anyone meant. We refuse it.
    """
    i = 0
    while i < len(pattern):
        if pattern[i] == "[":
            end = bracket_end(pattern, i)
            if end is None:
                return f"unclosed '[' at position {i + 1} in glob {pattern!r}"
            i = end
        i += 1
    return None


def _glob_check(what: str) -> Callable[[str], str]:
    """A validator: a non-empty name or glob with balanced brackets."""

    def check(name: str) -> str:
        if not name.strip():
            raise ValueError(f"a {what} may not be empty")
        problem = glob_error(name)
        if problem is not None:
            raise ValueError(problem)
        return name

    return check


def _check_tool_format(name: str) -> str:
    if name not in TOOL_FORMATS:
        known = ", ".join(sorted(TOOL_FORMATS))
        raise ValueError(f"unknown tool_format {name!r}; known: {known}")
    return name


def _check_timestamp(value: str) -> str:
    try:
        datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{value!r} is not an ISO-8601 timestamp (e.g. 2026-11-22T10:00:00Z)")
    return value


ModelKey = Annotated[str, AfterValidator(_glob_check("model name or glob"))]
ToolName = Annotated[str, AfterValidator(_glob_check("tool name"))]
NonEmptyStr = Annotated[str, Field(min_length=1)]
ServerToolName = Annotated[str, AfterValidator(check_tool_name)]


def _check_alias_target(model: str) -> str:
    if not model.strip():
        raise ValueError("an alias must name the model that serves it")
    if is_glob(model):
        raise ValueError(f"an alias must name one model, not a glob: {model!r}")
    return model


AliasTarget = Annotated[str, AfterValidator(_check_alias_target)]


class _Entry(BaseModel):
    # strict: YAML `max_tools: "8"` or `system_role: 1` is a typo, not a value to coerce.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def _not_null(value: object) -> object:
    if value is None:
        raise ValueError("may not be null; remove the key to inherit the value")
    return value


class SchemaEntry(_Entry):
    """`schema:` rewrites applied to tool parameter schemas sent upstream."""

    drop_keywords: list[NonEmptyStr] | None = None
    inline_refs: bool | None = None
    collapse_nullable: bool | None = None
    max_description_chars: Annotated[int, Field(gt=0)] | None = None
    """null: never trim."""

    _non_null = field_validator("drop_keywords", "inline_refs", "collapse_nullable")(_not_null)


class SystemPromptEntry(_Entry):
    """`system_prompt:` edits; null resets a part a less specific entry set."""

    prepend: str | None = None
    append: str | None = None
    replace: str | None = None


class ModelEntry(_Entry):
    """One entry under `defaults:` or `models:`; every key optional."""

    tools: ToolMode | None = None
    max_tools: Annotated[int, Field(ge=0)] | None = None
    """null: no budget."""
    invalid_tool_calls: InvalidPolicy | None = None
    allow_tools: list[ToolName] | None = None
    """null: every offered tool is allowed."""
    deny_tools: list[ToolName] | None = None
    rename: dict[NonEmptyStr, NonEmptyStr] | None = None
    """client name -> name sent upstream."""
    schema_: SchemaEntry | None = Field(default=None, alias="schema")
    system_prompt: SystemPromptEntry | None = None
    system_role: bool | None = None
    drop_tool_choice: list[ToolChoiceKind] | None = None
    parallel_tool_calls: bool | None = None
    """null: pass the client's value through."""
    tool_format: Annotated[str, AfterValidator(_check_tool_format)] | None = None
    """null: no format (nothing to emulate or recover with)."""
    fallback: Fallback | None = None
    tool_support: ToolSupport | None = None
    """a fact (learned, or stated by a person): native tools refused / none."""
    recover_text_calls: bool | None = None
    reasoning: ReasoningPolicy | None = None
    stream_tools: bool | None = None
    implicit_tool_choice: ImplicitToolChoice | None = None
    """null: send no tool_choice when the client sent none."""
    required_tool_choice: RequiredChoice | None = None
    null_content: bool | None = None
    # Ollama's native /api/chat (docs/ollama.md); any of the first three sends the
    # model there on an Ollama upstream. null: not set (num_ctx: null keeps /v1).
    num_ctx: Annotated[int, Field(gt=0)] | Literal["auto"] | None = None
    keep_alive: str | int | None = None
    """Ollama duration ("5m", "1h") or seconds (-1: keep loaded)."""
    ollama_options: dict[NonEmptyStr, Any] | None = None
    context_guard: ContextGuard | None = None
    chars_per_token: Annotated[float, Field(gt=0, le=64)] | None = None
    """Learned from Ollama's prompt_eval_count; sizes the num_ctx: auto estimate."""

    _guard_non_null = field_validator("context_guard")(_not_null)
    max_corrections: Annotated[int, Field(ge=0)] | None = None
    """under invalid_tool_calls: correct, how many times to ask the model again."""
    starts_in_reasoning: bool | None = None
    """replies start inside reasoning: only `</think>` appears (learned when seen)."""
    server_tools: list[ToolName] | None = None
    """names or globs over the `server_tools:` section (MCP tools as entry__tool)."""
    max_iterations: Annotated[int, Field(ge=1, le=50)] | None = None
    """server-tool rounds per request before toolshim stops the loop."""
    server_tools_budget: Annotated[float, Field(gt=0, le=3600)] | None = None
    """seconds the whole server-tool loop may take."""
    max_server_tool_calls: Annotated[int, Field(ge=1, le=256)] | None = None
    """distinct server-tool calls one assistant turn may run; the rest are error results."""

    _non_null = field_validator(
        "server_tools",
        "max_iterations",
        "server_tools_budget",
        "max_server_tool_calls",
        "tools",
        "invalid_tool_calls",
        "deny_tools",
        "rename",
        "schema_",
        "system_prompt",
        "system_role",
        "drop_tool_choice",
        "fallback",
        "tool_support",
        "recover_text_calls",
        "reasoning",
        "stream_tools",
        "required_tool_choice",
        "null_content",
        "max_corrections",
        "starts_in_reasoning",
    )(_not_null)

    @field_validator("rename")
    @classmethod
    def _rename_is_reversible(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        # Calls coming back are mapped upstream name -> client name, so two
        # client names sharing one upstream name could not be told apart.
        seen: dict[str, str] = {}
        for client, upstream in (value or {}).items():
            if upstream in seen:
                raise ValueError(f"{seen[upstream]!r} and {client!r} both rename to {upstream!r}")
            seen[upstream] = client
        return value


class ValidationRecord(_Entry):
    """`validation:` under a learned entry: the last tool-calling battery's result."""

    at: Annotated[str, AfterValidator(_check_timestamp)]
    passed: Annotated[int, Field(ge=0)]
    total: Annotated[int, Field(gt=0)]
    failed: list[NonEmptyStr] = []
    rung: str | None = None
    """the rung the proxy used for the battery's requests (native, emulate, off...)."""


class CorrectionRecord(_Entry):
    """`correction:` under a learned entry: how `invalid_tool_calls: correct` fared."""

    tried: Annotated[int, Field(ge=0)]
    succeeded: Annotated[int, Field(ge=0)]
    at: Annotated[str, AfterValidator(_check_timestamp)]
    """the last correction's time."""


PROVENANCE = ("source", "at", "evidence", "upstream")
"""where a learned entry came from: kept beside its facts, never a behaviour field."""
BOOKKEEPING = (*PROVENANCE, "validation", "correction")
"""every key of a learned entry that is not behaviour: what promote leaves behind."""


class LearnedEntry(ModelEntry):
    """One entry under `learned:`: a fact the proxy found out, with its evidence."""

    source: LearnedSource
    at: Annotated[str, AfterValidator(_check_timestamp)]
    """When it was learned, ISO-8601 UTC ("2026-11-22T10:00:00Z")."""
    evidence: str | None = None
    upstream: str | None = None
    validation: ValidationRecord | None = None
    """`toolshim validate`'s last result for this model (never a behaviour field)."""
    correction: CorrectionRecord | None = None
    """running counts of corrections asked for and that worked (never a behaviour field)."""


class Capabilities(_Entry):
    """The whole file. An empty file is `Capabilities()`: all built-in defaults."""

    version: Literal[1] = 1
    defaults: ModelEntry = ModelEntry()
    models: dict[ModelKey, ModelEntry] = {}
    """Exact names or fnmatch globs (* ? [..]); the person's section."""
    learned: dict[ModelKey, LearnedEntry] = {}
    """Exact names only in practice; the proxy's section."""
    server_tools: dict[ServerToolName, ServerToolDefinition] = {}
    """Tools toolshim runs itself (proxy/server_tools/), offered per model."""
    aliases: dict[ModelKey, AliasTarget] = {}
    """Names (or globs) clients ask for -> the model that serves them (aliases.py)."""

    @field_validator("version", mode="before")
    @classmethod
    def _version_not_bool(cls, value: object) -> object:
        # Literal[1] accepts True (True == 1); `version: true` is a typo.
        if isinstance(value, bool):
            raise PydanticCustomError("version", "version must be the integer 1")
        return value

    @field_validator("defaults", "models", "learned", "server_tools", "aliases", mode="before")
    @classmethod
    def _empty_section(cls, value: object) -> object:
        # `learned:` with nothing under it (or only comments) loads as null;
        # that is an empty section, not a type error.
        return {} if value is None else value

    @field_validator("models", mode="before")
    @classmethod
    def _empty_entries(cls, value: object) -> object:
        # `"gemma3:*":` with nothing under it: an entry that sets nothing.
        if isinstance(value, dict):
            return {k: {} if v is None else v for k, v in value.items()}
        return value
