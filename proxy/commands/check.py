"""`toolshim check [FILE]`: validate a capabilities file and report every problem.

The one place in the pure capabilities modules that reads a file: it is the
CLI command's body. Output is one "path:line: message" per problem, the form
editors and CI annotate, or "path: ok". Must not: write the file or stop at the
first problem.
"""

from __future__ import annotations

from typing import TextIO

from proxy.capabilities.load import Problem, parse_capabilities


def check_text(text: str, path: str) -> list[Problem]:
    """Every problem in `text`, as read from `path`; empty when valid."""
    return parse_capabilities(text, path)[1]


def run_check(path: str, out: TextIO) -> int:
    """Check the file at `path`, print the result to `out`; the exit status."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        print(Problem(path, None, f"cannot read: {reason}"), file=out)
        return 1
    problems = check_text(text, path)
    for problem in problems:
        print(problem, file=out)
    if problems:
        return 1
    print(f"{path}: ok", file=out)
    return 0
