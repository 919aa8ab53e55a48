"""The table of text tool-call formats, and recovery from a whole reply.

Owns: the name -> format table (explicit imports; nothing registers itself),
the order formats are tried in when the model's format is not known, and
`recover`. Must not: parse any format itself (that is each module) or do I/O.
"""

from __future__ import annotations

from collections.abc import Mapping

from proxy.formats import (
    apertus,
    command_r7b,
    deepseek_v3,
    deepseek_v4,
    deepseek_v31,
    deepseek_v32,
    functionary,
    functiongemma,
    gemma4,
    gigachat3,
    glm45,
    gpt_oss,
    granite,
    hermes,
    internlm2,
    jamba,
    json_block,
    kimi_k2,
    kimi_k3,
    lfm2,
    llama3_json,
    longcat,
    minicpm5,
    minimax_m2,
    minimax_m3,
    mistral,
    nemotron_v2,
    olmo3,
    phi4_mini,
    pythonic,
    qwen3_coder_xml,
    seed_oss,
    solar_open2,
    step3,
    xlam,
)
from proxy.formats.base import ParsedCall, ParseResult, TextFormat, no_calls, remaining_text
from proxy.formats.detect import recover_with, split_reasoning, strip_reasoning
from proxy.types import JSON

DEFAULT_EMULATE_FORMAT = "hermes"
"""The format tools are described in for emulation when the profile names none."""

# Each format's name is stated once, in its module (`FORMAT.name`).
FORMATS: dict[str, TextFormat] = {fmt.name: fmt for fmt in (
    hermes.FORMAT,
    mistral.FORMAT,
    llama3_json.FORMAT,
    json_block.FORMAT,
    pythonic.FORMAT,
    lfm2.FORMAT,
    qwen3_coder_xml.FORMAT,
    glm45.FORMAT,
    minimax_m2.FORMAT,
    deepseek_v3.FORMAT,
    deepseek_v31.FORMAT,
    kimi_k2.FORMAT,
    granite.FORMAT,
    phi4_mini.FORMAT,
    functionary.FORMAT,
    xlam.FORMAT,
    jamba.FORMAT,
    nemotron_v2.FORMAT,
    internlm2.FORMAT,
    apertus.FORMAT,
    command_r7b.FORMAT,
    gpt_oss.FORMAT,
    deepseek_v32.FORMAT,
    # The model families of 2026.
    gigachat3.FORMAT,
    kimi_k3.FORMAT,
    minimax_m3.FORMAT,
    minicpm5.FORMAT,
    deepseek_v4.FORMAT,
    solar_open2.FORMAT,
    gemma4.FORMAT,
    functiongemma.FORMAT,
    olmo3.FORMAT,
    seed_oss.FORMAT,
    step3.FORMAT,
    longcat.FORMAT,
)}

# Special-token formats first (a marker that cannot be prose), text tags next,
# bare JSON / Python last: they also match what the others leave behind.
# json_block has only generic markers, so leading here only makes it the name
# reported for bare JSON and fences (detect.applicable tries generic last).
_ORDER = (
    "json_block",
    "kimi_k2",
    "deepseek_v32",
    "deepseek_v31",
    "deepseek_v3",
    # The model families of 2026: their markers are special tokens (Kimi K3's
    # channels, DSML, GigaChat's separators, Solar's sentinels) or tags that no
    # other format reads after them (M3's `<invoke>` elements, MiniCPM 5's
    # `<param>`), so they go with the other marker formats.
    "kimi_k3",
    "deepseek_v4",
    "gigachat3",
    "solar_open2",
    "minimax_m3",
    "minicpm5",
    "gpt_oss",
    "command_r7b",
    "internlm2",
    "apertus",
    # The 2026 families, grouped: special tokens or own tags; seed_oss before
    # qwen3_coder_xml, which also reads its wrapper, so the report names it.
    "gemma4",
    "functiongemma",
    "step3",
    "seed_oss",
    "longcat",
    "olmo3",
    "mistral",
    "phi4_mini",
    "lfm2",
    "minimax_m2",
    "jamba",
    "nemotron_v2",
    "functionary",
    "qwen3_coder_xml",
    "glm45",
    "hermes",
    "granite",
    "llama3_json",
    "pythonic",
    "xlam",
)


def get_format(name: str) -> TextFormat:
    """The format called name; ValueError naming the known ones otherwise."""
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(
            f"unknown tool format {name!r}; known: {', '.join(sorted(FORMATS))}"
        ) from None


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
    order = format_order(preferred)
    if not keep_reasoning:
        return recover_with(strip_reasoning(text), tools, order)
    pieces = split_reasoning(text)
    if not any(reasoning for _, reasoning in pieces):
        return recover_with(text, tools, order)
    # Reasoning stays verbatim between the visible pieces, each searched alone.
    texts: list[str] = []
    calls: list[ParsedCall] = []
    found: str | None = None
    for piece, reasoning in pieces:
        result, name = (
            (no_calls(piece), None) if reasoning else recover_with(piece, tools, order, False)
        )
        texts.append(result.text or "")
        calls += result.calls
        found = found or name
    return ParseResult(tuple(calls), remaining_text(texts)), found
