"""What --shared-limits costs: the W1 workloads with and without a fleet-wide limiter.

``python bench/shared_limits.py [--quick]`` starts a throwaway redis-server on
a free loopback port (no persistence, temp dir), then runs ``bench/run.py --only W1``
three times: the proxy alone, with ``--redis-url`` (facts shared, no Redis
round trip per request), and with ``--redis-url ... --shared-limits`` (one
permit taken and one returned in Redis per request). Both tables are printed;
compare `+p50` at c=1 (latency added per request) and `cpu ms/req` at c=32.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time

import run
from procs import free_port


def _redis(port: int, workdir: str) -> subprocess.Popen[bytes]:
    binary = shutil.which("redis-server")
    if binary is None:
        sys.exit("redis-server is not installed (apt-get install redis-server)")
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--dir",
                             workdir, "--save", "", "--appendonly", "no"],
                            stdout=subprocess.DEVNULL)
    time.sleep(0.5)
    if proc.poll() is not None:
        sys.exit("redis-server did not start")
    return proc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    common = ["--only", "W1", "--no-naive", *(["--quick"] if args.quick else [])]
    with tempfile.TemporaryDirectory() as workdir:
        port = free_port()
        redis = _redis(port, workdir)
        try:
            print("== proxy alone (per-process limiter) ==", flush=True)
            run.main(common)
            url = f"redis://127.0.0.1:{port}/0"
            for extra in (f"--redis-url {url}", f"--redis-url {url} --shared-limits"):
                print(f"== proxy with {extra} ==", flush=True)
                run.main([*common, "--proxy-cmd", f"{run.PROXY_CMD} {extra}"])
        finally:
            redis.terminate()
            redis.wait(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
