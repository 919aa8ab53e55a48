"""Model name -> `Profile`: which capabilities entries apply, and in what order.

Pure: no I/O, no clock, never mutates the `Capabilities` it is given. The store
builds one `Resolver` per loaded file and caches profiles per model name.

Precedence, merged key by key, lowest first: the built-in `Profile` defaults,
`defaults:`, the `learned:` entry, every matching glob under `models:` (least
specific first), the exact entry under `models:`. A person's `models:` entry
therefore always overrules what the proxy learned. `schema` and
`system_prompt` merge one level deeper, key by key, too.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from proxy.capabilities.schema import Capabilities, ModelEntry, bracket_end, is_glob
from proxy.types import Profile, SchemaRewrite, SystemPrompt

_OLLAMA_REGISTRY = "registry.ollama.ai/"
_OLLAMA_LIBRARY = "library/"

# ModelEntry field -> Profile field; `schema_` only because `schema` clashes
# with a BaseModel attribute. LearnedEntry's bookkeeping keys are not here.
_PROFILE_FIELDS: Mapping[str, str] = {
    "tools": "tools",
    "max_tools": "max_tools",
    "invalid_tool_calls": "invalid_tool_calls",
    "allow_tools": "allow_tools",
    "deny_tools": "deny_tools",
    "rename": "rename",
    "system_role": "system_role",
    "drop_tool_choice": "drop_tool_choice",
    "parallel_tool_calls": "parallel_tool_calls",
    "tool_format": "tool_format",
    "fallback": "fallback",
    "tool_support": "tool_support",
    "recover_text_calls": "recover_text_calls",
    "reasoning": "reasoning",
    "stream_tools": "stream_tools",
    "implicit_tool_choice": "implicit_tool_choice",
    "required_tool_choice": "required_tool_choice",
    "null_content": "null_content",
    "num_ctx": "num_ctx",
    "keep_alive": "keep_alive",
    "ollama_options": "ollama_options",
    "context_guard": "context_guard",
    "chars_per_token": "chars_per_token",
    "max_corrections": "max_corrections",
    "starts_in_reasoning": "starts_in_reasoning",
    "server_tools": "server_tools",
    "max_iterations": "max_iterations",
    "server_tools_budget": "server_tools_budget",
    "max_server_tool_calls": "max_server_tool_calls",
}


def normalise_model_name(name: str) -> str:
    """The name as Ollama understands it: `qwen3` is `qwen3:latest`.

    Ollama names are case-insensitive and default the host
    (registry.ollama.ai), the namespace (library) and the tag (latest). The tag
    is a ':' after the last '/', so a registry `host:port/` is not a tag.
    """
    return learned_key(name).lower()


def learned_key(name: str) -> str:
    """`normalise_model_name` keeping the client's case: how a learned key is written.

    People read `hf.co/Org/Model-GGUF:Q4_K_M` as they typed it; matching still
    goes through `normalise_model_name`, so case never splits one model in two.
    """
    name = name.strip()
    while name.lower().startswith(_OLLAMA_REGISTRY):  # a loop keeps it idempotent
        name = name[len(_OLLAMA_REGISTRY):].strip()
    if name.lower().startswith(_OLLAMA_LIBRARY) and name.count("/") == 1:
        name = name[len(_OLLAMA_LIBRARY):].strip()
    if not name:
        return name
    last = name.rsplit("/", 1)[-1]
    if ":" not in last and "@" not in last:  # name@sha256:... pins a digest
        name += ":latest"
    return name


def glob_specificity(pattern: str) -> int:
    """Characters a glob matches literally; a `[...]` class counts as a wildcard."""
    count, i = 0, 0
    while i < len(pattern):
        end = bracket_end(pattern, i) if pattern[i] == "[" else None
        if end is not None:
            i = end + 1
            continue
        count += pattern[i] not in "*?"
        i += 1
    return count


@dataclass(frozen=True)
class _Glob:
    key: str
    pattern: re.Pattern[str]
    entry: ModelEntry

    def matches(self, raw: str, normalised: str) -> bool:
        return bool(self.pattern.match(normalised) or self.pattern.match(raw))


@dataclass(frozen=True)
class Resolver:
    """A `Capabilities` with names normalised and globs compiled, once."""

    defaults: ModelEntry
    exact: Mapping[str, tuple[str, ModelEntry]]
    globs: tuple[_Glob, ...]
    """Least specific first, so the most specific is applied last."""
    learned: Mapping[str, ModelEntry]

    @classmethod
    def build(cls, caps: Capabilities) -> Resolver:
        exact: dict[str, tuple[str, ModelEntry]] = {}
        ranked: list[tuple[tuple[int, int, int], _Glob]] = []
        for order, (key, entry) in enumerate(caps.models.items()):
            if is_glob(key):
                regex = re.compile(fnmatch.translate(key.strip()), re.IGNORECASE)
                rank = (glob_specificity(key), len(key), order)
                ranked.append((rank, _Glob(key, regex, entry)))
            else:
                exact[normalise_model_name(key)] = (key, entry)
        learned = {normalise_model_name(k): v for k, v in caps.learned.items()}
        globs = tuple(g for _, g in sorted(ranked, key=lambda pair: pair[0]))
        return cls(caps.defaults, exact, globs, learned)

    def with_learned(self, entries: Mapping[str, ModelEntry]) -> Resolver:
        """This resolver with learned entries (by normalised name) added or replaced:
        what recording a fact needs, without compiling every glob again."""
        return replace(self, learned={**self.learned, **entries})

    def layers(self, model: str) -> list[tuple[str, ModelEntry]]:
        """(origin, entry) pairs that apply to `model`, lowest precedence first."""
        raw, name = model.strip(), normalise_model_name(model)
        found: list[tuple[str, ModelEntry]] = [("defaults", self.defaults)]
        if name in self.learned:
            found.append(("learned", self.learned[name]))
        found.extend((f"models:{g.key}", g.entry) for g in self.globs if g.matches(raw, name))
        if name in self.exact:
            key, entry = self.exact[name]
            found.append((f"models:{key}", entry))
        return found

    def resolve(self, model: str) -> Profile:
        # Profile.model keeps the client's case: it is what a learned key is written as.
        return _merge(learned_key(model), self.layers(model))

    def has_entry(self, model: str) -> bool:
        """A `models:` (exact or glob) or `learned:` entry names this model."""
        return len(self.layers(model)) > 1


def resolve_profile(caps: Capabilities, model: str) -> Profile:
    """The `Profile` for `model`; build a `Resolver` instead when resolving many."""
    return Resolver.build(caps).resolve(model)


def has_entry(caps: Capabilities, model: str) -> bool:
    """Whether the file says anything about `model` beyond `defaults:`."""
    return Resolver.build(caps).has_entry(model)


def _merge(model: str, layers: list[tuple[str, ModelEntry]]) -> Profile:
    values: dict[str, Any] = {}
    schema: dict[str, Any] = {}
    prompt: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for origin, entry in layers:
        for name in type(entry).model_fields:
            if name not in entry.model_fields_set:
                continue
            if name == "schema_" and entry.schema_ is not None:
                if _update(schema, entry.schema_.model_dump(exclude_unset=True)):
                    sources["schema"] = origin
            elif name == "system_prompt" and entry.system_prompt is not None:
                if _update(prompt, entry.system_prompt.model_dump(exclude_unset=True)):
                    sources["system_prompt"] = origin
            elif origin == "learned" and name == "tools" and entry.tools in ("off", "emulate"):
                # Files written before `tool_support` recorded a refusal as the rung it
                # led to: read that as the fact, so the fallback in force decides.
                refused = getattr(entry, "source", None) != "probe"
                values["tool_support"] = "refused" if refused else "none"
                sources["tool_support"] = origin
            elif name in _PROFILE_FIELDS:
                field = _PROFILE_FIELDS[name]
                values[field] = _profile_value(getattr(entry, name))
                sources[field] = origin
    return Profile(
        model=model,
        schema=SchemaRewrite(**{k: _profile_value(v) for k, v in schema.items()}),
        system_prompt=SystemPrompt(**prompt),
        sources=sources,
        **values,
    )


def _update(target: dict[str, Any], values: dict[str, Any]) -> bool:
    target.update(values)
    return bool(values)


def _profile_value(value: Any) -> Any:
    """Entry values (lists, dicts) -> the immutable shapes `Profile` holds."""
    if isinstance(value, list):
        return tuple(value)
    if isinstance(value, dict):
        return tuple(value.items())
    return value
