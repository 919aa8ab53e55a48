"""Command line: `toolshim [serve]`, `toolshim check [FILE]`, `toolshim probe MODEL`,
`toolshim validate MODEL... | --all`, `toolshim init [PATH]`."""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import signal
import socket
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from proxy.settings import Settings

from proxy import __version__
from proxy.settings import secrets
from proxy.settings_sources import SettingsError, add_arguments, load_settings

_COMMANDS = ("serve", "check", "probe", "validate", "init")
_COMMAND_HELP = """commands:
  toolshim [serve] [FLAGS]          run the proxy (the default; the flags above)
  toolshim check [FILE]             validate a capabilities file
  toolshim probe MODEL... | --all   ask the backends what models can do, and record it
  toolshim validate MODEL... | --all
                                    run the tool-calling battery and record the result
  toolshim init [PATH]              write the shipped capabilities file
Each command has its own --help (toolshim probe --help)."""


class _Parser(argparse.ArgumentParser):
    """Every toolshim parser: no abbreviated flags (`--prot 9000` must not become
    --protect-metrics), and a usage error is one line and a hint, not the whole usage."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(allow_abbrev=False, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\nTry '{self.prog} --help'.\n")

    def settings(self, args: argparse.Namespace | None) -> Settings:
        try:
            return load_settings(args)
        except SettingsError as exc:
            self.error(str(exc))


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    command = args.pop(0) if args and args[0] in _COMMANDS else "serve"
    if command == "check":
        return _check(args)
    if command == "probe":
        return _probe(args)
    if command == "validate":
        return _validate(args)
    if command == "init":
        return _init(args)
    return _serve(args)


def _serve(argv: list[str]) -> int:
    parser = _Parser(
        prog="toolshim", description="OpenAI-compatible proxy that makes tool calling work "
        "whatever model is loaded.", epilog=_COMMAND_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"toolshim {__version__}")
    add_arguments(parser)
    settings = parser.settings(parser.parse_args(argv))
    from proxy.backends.egress import EgressError, egress_plan

    try:
        egress_plan(settings, os.environ, None)  # a CA file or proxy that cannot work
    except EgressError as exc:
        parser.error(str(exc))
    from proxy.observability.logs import setup_logging

    setup_logging(settings.log_level, settings.log_format, secrets(settings))
    if settings.workers > 1:
        _run_workers(settings)
    else:
        _run(settings)
    return 0


def _run(settings: Settings) -> None:
    """Serve until SIGTERM/SIGINT; drain open requests for the grace period; return."""
    import uvicorn

    from proxy.app import create_app
    from proxy.asgi.client_timeouts import header_timeout_protocol
    from proxy.asgi.server import draining_server
    from proxy.middleware.drain import Drain

    app = create_app(settings, serving=True)
    drain: Drain = app.state.drain
    config = uvicorn.Config(
        app, host=settings.host, port=settings.port, log_config=None,
        log_level=settings.log_level, access_log=False, server_header=False,
        # Nothing reads the client's address: no X-Forwarded-* rewriting layer per request.
        proxy_headers=False,
        http=header_timeout_protocol(settings.client_timeout),
        # uvicorn's own deadline is a backstop: the drain ends streams cleanly first.
        timeout_graceful_shutdown=math.ceil(settings.shutdown_grace) + 2)
    # uvicorn re-raises the signal it caught once it has shut down; with the
    # default handler a drained SIGTERM would still end with status 143.
    # Orchestrators read a drained stop as success, so the re-raise is a no-op.
    signal.signal(signal.SIGTERM, lambda signum, frame: None)
    sock = _listen(settings.host, settings.port)  # before the app starts and says "listening"
    draining_server(drain.begin)(config).run(sockets=[sock])


def _listen(host: str, port: int) -> socket.socket:
    """The bound socket uvicorn serves on; a bind failure is one error line and exit 1."""
    import logging

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        logging.getLogger("toolshim").error(
            "cannot listen on %s:%d: %s", host, port, exc.strerror or exc,
            extra={"record": {"listen": f"{host}:{port}", "errno": exc.errno}})
        raise SystemExit(1) from None
    sock.set_inheritable(True)
    return sock


def _run_workers(settings: Settings) -> None:
    """Several processes: uvicorn's supervisor imports the app factory in each.

    The resolved settings travel in the environment (flags included); workers
    learn independently and meet in capabilities.yaml, which each reloads.
    """
    import uvicorn

    from proxy.settings_sources import SETTINGS_ENV

    os.environ[SETTINGS_ENV] = settings.model_dump_json()
    uvicorn.run("proxy.app:from_env", factory=True, workers=settings.workers,
                host=settings.host, port=settings.port, log_config=None,
                log_level=settings.log_level, access_log=False, server_header=False,
                proxy_headers=False,
                http="proxy.asgi.client_timeouts:HeaderTimeoutProtocol",
                timeout_graceful_shutdown=math.ceil(settings.shutdown_grace) + 2)


def _check(argv: list[str]) -> int:
    parser = _Parser(prog="toolshim check", description="validate a capabilities file")
    parser.add_argument("file", nargs="?", help="default: TOOLSHIM_CAPABILITIES or "
                        "./capabilities.yaml")
    args = parser.parse_args(argv)
    from proxy.commands.check import run_check

    path = args.file or parser.settings(None).capabilities
    return run_check(path, sys.stdout)


def _probe(argv: list[str]) -> int:
    parser = _Parser(prog="toolshim probe",
                     description="ask backends what models can do, and record it")
    parser.add_argument("models", nargs="*", metavar="MODEL")
    parser.add_argument("--all", action="store_true", help="every model the upstreams list")
    parser.add_argument("--upstream", dest="upstreams", action="append", metavar="URL")
    parser.add_argument("--capabilities", metavar="PATH")
    parser.add_argument("--ca-bundle", metavar="FILE",
                        help="CAs upstream certificates must chain to (TOOLSHIM_CA_BUNDLE)")
    args = parser.parse_args(argv)
    if not args.models and not args.all:
        parser.error("name a MODEL or use --all")
    settings = parser.settings(args)
    from proxy.backends.egress import tls_context
    from proxy.commands.probe import run_probe_cli

    # Without a bundle httpx reads SSL_CERT_FILE and the proxy variables itself.
    verify = tls_context(settings.ca_bundle, os.environ) if settings.ca_bundle else True
    return asyncio.run(run_probe_cli(args.models, list(settings.upstreams),
                                     settings.capabilities, args.all, sys.stdout,
                                     verify=verify))


def _validate(argv: list[str]) -> int:
    parser = _Parser(
        prog="toolshim validate",
        description="run the tool-calling battery through the proxy and record the result")
    add_arguments(parser)
    from proxy.commands.validate import add_validate_arguments, run_validate_cli

    add_validate_arguments(parser)
    args = parser.parse_args(argv)
    if not args.models and not args.every:
        parser.error("name a MODEL or use --all")
    settings = parser.settings(args)
    return asyncio.run(run_validate_cli(settings, args.models, args.every, sys.stdout))


def _init(argv: list[str]) -> int:
    parser = _Parser(
        prog="toolshim init", description="write the shipped capabilities file to PATH",
        epilog="exit status: 0 written, 1 PATH exists (nothing written; use --force), "
        "2 bad usage, 3 PATH cannot be written")
    parser.add_argument("path", nargs="?", metavar="PATH", help="default: TOOLSHIM_CAPABILITIES "
                        "or ./capabilities.yaml")
    parser.add_argument("--force", action="store_true", help="replace an existing file")
    args = parser.parse_args(argv)
    from proxy.commands.init import run_init

    return run_init(args.path or parser.settings(None).capabilities, args.force, sys.stdout)
