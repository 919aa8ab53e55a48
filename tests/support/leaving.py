"""A client that leaves a stream midway, and waiting for what the proxy does about it.

Every door must cancel its upstream request at once when its client leaves; the tests
of each door share these two steps so that they test the same thing the same way.
"""

from __future__ import annotations

from typing import Any

import httpx

from support.fake_ollama import FakeOllama
from support.polling import until


def leave_mid_stream(url: str, body: Any, *, after: str = "piece 1",
                     trust_env: bool = True) -> None:
    """POST a streamed request, read until a line holds `after`, then close the socket."""
    with httpx.stream("POST", url, json=body, trust_env=trust_env) as response:
        for line in response.iter_lines():
            if after in line:
                break


def wait_for_cancel(fake: FakeOllama, within: float = 3.0) -> None:
    """Wait until the fake upstream has seen a request of its own cancelled."""
    until(lambda: fake.abandoned > 0, within=within,
          what="the upstream to see its request cancelled")
