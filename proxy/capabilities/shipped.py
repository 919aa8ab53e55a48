"""The capabilities.yaml that ships inside the package, and `toolshim init [PATH]`.

The package carries a copy of the repository's capabilities.yaml
(proxy/data/capabilities.yaml; a test keeps the two identical), so a proxy
installed with pip and started anywhere still has every shipped entry and a
file to write what it learns into. Must not: overwrite an existing file unless
asked (`--force`).
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import TextIO

from proxy.capabilities.write import rewrite_file

INIT_OK = 0
INIT_EXISTS = 1
"""The file exists and --force was not given: nothing written."""
INIT_CANNOT_WRITE = 3
"""The file (or its directory) cannot be written."""


@cache
def shipped_text() -> str:
    """The shipped file's text (read once: it never changes while running)."""
    return files("proxy").joinpath("data/capabilities.yaml").read_text(encoding="utf-8")


def run_init(path: str, force: bool, out: TextIO) -> int:
    """Write the shipped file to `path`; refuse to replace an existing one unless `force`."""
    target = Path(path)
    existed: list[bool] = []

    def edit(current: str | None) -> str | None:
        existed.append(current is not None)
        return None if current is not None and not force else shipped_text()

    try:
        if target.parent != Path("") and not target.parent.exists():
            target.parent.mkdir(parents=True)
        done = rewrite_file(target, edit)
    except (OSError, UnicodeDecodeError) as exc:
        print(f"{path}: cannot write: {exc}", file=out)
        return INIT_CANNOT_WRITE
    if done is None:
        print(f"{path}: already exists; not replaced (use --force to overwrite it)", file=out)
        return INIT_EXISTS
    verb = "replaced with" if existed and existed[0] else "created from"
    print(f"{path}: {verb} the shipped capabilities file", file=out)
    return INIT_OK
