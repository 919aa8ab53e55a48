"""The one benchmark command: ``python bench/run.py [--quick]``.

Owns the experiment: starts the fake upstream (core 1), the proxy and the naive
baseline forwarder (core 0), then for every workload alternates direct, proxied and
baseline runs of the load generator (core 1, in this process) for a few rounds and
prints one table of medians (report.py). Every child is stopped on exit, error or
Ctrl-C. It does not judge the proxy's answers beyond "complete and 200".
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

import wrk
from _nginx import write_nginx_conf
from load import LoadResult, LoadSpec, loop_factory, run_load
from procs import Child, ServerProbe, free_port, pin_self
from report import (
    W1_C1,
    W1_C32,
    W2,
    W2G,
    W2M,
    W2N,
    W2R,
    W2T,
    W3,
    W5,
    Sample,
    Target,
    render,
)

ROOT = Path(__file__).resolve().parent.parent
PROXY_CORE, LOAD_CORE = 0, 1
# bench-native-*: an explicit num_ctx sends it to Ollama's native /api/chat (W2n vs W2).
CAPABILITIES = ('version: 1\nmodels:\n  "bench-*":\n    tools: native\n'
                '  "bench-native-*":\n    num_ctx: 8192\n')
# W3: 64 chunks 10 ms apart is ~0.65 s per stream; workers start spread over one stream
# so completions are uniform in time, not waves that make streams/s depend on phase.
# W1, W3 and W5 offer the three tools: the targets are for every stage on. W2 alone
# shows a stream without tools, W2t the same stream with them.
WORKLOADS: tuple[tuple[str, LoadSpec], ...] = (
    (W1_C1, LoadSpec("bench-small", False, 1, tools=True)),
    (W1_C32, LoadSpec("bench-small", False, 32, tools=True)),
    (W2, LoadSpec("bench-chunks-64", True, 32)),
    (W2T, LoadSpec("bench-chunks-64", True, 32, tools=True)),
    (W2N, LoadSpec("bench-native-64", True, 32)),
    # The W2 stream asked for through /v1/responses (only toolshim speaks it here).
    (W2R, LoadSpec("bench-chunks-64", True, 32, api="responses")),
    # ... and through /v1/messages (Anthropic's Messages API: only toolshim speaks it here).
    (W2M, LoadSpec("bench-chunks-64", True, 32, api="messages")),
    # ... and through the Gemini API's streamGenerateContent (alt=sse), as Gemini CLI asks.
    (W2G, LoadSpec("bench-chunks-64", True, 32, api="gemini")),
    (W3, LoadSpec("bench-slow-64", True, 200, tools=True, ramp=0.7)),
    # A thousand open streams on one worker: errors, RSS and CPU per stream next to W3.
    (W5, LoadSpec("bench-slow-64", True, 1000, tools=True, ramp=0.7, timeout=60.0,
                  drain=30.0)),
)
PROXY_CMD = ("{python} -m proxy --host 127.0.0.1 --port {port} --upstream {upstream}"
             " --capabilities {caps}")


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="toolshim benchmark (see bench/README.md)")
    parser.add_argument("--quick", action="store_true", help="2 short rounds, < 1 minute")
    parser.add_argument("--rounds", type=int, help="rounds per workload (default 3; quick 2)")
    parser.add_argument("--duration", type=float, help="seconds per run (default 2; quick 0.8)")
    parser.add_argument("--naive", action=argparse.BooleanOptionalAction, default=None,
                        help="also run the naive httpx forwarder (default: on unless --quick)")
    parser.add_argument("--floor", action="store_true",
                        help="also run the floor: toolshim's server stack and upstream client"
                        " with no product logic (bench/_floor_forwarder.py)")
    parser.add_argument("--nginx", action="store_true",
                        help="also run nginx as a plain reverse proxy (keep-alive upstream,"
                        " one process, no buffering): what a hop costs in C on this machine")
    parser.add_argument("--no-proxy", action="store_true", help="skip toolshim itself")
    parser.add_argument("--wrk", action="store_true",
                        help="add W1 rows measured with wrk (if installed)")
    parser.add_argument("--only", help="run only workloads whose name contains this")
    parser.add_argument("--proxy-cmd", default=PROXY_CMD,
                        help="command template; fields {python} {port} {upstream} {caps}")
    parser.add_argument("--proxy-cores", default=str(PROXY_CORE), metavar="LIST",
                        help="cores for the servers under test (taskset list, default 0;"
                        " '0,1' to measure --workers 2)")
    parser.add_argument("--compare", metavar="REF",
                        help="also run toolshim as of this git ref (target 'ref'), same runs")
    args = parser.parse_args(argv)
    args.rounds = args.rounds or (2 if args.quick else 3)
    args.duration = args.duration or (0.8 if args.quick else 2.0)
    args.naive = (not args.quick) if args.naive is None else args.naive
    return args


def _export_ref(ref: str, into: Path) -> Path:
    """The `proxy` package as of git `ref`, unpacked under `into` (no worktree, no checkout).

    The ref's proxy runs with this interpreter and these installed libraries: only
    the package's code differs between the two targets.
    """
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", ref, "proxy"],
                             capture_output=True, check=False)
    if archive.returncode != 0:
        raise RuntimeError(f"git archive {ref}: {archive.stderr.decode().strip()}")
    tar_path = into / "ref.tar"
    tar_path.write_bytes(archive.stdout)
    with tarfile.open(tar_path) as tar:
        tar.extractall(into, filter="data")
    return into


def _server_argvs(args: argparse.Namespace, upstream: str, caps: Path,
                  ref_dir: Path | None) -> list[tuple[str, list[str], Path]]:
    """(name, argv, working directory) of every server under test but the fake."""
    py = sys.executable
    proxy_argv = args.proxy_cmd.format(python=py, port="{port}", upstream=upstream,
                                       caps=caps).split()
    servers: list[tuple[str, list[str], Path]] = []
    if not args.no_proxy:
        servers.append(("proxy", proxy_argv, ROOT))
    if ref_dir is not None:
        # `python -m proxy` puts its working directory first on sys.path: the ref's copy.
        servers.append(("ref", proxy_argv, ref_dir))
    if args.naive:
        servers.append(("naive", [py, str(ROOT / "bench" / "_naive_forwarder.py"),
                                  "--port", "{port}", "--upstream", upstream], ROOT))
    if args.floor:
        servers.append(("floor", [py, str(ROOT / "bench" / "_floor_forwarder.py"),
                                  "--port", "{port}", "--upstream", upstream], ROOT))
    if args.nginx:
        nginx = shutil.which("nginx")
        if nginx is None:
            raise RuntimeError("--nginx: no nginx on PATH (apt-get install nginx-light)")
        # The config names the port, which is chosen at start: _start_servers writes it.
        servers.append(("nginx", [nginx, "-p", "{dir}", "-c", "{dir}/nginx.conf"], ROOT))
    return servers


def _start_servers(args: argparse.Namespace, tmp: Path, children: list[Child]) -> list[Target]:
    py = sys.executable
    fake = Child("fake upstream", [py, str(ROOT / "bench" / "fake_upstream.py")],
                 tmp / "fake.log", core=LOAD_CORE)
    children.append(fake)
    fake.start(ROOT)
    upstream = f"http://127.0.0.1:{fake.wait_line('LISTENING', 10).split()[1]}"
    targets = [Target("direct", upstream, None)]
    caps = tmp / "capabilities.yaml"
    caps.write_text(CAPABILITIES)
    ref_dir = _export_ref(args.compare, Path(args.ref_tmp)) if args.compare else None
    for name, argv, cwd in _server_argvs(args, upstream, caps, ref_dir):
        port = free_port()
        if name == "nginx":
            conf_dir = str(write_nginx_conf(tmp / "nginx", port, upstream))
            argv = [a.replace("{dir}", conf_dir) for a in argv]
        child = Child(name, [a.replace("{port}", str(port)) for a in argv],
                      tmp / f"{name}.log", core=args.proxy_cores)
        children.append(child)
        child.start(cwd)
        child.wait_http(f"http://127.0.0.1:{port}/healthz", 30)
        targets.append(Target(name, f"http://127.0.0.1:{port}", child.pid))
    return targets


def _spec_for(spec: LoadSpec, args: argparse.Namespace) -> LoadSpec:
    warmup = spec.ramp + (0.25 if args.quick else 0.4)
    duration = args.duration * (1.5 if spec.ramp else 1.0)
    return dataclasses.replace(spec, warmup=warmup, duration=duration)


def _workloads(args: argparse.Namespace) -> list[tuple[str, LoadSpec, bool]]:
    """(name, spec, use wrk) in run order; wrk rows follow the aiohttp ones."""
    chosen = [(n, _spec_for(s, args), False) for n, s in WORKLOADS]
    if args.wrk:
        if wrk.available():
            chosen += [(f"{n} wrk", s, True) for n, s, _ in chosen[:2]]
        else:
            print("wrk not installed: no wrk rows", file=sys.stderr)
    return [w for w in chosen if not args.only or args.only in w[0]]


async def _run_all(targets: list[Target], args: argparse.Namespace,
                   tmp: Path) -> list[Sample]:
    samples: list[Sample] = []
    for name, spec, use_wrk in _workloads(args):
        for rnd in range(args.rounds):
            for target in targets:
                if spec.api != "chat" and target.name != "proxy":
                    continue  # the fake and the forwarders speak chat only
                probe = ServerProbe(target.pid)
                result: LoadResult | wrk.WrkResult
                if use_wrk:
                    result = await wrk.run_wrk(target.url, spec, tmp, probe)
                else:
                    result = await run_load(target.url, spec, probe)
                samples.append(Sample(name, target.name, rnd, result, probe))
                await asyncio.sleep(0.1)  # let closed connections settle between runs
            print(f"  {name}: round {rnd + 1}/{args.rounds} done", file=sys.stderr)
    return samples


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # same cleanup path as Ctrl-C


def _notes(args: argparse.Namespace, pinned: bool, load_before: str) -> list[str]:
    pin = f"proxy on core(s) {args.proxy_cores}, load + fake upstream on core 1" if pinned else (
        "NOT PINNED (fewer than 2 cores): numbers are not comparable")
    load_after = " ".join(f"{x:.1f}" for x in os.getloadavg())
    compare = [f"ref = toolshim as of {args.compare}"] if args.compare else []
    return [f"{args.rounds} rounds x {args.duration:g} s per run (W3, W5 x1.5), medians; {pin}",
            *compare,
            (f"load average before {load_before}, after {load_after}"
             " (other work on this machine skews every number)")]


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    signal.signal(signal.SIGTERM, _on_sigterm)
    pinned = pin_self(LOAD_CORE)
    load_before = " ".join(f"{x:.1f}" for x in os.getloadavg())
    # Logs, the capabilities file and the table stay here for a look after the run.
    out = ROOT / "bench" / "results" / time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out.mkdir(parents=True, exist_ok=True)
    children: list[Child] = []
    ref_tmp = tempfile.TemporaryDirectory(prefix="toolshim-ref-")
    args.ref_tmp = ref_tmp.name
    try:
        targets = _start_servers(args, out, children)
        with asyncio.Runner(loop_factory=loop_factory()) as runner:
            samples = runner.run(_run_all(targets, args, out))
        table = render(samples, targets, _notes(args, pinned, load_before), ROOT)
        (out / "table.txt").write_text(table + "\n")
        print(table + f"\nlogs: {out.relative_to(ROOT)}/")
        return 0
    except RuntimeError as exc:
        print(f"bench failed: {exc}\nlogs: {out}/", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("bench interrupted", file=sys.stderr)
        return 130
    finally:
        for child in reversed(children):
            child.stop()
        ref_tmp.cleanup()


if __name__ == "__main__":
    sys.exit(main())
