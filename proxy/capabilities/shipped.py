"""The capabilities.yaml that ships inside the package.

The package carries a copy of the repository's capabilities.yaml
(proxy/data/capabilities.yaml; a test keeps the two identical), so a proxy
installed with pip and started anywhere still has every shipped entry and a
file to write what it learns into. Must not: overwrite an existing file unless
asked (`--force`).
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files


@cache
def shipped_text() -> str:
    """The shipped file's text (read once: it never changes while running)."""
    return files("proxy").joinpath("data/capabilities.yaml").read_text(encoding="utf-8")
