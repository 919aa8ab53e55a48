"""capabilities.yaml on disk: reload when it changes, and write `learned:` safely.

Owns the only disk I/O on the capabilities file. Reads are cheap (a stat at most
every `check_interval` s, profiles cached); a bad edit is reported once and the
last good version stays in force. Writes (under a file lock, after re-reading,
atomically) re-render only `learned:` and splice it into the file text, so every
other byte a person wrote is kept. Facts for a model with a `models:` entry are
still recorded: the person's entry wins at resolution, so they stay inert.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from io import StringIO
from pathlib import Path

from cachetools import LRUCache
from filelock import FileLock
from pydantic import ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError
from ruamel.yaml.scalarstring import DoubleQuotedScalarString

from proxy.capabilities.load import parse_capabilities
from proxy.capabilities.resolve import Resolver, normalise_model_name
from proxy.capabilities.schema import Capabilities, LearnedEntry
from proxy.learning import LearnedFact, fact_is_news, merge_fact
from proxy.types import Profile

_PROVENANCE = ("source", "at", "evidence", "upstream")
_LEARNED_KEY = re.compile(r"""^(learned|"learned"|'learned')[ \t]*:(?=[ \t]|\r?$)""")

StatKey = tuple[int, int, int]


class CapabilityStore:
    """The capabilities in force, reloaded on change; learned facts recorded to disk."""

    def __init__(
        self, path: str | Path, *, check_interval: float = 1.0, logger: logging.Logger | None = None
    ) -> None:
        self._path = Path(path)
        self._interval = check_interval
        self._log = logger or logging.getLogger(__name__)
        self._lock = threading.RLock()  # guards the in-memory state below
        self._write_lock = threading.Lock()  # one disk merge at a time per process
        self._caps = Capabilities()
        self._resolver = Resolver.build(self._caps)
        self._stat: StatKey | None = None
        self._loaded = False
        self._checked_at = -math.inf
        self._cache: LRUCache[str, Profile] = LRUCache(maxsize=4096)
        self._pending: list[LearnedFact] = []  # applied in memory, not yet on disk
        self._last_error: str | None = None
        self._reported: set[str] = set()
        self.generation = 0
        self.reload_if_changed()

    def profile(self, model: str) -> Profile:
        now = time.monotonic()
        if now - self._checked_at >= self._interval:
            self._checked_at = now
            self.reload_if_changed()
        with self._lock:
            found = self._cache.get(model)
            if found is None:
                found = self._cache[model] = self._resolver.resolve(model)
            return found

    def capabilities(self) -> Capabilities:
        return self._caps

    def has_entry(self, model: str) -> bool:
        return self._resolver.has_entry(model)

    def _use(self, caps: Capabilities) -> None:
        """Put a version in force: globs compiled once, resolved profiles forgotten."""
        self._caps = caps
        self._resolver = Resolver.build(caps)
        self._cache.clear()

    def last_error(self) -> str | None:
        """The problems of the file on disk ("path:line: reason"), None while it is good."""
        return self._last_error

    def reload_if_changed(self) -> bool:
        """Re-read the file if its stat changed; True when a new version took effect."""
        with self._lock:
            try:
                stat = _stat_key(self._path)
                if self._loaded and stat == self._stat:
                    return False
                self._loaded, self._stat = True, stat
                text = None if stat is None else self._path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                self._reject(f"{self._path}: cannot read: {exc}", f"read:{exc}")
                return False
            if text is None:
                self._once(logging.INFO, "missing", f"{self._path}: not found; built-in defaults")
                self._install(Capabilities())
                return True
            caps, problems = parse_capabilities(text, str(self._path))
            if caps is None:
                self._reject("\n".join(str(p) for p in problems), f"parse:{_digest(text)}")
                return False
            self._install(caps)
            return True

    def record(self, facts: Sequence[LearnedFact]) -> None:
        """Apply facts in memory at once, then merge them into the file's `learned:`."""
        with self._lock:
            learned = self._caps.learned
            news = [f for f in facts if self._acceptable(f)
                    and fact_is_news(learned.get(normalise_model_name(f.model)), f)]
            if not news:
                return
            self._pending.extend(news)
            self._use(_apply(self._caps, news))
        with self._write_lock:
            with self._lock:
                batch = list(self._pending)
            if batch:
                self._write(batch)

    def rewrite(self, transform: Callable[[str], str]) -> None:
        """A person's explicit edit made through the console (promote, forget).

        Same path as learning: one writer per process, the file lock, a fresh
        read, the result parsed before an atomic replace. `transform` gets the
        text on disk and returns the new text; its exceptions reach the caller,
        as does a ValueError when the result would not load.
        """
        with self._write_lock, FileLock(f"{self._path}.lock", timeout=10.0):
            before = _stat_key(self._path)
            text = "" if before is None else self._path.read_text(encoding="utf-8")
            new_text = transform(text)
            updated, problems = parse_capabilities(new_text, str(self._path))
            if updated is None:
                raise ValueError(f"the edit would break the file: {problems[0]}")
            mode = 0o644 if before is None else self._path.stat().st_mode & 0o7777
            written = _atomic_write(self._path, new_text, mode)
        with self._lock:
            self._stat, self._loaded = written, True
            self._install(updated)

    def _acceptable(self, fact: LearnedFact) -> bool:
        # A fact the schema would reject must never reach the file (it would break it).
        try:
            LearnedEntry.model_validate(merge_fact(None, fact))
        except ValidationError as exc:
            self._once(logging.WARNING, f"fact:{fact}", f"not learning {fact}: {exc}")
            return False
        return True

    def _install(self, caps: Capabilities) -> None:
        self._use(_apply(caps, self._pending) if self._pending else caps)
        self._last_error = None
        self.generation += 1

    def _reject(self, message: str, key: str) -> None:
        self._last_error = message
        self._once(logging.WARNING, key, f"{message} (keeping the last good version)")

    def _once(self, level: int, key: str, message: str) -> None:
        if key not in self._reported:
            self._reported.add(key)
            self._log.log(level, "%s", message)

    def _write(self, facts: list[LearnedFact]) -> None:
        try:
            with FileLock(f"{self._path}.lock", timeout=10.0):
                written = self._merge_on_disk(facts)
        except (OSError, UnicodeDecodeError) as exc:  # read-only, disk full, lock timeout
            self._once(logging.WARNING, f"write:{type(exc).__name__}:{getattr(exc, 'errno', 0)}",
                       f"{self._path}: cannot record learned facts ({exc}); kept in memory")
            return
        if written is not None:
            with self._lock:
                self._pending = [f for f in self._pending if f not in facts]
                self._stat, self._loaded = written[1], True
                self._install(written[0])

    def _merge_on_disk(self, facts: list[LearnedFact]) -> tuple[Capabilities, StatKey | None] | None:
        # Re-read under the lock: a person or another worker may have changed the file,
        # and a stat taken before the read can only cause an extra reload, never a miss.
        path = self._path
        before = _stat_key(path)
        text = "" if before is None else path.read_text(encoding="utf-8")
        current, problems = parse_capabilities(text, str(path))
        if current is None:  # never clobber a person's half-finished edit
            self._once(logging.WARNING, f"nowrite:{_digest(text)}",
                       f"{path}: invalid, not recording learned facts yet: {problems[0]}")
            return None
        try:
            new_text: str | None = splice_learned(text or "version: 1\n", facts)
        except YAMLError:
            new_text = None
        updated = None if new_text is None else parse_capabilities(new_text, str(path))[0]
        if updated is None or _outside(updated) != _outside(current):
            # The splice must never change what the person's sections mean.
            self._once(logging.ERROR, f"splice:{_digest(text)}",
                       f"{path}: cannot splice learned facts into this layout; kept in memory")
            return None
        if new_text == text:
            return updated, before
        mode = 0o644 if before is None else path.stat().st_mode & 0o7777
        if not mode & 0o222:  # a person made it read-only: respect that even as root
            raise PermissionError(f"{path} is read-only")
        return updated, _atomic_write(path, new_text or "", mode)


def _stat_key(path: Path) -> StatKey | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


def _outside(caps: Capabilities) -> Capabilities:
    return caps.model_copy(update={"learned": {}})


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _atomic_write(path: Path, text: str, mode: int) -> StatKey:
    """Temp file beside the target, fsync, rename, fsync the dir; the stat written
    (rename keeps it, so a later replace by another process is still a change)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
            out.write(text)
            out.flush()
            os.fchmod(out.fileno(), mode)
            os.fsync(out.fileno())
            st = os.fstat(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _apply(caps: Capabilities, facts: Sequence[LearnedFact]) -> Capabilities:
    """The capabilities with facts merged into `learned:` (in memory)."""
    learned = dict(caps.learned)
    for fact in facts:
        name = normalise_model_name(fact.model)
        learned[name] = LearnedEntry.model_validate(merge_fact(learned.get(name), fact))
    return caps.model_copy(update={"learned": learned})


def _merge_into(entry: CommentedMap, fact: LearnedFact) -> None:
    """merge_fact applied in place, so ruamel keeps the entry's comments and order."""
    merged = merge_fact(entry, fact)
    for key in [k for k in entry if k not in merged or k in _PROVENANCE]:
        del entry[key]
    for key, value in merged.items():
        if isinstance(value, list):
            value = CommentedSeq(value)
            value.fa.set_flow_style()
        if key == "correction" and isinstance(value, dict):  # its `at` must stay a string
            value = {**value, "at": DoubleQuotedScalarString(value["at"])}
        entry[key] = DoubleQuotedScalarString(value) if key == "at" else value


def splice_learned(text: str, facts: Sequence[LearnedFact]) -> str:
    """`text` with facts merged into its top-level `learned:` section; all else byte-identical."""
    lines = re.findall(r"[^\n]*\n|[^\n]+$", text)
    span = _learned_span(lines)
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.width = 4096  # evidence strings stay on one line
    doc = yaml.load("".join(lines[span[0]:span[1]])) if span else None
    doc = doc if isinstance(doc, CommentedMap) else CommentedMap()
    learned = doc.get("learned")
    learned = doc["learned"] = learned if isinstance(learned, CommentedMap) else CommentedMap()
    learned.fa.set_block_style()
    for fact in facts:
        name = normalise_model_name(fact.model)
        entry = learned.get(name)
        entry = entry if isinstance(entry, CommentedMap) else CommentedMap()
        entry.fa.set_block_style()
        learned[DoubleQuotedScalarString(name)] = entry
        _merge_into(entry, fact)
    out = StringIO()
    yaml.dump(doc, out)
    if span is None:
        return text + ("\n" if text and not text.endswith("\n") else "") + out.getvalue()
    return "".join(lines[: span[0]]) + out.getvalue() + "".join(lines[span[1]:])


def _learned_span(lines: Sequence[str]) -> tuple[int, int] | None:
    """Line range of the top-level `learned:` key, without trailing blanks and col-0 comments."""
    start = next((i for i, line in enumerate(lines) if _LEARNED_KEY.match(line)), None)
    if start is None:
        return None
    end = start + 1
    while end < len(lines) and not _is_top_level(lines[end]):
        end += 1
    while end > start + 1 and (not lines[end - 1].strip() or lines[end - 1].startswith("#")):
        end -= 1  # a column-0 comment after the section introduces what follows
    return start, end


def _is_top_level(line: str) -> bool:
    return bool(line.strip()) and not line[0].isspace() and not line.startswith("#")
