"""Child processes of the benchmark and what /proc says about them.

Owns starting a server pinned to one core in its own process group, waiting until it
answers, stopping it (always, also on Ctrl-C), and reading CPU ticks and RSS of a
process tree. Linux only. It does not generate load or format results.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

_TICK_MS = 1000.0 / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def pin_self(core: int) -> bool:
    """Pin this process to `core` if the machine has it; False when it cannot."""
    if core not in os.sched_getaffinity(0):
        return False
    os.sched_setaffinity(0, {core})
    return True


@dataclass
class Child:
    """A server subprocess in its own process group, with its output in a log file."""

    name: str
    argv: Sequence[str]
    log: Path
    core: int | str | None = None  # a core, or a taskset list such as "0,1"
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self, cwd: Path) -> None:
        # taskset rather than a preexec_fn: it pins before the server's first instruction
        # and is safe whatever threads this process has.
        argv, taskset = list(self.argv), shutil.which("taskset")
        if self.core is not None and taskset:
            argv = [taskset, "-c", str(self.core), *argv]
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                argv, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True)
        if self.core is not None and not taskset:
            os.sched_setaffinity(self.proc.pid, {int(c) for c in str(self.core).split(",")})

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def log_tail(self, lines: int = 30) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def wait_line(self, prefix: str, timeout: float) -> str:
        """Wait for a line starting with `prefix` in the log (e.g. LISTENING <port>)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_alive()
            for line in self.log.read_text(errors="replace").splitlines():
                if line.startswith(prefix):
                    return line
            time.sleep(0.05)
        raise RuntimeError(f"{self.name}: no '{prefix}' line in {timeout:.0f} s\n"
                           + self.log_tail())

    def wait_http(self, url: str, timeout: float) -> None:
        """Wait until GET `url` answers 200."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                with urllib.request.urlopen(url, timeout=1.0) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.1)
        raise RuntimeError(f"{self.name}: {url} not ready in {timeout:.0f} s\n"
                           + self.log_tail())

    def _check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n"
                               + self.log_tail())

    def stop(self) -> None:
        """SIGTERM the child's process group, SIGKILL it after 5 s."""
        if self.proc is None or self.proc.poll() is not None:
            return
        for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 2.0)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                self.proc.wait(timeout=grace)
                return
            except subprocess.TimeoutExpired:
                continue


def tree_pids(pid: int) -> list[int]:
    """`pid` and all its descendants (a server may fork workers)."""
    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        out.append(current)
        for task in Path(f"/proc/{current}/task").glob("*/children"):
            try:
                todo += [int(c) for c in task.read_text().split()]
            except OSError:
                continue
    return out


def cpu_ms(pid: int) -> float:
    """utime + stime of the process tree so far, in ms."""
    total = 0
    for p in tree_pids(pid):
        try:
            stat = Path(f"/proc/{p}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
    return total * _TICK_MS


def rss_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of the process tree in MB; HWM is each process's peak, summed."""
    rss = hwm = 0
    for p in tree_pids(pid):
        try:
            lines = Path(f"/proc/{p}/status").read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            if line.startswith("VmRSS:"):
                rss += int(line.split()[1])
            elif line.startswith("VmHWM:"):
                hwm += int(line.split()[1])
    return rss / 1024, hwm / 1024


@dataclass
class ServerProbe:
    """A load.WindowProbe: proxy CPU over the measured window and RSS at its end."""

    pid: int | None
    cpu_start: float = 0.0
    cpu: float = 0.0
    rss: float = 0.0
    hwm: float = 0.0

    def start(self) -> None:
        if self.pid is not None:
            self.cpu_start = cpu_ms(self.pid)

    def stop(self) -> None:
        if self.pid is not None:
            # Sampled while the window's streams are still open: W3's RSS under load.
            self.cpu = cpu_ms(self.pid) - self.cpu_start
            self.rss, self.hwm = rss_mb(self.pid)
