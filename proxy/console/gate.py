"""--min-validation: models whose recorded validation is too weak get requests with tools off."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from proxy.capabilities.resolve import normalise_model_name
from proxy.capabilities.schema import Capabilities, LearnedEntry
from proxy.types import Plan, Profile

if TYPE_CHECKING:
    from proxy.capabilities.store import CapabilityStore
    from proxy.services import Services


def find_learned(caps: Capabilities, model: str) -> LearnedEntry | None:
    """The `learned:` entry for `model` in a freshly parsed file (yaml_edit), its key
    matched as the resolver matches it; the running store has `learned_entry`."""
    name = normalise_model_name(model)
    found = caps.learned.get(name)
    if found is None:  # a key a person wrote un-normalised ("llama3.2", "Qwen3:8B")
        found = next((e for k, e in caps.learned.items() if normalise_model_name(k) == name),
                     None)
    return found


def validation_of(store: CapabilityStore, model: str) -> dict[str, Any] | None:
    """The model's recorded validation ({at, passed, total, failed, rung}), if any."""
    entry = store.learned_entry(model)
    if entry is None or entry.validation is None:
        return None
    return entry.validation.model_dump()


def below_min_validation(svc: Services, profile: Profile, plan: Plan, *,
                         has_tools: bool) -> Plan:
    """`plan`, or tools off when --min-validation is set and the model scored below it.

    Only requests that carry tools are affected; a model never validated is left alone.
    """
    minimum = svc.settings.min_validation
    if minimum is None or not has_tools or plan.tools == "off":
        return plan
    entry = svc.store.learned_entry(profile.model)
    result = entry.validation if entry is not None else None
    if result is None or result.passed / result.total >= minimum:
        return plan
    svc.telemetry.log.info("tools off for %s: validation %d/%d is below --min-validation %s",
                           profile.model, result.passed, result.total, minimum)
    return Plan("off", below_min_validation=True)

