"""capabilities.yaml text -> `Capabilities`, or problems that name a line.

Pure: text in, values out. Reading the file, reload and keeping the last good
version are `store.py`'s job; this module never raises on bad input, because a
typo in a file a person edits must be reported, never crash the proxy.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError
from ruamel.yaml.scalarbool import ScalarBoolean

from proxy.capabilities.resolve import normalise_model_name
from proxy.capabilities.schema import (
    Capabilities,
    LearnedEntry,
    ModelEntry,
    SchemaEntry,
    SystemPromptEntry,
    is_glob,
)
from proxy.capabilities.server_tools import SERVER_TOOL_KINDS

# Aliases can multiply a small file into a huge tree ("billion laughs") or
# point back at themselves; both are refused rather than expanded.
_MAX_DEPTH = 64
_MAX_NODES = 100_000

_KNOWN_KEYS: tuple[str, ...] = tuple(
    sorted(
        {
            field.alias or name
            for model in (Capabilities, LearnedEntry, ModelEntry, SchemaEntry, SystemPromptEntry,
                          *SERVER_TOOL_KINDS)
            for name, field in model.model_fields.items()
        }
    )
)
_LEARNED_ONLY = frozenset(
    f.alias or n for n, f in LearnedEntry.model_fields.items()
) - frozenset(f.alias or n for n, f in ModelEntry.model_fields.items())
"""The proxy's bookkeeping (source, at, evidence...): a key a person copying a learned
entry into models: or defaults: brings along, and whose nearest known key is itself."""
_PLAIN_SEGMENT = re.compile(r"[A-Za-z0-9_]+")


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the file; `line` is 1-based, None when unknown."""

    path: str
    line: int | None
    message: str

    def __str__(self) -> str:
        if self.line is None:
            return f"{self.path}: {self.message}"
        return f"{self.path}:{self.line}: {self.message}"


class _TooBig(Exception):
    """The YAML tree is too deep or too large to be a capabilities file."""


def parse_capabilities(
    text: str, path: str = "capabilities.yaml"
) -> tuple[Capabilities | None, list[Problem]]:
    """Parse and validate; (caps, []) when valid, else (None, problems)."""
    try:
        doc = YAML(typ="rt").load(text)
    except MarkedYAMLError as exc:
        return None, [_yaml_problem(exc, path)]
    except Exception as exc:  # noqa: BLE001
        # ruamel raises assorted non-YAMLError types (ReaderError, RecursionError,
        # warnings turned errors) on odd input; never let one escape a reload.
        return None, [Problem(path, None, f"cannot parse YAML: {exc}")]
    if doc is None:  # empty or only comments: all defaults
        return Capabilities(), []
    if not isinstance(doc, CommentedMap):
        if isinstance(doc, CommentedSeq):
            line, kind = doc.lc.line + 1, "a list"
        else:  # a bare scalar carries no position; it is the whole document
            line, kind = None, "a single value"
        return None, [Problem(path, line, f"the top level must be a mapping, not {kind}")]
    try:
        data = _plain(doc, 0, [0])
    except (_TooBig, RecursionError):
        return None, [Problem(path, None, "document too deep or too large (recursive alias?)")]
    try:
        caps = Capabilities.model_validate(data)
    except ValidationError as exc:
        problems = [_validation_problem(err, doc, path) for err in exc.errors()]
        return None, sorted(problems, key=lambda p: p.line or 0)
    problems = _name_clashes(caps, doc, path)
    return (None, problems) if problems else (caps, [])


def _yaml_problem(exc: MarkedYAMLError, path: str) -> Problem:
    mark = exc.problem_mark or exc.context_mark
    line = None if mark is None else mark.line + 1
    parts = [p for p in (exc.context, exc.problem) if p]
    return Problem(path, line, "YAML: " + (", ".join(parts) or str(exc)))


def _plain(node: Any, depth: int, count: list[int]) -> Any:
    """ruamel's round-trip objects -> plain dicts, lists and scalars for pydantic."""
    count[0] += 1
    if depth > _MAX_DEPTH or count[0] > _MAX_NODES:
        raise _TooBig
    if isinstance(node, dict):
        # Complex keys (`? [a, b]`) stay as ruamel made them; pydantic rejects them.
        return {_plain_scalar(k): _plain(v, depth + 1, count) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain(v, depth + 1, count) for v in node]
    return _plain_scalar(node)


def _plain_scalar(value: Any) -> Any:
    # ruamel subclasses (an anchored `&a true` is a ScalarBoolean, an int;
    # HexInt; LiteralScalarString) would fail pydantic's strict checks.
    if isinstance(value, (bool, ScalarBoolean)):
        return bool(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, datetime):
        # An unquoted `at: 2026-11-22T10:00:00Z` loads as a timestamp.
        text = value.isoformat()
        return (
            text[:-6] + "Z"
            if value.utcoffset() == timedelta(0) and text.endswith("+00:00")
            else text
        )
    if isinstance(value, date):
        return value.isoformat()
    return value


def _validation_problem(err: ErrorDetails, doc: CommentedMap, path: str) -> Problem:
    loc = tuple(err["loc"])
    if len(loc) >= 3 and loc[0] == "server_tools":
        loc = loc[:2] + loc[3:]  # drop the `kind` tag pydantic puts in a union's location
    return Problem(path, _line_of(doc, loc), f"{_where(loc)}: {_message(err)}")


def _line_of(doc: CommentedMap, loc: Sequence[Any]) -> int | None:
    """1-based line of the deepest key or item of `loc` present in the YAML tree."""
    node: Any = doc
    line: int | None = None
    for step in loc:
        if step == "[key]":  # the problem is the key itself, whose line we have
            break
        try:
            if isinstance(node, CommentedMap):
                key = _find_key(node, step)
                line = node.lc.key(key)[0] + 1
                node = node[key]
            elif isinstance(node, CommentedSeq):
                line = node.lc.item(step)[0] + 1
                node = node[step]
            else:
                break
        except (AttributeError, KeyError, IndexError, TypeError):
            break  # not in the tree, or pulled in by a `<<:` merge: no position of its own
    return line


def _find_key(node: CommentedMap, step: object) -> object:
    if step in node:
        return step
    # pydantic reports a non-string key (`1.5:`) by its str() in the location.
    for key in node:
        if str(key) == step:
            return key
    raise KeyError(step)


def _where(loc: Iterable[Any]) -> str:
    parts: list[str] = []
    for step in loc:
        if step == "[key]":
            parts.append("(key)")
        elif isinstance(step, str) and _PLAIN_SEGMENT.fullmatch(step):
            parts.append(step)
        else:
            parts.append(repr(step) if not isinstance(step, int) else f"[{step}]")
    return ".".join(parts).replace(".[", "[") or "(top level)"


def _message(err: ErrorDetails) -> str:
    kind, loc = err["type"], err["loc"]
    if kind == "extra_forbidden":
        key = str(loc[-1])
        if key in _LEARNED_ONLY and loc[0] != "learned":
            return f"key {key!r} is only valid under learned: (the proxy's bookkeeping)"
        if key in _KNOWN_KEYS:  # valid elsewhere: its nearest known key would be itself
            return f"key {key!r} is not valid here"
        close = difflib.get_close_matches(key, _KNOWN_KEYS, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"unknown key {key!r}{hint}"
    if kind == "missing":
        return f"required key {str(loc[-1])!r} is missing"
    msg = err["msg"]
    for prefix in ("Value error, ", "Assertion failed, "):
        msg = msg.removeprefix(prefix)
    return msg


def _name_clashes(caps: Capabilities, doc: CommentedMap, path: str) -> list[Problem]:
    """Exact keys of one section that name the same model once normalised."""
    problems: list[Problem] = []
    sections: tuple[tuple[str, dict[str, Any]], ...] = (
        ("models", dict(caps.models)),
        ("learned", dict(caps.learned)),
    )
    for section, entries in sections:
        first: dict[str, str] = {}
        for key in entries:
            if is_glob(key):
                continue
            name = normalise_model_name(key)
            if name in first:
                message = f"{section}: {first[name]!r} and {key!r} both name {name!r}"
                problems.append(Problem(path, _line_of(doc, (section, key)), message))
            else:
                first[name] = key
    return problems
