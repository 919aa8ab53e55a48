"""Log setup: one JSON object per line (default) or plain text.

Request records arrive as `extra={"record": {...}}` from telemetry; they are
merged into the JSON line. Records hold no key, and upstream errors are logged
by message only; as a last line of defence every configured secret (client
keys, upstream keys) is masked in the finished line, whatever logged it.
"""

from __future__ import annotations

import logging
import re
import sys
import threading
import time
from collections.abc import Iterable
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, TextIO

import orjson

from proxy.observability.redact import Redactor


class _Masking(logging.Formatter):
    """Replaces each secret in the formatted line (observability/redact.py's rule)."""

    def __init__(self, fmt: str | None = None, secrets: Iterable[str] = ()) -> None:
        super().__init__(fmt)
        self.mask = Redactor(secrets).mask


class JsonFormatter(_Masking):
    _second = -1
    _stamp = ""

    def _ts(self, record: logging.LogRecord) -> str:
        """`2026-11-24T21:45:08.123Z`; the part up to the second is made once a second
        (datetime's isoformat was a tenth of the cost of a request's log line)."""
        second = int(record.created)
        if second != self._second:
            self._stamp = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")
            self._second = second
        return f"{self._stamp}.{int(record.msecs):03d}Z"

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": self._ts(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        extra = getattr(record, "record", None)
        if isinstance(extra, dict):
            line.update(extra)
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return self.mask(orjson.dumps(line, default=str).decode())


# Line breaks and other controls: a model name with "\n" must not start a forged line.
_CONTROL = re.compile("[\x00-\x1f\x7f\x85\u2028\u2029]")


def escape_controls(text: str) -> str:
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                        else f"\\u{ord(m.group()):04x}", text)


_PLAIN_VALUE = re.compile(r'[^\s="\\]*')


def _field(value: Any) -> str:
    """A field's value as logfmt has it: quoted (with `"` and `\\` escaped) when it
    holds a space, `=` or a quote, so a value (a model name a client sent) cannot
    pass for more fields; control characters escaped either way."""
    text = escape_controls(str(value))
    if _PLAIN_VALUE.fullmatch(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class TextFormatter(_Masking):
    """One line per record: message and fields with control characters escaped
    (a traceback, when there is one, follows on its own lines as usual)."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s", secrets)

    def format(self, record: logging.LogRecord) -> str:
        saved = record.msg, record.args
        record.msg, record.args = escape_controls(record.getMessage()), None
        try:
            base, sep, trace = super().format(record).partition("\n")
        finally:
            record.msg, record.args = saved
        extra = getattr(record, "record", None)
        if isinstance(extra, dict):
            base += " " + " ".join(f"{k}={_field(v)}" for k, v in extra.items())
        return self.mask(base + sep + trace)


class BatchingHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A StreamHandler that writes info lines in batches, warnings and worse at once.

    A write (and flush) to stderr for each access line would be paid by every
    request, so lines below WARNING wait up to
    `interval` seconds (or `max_pending` lines) and go out in one write; a warning or
    error goes out at once, after whatever waited before it (order is kept).
    `logging.shutdown` (at exit, also after SIGTERM) writes the rest; only a killed
    process loses its last `interval` of info lines.
    """

    def __init__(self, stream: TextIO, interval: float = 0.1, max_pending: int = 512) -> None:
        super().__init__(stream)
        self.interval = interval
        self.max_pending = max_pending
        self._pending: list[str] = []
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def emit(self, record: logging.LogRecord) -> None:
        # Called with the handler's lock held (Handler.handle).
        try:
            self._pending.append(self.format(record) + self.terminator)
        except Exception:  # noqa: BLE001 - as StreamHandler: report, never raise
            self.handleError(record)
            return
        if record.levelno >= logging.WARNING or len(self._pending) >= self.max_pending:
            self._write()
        elif len(self._pending) == 1:
            if self._thread is None:  # started on first use: after any fork
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="toolshim-log-writer")
                self._thread.start()
            self._wake.set()

    def flush(self) -> None:
        self.acquire()
        try:
            self._write()
        finally:
            self.release()

    def _write(self) -> None:
        if not self._pending:
            return
        text = "".join(self._pending)
        self._pending.clear()
        try:
            self.stream.write(text)
            self.stream.flush()
        except Exception:  # noqa: BLE001 - a closed or full stream must not break requests
            self.handleError(logging.makeLogRecord({"msg": "writing %d log lines failed",
                                                    "args": (text.count("\n"),)}))

    def _run(self) -> None:
        while True:
            self._wake.wait()
            time.sleep(self.interval)
            self._wake.clear()
            self.flush()


def setup_logging(level: str, fmt: str, secrets: Iterable[str] = ()) -> None:
    handler = BatchingHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(secrets=secrets) if fmt == "json"
                         else TextFormatter(secrets))
    root = logging.getLogger()
    for old in root.handlers:  # lines a replaced batching handler still holds go out
        old.flush()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
    # Nothing we format uses the caller's file/line, thread or process names: don't
    # collect them for every record (the logging HOWTO's "Optimization" switches).
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    # One line per request comes from telemetry; uvicorn's access line would double it.
    logging.getLogger("uvicorn.access").disabled = True
    # httpx logs every upstream request at INFO; the request line already says it.
    if level.lower() != "debug":
        logging.getLogger("httpx").setLevel(logging.WARNING)


class IntendedCut:
    """A request's flag: its response was left unfinished on purpose (`intend_cut`)."""

    __slots__ = ("cut",)

    def __init__(self) -> None:
        self.cut = False


_INTENDED_CUT: ContextVar[IntendedCut | None] = ContextVar("toolshim_intended_cut",
                                                           default=None)
_UNFINISHED_LINE = "ASGI callable returned without completing response."


def intend_cut() -> IntendedCut:
    """A flag for the calling request's task (and the tasks it starts): set its `cut`
    when the response is left unfinished on purpose (a passed-through body the
    upstream broke off), and the server's own error line about that is dropped.
    The request's line already says why; one failure is logged once."""
    flag = IntendedCut()
    _INTENDED_CUT.set(flag)
    return flag


class _DropIntendedCut(logging.Filter):
    """On uvicorn's logger: its "returned without completing response" line, only for
    a request that set `intend_cut().cut`. uvicorn logs it from the request's own task,
    so the flag is in the context; any other unfinished response is still logged."""

    def filter(self, record: logging.LogRecord) -> bool:
        flag = _INTENDED_CUT.get()
        return not (flag is not None and flag.cut and record.msg == _UNFINISHED_LINE)


_DROP_INTENDED_CUT = _DropIntendedCut()


def quiet_intended_cuts() -> None:
    """Attach the filter to uvicorn's error logger (once, however many apps are made)."""
    server_log = logging.getLogger("uvicorn.error")
    if _DROP_INTENDED_CUT not in server_log.filters:
        server_log.addFilter(_DROP_INTENDED_CUT)
