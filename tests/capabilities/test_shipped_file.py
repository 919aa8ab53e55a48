"""The capabilities.yaml shipped at the repository root is what users get out of
the box: it must load, use only the documented keys and values, leave learned:
to the proxy, and actually cover the well-known model families it claims to.
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from proxy.capabilities import load, resolve

SHIPPED = Path(__file__).resolve().parents[2] / "capabilities.yaml"

TOP_KEYS = {"version", "defaults", "models", "learned"}
ENTRY_KEYS = {
    "tools",
    "max_tools",
    "invalid_tool_calls",
    "allow_tools",
    "deny_tools",
    "rename",
    "schema",
    "system_prompt",
    "system_role",
    "drop_tool_choice",
    "parallel_tool_calls",
    "tool_format",
    "fallback",
    "recover_text_calls",
    "reasoning",
    "num_ctx",
    "keep_alive",
    "ollama_options",
    "context_guard",
}
ENUMS: dict[str, set[str]] = {
    "tools": {"auto", "native", "off", "emulate"},
    "invalid_tool_calls": {"drop", "repair", "keep"},
    "fallback": {"off", "emulate"},
    "reasoning": {"pass", "strip", "move"},
    "context_guard": {"trim", "reject", "off"},
    "tool_format": {
        "hermes",
        "qwen3_coder_xml",
        "mistral",
        "llama3_json",
        "pythonic",
        "lfm2",
        "deepseek_v3",
        "deepseek_v31",
        "kimi_k2",
        "granite",
        "phi4_mini",
        "functionary",
        "xlam",
        "glm45",
        "minimax_m2",
        "json_block",
        # The 2026 families, grouped.
        "gemma4",
        "functiongemma",
        "olmo3",
        "seed_oss",
        "step3",
        "longcat",
        # The 2026 families, second group.
        "gigachat3",
        "kimi_k3",
        "minimax_m3",
        "minicpm5",
        "deepseek_v4",
        "solar_open2",
    },
}
BOOL_KEYS = {"system_role", "parallel_tool_calls", "recover_text_calls"}
NAME_LIST_KEYS = {"allow_tools", "deny_tools"}
SCHEMA_KEYS = {"drop_keywords", "inline_refs", "collapse_nullable", "max_description_chars"}
SYSTEM_PROMPT_KEYS = {"prepend", "append", "replace"}
TOOL_CHOICE_KINDS = {"none", "auto", "required", "function"}


@pytest.fixture(scope="module")
def doc() -> Any:
    return YAML(typ="rt").load(SHIPPED.read_text(encoding="utf-8"))


def entry_problems(entry: Any) -> list[str]:
    """Everything wrong with one defaults:/models: entry, as readable strings."""
    if not isinstance(entry, dict):
        return [f"entry is {type(entry).__name__}, not a mapping"]
    problems = [f"unknown key {k!r}" for k in entry if k not in ENTRY_KEYS]
    for key, allowed in ENUMS.items():
        if key in entry and entry[key] not in allowed:
            problems.append(f"{key}: {entry[key]!r} not in {sorted(allowed)}")
    for key in BOOL_KEYS & entry.keys():
        if not isinstance(entry[key], bool):
            problems.append(f"{key} must be true/false")
    if "max_tools" in entry:
        value = entry["max_tools"]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            problems.append(f"max_tools: {value!r} is not a count")
    for key in NAME_LIST_KEYS & entry.keys():
        if not all(isinstance(n, str) and n for n in entry[key]):
            problems.append(f"{key} must list tool names")
    if "drop_tool_choice" in entry and not set(entry["drop_tool_choice"]) <= TOOL_CHOICE_KINDS:
        problems.append(f"drop_tool_choice: {list(entry['drop_tool_choice'])}")
    if "rename" in entry and not all(
        isinstance(k, str) and isinstance(v, str) for k, v in entry["rename"].items()
    ):
        problems.append("rename must map names to names")
    for key, allowed_sub in (("schema", SCHEMA_KEYS), ("system_prompt", SYSTEM_PROMPT_KEYS)):
        if key in entry and not set(entry[key]) <= allowed_sub:
            problems.append(f"{key}: unknown keys {sorted(set(entry[key]) - allowed_sub)}")
    return problems


def glob_problem(pattern: str) -> str | None:
    """Why `pattern` is no usable fnmatch glob: empty, or an unclosed '['
    (which fnmatch silently turns into a literal that matches nothing)."""
    if not pattern.strip():
        return "empty name"
    if re.search(r"\[(?:[^\]]*)$", pattern.replace("[]", "")):
        return "unclosed ["
    re.compile(fnmatch.translate(pattern))
    return None


def matching(doc: Any, name: str) -> list[Any]:
    """Entries whose key matches `name`; like the proxy, ignoring case."""
    return [
        entry
        for key, entry in doc["models"].items()
        if fnmatch.fnmatchcase(name.lower(), key.lower())
    ]


def test_top_level_shape(doc: Any) -> None:
    assert set(doc) == TOP_KEYS
    assert doc["version"] == 1 and not isinstance(doc["version"], bool)
    assert doc["learned"] == {}, "learned: is the proxy's section; ship it empty"
    assert dict(doc["defaults"]) == {"tools": "auto", "max_tools": 64,
                                    "invalid_tool_calls": "repair", "num_ctx": "auto",
                                    "reasoning": "move"}


def test_every_entry_uses_only_documented_keys_and_values(doc: Any) -> None:
    problems = {"defaults": entry_problems(doc["defaults"])}
    problems.update({key: entry_problems(entry) for key, entry in doc["models"].items()})
    assert {k: v for k, v in problems.items() if v} == {}


def test_every_model_key_is_a_valid_glob(doc: Any) -> None:
    bad = {key: glob_problem(key) for key in doc["models"]}
    assert {k: v for k, v in bad.items() if v} == {}


def test_glob_checker_rejects_what_it_should() -> None:
    assert glob_problem("qwen[3*") == "unclosed ["
    assert glob_problem(" ") == "empty name"
    assert glob_problem("*/*[Qq]wen3-[Cc]oder*") is None


@pytest.mark.parametrize(
    "name",
    [
        "gemma3:4b",
        "qwen2.5-coder:7b",
        "llama3.2:3b",
        "qwen3-coder:30b",
        "mistral:7b",
        "deepseek-r1:8b",
        "qwen3:8b",
        "llama3.1:8b",
        "phi4-mini:3.8b",
        "granite4:3b",
        "kimi-k2:1t-cloud",
        "gpt-oss:20b",
        "glm-4.6:cloud",
        "minimax-m2:cloud",
        "hermes3:8b",
        "devstral:24b",
        "command-r:35b",
        "lfm2:1.2b",
        "gemma4:e4b",
    ],
)
def test_well_known_families_have_an_entry(doc: Any, name: str) -> None:
    assert matching(doc, name), f"no models: entry matches {name}"


# name -> fields every matching entry that sets them must agree on. Agreement
# across all matching globs makes the outcome independent of how specificity
# is ranked, and catches a glob that reaches a neighbouring family.
EXPECTED: dict[str, dict[str, object]] = {
    "gemma3:4b": {"tools": "emulate", "tool_format": "pythonic", "system_role": False},
    "gemma3:latest": {"tools": "emulate"},
    "qwen2.5-coder:7b-instruct-q4_K_M": {"tool_format": "json_block"},
    "qwen2.5:7b": {"tool_format": "hermes"},
    "qwen3:8b": {"tool_format": "hermes"},
    "qwen3-coder:30b": {"tool_format": "qwen3_coder_xml"},
    "qwen3.5:9b": {"tool_format": "qwen3_coder_xml"},
    "qwen3-vl:8b": {"tool_format": "hermes"},
    "llama3.2:3b": {"tool_format": "llama3_json", "parallel_tool_calls": False},
    "llama3.2-vision:11b": {"tools": "emulate"},
    "llama3.1:8b": {"tool_format": "llama3_json", "parallel_tool_calls": False},
    "llama3:latest": {"tools": "emulate"},
    "mistral:7b": {"tool_format": "mistral"},
    "mistral-small3.2:24b": {"tool_format": "mistral"},
    "deepseek-r1:8b": {"tools": "auto", "fallback": "emulate"},
    "deepseek-v3.1:671b": {"tool_format": "deepseek_v31"},
    "deepseek-v3:671b": {"tool_format": "deepseek_v3"},
    "kimi-k2-thinking:cloud": {"tool_format": "kimi_k2"},
    "phi4:14b": {"tools": "emulate"},
    "phi4-mini:3.8b": {"tool_format": "phi4_mini"},
    "hf.co/unsloth/Qwen3-Coder-30B-A3B-Instruct-GGUF:Q4_K_M": {"tool_format": "qwen3_coder_xml"},
    "NousResearch/Hermes-3-Llama-3.1-8B": {"tool_format": "hermes"},
    "meta-llama/Llama-3.2-3B-Instruct": {"tool_format": "llama3_json"},
    "Qwen/Qwen3-30B-A3B-Instruct-2507": {"tool_format": "hermes", "fallback": "emulate"},
    "Qwen/Qwen2.5-Coder-32B-Instruct": {"tool_format": "json_block"},
    "mistralai/Mistral-Small-3.2-24B-Instruct-2506": {"tool_format": "mistral"},
    "NousResearch/Hermes-2-Pro-Mistral-7B": {"tool_format": "hermes"},
    "some-org/unknown-model-7b": {"tool_format": None, "tools": None},
    "google/gemma-2-9b-it": {"tool_format": "pythonic", "system_role": False},
    # The 2026 families, grouped.
    "gemma4:e4b": {"tool_format": "gemma4"},
    "functiongemma:270m": {"tool_format": "functiongemma"},
    "olmo-3:7b": {"tool_format": "olmo3"},
    "seed-oss:36b": {"tool_format": "seed_oss"},
    "step3:321b": {"tool_format": "step3"},
    "step3.5-flash:cloud": {"tool_format": None},
    "longcat-flash:latest": {"tool_format": "longcat"},
    # The 2026 families, second group.
    "gigachat3:10b": {"tool_format": "gigachat3"},
    "gigachat3.1:702b": {"tool_format": "gigachat3"},
    "kimi-k3:cloud": {"tool_format": "kimi_k3"},
    "minimax-m3:latest": {"tool_format": "minimax_m3"},
    "minimax-m2.5:cloud": {"tool_format": "minimax_m2"},
    "minicpm5:8b": {"tool_format": "minicpm5"},
    "minicpm-v5:latest": {"tool_format": "minicpm5"},
    "minicpm-v:8b": {"tool_format": None},
    "deepseek-v4:671b": {"tool_format": "deepseek_v4"},
    "solar-open2:100b": {"tool_format": "solar_open2"},
    "solar-open-2:latest": {"tool_format": "solar_open2"},
    "ibm-granite/granite-4.0-h-small": {"tool_format": "granite"},
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_matching_entries_agree(doc: Any, name: str) -> None:
    entries = matching(doc, name)
    if all(want is None for want in EXPECTED[name].values()):
        assert entries == [], name
    else:
        assert entries, f"no entry matches {name}"
    for field, want in EXPECTED[name].items():
        got = [entry[field] for entry in entries if field in entry]
        if want is None:  # no entry may set it
            assert got == [], (name, field, got)
        else:
            assert got and all(value == want for value in got), (name, field, got)


def test_every_entry_or_group_says_why() -> None:
    """Each models: key sits in a paragraph (lines up to the previous blank
    line) that holds a comment, or carries an inline comment itself."""
    lines = SHIPPED.read_text(encoding="utf-8").splitlines()
    start = lines.index("models:")
    end = lines.index("learned: {}")
    unexplained = []
    for i in range(start + 1, end):
        if not re.match(r'^  "[^"]+":', lines[i]):
            continue
        j = i
        while j > start and lines[j].strip():
            if "#" in re.sub(r'"[^"]*"', "", lines[j]):
                break
            j -= 1
        else:
            unexplained.append(lines[i].strip())
    assert unexplained == []


def test_the_project_loader_accepts_the_file() -> None:
    _caps, problems = load.parse_capabilities(SHIPPED.read_text(encoding="utf-8"), str(SHIPPED))
    assert problems == []


# What the project's own resolver makes of the file for real model names,
# including the cases where two globs layer (deepseek-r1:671b) and names that
# only match after normalisation (no tag, registry prefix, upper case).
RESOLVED: dict[str, dict[str, object]] = {
    "gemma3": {"tools": "emulate", "tool_format": "pythonic", "system_role": False},
    "registry.ollama.ai/library/gemma3:4b": {"tools": "emulate", "max_tools": 16},
    "deepseek-r1:8b": {"tools": "auto", "fallback": "emulate", "tool_format": "json_block"},
    "deepseek-r1:671b": {"fallback": "emulate", "tool_format": "deepseek_v3"},
    "qwen3-coder:30b": {"tools": "auto", "tool_format": "qwen3_coder_xml"},
    "qwen3:8b": {"tool_format": "hermes"},
    "qwen3.5:9b": {"tool_format": "qwen3_coder_xml"},
    "qwen2.5-coder:7b": {"tool_format": "json_block", "max_tools": 64},
    "llama3.2": {"tool_format": "llama3_json", "parallel_tool_calls": False, "max_tools": 8},
    "mistral": {"tools": "auto", "tool_format": "mistral"},
    "Qwen/Qwen3-Coder-30B-A3B-Instruct": {"tool_format": "qwen3_coder_xml"},
    "hf.co/unsloth/gemma-3-12b-it-GGUF:Q4_K_M": {
        "tools": "auto", "fallback": "emulate", "tool_format": "pythonic",
    },
    "mistralai/Mistral-Small-3.2-24B-Instruct-2506": {
        "fallback": "emulate", "tool_format": "mistral",
    },
    "NousResearch/Hermes-3-Llama-3.1-8B": {"tool_format": "hermes", "parallel_tool_calls": None},
    "some-new-model:7b": {"tools": "auto", "tool_format": None, "max_tools": 64},
}


@pytest.mark.parametrize("name", sorted(RESOLVED))
def test_the_project_resolver_gives_the_intended_profile(name: str) -> None:
    caps, problems = load.parse_capabilities(SHIPPED.read_text(encoding="utf-8"), str(SHIPPED))
    assert problems == []
    profile = resolve.resolve_profile(caps, name)
    got = {field: getattr(profile, field) for field in RESOLVED[name]}
    assert got == RESOLVED[name]
