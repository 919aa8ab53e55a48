"""`toolshim probe MODEL... | --all`: ask each upstream whether a model takes tools, print
one line a model, and record the answers in capabilities.yaml (backends/probe.py asks)."""

from __future__ import annotations

import asyncio
import ssl
from typing import TextIO

import httpx

from proxy.backends.probe import list_models, probe_model, server_root
from proxy.backends.probe_failures import (
    EXIT_MODEL_NOT_FOUND,
    EXIT_OK,
    diagnose,
    diagnose_listing,
)
from proxy.capabilities.learning import facts_from
from proxy.capabilities.store import CapabilityStore, now_iso
from proxy.settings import redact_url


async def run_probe_cli(
    models: list[str], upstreams: list[str], capabilities_path: str, all_models: bool, out: TextIO,
    *, verify: ssl.SSLContext | bool = True,
) -> int:
    """Probe models, print one line each, record the answers.

    0 if every probe answered; else the exit code of the first failure
    (probe_failures: unreachable, model not found, an error status, a timeout).
    """
    roots = [server_root(u) for u in upstreams]
    store = CapabilityStore(capabilities_path)
    failures: list[int] = []
    async with httpx.AsyncClient(verify=verify) as client:
        targets: list[tuple[str, list[str]]] = []
        listings = {root: await list_models(client, root) for root in roots} if models else {}
        for model in models:
            serving = _listing(model, listings)
            if serving is None:  # every upstream lists its models, and none lists this one
                print(f"{model}: not found: no upstream lists it "
                      f"({', '.join(redact_url(r) for r in roots)}); nothing recorded", file=out)
                failures.append(EXIT_MODEL_NOT_FOUND)
            else:
                targets.append((model, serving))
        if all_models:
            for root in roots:
                listed = await list_models(client, root)
                if listed is None:
                    failure = await diagnose_listing(client, root)
                    print(f"{redact_url(root)}: cannot list models: {failure.text}", file=out)
                    failures.append(failure.exit_code)
                targets += [(m, [root]) for m in listed or []]
        for model, candidates in targets:
            code = await _probe_one(client, store, model, candidates, out)
            if code != EXIT_OK:
                failures.append(code)
    return failures[0] if failures else EXIT_OK


def _listing(model: str, listings: dict[str, list[str] | None]) -> list[str] | None:
    """The upstreams to probe `model` on, as chat routes it: those that list it; every
    upstream when some list nothing (they may serve what they do not list); None when
    every upstream lists its models and none lists this one (chat's 404)."""
    names = {model, model + ":latest"} if ":" not in model else {model}
    listing = [root for root, ids in listings.items() if ids and names & set(ids)]
    if listing:
        return listing
    if listings and all(listings.values()):
        return None
    return list(listings)


async def _probe_one(
    client: httpx.AsyncClient, store: CapabilityStore, model: str, roots: list[str], out: TextIO
) -> int:
    for root in roots:
        found = await probe_model(client, root, model)
        if found is not None:
            mode = "native" if found.detail["tools"] else "off"
            await asyncio.to_thread(store.record, facts_from([found], now_iso(), root))
            # What the proxy will do is the resolved profile's: an entry under models:
            # (gemma3's shipped `emulate`) wins over what the probe found.
            print(f"{model}: tools {mode} (probe: {found.detail['evidence']}); "
                  f"toolshim uses: {store.profile(model).tools}", file=out)
            return EXIT_OK
    failures = [await diagnose(client, root, model) for root in roots]
    print(f"{model}: unknown: " + "; ".join(f.text for f in failures), file=out)
    return failures[0].exit_code
