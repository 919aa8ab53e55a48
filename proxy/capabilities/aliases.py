"""Model aliases: the names agents ask for -> the local models that serve them. Pure.

Agents send their own vendor's model names (Claude Code `claude-sonnet-...`, its
background tasks `claude-haiku-...`). The top-level `aliases:` map of
capabilities.yaml and `--alias PATTERN=MODEL` (TOOLSHIM_ALIASES) map them, glob
-> model, matched case-insensitively; an exact name wins over any glob, then the
most specific glob (most literal characters, then the longer pattern). Flags win
over the file for the same pattern. Applied once, before routing and profile
resolution, so everything after sees only the served model. Must not: read the
file or the flags itself (it is given both), or map one name to several models.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from proxy.capabilities.resolve import glob_specificity
from proxy.capabilities.schema import is_glob


@dataclass(frozen=True)
class Aliases:
    """A built alias table: exact names (lower-cased) and globs, most specific first."""

    exact: Mapping[str, str]
    globs: tuple[tuple[re.Pattern[str], str], ...]
    patterns: tuple[tuple[str, str], ...]
    """(pattern, model) as written, flags' over the file's: what /v1/models lists."""

    @classmethod
    def build(cls, *tables: Iterable[tuple[str, str]]) -> Aliases:
        """Later tables win over earlier ones for the same pattern (file, then flags)."""
        merged: dict[str, tuple[str, str]] = {}
        for table in tables:
            for pattern, model in table:
                merged[pattern.strip().lower()] = (pattern.strip(), model.strip())
        exact: dict[str, str] = {}
        ranked: list[tuple[tuple[int, int], re.Pattern[str], str]] = []
        for key, (pattern, model) in merged.items():
            if is_glob(pattern):
                regex = re.compile(fnmatch.translate(key), re.IGNORECASE)
                ranked.append(((-glob_specificity(pattern), -len(pattern)), regex, model))
            else:
                exact[key] = model
        ranked.sort(key=lambda item: item[0])
        return cls(exact, tuple((r, m) for _, r, m in ranked), tuple(merged.values()))

    def target(self, model: str) -> str | None:
        """The model `model` is served by, or None: not an alias."""
        if not self.exact and not self.globs:
            return None
        lowered = model.lower()
        found = self.exact.get(lowered)
        if found is not None:
            return found
        for regex, target in self.globs:
            if regex.match(lowered):
                return target
        return None


NO_ALIASES = Aliases({}, (), ())
