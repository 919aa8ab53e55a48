"""How deep JSON nests: the bound every recursive walk over client or upstream JSON relies on.

Pure and iterative (the check itself cannot overflow the stack). The client
door refuses bodies past `MAX_DEPTH` (api/hostile.py); the flow checks an
upstream's whole answer before `orjson.dumps`, which stops at 254 levels.
Must not: change what it inspects, or do I/O.
"""

from __future__ import annotations

from typing import Any

MAX_DEPTH = 100
"""arrays/objects inside each other; real chat requests and tool schemas stay far below."""


def containers_at_most(raw: bytes) -> int:
    """At most how many arrays/objects JSON text `raw` holds: its opening brackets
    (counted in C, brackets inside strings included, so never too few)."""
    return raw.count(b"[") + raw.count(b"{")


def may_nest_deeper(raw: bytes, limit: int = MAX_DEPTH) -> bool:
    """False when JSON text `raw` cannot nest past `limit`: it does not even hold that
    many brackets. Lets the common small body skip the walk in `depth_exceeds`."""
    return containers_at_most(raw) > limit


def depth_exceeds(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether arrays/objects nest deeper than `limit` anywhere in `value`."""
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        node, depth = pending.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > limit:
            return True
        pending.extend((child, depth + 1) for child in children
                       if isinstance(child, (dict, list)))
    return False
