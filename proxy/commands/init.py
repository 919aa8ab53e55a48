"""`toolshim init [PATH]`: write the shipped capabilities.yaml where a person can edit it."""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from proxy.capabilities.shipped import shipped_text
from proxy.capabilities.write import rewrite_file

INIT_OK = 0
INIT_EXISTS = 1
"""The file exists and --force was not given: nothing written."""
INIT_CANNOT_WRITE = 3
"""The file (or its directory) cannot be written."""



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
