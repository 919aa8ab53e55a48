"""The table of text tool-call formats, and recovery from a whole reply.

Owns: the name -> format table (explicit imports; nothing registers itself),
the order formats are tried in when the model's format is not known, and
`recover`. Must not: parse any format itself (that is each module) or do I/O.
"""

from __future__ import annotations

from collections.abc import Mapping

from proxy.formats import (
    deepseek_v3, deepseek_v31, glm45, hermes, json_block, kimi_k2, lfm2, llama3_json, minimax_m2,
    mistral, pythonic, qwen3_coder_xml,
)
from proxy.formats.base import ParseResult, TextFormat
from proxy.formats.detect import recover_with, strip_reasoning
from proxy.types import JSON

FORMATS: dict[str, TextFormat] = {
    "hermes": hermes.FORMAT,
    "mistral": mistral.FORMAT,
    "llama3_json": llama3_json.FORMAT,
    "json_block": json_block.FORMAT,
    "pythonic": pythonic.FORMAT,
    "lfm2": lfm2.FORMAT,
    "qwen3_coder_xml": qwen3_coder_xml.FORMAT,
    "glm45": glm45.FORMAT,
    "minimax_m2": minimax_m2.FORMAT,
    "deepseek_v3": deepseek_v3.FORMAT,
    "deepseek_v31": deepseek_v31.FORMAT,
    "kimi_k2": kimi_k2.FORMAT,
}

# Special-token formats first (a marker that cannot be prose), text tags next,
# bare JSON / Python last: they also match what the others leave behind.
_ORDER = (
    "kimi_k2", "deepseek_v31", "deepseek_v3", "mistral", "granite", "phi4_mini",
    "lfm2", "minimax_m2", "functionary", "qwen3_coder_xml", "glm45", "hermes",
    "llama3_json", "pythonic", "xlam", "json_block",
)


def get_format(name: str) -> TextFormat:
    """The format called name; ValueError naming the known ones otherwise."""
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown tool format {name!r}; known: {', '.join(sorted(FORMATS))}") from None


def format_order(preferred: str | None) -> list[TextFormat]:
    """Every registered format, preferred first, then the fixed order."""
    names = [name for name in _ORDER if name in FORMATS]
    names += sorted(name for name in FORMATS if name not in names)
    if preferred in FORMATS:
        names.remove(preferred)
        names.insert(0, preferred)
    return [FORMATS[name] for name in names]


def recover(
    text: str, tools: Mapping[str, JSON], preferred: str | None = None, keep_reasoning: bool = False
) -> tuple[ParseResult, str | None]:
    """Calls written as text in a whole reply, and the name of the format that matched.

    Reasoning is never searched; unless keep_reasoning, it is also removed
    from the returned text (it belongs in reasoning_content).
    """
    visible = text if keep_reasoning else strip_reasoning(text)
    return recover_with(visible, tools, format_order(preferred))
