"""capabilities.yaml on disk: the version in force, reloads, and learned facts to write.

Owns the coordination, not the details: parsing is load.py, the `learned:`
splice is splice.py, the locked atomic write is write.py, and the background
thread that reloads and writes is keeper.py. Reads on the request path
(`profile`) never touch the disk or parse; `record` applies facts in memory at
once and queues them for the file. A bad edit (or a file over the size limit)
is reported and the last good version stays in force; facts that cannot be
written yet (invalid or read-only file) stay queued and are written at the next
chance. A person's `models:` entry wins over a learned one at resolution, so
facts about such a model are still recorded but stay inert.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cachetools import LRUCache

from proxy.capabilities.keeper import Keeper
from proxy.capabilities.learned import apply_facts, trim_learned, unlearnable
from proxy.capabilities.learning import LearnedFact, fact_is_news
from proxy.capabilities.load import Problem, parse_capabilities
from proxy.capabilities.resolve import Resolver, normalise_model_name
from proxy.capabilities.schema import Capabilities, LearnedEntry
from proxy.capabilities.shipped import shipped_text
from proxy.capabilities.splice import splice_checked
from proxy.capabilities.write import StatKey, rewrite_file, stat_key
from proxy.types import Profile

MAX_LEARNED = 5000
MAX_FILE_BYTES = 4 * 1024 * 1024


class CapabilityStore:
    """The capabilities in force, reloaded on change; learned facts recorded to disk."""

    def __init__(self, path: str | Path, *, check_interval: float = 1.0,
                 max_learned: int = MAX_LEARNED, max_bytes: int = MAX_FILE_BYTES,
                 logger: logging.Logger | None = None,
                 on_written: Callable[[int], None] | None = None,
                 create_missing: bool = False) -> None:
        self._path = Path(path)
        self.check_interval = check_interval
        self.max_learned = max_learned
        self.max_bytes = max_bytes
        self._log = logger or logging.getLogger(__name__)
        self._on_written = on_written
        self._create_missing = create_missing
        """The server creates a missing file from the shipped one; the CLI only when
        it records a fact (a write to a missing file starts from the shipped text)."""
        self._lock = threading.RLock()  # guards the in-memory state; never held over I/O
        self._write_lock = threading.Lock()  # one disk merge at a time per process
        self._caps = Capabilities()
        self._resolver = Resolver.build(self._caps)
        self._keys: dict[str, str] = {}  # normalised name -> key under learned:
        self._stat: StatKey | None = None
        self._loaded = False
        self._cache: LRUCache[str, Profile] = LRUCache(maxsize=4096)
        self._pending: list[LearnedFact] = []  # applied in memory, not yet on disk
        self._last_error: str | None = None
        self._reported: LRUCache[str, bool] = LRUCache(maxsize=1024)
        self._keeper: Keeper | None = None
        self._last_parsed: tuple[str, Capabilities] | None = None
        self.dirty = False
        """Set when there is news for the file: new facts, or a reload that may unblock them."""
        self.reloading = False
        """True while a new version is being read and parsed (off the request path)."""
        self.generation = 0
        self.reload_if_changed()

    # --- reads: the request path, memory only --------------------------------

    def profile(self, model: str) -> Profile:
        with self._lock:
            found = self._cache.get(model)
            if found is None:
                found = self._cache[model] = self._resolver.resolve(model)
            return found

    def learned_entry(self, model: str) -> LearnedEntry | None:
        """The `learned:` entry for `model`, matched as the resolver matches it (case,
        the `:latest` tag): one lookup in the resolver's index, not a scan of the keys."""
        entry = self._resolver.learned.get(normalise_model_name(model))
        return entry if isinstance(entry, LearnedEntry) else None

    def validation(self, model: str) -> dict[str, Any] | None:
        """The model's recorded validation ({at, passed, total, failed, rung}), if any."""
        entry = self.learned_entry(model)
        if entry is None or entry.validation is None:
            return None
        return entry.validation.model_dump()

    def capabilities(self) -> Capabilities:
        return self._caps

    def has_entry(self, model: str) -> bool:
        return self._resolver.has_entry(model)

    def last_error(self) -> str | None:
        """The problems of the file on disk ("path:line: reason"), None while it is good."""
        return self._last_error

    def pending(self) -> int:
        """Facts in memory that are not in the file yet."""
        return len(self._pending)

    # --- the background keeper ---------------------------------------------------

    def writes_in_background(self) -> bool:
        """`record` does no I/O (the keeper writes): it may be called on the event loop."""
        return self._keeper is not None

    def start(self) -> None:
        """Reload and write from a background thread from now on (the server does this)."""
        if self._keeper is None:
            self._keeper = Keeper(self, self.check_interval)
            self._keeper.start()

    def close(self) -> None:
        """Stop the thread; write what is still pending (called on shutdown)."""
        keeper, self._keeper = self._keeper, None
        if keeper is not None:
            keeper.stop()
        if self._pending:
            self.flush()

    # --- reload ---------------------------------------------------------------------

    def reload_if_changed(self) -> bool:
        """Re-read the file if its stat changed; True when a new version took effect."""
        try:
            stat = stat_key(self._path)
        except OSError as exc:
            return self._reject(f"{self._path}: cannot read: {exc}")
        if self._loaded and stat == self._stat:
            return False
        self.reloading = True
        try:
            return self._reload(stat)
        finally:
            self.reloading = False

    def _reload(self, stat: StatKey | None) -> bool:
        if stat is None:
            stat = self._create_from_shipped() if self._create_missing else None
            if stat is None:
                return self._install(parse_capabilities(shipped_text(), "shipped")[0], None)
        if stat[1] > self.max_bytes:
            self._stat, self._loaded = stat, True
            return self._reject(f"{self._path}: {stat[1]} bytes, over the limit of "
                                f"{self.max_bytes} (--max-capabilities-bytes)")
        try:
            text = self._path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            return self._reject(f"{self._path}: cannot read: {exc}")
        self._stat, self._loaded = stat, True
        caps, problems = self._parse(text)
        if caps is None:
            return self._reject("\n".join(str(p) for p in problems), text)
        return self._install(caps, stat)

    def _create_from_shipped(self) -> StatKey | None:
        """A missing file is created from the shipped one, so nothing learned is lost."""
        try:
            done = rewrite_file(self._path, lambda current: current or shipped_text())
        except OSError as exc:
            self._once(logging.WARNING, f"create:{exc}", f"{self._path}: not found and cannot "
                       f"be created ({exc}); using the shipped defaults in memory")
            return None
        if done is not None and done.changed:
            self._log.info("%s", f"{self._path}: not found; created it from the shipped defaults")
        return stat_key(self._path)

    def _install(self, caps: Capabilities | None, stat: StatKey | None) -> bool:
        assert caps is not None
        with self._lock:
            self._use(apply_facts(caps, self._pending)[0] if self._pending else caps)
            self._stat, self._loaded = stat, True
            if self._last_error is not None:
                self._log.info("%s", f"{self._path}: valid again; this version is in force")
            self._last_error = None
            self.generation += 1
            self.dirty = self.dirty or bool(self._pending)
        return True

    def _reject(self, message: str, text: str | None = None) -> bool:
        if self.generation == 0:
            return self._start_shipped(message, text)
        if message != self._last_error:  # logged once per change, not once per check
            self._log.warning("%s", f"{message} (keeping the last good version)")
        self._last_error = message
        return False

    def _start_shipped(self, message: str, text: str | None) -> bool:
        """No good version yet (a broken file at start): the shipped entries, never none.

        The file is a person's and is left as it is; what is learned meanwhile waits
        in memory (`_merged` never writes into an invalid file) until it is fixed."""
        self._install(parse_capabilities(shipped_text(), "shipped")[0], self._stat)
        first, _, more = message.partition("\n")
        extra = f" ({more.count(chr(10)) + 1} more problems)" if more else ""
        self._log.warning("%s", f"{first}{extra}; starting with the shipped entries instead; "
                          "the file is left as it is and learned facts wait in memory until "
                          "it is fixed")
        self._last_error = message
        if text is not None:  # this line said it: no second one when a fact must wait
            self._reported[f"nowrite:{_digest(text)}"] = True
        return False

    def _use(self, caps: Capabilities) -> None:
        """Put a version in force: globs compiled once, resolved profiles forgotten."""
        self._caps = caps
        self._resolver = Resolver.build(caps)
        self._keys = {normalise_model_name(k): k for k in caps.learned}
        self._cache.clear()

    # --- learning ---------------------------------------------------------------------

    def record(self, facts: Sequence[LearnedFact]) -> None:
        """The one way in for learned facts: in force at once, on disk at the next chance.

        Cheap and free of I/O while the keeper runs; without it (the CLI), the
        write happens here, in the caller's thread.
        """
        with self._lock:
            news = [f for f in facts
                    if fact_is_news(self._resolver.learned.get(normalise_model_name(f.model)), f)]
        # Checked after the news test: a repeat (most requests) costs no validation.
        news = [f for f in news if self._acceptable(f)]
        with self._lock:
            if not news:
                return
            self._pending = (self._pending + news)[-self.max_learned:]
            caps, touched = apply_facts(self._caps, news, self._keys)
            self._caps, self._keys = caps, {**self._keys, **touched}
            self._resolver = self._resolver.with_learned(
                {name: caps.learned[key] for name, key in touched.items()})
            self._cache.clear()  # profiles are keyed by the client's spelling: forget all
            self.dirty = True
        if self._keeper is not None:
            self._keeper.wake()
        else:
            self.flush()

    def rewrite(self, transform: Callable[[str], str]) -> None:
        """A person's explicit edit through the console (promote, forget).

        The same locked atomic writer as learning, on a fresh read; the result
        must load (else ValueError, file untouched) and is in force at once.
        """
        checked: list[Capabilities] = []

        def edit(text: str | None) -> str:
            new_text = transform(text or "")
            caps, problems = self._parse(new_text)
            if caps is None:
                raise ValueError(f"the edit would break the file: {problems[0]}")
            checked.append(caps)
            return new_text

        with self._write_lock:
            written = rewrite_file(self._path, edit)
        if written is not None:
            self._install(checked[-1], written.stat)

    def _acceptable(self, fact: LearnedFact) -> bool:
        reason = unlearnable(fact)
        if reason is not None:
            name = fact.model.strip()
            shown = name if len(name) <= 80 else name[:80] + "..."
            self._once(logging.WARNING, f"fact:{name[:300]}:{reason}",
                       f"not learning {dict(fact.fields)} about model {shown!r}: {reason}")
        return reason is None

    def flush(self) -> None:
        """Write every pending fact now, in the caller's thread (the keeper calls this)."""
        with self._write_lock:
            with self._lock:
                batch, self.dirty = list(self._pending), False
            if batch:
                self._write(batch)
            with self._lock:  # facts that could not be written must not grow memory forever
                if len(self._caps.learned) > self.max_learned:
                    self._use(trim_learned(self._caps, self.max_learned))

    def _write(self, facts: list[LearnedFact]) -> None:
        spliced: list[list[LearnedFact]] = []  # the facts that went into the new text
        try:
            written = rewrite_file(self._path, lambda text: self._merged(text, facts, spliced))
        except (OSError, UnicodeDecodeError) as exc:  # read-only, disk full, lock timeout
            self._once(logging.WARNING, f"write:{type(exc).__name__}:{getattr(exc, 'errno', 0)}",
                       f"{self._path}: cannot record learned facts ({exc}); kept in memory, "
                       "written once the file can be written")
            return
        if written is None:
            return
        updated = self._parse(written.text)[0]
        with self._lock:
            self._pending = [f for f in self._pending if f not in facts]
            self._install(updated, written.stat)
        if not written.changed:
            return
        for fact in spliced[-1] if spliced else []:
            self._log_written(fact)
        if self._on_written is not None:
            self._on_written(len(spliced[-1]) if spliced else 0)

    def _log_written(self, fact: LearnedFact) -> None:
        """One line per fact written: what toolshim changed in a person's file, and why."""
        fields = ", ".join(f"{name}={value!r}" for name, value in fact.fields.items())
        self._log.info("%s", f"{self._path}: learned {fact.model!r}: {fields} "
                       f"(source: {fact.source})",
                       extra={"record": {"model": fact.model, "fields": dict(fact.fields),
                                         "source": fact.source}})

    def _merged(self, text: str | None, facts: list[LearnedFact],
                spliced: list[list[LearnedFact]]) -> str | None:
        """The file's new text with `facts` spliced in, or None to leave it alone."""
        text = shipped_text() if text is None else text
        if len(text.encode()) > self.max_bytes:
            self._once(logging.WARNING, f"big:{_digest(text)}", f"{self._path}: over "
                       f"{self.max_bytes} bytes; not recording learned facts until it is smaller")
            return None
        current, problems = self._parse(text)
        if current is None:  # never clobber a person's half-finished edit
            self._once(logging.WARNING, f"nowrite:{_digest(text)}", f"{self._path}: invalid, "
                       f"learned facts wait in memory until it is fixed: {problems[0]}")
            return None
        good = facts
        done = splice_checked(text, current, facts, self.max_learned)
        if done is None:  # find the fact that cannot go in; never let it block the others
            good = []
            for fact in facts:
                if splice_checked(text, current, [*good, fact], self.max_learned) is None:
                    self._once(logging.ERROR, f"splice:{fact}", f"{self._path}: cannot record "
                               f"{dict(fact.fields)} about {fact.model!r}; dropped")
                else:
                    good.append(fact)
            if not good:  # nothing can go in: leave the file, stop retrying these facts
                return text
            done = splice_checked(text, current, good, self.max_learned)
        if done is None:
            return None
        self._last_parsed = done
        spliced.append(good)
        return done[0]

    def _parse(self, text: str) -> tuple[Capabilities | None, list[Problem]]:
        """parse_capabilities, remembering the last good text: a write usually starts
        from the text the last reload or write saw, and big files parse slowly."""
        last = self._last_parsed
        if last is not None and last[0] == text:
            return last[1], []
        caps, problems = parse_capabilities(text, str(self._path))
        if caps is not None:
            self._last_parsed = (text, caps)
        return caps, problems

    def _once(self, level: int, key: str, message: str) -> None:
        if key not in self._reported:
            self._reported[key] = True
            self._log.log(level, "%s", message)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def now_iso() -> str:
    """The time learned facts are stamped with (`at:` in capabilities.yaml)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
