"""A client that leaves a stream midway, and waiting for what the proxy does about it.

Every door must cancel its upstream request at once when its client leaves; the tests
of each door share these two steps so that they test the same thing the same way.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx


def leave_mid_stream(url: str, body: Any, *, after: str = "piece 1",
                     trust_env: bool = True) -> None:
    """POST a streamed request, read until a line holds `after`, then close the socket."""
    with httpx.stream("POST", url, json=body, trust_env=trust_env) as response:
        for line in response.iter_lines():
            if after in line:
                break


def eventually(check: Callable[[], bool], within: float = 3.0) -> bool:
    """Whether `check()` comes true within `within` seconds (polled every 20 ms)."""
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True
