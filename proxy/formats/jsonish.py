"""JSON helpers shared by the format parsers and the response checks.

Owns: strict decoding (orjson), the safe repair ladder for JSON-ish model
output (only the steps that can be named and never guess), and
finding where a JSON value ends in a longer text. Every function is pure and
never raises, whatever the input.

Must not: complete truncated input (unbalanced braces or an unterminated
string are a cut-off call, not a repairable one), replace every `'` with `"`,
or invent values.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

# One token of JSON-ish text. Strings are matched whole, escapes included, so a
# quote or bracket inside a string never counts; a lone quote is a string cut
# off by truncation.
_TOKEN = re.compile(
    r"""(?P<dq>"(?:[^"\\]|\\.)*")"""
    r"""|(?P<sq>'(?:[^'\\]|\\.)*')"""
    r"""|(?P<open>[{\[])|(?P<close>[}\]])"""
    r"""|(?P<comma>,)"""
    r"""|(?P<ident>[A-Za-z_][A-Za-z0-9_]*)"""
    r"""|(?P<ws>\s+)"""
    r"""|(?P<cut>["'])"""
    r"""|(?P<other>[^"'A-Za-z_,{}\[\]\s]+)""",
    re.DOTALL,
)
_SCAN_STOP = re.compile(r"""[{}\[\]"']""")
_DQ_BODY = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_SQ_BODY = re.compile(r"'(?:[^'\\]|\\.)*'", re.DOTALL)
_CONTROL = re.compile(r"[\x00-\x1f]")
_PY_LITERALS = {"True": "true", "False": "false", "None": "null"}
_CLOSERS = {"{": "}", "[": "]"}
_SIMPLE_ESCAPES = {
    "\\": "\\",
    "'": "'",
    '"': '"',
    "/": "/",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "b": "\b",
    "f": "\f",
}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}


def loads_strict(text: str) -> Any | None:
    """Strict JSON; None on failure (note: JSON `null` also gives None)."""
    try:
        return orjson.loads(text)
    except (orjson.JSONDecodeError, TypeError):
        return None


def loads_object(text: str) -> dict[str, Any] | None:
    """Strict JSON that must be an object."""
    value = loads_strict(text)
    return value if isinstance(value, dict) else None


def loads_lenient(text: str) -> tuple[Any, tuple[str, ...]] | None:
    """Strict JSON, else the named repair ladder; (value, fixes) or None.

    Fixes: "trailing_comma", "single_quotes", "python_literals",
    "control_characters" (raw newlines/tabs inside strings) and
    "string_in_string" (a top-level JSON string holding an object or array,
    as some models double-encode `arguments`, decoded once).
    """
    result = _ladder(text)
    if result is None:
        return None
    value, fixes = result
    if isinstance(value, str) and value.strip()[:1] in ("{", "["):
        inner = _ladder(value)
        if inner is not None and isinstance(inner[0], (dict, list)):
            return inner[0], fixes + ("string_in_string",) + inner[1]
    return value, fixes


def scan_json_value(text: str, start: int, remember: bool = True) -> int | None:
    """Index just past the value opening at text[start] ('{' or '['), or None.

    Strings in either quote style are skipped whole; None when the value is
    not closed (truncated) or a closer does not match its opener. remember=False
    for a one-off text (a slice of a value already found): it then neither uses
    nor replaces the memo of the reply being scanned.
    """
    if not 0 <= start < len(text) or text[start] not in _CLOSERS:
        return None
    return (_scan_memo(text) if remember else _ScanMemo(text)).value_end(start)


class _ScanMemo:
    """What scans of one text found: where the value opening at each bracket they
    passed ends (None: it never closes), and where each string they passed ends.

    A scan from a bracket that another scan passed as structure (not inside a
    string) runs exactly as that scan did from there, with the earlier brackets
    under it on the stack: so the outcome is the same for every bracket still
    open when a scan stops. Remembering it makes a later scan from such a
    bracket, or a scan that reaches one, jump to its end: the scans from every
    candidate start of a reply (runs of cut-off calls) cost about one pass
    instead of one pass each.
    """

    __slots__ = ("ends", "strings", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.ends: dict[int, int | None] = {}
        self.strings: dict[int, int | None] = {}

    def value_end(self, start: int) -> int | None:
        text, ends = self.text, self.ends
        if start in ends:
            return ends[start]
        stack: list[tuple[int, str]] = []
        pos = start
        while (match := _SCAN_STOP.search(text, pos)) is not None:
            char, pos = match.group(), match.start()
            if char in _CLOSERS:
                if pos in ends:
                    known = ends[pos]
                    if known is None:
                        return self._fail(stack, start)
                    pos = known
                    continue
                stack.append((pos, _CLOSERS[char]))
            elif char in "}]":
                opened, closer = stack.pop()
                if closer != char:
                    stack.append((opened, closer))
                    return self._fail(stack, start)
                ends[opened] = pos + 1
                if not stack:
                    return pos + 1
            else:
                end = self._string_end(pos, char)
                if end is None:
                    return self._fail(stack, start)
                pos = end
                continue
            pos += 1
        return self._fail(stack, start)

    def _fail(self, stack: list[tuple[int, str]], start: int) -> int | None:
        """None, noted for every bracket still open: it fails with the scan (see above)."""
        for opened, _ in stack:
            self.ends[opened] = None
        self.ends[start] = None
        return None

    def _string_end(self, pos: int, quote: str) -> int | None:
        strings = self.strings
        if pos not in strings:
            body = (_DQ_BODY if quote == '"' else _SQ_BODY).match(self.text, pos)
            strings[pos] = None if body is None else body.end()
        return strings[pos]


_last_memo: _ScanMemo | None = None


def forget_scans() -> None:
    """Drop the memo (and the reply it holds): recovery calls this when done with a reply."""
    global _last_memo
    _last_memo = None


def _scan_memo(text: str) -> _ScanMemo:
    """The memo for text: the last one kept while the same text object is scanned
    (recovery scans one reply from many starts; a new text starts afresh, so the
    memo holds at most one reply)."""
    global _last_memo
    memo = _last_memo
    if memo is None or memo.text is not text:
        memo = _last_memo = _ScanMemo(text)
    return memo


def _ladder(text: str) -> tuple[Any, tuple[str, ...]] | None:
    try:
        return orjson.loads(text), ()
    except (orjson.JSONDecodeError, TypeError):
        pass
    if not isinstance(text, str):
        return None
    rewritten = _rewrite(text)
    if rewritten is None:
        return None
    cleaned, fixes = rewritten
    if not fixes:
        return None
    value = loads_strict(cleaned)
    if value is None and cleaned.strip() != "null":
        return None
    return value, fixes


def _rewrite(text: str) -> tuple[str, tuple[str, ...]] | None:
    """Apply the text-level fixes outside strings; None if truncated."""
    tokens = [(m.lastgroup or "", m.group()) for m in _TOKEN.finditer(text)]
    out: list[str] = []
    fixes: set[str] = set()
    stack: list[str] = []
    last_sig = ""
    for i, (kind, tok) in enumerate(tokens):
        if kind == "cut":
            return None
        if kind == "open":
            stack.append(_CLOSERS[tok])
        elif kind == "close":
            if not stack or stack.pop() != tok:
                return None
        elif kind == "sq":
            decoded = _python_string(tok[1:-1])
            if decoded is None:
                return None
            tok = decoded
            fixes.add("single_quotes")
        elif kind == "dq" and _CONTROL.search(tok):
            # Literal newlines/tabs inside strings (code arguments) are
            # unambiguous: escape them.
            tok = _CONTROL.sub(_escape_control, tok)
            fixes.add("control_characters")
        elif kind == "ident" and tok in _PY_LITERALS:
            tok = _PY_LITERALS[tok]
            fixes.add("python_literals")
        elif kind == "comma" and last_sig not in ("{", "[", ",") and _closes_next(tokens, i):
            fixes.add("trailing_comma")
            last_sig = ","
            continue
        if kind != "ws":
            last_sig = tok[-1:]
        out.append(tok)
    if stack:
        return None
    return "".join(out), tuple(sorted(fixes))


def _closes_next(tokens: list[tuple[str, str]], i: int) -> bool:
    for kind, _ in tokens[i + 1 :]:
        if kind != "ws":
            return kind == "close"
    return False


def _python_string(body: str) -> str | None:
    """The inside of a Python single-quoted literal as a JSON string; None if unsure."""
    out: list[str] = []
    i, n = 0, len(body)
    while i < n:
        char = body[i]
        if char != "\\":
            out.append(char)
            i += 1
            continue
        code = body[i + 1] if i + 1 < n else ""
        if code in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[code])
            i += 2
            continue
        width = _HEX_ESCAPES.get(code)
        digits = body[i + 2 : i + 2 + width] if width else ""
        if not width or len(digits) != width or not _is_hex(digits):
            # Python would keep an unknown escape literally; JSON would not:
            # ambiguous, so no repair.
            return None
        point = int(digits, 16)
        if point > 0x10FFFF:
            return None
        out.append(chr(point))
        i += 2 + width
    try:
        # Join JSON-style surrogate pairs; a lone surrogate cannot be encoded.
        joined = "".join(out).encode("utf-16", "surrogatepass").decode("utf-16")
        return orjson.dumps(joined).decode()
    except (UnicodeError, orjson.JSONEncodeError):
        return None


def _escape_control(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def _is_hex(digits: str) -> bool:
    return all(c in "0123456789abcdefABCDEF" for c in digits)
