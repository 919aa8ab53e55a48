"""`toolshim validate MODEL... | --all`: the validation battery from the command line.

Runs the proxy in process (same settings, same flow as `toolshim` serving) and
sends the battery through it; results are printed and recorded in
capabilities.yaml under each model's `learned:` entry.
"""

from __future__ import annotations

import argparse
from typing import IO, Any

import httpx

from proxy.capabilities.store import now_iso
from proxy.console.validate import BATTERY, record_validation, run_battery
from proxy.errors import ApiError
from proxy.settings import Settings


async def run_validate_cli(settings: Settings, models: list[str], every: bool,
                           out: IO[str]) -> int:
    """0 when every model passed every check, 1 when some check failed or a model
    is not found, 2 on no models."""
    from proxy.app import create_app

    app = create_app(settings)
    async with app.router.lifespan_context(app):
        svc = app.state.services
        if every:
            await svc.router.refresh_listing()
            models = models + [m for m in svc.router.listing if m not in models]
        if not models:
            out.write("no models to validate: the upstreams listed none\n")
            return 2
        headers = {"authorization": f"Bearer {settings.api_keys[0]}"} if settings.api_keys \
            else {}
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), headers=headers,
                                     base_url="http://toolshim", timeout=None) as http:
            async def send(body: dict[str, Any]) -> tuple[int, dict[str, str], Any]:
                answer = await http.post("/v1/chat/completions", json=body)
                try:
                    decoded = answer.json()
                except ValueError:
                    decoded = answer.text
                return answer.status_code, dict(answer.headers), decoded

            failures = 0
            for model in models:
                try:
                    result = await run_battery(model, send)
                except ApiError as exc:  # no upstream has it: nothing to record
                    out.write(f"{model}: {exc.message}\n")
                    failures += 1
                    continue
                record_validation(svc.store, result, now_iso())
                failures += bool(result["failed"])
                _print(result, out)
    return 1 if failures else 0


def _print(result: dict[str, Any], out: IO[str]) -> None:
    rung = f", rung {result['rung']}" if result["rung"] else ""
    out.write(f"{result['model']}: {result['passed']}/{result['total']} passed{rung}\n")
    for check in result["checks"]:
        mark = "pass" if check["passed"] else "FAIL"
        out.write(f"  {mark}  {check['name']:<20} {check['reason']}\n")


def add_validate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("models", nargs="*", metavar="MODEL")
    parser.add_argument("--all", dest="every", action="store_true",
                        help="every model the upstreams list")
    names = ", ".join(check.name for check in BATTERY)
    parser.epilog = f"checks: {names} (see docs/console.md)"
