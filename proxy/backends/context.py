"""Sizing Ollama's context window for one request (`num_ctx: auto`) and guarding it.

Pure: the caller supplies what it knows (the prompt's size in characters, the window
the model runs with now, the model's own maximum, the size toolshim already asked
for) and gets a decision back. Ollama silently cuts a prompt that does not fit from
the front, tool definitions first (docs/backends.md 1e), so the estimate errs large.
Must not: ask Ollama anything or keep state (routing.py asks, the caller keeps).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

LADDER = (8192, 16384, 32768, 65536, 131072, 262144)
"""Windows `auto` asks for: few distinct sizes, so Ollama reloads a model rarely."""

DEFAULT_CHARS_PER_TOKEN = 3.2
"""Until a model's own ratio is learned: below English prose's ~4, since tool
schemas and JSON tokenize worse, and an estimate too small loses the tools."""
HEADROOM = 1.15
"""The chat template's own tokens and the estimate's error."""
REPLY_RESERVE = 1024
"""Tokens kept for the answer when the client set no max_tokens."""

MIN_LEARN_TOKENS = 512
"""Prompts shorter than this say more about the chat template than the tokenizer."""

Action = Literal["fits", "raise", "trim", "reject", "send"]


@dataclass(frozen=True)
class Window:
    """What a request needs and what the model has, in tokens."""

    needed: int
    current: int
    maximum: int | None = None
    """The model's own context_length (/api/show); None when unknown."""
    floor: int = 0
    """The largest window toolshim already asked for: never go back below it."""


@dataclass(frozen=True)
class Decision:
    action: Action
    num_ctx: int | None
    """The window to send (None: send nothing, the current window holds it)."""


def estimate_tokens(prompt_chars: int, max_tokens: int | None,
                    chars_per_token: float | None) -> int:
    """Tokens a prompt of `prompt_chars` characters plus its reply will need."""
    reply = max_tokens if isinstance(max_tokens, int) and max_tokens > 0 else REPLY_RESERVE
    return prompt_tokens(prompt_chars, chars_per_token) + reply


def prompt_tokens(prompt_chars: int, chars_per_token: float | None) -> int:
    """Tokens a prompt of `prompt_chars` characters takes, by the model's learned ratio
    (else the default), erring large as `estimate_tokens` does."""
    ratio = chars_per_token if chars_per_token and chars_per_token > 0 else \
        DEFAULT_CHARS_PER_TOKEN
    return math.ceil(prompt_chars / ratio * HEADROOM)


def largest_allowed(window: Window) -> int:
    """The biggest window `auto` may ask for: the ladder's top, capped by the model."""
    top = LADDER[-1] if window.maximum is None else min(LADDER[-1], window.maximum)
    return max(top, window.current, window.floor)


def size_window(window: Window) -> Decision:
    """`num_ctx: auto`: nothing if it fits, else the next ladder step that holds it.

    Never below what the model has now or what was already asked for (a smaller
    num_ctx would make Ollama reload the model), never above the model's maximum.
    """
    if window.needed <= window.current and window.floor == 0:
        return Decision("fits", None)
    have = max(window.current, window.floor)
    if window.needed <= have:
        return Decision("fits", have if window.floor else None)
    cap = largest_allowed(window)
    if window.needed > cap:
        return Decision("trim", cap)  # the guard decides between trim, reject and send
    step = next(size for size in LADDER if size >= window.needed) \
        if window.needed <= LADDER[-1] else cap
    return Decision("raise", max(min(step, cap), have))


def observed_chars_per_token(prompt_chars: int, prompt_eval_count: int,
                             num_ctx: int | None) -> float | None:
    """Characters per token seen on one answer; None when the count can't be trusted.

    A prompt Ollama had to cut reports the window, not the prompt; in a short one the
    chat template's own tokens dominate; and a ratio far outside what tokenizers
    produce means the count is not the whole prompt.
    """
    if prompt_eval_count < MIN_LEARN_TOKENS or prompt_chars <= 0:
        return None
    if num_ctx is not None and prompt_eval_count >= num_ctx - 8:
        return None
    ratio = prompt_chars / prompt_eval_count
    return round(ratio, 2) if 1.0 <= ratio <= 12.0 else None
