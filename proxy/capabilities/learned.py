"""The `learned:` section as values: which facts may be learned, and facts applied in memory.

Pure. The text side (splicing facts into the file) is splice.py; the store
decides when each runs. Must not: read or write the file, or let through a fact
the file's own validation would refuse (`unlearnable`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import ValidationError

from proxy.capabilities.learning import LearnedFact, merge_fact
from proxy.capabilities.resolve import normalise_model_name
from proxy.capabilities.schema import Capabilities, LearnedEntry
from proxy.capabilities.splice import oldest_first
from proxy.errors import MAX_MODEL_NAME

MAX_NAME_CHARS = MAX_MODEL_NAME
"""Longer model names are never learned: a client must not grow the file at will."""


def unlearnable(fact: LearnedFact) -> str | None:
    """Why `fact` must not reach the file, or None when it may.

    Checked before a fact is queued, with exactly the validation the file gets
    on load (its key included), so one odd model name (`refuse-x[` is an
    unclosed glob) can never make the file invalid and stop all learning.
    """
    name = fact.model.strip()
    if len(name) > MAX_NAME_CHARS:
        return f"a model name of {len(name)} characters (limit {MAX_NAME_CHARS})"
    try:
        Capabilities.model_validate({"learned": {fact.key(): merge_fact(None, fact)}})
    except ValidationError as exc:
        return "; ".join(e["msg"] for e in exc.errors())
    return None


def apply_facts(caps: Capabilities, facts: Sequence[LearnedFact],
                keys: Mapping[str, str] | None = None) -> tuple[Capabilities, dict[str, str]]:
    """The capabilities with facts merged into `learned:`, keys as the client spelled them,
    and the keys touched (normalised name -> key).

    A fact about a model already learned under another spelling updates that entry;
    `keys` (normalised name -> key of `caps.learned`) saves rebuilding that index.
    """
    learned = dict(caps.learned)
    if keys is None:
        keys = {normalise_model_name(k): k for k in learned}
    touched: dict[str, str] = {}
    for fact in facts:
        name = normalise_model_name(fact.model)
        key = touched.get(name) or keys.get(name) or fact.key()
        touched[name] = key
        learned[key] = LearnedEntry.model_validate(merge_fact(learned.get(key), fact))
    return caps.model_copy(update={"learned": learned}), touched


def trim_learned(caps: Capabilities, max_learned: int) -> Capabilities:
    """At most `max_learned` learned entries, the least recently learned dropped first."""
    extra = len(caps.learned) - max_learned
    if extra <= 0:
        return caps
    drop = set(oldest_first(dict(caps.learned))[:extra])
    kept = {k: v for k, v in caps.learned.items() if k not in drop}
    return caps.model_copy(update={"learned": kept})
