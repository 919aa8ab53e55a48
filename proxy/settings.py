"""Deployment settings: the frozen `Settings` and the values it normalizes.

Owns every deployment field with its default and bounds, the normal forms of
what they hold (an upstream's root URL, a host name), an upstream's API URL,
a URL with its credentials hidden, and the secrets the process holds (what
logs and answers mask). Where values come from (flags, TOOLSHIM_* variables,
the parent's JSON) is settings_sources.py's. Must not: read flags or the
environment for a field, or know what a *model* can do (capabilities.yaml
does); upstream URLs come only from here, never from a request.
"""

from __future__ import annotations

import base64
import os
from typing import Literal
from urllib.parse import unquote, urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

DEFAULT_UPSTREAM = "http://127.0.0.1:11434"


class Route(BaseModel):
    """Explicit routing: model names matching `pattern` (fnmatch) go to `upstream`."""

    model_config = ConfigDict(frozen=True)
    pattern: str
    upstream: str


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True)

    host: str = "127.0.0.1"
    port: int = Field(8080, ge=1, le=65535)
    upstreams: tuple[str, ...] = (DEFAULT_UPSTREAM,)
    routes: tuple[Route, ...] = ()
    upstream_key_envs: tuple[tuple[str, str], ...] = ()
    """(upstream root URL, name of the env variable holding its API key)."""
    capabilities: str = "./capabilities.yaml"
    api_keys: tuple[str, ...] = Field(default=(), repr=False)
    protect_metrics: bool = False
    connect_timeout: float = Field(10.0, gt=0)
    # Ollama loads a model on the first request, which takes minutes on a cold
    # GPU box: the read timeout is the gap allowed between bytes, not the total.
    read_timeout: float = Field(600.0, gt=0)
    max_body_bytes: int = Field(32 * 1024 * 1024, gt=0)
    max_concurrency: int = Field(1024, gt=0)
    max_queue: int = Field(1024, ge=0)
    queue_timeout: float = Field(30.0, gt=0)
    shutdown_grace: float = Field(30.0, ge=0)
    probe: bool = True
    probe_timeout: float = Field(2.0, gt=0)
    reload_interval: float = Field(1.0, ge=0)
    redis_url: str | None = Field(None, repr=False)
    """Share learned facts, probe turns (and with shared_limits the limits) through Redis."""
    redis_prefix: str = Field("toolshim:", min_length=1)
    shared_limits: bool = False
    max_learned: int = Field(5000, ge=1)
    """learned: entries kept; past it the oldest are removed."""
    max_capabilities_bytes: int = Field(4 * 1024 * 1024, gt=0)
    """A larger capabilities file is a reload error (the last good version stays)."""
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_format: Literal["json", "text"] = "json"
    log_prompts: bool = False
    workers: int = Field(1, ge=1, le=64)
    client_timeout: float = Field(60.0, gt=0)
    """seconds a client has to send a request's headers, and again its whole body."""
    recent_requests: int = Field(200, ge=0, le=100_000)
    """how many finished requests the console keeps in memory."""
    min_validation: float | None = Field(None, ge=0, le=1)
    """send tools-off to models whose recorded validation passed/total is below this."""
    fast_paths: bool = True
    """off: every answer read by the reference translators alone (to bisect a fast-path bug)."""

    @field_validator("redis_url")
    @classmethod
    def _redis_scheme(cls, value: str | None) -> str | None:
        if value and not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("must start with redis://, rediss:// or unix://")
        return value or None

    @model_validator(mode="after")
    def _shared_limits_need_redis(self) -> Settings:
        if self.shared_limits and not self.redis_url:
            raise ValueError("TOOLSHIM_SHARED_LIMITS needs TOOLSHIM_REDIS_URL (--redis-url)")
        return self
    upstream_kinds: tuple[tuple[str, Literal["ollama", "openai"]], ...] = ()
    """(upstream root URL, kind): overrides asking the upstream's /api/version."""
    ollama_default_ctx: int = Field(4096, gt=0)
    """The window Ollama loads a model with when nobody asked for one (num_ctx: auto)."""
    responses_store_size: int = Field(1000, ge=0)
    responses_store_mb: float = Field(256.0, ge=0)
    """megabytes (MiB) the stored responses may take, besides their count."""
    responses_ttl: float = Field(3600.0, gt=0)
    ca_bundle: str | None = None
    """PEM file of the CAs upstream certificates must chain to (instead of the defaults)."""
    upstream_transports: tuple[tuple[str, Literal["httpx", "wire"]], ...] = ()
    """(upstream root URL, transport): overrides the choice backends/egress.py makes."""

    @field_validator("ca_bundle")
    @classmethod
    def _readable_bundle(cls, value: str | None) -> str | None:
        if value and not os.path.isfile(value):
            raise ValueError(f"no such file: {value}")
        return value or None

    # Who may act (docs/security.md): admin keys, and the Host names a loopback listener answers.
    admin_keys: tuple[str, ...] = Field(default=(), repr=False)
    """keys for /admin/* and the console's API; when set, client keys get 403 there."""
    allowed_hosts: tuple[str, ...] = ()
    """Host names (any port) accepted on a loopback address besides localhost, 127.0.0.1
    and [::1]; `*` accepts any."""

    @field_validator("allowed_hosts")
    @classmethod
    def _host_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        names = (host_name(part) for v in value for part in v.split(",") if part.strip())
        return tuple(dict.fromkeys(names))

    aliases: tuple[tuple[str, str], ...] = ()
    """(model name or glob, served model); over capabilities.yaml's `aliases:`."""

    @field_validator("upstreams")
    @classmethod
    def _roots(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("at least one upstream URL is required")
        return tuple(dict.fromkeys(upstream_root(v) for v in value))

    def all_upstreams(self) -> tuple[str, ...]:
        extra = (upstream_root(r.upstream) for r in self.routes)
        return tuple(dict.fromkeys((*self.upstreams, *extra)))

    def key_env_for(self, root: str) -> str | None:
        return dict(self.upstream_key_envs).get(root)

    def transport_for(self, root: str) -> Literal["httpx", "wire"] | None:
        """The transport --upstream-transport set for `root`, else None (egress decides)."""
        return dict(self.upstream_transports).get(root)

    def kind_for(self, root: str) -> str | None:
        """"ollama" / "openai" when set by --upstream-kind, else None (ask the upstream)."""
        return dict(self.upstream_kinds).get(root)


def redact_url(url: str) -> str:
    """`http://user:secret@host:1/x` -> `http://host:1/x`: credentials never get shown."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def host_name(entry: str) -> str:
    """An --allowed-hosts entry, lower-cased; a name or address without scheme or port."""
    name = entry.strip().lower().rstrip(".")
    bare = name.removeprefix("[").removesuffix("]")
    if name != "*" and (not name or "/" in name or "@" in name
                        or (":" in name and not (name.startswith("[") and name.endswith("]")))
                        or not all(c.isalnum() or c in "-._:" for c in bare)):
        raise ValueError(f"a host name without scheme or port (IPv6 in brackets), got {entry!r}")
    return name


def upstream_root(url: str) -> str:
    """`http://host:11434/v1/` -> `http://host:11434`: Ollama's root and /v1 both work."""
    url = url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"upstream URL must start with http:// or https://: {url!r}")
    return url.removesuffix("/v1")


def api_url(root: str, path: str) -> str:
    """`root` + an OpenAI API path (`/v1/chat/completions`). A base that ends in `/openai`
    is an OpenAI-compatible API mounted under its own version (Google's
    `https://generativelanguage.googleapis.com/v1beta/openai`, whose chat endpoint is
    `…/openai/chat/completions`): its paths come without `/v1`."""
    if root.endswith("/openai") and path.startswith("/v1/"):
        return root + path[3:]
    return root + path


def secrets(settings: Settings) -> list[str]:
    """Every key the process holds, so logs, client answers and the console can mask it
    wherever it shows up (observability/redact.py)."""
    keys = [*settings.api_keys, *settings.admin_keys]
    keys.extend(os.environ.get(env, "") for _, env in settings.upstream_key_envs)
    if settings.redis_url:
        keys.append(urlsplit(settings.redis_url).password or "")
    for root in settings.all_upstreams():
        keys.extend(url_credentials(root))
    return [k for k in keys if k]


def url_credentials(url: str) -> list[str]:
    """The password of `http://user:password@host` as written and decoded, and the Basic
    credentials sent for it (base64 of user:password, as backends/upstream.py sends them):
    what an upstream that repeats its Authorization header would show."""
    parts = urlsplit(url)
    if parts.password is None:
        return []
    user, password = unquote(parts.username or ""), unquote(parts.password)
    basic = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    return [parts.password, password, basic]
