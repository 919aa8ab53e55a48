"""How traffic leaves for an upstream: through which HTTP proxy, trusting which CAs,
over which transport. Decided once per upstream at start-up, never per request.

Proxies follow the environment exactly as httpx (and so the OpenAI SDKs) read it:
`http_proxy` / `https_proxy` / `all_proxy` and `no_proxy`, lower case winning over
upper case (urllib's `getproxies_environment`), `NO_PROXY` entries matched as
httpx matches them (curl's rules: `example.com` also covers its subdomains,
`.example.com` only them, `localhost`, IPs, `*` for everything). Nothing is left
out of the proxy by default: `127.0.0.1` and `localhost` go through it unless
`NO_PROXY` names them, as with httpx.

Two transports: `wire` (backends/wire.py, ours: lean and fast, plain HTTP/1.1
with TLS but no proxy support) and `httpx` (httpx's own, which tunnels through
proxies). An upstream reached over https or through a proxy gets httpx unless
told otherwise (`--upstream-transport URL=wire`); plain http on loopback or a LAN
keeps `wire`.

`choose_egress` and `proxy_for` are pure over the environment they are given;
`tls_context` reads certificate files; `egress_plan` puts them together for the
app's start-up and says what it chose.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.util import find_spec
from ipaddress import IPv4Address, IPv6Address
from re import Pattern, compile, escape
from typing import Literal

import certifi
import httpx

from proxy.settings import Settings, redact_url

Transport = Literal["httpx", "wire"]


@dataclass(frozen=True)
class Egress:
    """One upstream's way out."""

    transport: Transport
    proxy: str | None = None
    """the proxy URL (credentials and all) requests go through, as httpx would pick it."""
    ignored_proxy: str | None = None
    """a proxy that applies but that the forced `wire` transport cannot use."""


def choose_egress(root: str, env: Mapping[str, str], forced: Transport | None) -> Egress:
    """The transport and proxy for `root`: `forced` if given, else httpx when a proxy
    applies (our wire transport speaks no proxy protocol), else wire. An https upstream
    stays on the wire: it does TLS with the same trust (`tls_context`), and httpx's
    transport costs about four times the CPU per request (docs/egress.md)."""
    proxy = proxy_for(root, env)
    transport = forced or ("httpx" if proxy else "wire")
    if transport == "wire":
        return Egress("wire", ignored_proxy=proxy)
    return Egress("httpx", proxy=proxy)


def env_proxies(env: Mapping[str, str]) -> dict[str, str]:
    """scheme -> proxy from `*_proxy` variables, as urllib's `getproxies_environment`:
    any case first, then lower-case names over them (an empty lower-case one unsets);
    under CGI (`REQUEST_METHOD` set) an upper-case `HTTP_PROXY` is a client's header."""
    proxies = {name.lower()[:-6]: value for name, value in env.items()
               if value and name.lower().endswith("_proxy")}
    if "REQUEST_METHOD" in env:
        proxies.pop("http", None)
    for name, value in env.items():
        if name.endswith("_proxy"):
            if value:
                proxies[name.lower()[:-6]] = value
            else:
                proxies.pop(name.lower()[:-6], None)
    return proxies


def proxy_for(url: str, env: Mapping[str, str]) -> str | None:
    """The proxy httpx would send `url` through with these variables, or None."""
    target = httpx.URL(url)
    for pattern, proxy in _mounts(env_proxies(env)):
        if pattern.matches(target):
            return proxy
    return None


@dataclass(frozen=True)
class _Pattern:
    """A mount key as httpx's `URLPattern` reads it: scheme (`all` = any), host (`*x`
    covers x and its subdomains, `*.x` only the subdomains), port."""

    scheme: str
    host: str
    port: int | None
    host_regex: Pattern[str] | None

    @classmethod
    def parse(cls, key: str) -> _Pattern:
        url = httpx.URL(key)
        host = "" if url.host == "*" else url.host
        regex = None
        if host.startswith("*."):
            regex = compile(rf"^.+\.{escape(host[2:])}$")
        elif host.startswith("*"):
            regex = compile(rf"^(.+\.)?{escape(host[1:])}$")
        elif host:
            regex = compile(rf"^{escape(host)}$")
        return cls("" if url.scheme == "all" else url.scheme, host, url.port, regex)

    def priority(self) -> tuple[int, int, int]:
        """Most specific first: with a port, then longer hosts, then longer schemes."""
        return (0 if self.port is not None else 1, -len(self.host), -len(self.scheme))

    def matches(self, url: httpx.URL) -> bool:
        if self.scheme and self.scheme != url.scheme:
            return False
        if self.host_regex is not None and not self.host_regex.match(url.host):
            return False
        return self.port is None or self.port == url.port


def _mounts(proxies: Mapping[str, str]) -> list[tuple[_Pattern, str | None]]:
    """httpx's environment mounts, most specific first; None = no proxy for these."""
    keys: dict[str, str | None] = {}
    for scheme in ("http", "https", "all"):
        if proxies.get(scheme):
            value = proxies[scheme]
            keys[f"{scheme}://"] = value if "://" in value else f"http://{value}"
    for entry in (h.strip() for h in proxies.get("no", "").split(",")):
        if entry == "*":
            return []
        if entry:
            keys[_no_proxy_key(entry)] = None
    mounts = []
    for key, proxy in keys.items():
        try:
            mounts.append((_Pattern.parse(key), proxy))
        except httpx.InvalidURL:
            continue  # an entry no URL can match
    return sorted(mounts, key=lambda mount: mount[0].priority())


def _no_proxy_key(entry: str) -> str:
    if "://" in entry:
        return entry
    if _is_ip(entry, IPv4Address):
        return f"all://{entry}"
    if _is_ip(entry, IPv6Address):
        return f"all://[{entry}]"
    if entry.lower() == "localhost":
        return f"all://{entry}"
    return f"all://*{entry}"


def _is_ip(entry: str, kind: type[IPv4Address | IPv6Address]) -> bool:
    try:
        kind(entry.split("/")[0])
    except ValueError:
        return False
    return True


def tls_context(ca_bundle: str | None, env: Mapping[str, str]) -> ssl.SSLContext:
    """Whom upstream certificates must chain to: `--ca-bundle` if given, else
    `SSL_CERT_FILE` / `SSL_CERT_DIR` as httpx reads them, else certifi's roots.
    A bundle replaces the default roots (as curl's --cacert and httpx's verify do):
    to trust a private CA and public ones, give a file holding both."""
    if ca_bundle:
        return ssl.create_default_context(cafile=ca_bundle)
    if env.get("SSL_CERT_FILE"):
        return ssl.create_default_context(cafile=env["SSL_CERT_FILE"])
    if env.get("SSL_CERT_DIR"):
        return ssl.create_default_context(capath=env["SSL_CERT_DIR"])
    return ssl.create_default_context(cafile=certifi.where())


class EgressError(RuntimeError):
    """A way out that cannot work (a CA file that does not load, a proxy URL httpx cannot
    use): the proxy must not start with it."""


def egress_plan(settings: Settings, env: Mapping[str, str], log: logging.Logger | None,
                ) -> dict[str, tuple[Egress, ssl.SSLContext | None]]:
    """Each upstream's way out and the TLS trust it uses (one context for all, loaded
    only when some upstream or proxy speaks TLS). With `log`, says every choice that is
    not the plain `wire`, and a proxy the forced `wire` transport cannot use; without,
    it only checks (the CLI, before anything starts)."""
    plan = {root: choose_egress(root, env, settings.transport_for(root))
            for root in settings.all_upstreams()}
    tls = None
    if any(root.startswith("https://") or (e.proxy or "").startswith("https://")
           for root, e in plan.items()):
        try:
            tls = tls_context(settings.ca_bundle, env)
        except (OSError, ssl.SSLError) as exc:
            where = settings.ca_bundle or env.get("SSL_CERT_FILE") or env.get("SSL_CERT_DIR")
            raise EgressError(f"cannot load the CA certificates in {where}: {exc}") from None
    for root, egress in plan.items():
        if egress.proxy is not None:
            _check_proxy(root, egress.proxy)
        if log is None:
            continue
        if egress.ignored_proxy is not None:
            log.warning("upstream %s: transport wire cannot use the proxy %s from the "
                        "environment; connecting directly", redact_url(root),
                        redact_url(egress.ignored_proxy))
        elif egress.transport == "httpx":
            via = f" through the proxy {redact_url(egress.proxy)}" if egress.proxy else ""
            log.info("upstream %s: transport httpx%s", redact_url(root), via)
    return {root: (egress, tls) for root, egress in plan.items()}


def _check_proxy(root: str, proxy: str) -> None:
    """httpx takes http:// and https:// proxies, and socks5:// with socksio installed."""
    scheme = proxy.partition("://")[0].lower()
    if scheme in ("socks5", "socks5h") and find_spec("socksio") is not None:
        return
    if scheme not in ("http", "https"):
        hint = " (SOCKS needs: pip install 'httpx[socks]')" if scheme.startswith("socks") \
            else ""
        raise EgressError(f"upstream {redact_url(root)}: the proxy {redact_url(proxy)} from "
                          f"the environment is not an http:// or https:// URL{hint}")
