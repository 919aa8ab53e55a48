"""Upstream error messages without the backend's internals.

A backend's 5xx may carry a Python traceback, a validation dump or server file
paths (llama-cpp-python puts all three in `error.message`). The client gets the
first meaningful line and the status; the whole text goes to the log at debug
level, for whoever runs the backend. Must not: change the status, or hand the
client more of the backend's text than that first line.
"""

from __future__ import annotations

import logging
import re

log = logging.getLogger("toolshim")

_INTERNALS = re.compile(
    r"Traceback \(most recent call last\)"
    r"|^\s*File \"[^\"]+\", line \d+"
    r"|(?:/|\\|<)[\w.<>-]+(?:/|\\)[\w./\\<>-]*\.py\b"
    r"|site-packages",
    re.MULTILINE,
)
_NOT_MEANINGFUL = re.compile(r"^(Traceback \(most recent call last\):|File \".*|\W*)$")


def has_internals(message: str) -> bool:
    return bool(_INTERNALS.search(message))


def client_message(status: int, message: str) -> str:
    """The text a client sees for an upstream error answer of `status`."""
    if status < 500 or not has_internals(message):
        return message
    log.debug("upstream HTTP %d, full error text: %s", status, message)
    return f"{first_meaningful_line(message)} (upstream HTTP {status})"


def first_meaningful_line(message: str) -> str:
    for line in message.splitlines():
        text = line.strip()
        if text and not _NOT_MEANINGFUL.match(text):
            return text[:300]
    return "the upstream failed"
