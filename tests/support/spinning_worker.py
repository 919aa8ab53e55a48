"""A builtin worker whose `echo` never ends when asked to `spin`: a future builtin gone wrong.

It also has `environ`, which shows the worker's environment (none of toolshim's
should be there) and `pid`.

Run in place of `proxy.server_tools.worker` (tests set `sandbox.WORKER_MODULE`),
so the proxy's rule (every builtin runs in a process killed at its timeout)
is tested with a call no evaluator bound can save.
"""

from __future__ import annotations

import os
from typing import Any

from proxy.server_tools import local, worker


def spin_or_echo(arguments: dict[str, Any]) -> str:
    while arguments.get("spin"):
        pass
    return local.as_text(arguments)


local.BUILTINS["echo"] = spin_or_echo
local.BUILTINS["environ"] = lambda arguments: local.as_text(dict(os.environ))
local.BUILTINS["pid"] = lambda arguments: str(os.getpid())

if __name__ == "__main__":
    worker.main()
