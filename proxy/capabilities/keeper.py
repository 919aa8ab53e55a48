"""The store's background thread: reload on change and write learned facts, off the loop.

A client request never pays for parsing the file or writing it: this thread
checks the file every `interval` seconds (so /readyz and /admin/capabilities
show a fix or a new error with no chat request at all), and writes the facts
the store has queued, coalesced: at most one write per `write_gap` seconds, and
a write that failed (read-only file, invalid file) is retried when the file
changes or every `retry` seconds, never in a busy loop.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Protocol

log = logging.getLogger(__name__)

_MIN_INTERVAL = 0.05
"""An interval of 0 ("check all the time") still sleeps this long between checks."""


class _Store(Protocol):
    dirty: bool

    def reload_if_changed(self) -> bool: ...
    def pending(self) -> int: ...
    def flush(self) -> None: ...


class Keeper:
    def __init__(self, store: _Store, interval: float, *, write_gap: float = 1.0,
                 retry: float = 30.0) -> None:
        self.store = store
        self.interval = max(interval, _MIN_INTERVAL)
        self.write_gap = write_gap
        self.retry = retry
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="toolshim-capabilities",
                                        daemon=True)
        self._last_write = -float("inf")

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        """New facts are queued: write them as soon as the write gap allows."""
        self._wake.set()

    def stop(self) -> None:
        """Stop after the current check (a parse is bounded by the file size limit)."""
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._tick()
            except Exception:  # a bug here must not end reloads for the process's life
                log.exception("capabilities keeper: unexpected error")
            self._wake.wait(self._sleep())
            self._wake.clear()

    def _tick(self) -> None:
        self.store.reload_if_changed()
        if self.store.pending() and self._due():
            self._last_write = time.monotonic()
            self.store.flush()

    def _due(self) -> bool:
        since = time.monotonic() - self._last_write
        if since < self.write_gap:
            return False
        return self.store.dirty or since >= self.retry

    def _sleep(self) -> float:
        if self.store.pending() and self.store.dirty:
            left = self.write_gap - (time.monotonic() - self._last_write)
            return max(0.0, min(self.interval, left))
        return self.interval
