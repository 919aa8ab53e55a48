"""Per-model capabilities: the capabilities.yaml model (schema), text -> value
(load), model name -> Profile (resolve), `toolshim check` (check) and the
file on disk (store). Must not: reach a backend or a request; only store.py and
its helpers touch the disk."""

from __future__ import annotations

from proxy.capabilities.load import Problem, parse_capabilities
from proxy.capabilities.resolve import Resolver, has_entry, normalise_model_name, resolve_profile
from proxy.capabilities.schema import Capabilities, LearnedEntry, ModelEntry

__all__ = [
    "Capabilities",
    "LearnedEntry",
    "ModelEntry",
    "Problem",
    "Resolver",
    "has_entry",
    "normalise_model_name",
    "parse_capabilities",
    "resolve_profile",
]
