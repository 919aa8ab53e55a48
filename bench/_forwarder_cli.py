"""The command line both baseline forwarders share: `--port P --upstream URL [--host H]`."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import uvicorn


def run_forwarder(create_app: Callable[[str], Any], doc: str, **server: Any) -> None:
    """Parse the forwarder's flags and serve `create_app(upstream)` until stopped."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True)
    args = parser.parse_args()
    uvicorn.run(create_app(args.upstream), host=args.host, port=args.port,
                log_level="warning", access_log=False, **server)
