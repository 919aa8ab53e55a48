"""Where settings come from: command-line flags, TOOLSHIM_* variables, the parent's JSON.

Owns the public names (every flag and its TOOLSHIM_* variable), the argparse
flags, reading a variable's text (lists, LEFT=RIGHT pairs, booleans), merging
flags over the environment over defaults, and errors that name a bad value the
way it was given. Must not: define a field or its bounds (settings.py does), or
rename a flag or variable: the names are a public contract.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence

from pydantic import ValidationError

from proxy.settings import DEFAULT_UPSTREAM, Route, Settings, upstream_root

# flag dest -> environment variable; the names are a public contract.
ENV_NAMES: Mapping[str, str] = {
    "host": "TOOLSHIM_HOST",
    "port": "TOOLSHIM_PORT",
    "upstreams": "TOOLSHIM_UPSTREAM",
    "routes": "TOOLSHIM_ROUTES",
    "upstream_key_envs": "TOOLSHIM_UPSTREAM_KEY_ENVS",
    "capabilities": "TOOLSHIM_CAPABILITIES",
    "api_keys": "TOOLSHIM_API_KEYS",
    "protect_metrics": "TOOLSHIM_PROTECT_METRICS",
    "connect_timeout": "TOOLSHIM_CONNECT_TIMEOUT",
    "read_timeout": "TOOLSHIM_READ_TIMEOUT",
    "max_body_bytes": "TOOLSHIM_MAX_BODY_BYTES",
    "max_concurrency": "TOOLSHIM_MAX_CONCURRENCY",
    "max_queue": "TOOLSHIM_MAX_QUEUE",
    "queue_timeout": "TOOLSHIM_QUEUE_TIMEOUT",
    "shutdown_grace": "TOOLSHIM_SHUTDOWN_GRACE",
    "probe": "TOOLSHIM_PROBE",
    "probe_timeout": "TOOLSHIM_PROBE_TIMEOUT",
    "reload_interval": "TOOLSHIM_RELOAD_INTERVAL",
    "redis_url": "TOOLSHIM_REDIS_URL",
    "redis_prefix": "TOOLSHIM_REDIS_PREFIX",
    "shared_limits": "TOOLSHIM_SHARED_LIMITS",
    "max_learned": "TOOLSHIM_MAX_LEARNED",
    "max_capabilities_bytes": "TOOLSHIM_MAX_CAPABILITIES_BYTES",
    "log_level": "TOOLSHIM_LOG_LEVEL",
    "log_format": "TOOLSHIM_LOG_FORMAT",
    "log_prompts": "TOOLSHIM_LOG_PROMPTS",
    "workers": "TOOLSHIM_WORKERS",
    "client_timeout": "TOOLSHIM_CLIENT_TIMEOUT",
    "recent_requests": "TOOLSHIM_RECENT_REQUESTS",
    "min_validation": "TOOLSHIM_MIN_VALIDATION",
    "upstream_kinds": "TOOLSHIM_UPSTREAM_KIND",
    "ollama_default_ctx": "TOOLSHIM_OLLAMA_DEFAULT_CTX",
    "responses_store_size": "TOOLSHIM_RESPONSES_STORE_SIZE",
    "responses_store_mb": "TOOLSHIM_RESPONSES_STORE_MB",
    "responses_ttl": "TOOLSHIM_RESPONSES_TTL",
    "ca_bundle": "TOOLSHIM_CA_BUNDLE",
    "upstream_transports": "TOOLSHIM_UPSTREAM_TRANSPORT",
    "admin_keys": "TOOLSHIM_ADMIN_KEYS",
    "allowed_hosts": "TOOLSHIM_ALLOWED_HOSTS",
    "aliases": "TOOLSHIM_ALIASES",
    "fast_paths": "TOOLSHIM_FAST_PATHS",
}
_LISTS = {"upstreams", "api_keys", "admin_keys", "allowed_hosts"}
_PAIRS = {"routes", "upstream_key_envs", "upstream_kinds", "upstream_transports", "aliases"}
_BOOLS = {"protect_metrics", "probe", "log_prompts", "shared_limits", "fast_paths"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Serve flags. Defaults are None so 'not given' falls through to env/defaults."""
    add = parser.add_argument
    add("--host", help="listen address (TOOLSHIM_HOST, default 127.0.0.1)")
    add("--port", type=int, help="listen port (TOOLSHIM_PORT, default 8080)")
    add("--upstream", dest="upstreams", action="append", metavar="URL",
        help=f"backend URL, with or without /v1; repeatable (TOOLSHIM_UPSTREAM, comma-separated; "
             f"default {DEFAULT_UPSTREAM})")
    add("--route", dest="routes", action="append", metavar="PATTERN=URL",
        help="send models matching PATTERN (glob) to URL; repeatable (TOOLSHIM_ROUTES)")
    add("--alias", dest="aliases", action="append", metavar="PATTERN=MODEL",
        help="serve requests for models matching PATTERN (glob, any case) with MODEL; "
             "repeatable (TOOLSHIM_ALIASES, comma-separated)")
    add("--upstream-key-env", dest="upstream_key_envs", action="append", metavar="URL=ENVVAR",
        help="send the API key from ENVVAR to that upstream (TOOLSHIM_UPSTREAM_KEY_ENVS)")
    add("--capabilities", metavar="PATH",
        help="capabilities file (TOOLSHIM_CAPABILITIES, default ./capabilities.yaml)")
    add("--api-key", dest="api_keys", action="append", metavar="KEY",
        help="a key clients must send as Bearer; repeatable (TOOLSHIM_API_KEYS, comma-separated)")
    add("--protect-metrics", action="store_true", default=None,
        help="require an API key for /metrics too (TOOLSHIM_PROTECT_METRICS)")
    add("--connect-timeout", type=float, help="seconds (TOOLSHIM_CONNECT_TIMEOUT, default 10)")
    add("--read-timeout", type=float,
        help="seconds allowed between upstream bytes (TOOLSHIM_READ_TIMEOUT, default 600)")
    add("--max-body-bytes", type=int, help="request body limit (TOOLSHIM_MAX_BODY_BYTES, 32 MiB)")
    add("--max-concurrency", type=int,
        help="concurrent requests per upstream (TOOLSHIM_MAX_CONCURRENCY, default 1024)")
    add("--max-queue", type=int,
        help="requests waiting per upstream before 429 (TOOLSHIM_MAX_QUEUE, default 1024)")
    add("--queue-timeout", type=float, help="seconds a request may wait (TOOLSHIM_QUEUE_TIMEOUT)")
    add("--shutdown-grace", type=float,
        help="seconds open streams may finish on SIGTERM (TOOLSHIM_SHUTDOWN_GRACE, default 30)")
    add("--no-probe", dest="probe", action="store_false", default=None,
        help="do not ask the backend's metadata about unknown models (TOOLSHIM_PROBE=0)")
    add("--probe-timeout", type=float, help="seconds (TOOLSHIM_PROBE_TIMEOUT, default 2)")
    add("--reload-interval", type=float,
        help="seconds between capabilities.yaml change checks (TOOLSHIM_RELOAD_INTERVAL, 1)")
    add("--redis-url", metavar="URL",
        help="share learned facts and probes across replicas through Redis; "
             "redis://[user:password@]host:6379/0 or rediss:// for TLS (TOOLSHIM_REDIS_URL, off)")
    add("--redis-prefix", metavar="PREFIX",
        help="namespace for toolshim's Redis keys (TOOLSHIM_REDIS_PREFIX, default toolshim:)")
    add("--shared-limits", action="store_true", default=None,
        help="make --max-concurrency and the queue fleet-wide through Redis "
             "(TOOLSHIM_SHARED_LIMITS)")
    add("--max-learned", type=int,
        help="learned: entries kept, oldest removed first (TOOLSHIM_MAX_LEARNED, default 5000)")
    add("--max-capabilities-bytes", type=int,
        help="largest capabilities file loaded (TOOLSHIM_MAX_CAPABILITIES_BYTES, 4 MiB)")
    add("--log-level", choices=["debug", "info", "warning", "error"], help="TOOLSHIM_LOG_LEVEL")
    add("--log-format", choices=["json", "text"], help="TOOLSHIM_LOG_FORMAT (default json)")
    add("--log-prompts", action="store_true", default=None,
        help="log whole prompts at debug level (TOOLSHIM_LOG_PROMPTS)")
    add("--workers", type=int,
        help="worker processes; they share what they learn through the capabilities file "
             "(TOOLSHIM_WORKERS, default 1)")
    add("--client-timeout", type=float,
        help="seconds a client has to send its request headers, and again its body, before "
             "a 408 (TOOLSHIM_CLIENT_TIMEOUT, default 60)")
    add("--recent-requests", type=int,
        help="finished requests the console keeps in memory (TOOLSHIM_RECENT_REQUESTS, 200)")
    add("--min-validation", type=float, metavar="F",
        help="models whose recorded validation passed/total is below F get requests with "
             "tools off (TOOLSHIM_MIN_VALIDATION)")
    add("--upstream-kind", dest="upstream_kinds", action="append", metavar="URL=KIND",
        help="ollama or openai: skip asking URL's /api/version; repeatable "
             "(TOOLSHIM_UPSTREAM_KIND, comma-separated)")
    add("--ollama-default-ctx", type=int,
        help="context window Ollama gives a model nobody sized, for num_ctx: auto "
             "(TOOLSHIM_OLLAMA_DEFAULT_CTX, default 4096)")
    add("--responses-store-size", type=int,
        help="responses kept for previous_response_id and GET; 0 keeps none "
             "(TOOLSHIM_RESPONSES_STORE_SIZE, default 1000)")
    add("--responses-store-mb", type=float, metavar="MB",
        help="memory the stored responses may take, oldest dropped first; a response larger "
             "than this is not stored (TOOLSHIM_RESPONSES_STORE_MB, default 256)")
    add("--responses-ttl", type=float,
        help="seconds a stored response is kept (TOOLSHIM_RESPONSES_TTL, default 3600)")
    add("--ca-bundle", metavar="FILE",
        help="PEM file of the CAs that upstream TLS certificates must chain to, instead of "
             "the default roots (TOOLSHIM_CA_BUNDLE; else SSL_CERT_FILE is honoured)")
    add("--upstream-transport", dest="upstream_transports", action="append",
        metavar="URL=TRANSPORT",
        help="httpx or wire for that upstream; default httpx where a proxy from "
             "HTTP(S)_PROXY applies, wire otherwise; repeatable (TOOLSHIM_UPSTREAM_TRANSPORT, "
             "comma-separated)")
    add("--admin-key", dest="admin_keys", action="append", metavar="KEY",
        help="a key for /admin/* and the console; client keys then get 403 there; "
             "repeatable (TOOLSHIM_ADMIN_KEYS, comma-separated)")
    add("--allowed-hosts", dest="allowed_hosts", action="append", metavar="NAMES",
        help="Host names answered on a loopback address besides localhost, 127.0.0.1 and "
             "[::1]; comma-separated, repeatable (TOOLSHIM_ALLOWED_HOSTS)")
    add("--no-fast-paths", dest="fast_paths", action="store_false", default=None,
        help="read every answer the reference way, to bisect a suspected fast-path bug; "
             "the client gets the same bytes, slower (TOOLSHIM_FAST_PATHS=0)")


def _from_env(name: str, raw: str) -> object:
    if name in _LISTS:
        return [p.strip() for p in raw.split(",") if p.strip()]
    if name in _PAIRS:
        return [p.strip() for p in raw.split(",") if p.strip()]
    if name in _BOOLS:
        return raw.strip().lower() in {"1", "true", "yes", "on"}
    return raw


def _pairs(items: Sequence[str], what: str) -> list[tuple[str, str]]:
    out = []
    for item in items:
        left, sep, right = item.partition("=")
        if not sep or not left.strip() or not right.strip():
            raise SettingsError(f"{what} must look like LEFT=RIGHT, got {item!r}")
        out.append((left.strip(), right.strip()))
    return out


class SettingsError(ValueError):
    pass


def load_settings(args: argparse.Namespace | None = None,
                  environ: Mapping[str, str] | None = None) -> Settings:
    """Merge flags over env over defaults; raise SettingsError with a readable message
    that names each bad value the way it was given: its flag, or its env variable."""
    env = os.environ if environ is None else environ
    values: dict[str, object] = {}
    names: dict[str, str] = {}
    for name, env_name in ENV_NAMES.items():
        if env.get(env_name, "").strip():
            values[name] = _from_env(name, env[env_name])
            names[name] = env_name
    for name in ENV_NAMES:
        flag = getattr(args, name, None) if args is not None else None
        if flag is not None:
            values[name] = flag
            names[name] = flag_name(name)
    try:
        for name, what in _PAIR_WHAT.items():
            if name in values:
                values[name] = _split_pairs(name, values[name], what)  # type: ignore[arg-type]
    except ValueError as exc:
        raise SettingsError(f"{names[name]}: {exc}") from None
    try:
        return Settings.model_validate(values)
    except ValidationError as exc:
        raise SettingsError(_describe(exc, names)) from None


_PAIR_WHAT = {"routes": "a route", "upstream_key_envs": "an upstream key",
              "upstream_kinds": "an upstream kind",
              "upstream_transports": "an upstream transport", "aliases": "an alias"}
_FLAGS = {"upstreams": "--upstream", "routes": "--route", "api_keys": "--api-key",
          "upstream_key_envs": "--upstream-key-env", "upstream_kinds": "--upstream-kind",
          "probe": "--no-probe", "admin_keys": "--admin-key",
          "upstream_transports": "--upstream-transport", "aliases": "--alias"}


def flag_name(name: str) -> str:
    """The command-line flag that sets Settings field `name`."""
    return _FLAGS.get(name) or "--" + name.replace("_", "-")


def _split_pairs(name: str, items: Sequence[str], what: str) -> list[object]:
    if name == "aliases":
        return list(_aliases(items))
    pairs = _pairs(items, what)
    if name == "routes":
        return [Route(pattern=p, upstream=upstream_root(u)) for p, u in pairs]
    if name in ("upstream_kinds", "upstream_transports"):
        return [(upstream_root(u), k.lower()) for u, k in pairs]
    return [(upstream_root(u), e) for u, e in pairs]


def _describe(exc: ValidationError, names: Mapping[str, str]) -> str:
    parts = []
    for err in exc.errors():
        field = str(err["loc"][0]) if err["loc"] else "settings"
        name = names.get(field) or ENV_NAMES.get(field, field)
        parts.append(f"{name}: {err['msg'].removeprefix('Value error, ')}")
    return "; ".join(parts)


def _aliases(items: Sequence[str]) -> list[tuple[str, str]]:
    pairs = _pairs(items, "an alias")
    for pattern, model in pairs:
        if any(c in model for c in "*?["):
            raise SettingsError(f"alias {pattern!r}: must name one model, not a glob: {model!r}")
    return pairs


SETTINGS_ENV = "TOOLSHIM_SETTINGS_JSON"
"""the parent's resolved settings, handed to worker processes (`--workers N`)."""


def settings_from_env() -> Settings:
    """A worker's settings: what its parent resolved, else the TOOLSHIM_* variables."""
    raw = os.environ.get(SETTINGS_ENV)
    return Settings.model_validate_json(raw) if raw else load_settings(None)
