"""Which way traffic leaves for an upstream: the proxy httpx itself would use (checked
against httpx's own reading of the environment), the transport that follows, the CA
file that is loaded, and the settings that steer them."""

from __future__ import annotations

import argparse
import logging
import os
import ssl
import subprocess
import sys
from pathlib import Path
from unittest import mock

import httpx
import pytest
import trustme
from httpx._utils import URLPattern, get_environment_proxies
from hypothesis import given
from hypothesis import strategies as st

from proxy.backends.egress import (
    Egress,
    EgressError,
    choose_egress,
    egress_plan,
    proxy_for,
    tls_context,
)
from proxy.settings import Settings
from proxy.settings_sources import SettingsError, add_arguments, load_settings


def _httpx_proxy_for(url: str, env: dict[str, str]) -> str | None:
    """httpx's own answer (the mounts its clients build with trust_env), as the oracle."""
    with mock.patch.dict(os.environ, env, clear=True):
        mounts = sorted((URLPattern(k), v) for k, v in get_environment_proxies().items())
    for pattern, proxy in mounts:
        if pattern.matches(httpx.URL(url)):
            return proxy
    return None


_NAMES = ["http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"]
_PROXIES = ["http://p1:3128", "p2:8080", "https://user:pw@p3:443", ""]
_NO_PROXY = ["localhost", "127.0.0.1", "::1", "example.com", ".example.com", "*", "internal",
             "10.0.0.1", "http://example.com", "api.example.com:443", "LOCALHOST", " ",
             "192.168.0.0/16", "*.lan"]
_HOSTS = ["127.0.0.1", "localhost", "example.com", "api.example.com", "wwwexample.com",
          "10.0.0.1", "[::1]", "box.lan", "internal", "gpu.internal"]


@st.composite
def _environments(draw: st.DrawFn) -> dict[str, str]:
    env = {name: draw(st.sampled_from(_PROXIES))
           for name in draw(st.lists(st.sampled_from(_NAMES), max_size=4, unique=True))}
    if draw(st.booleans()):
        name = draw(st.sampled_from(["no_proxy", "NO_PROXY"]))
        env[name] = ",".join(draw(st.lists(st.sampled_from(_NO_PROXY), max_size=4)))
    if draw(st.booleans()):
        env["REQUEST_METHOD"] = "GET"  # under CGI an upper-case HTTP_PROXY is not trusted
    return env


@given(env=_environments(), scheme=st.sampled_from(["http", "https"]),
       host=st.sampled_from(_HOSTS), port=st.sampled_from(["", ":443", ":11434"]))
def test_the_proxy_is_the_one_httpx_would_use(env: dict[str, str], scheme: str, host: str,
                                              port: str) -> None:
    url = f"{scheme}://{host}{port}"
    assert proxy_for(url, env) == _httpx_proxy_for(url, env)


def test_loopback_is_not_left_out_of_the_proxy_by_default() -> None:
    """As httpx: nothing is implicitly direct; NO_PROXY must name localhost or the IP."""
    env = {"HTTP_PROXY": "http://proxy:3128"}
    assert proxy_for("http://127.0.0.1:11434", env) == "http://proxy:3128"
    assert proxy_for("http://127.0.0.1:11434", {**env, "NO_PROXY": "localhost"}) \
        == "http://proxy:3128"  # a name is not its address
    assert proxy_for("http://127.0.0.1:11434", {**env, "NO_PROXY": "127.0.0.1"}) is None


def test_lower_case_wins_and_an_empty_lower_case_one_unsets() -> None:
    env = {"HTTPS_PROXY": "http://upper:1", "https_proxy": "http://lower:1"}
    assert proxy_for("https://api.example.com", env) == "http://lower:1"
    assert proxy_for("https://api.example.com", {**env, "https_proxy": ""}) is None


@pytest.mark.parametrize(("root", "env", "forced", "expected"), [
    ("http://127.0.0.1:11434", {}, None, Egress("wire")),
    ("http://gpu.lan:8000", {"NO_PROXY": "gpu.lan", "HTTP_PROXY": "http://p:1"}, None,
     Egress("wire")),
    ("https://openrouter.ai/api", {}, None, Egress("wire")),
    ("https://openrouter.ai/api", {"HTTPS_PROXY": "http://p:1"}, None,
     Egress("httpx", "http://p:1")),
    ("http://gpu.lan:8000", {"HTTP_PROXY": "http://p:1"}, None, Egress("httpx", "http://p:1")),
    ("http://gpu.lan:8000", {"HTTPS_PROXY": "http://p:1"}, None, Egress("wire")),
    ("http://gpu.lan:8000", {"HTTP_PROXY": "http://p:1"}, "wire",
     Egress("wire", ignored_proxy="http://p:1")),
    ("http://127.0.0.1:11434", {}, "httpx", Egress("httpx")),
    ("https://vllm.corp:443", {}, "wire", Egress("wire")),
])
def test_the_transport_follows_proxies_unless_forced(
        root: str, env: dict[str, str], forced: str | None, expected: Egress) -> None:
    assert choose_egress(root, env, forced) == expected  # type: ignore[arg-type]


def test_a_ca_bundle_replaces_the_default_roots(tmp_path: Path) -> None:
    ca = trustme.CA()
    bundle = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    other = tmp_path / "other.pem"
    trustme.CA().cert_pem.write_to_path(str(other))
    assert len(tls_context(str(bundle), {"SSL_CERT_FILE": str(other)}).get_ca_certs()) == 1
    from_env = tls_context(None, {"SSL_CERT_FILE": str(other)})
    assert len(from_env.get_ca_certs()) == 1 and from_env.verify_mode == ssl.CERT_REQUIRED
    assert len(tls_context(None, {}).get_ca_certs()) > 50  # certifi's public roots


def test_a_missing_cert_file_stops_the_start_with_its_name(caplog: pytest.LogCaptureFixture,
                                                          ) -> None:
    settings = Settings(upstreams=("https://api.example.com",))
    with pytest.raises(EgressError, match="/nowhere/ca.pem"):
        egress_plan(settings, {"SSL_CERT_FILE": "/nowhere/ca.pem"}, logging.getLogger("t"))


def test_the_plan_says_what_it_chose(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    settings = Settings(upstreams=("http://gpu.lan:8000", "http://127.0.0.1:11434"),
                        upstream_transports=(("http://gpu.lan:8000", "wire"),))
    env = {"HTTP_PROXY": "http://user:s3cret@proxy:3128", "NO_PROXY": "127.0.0.1"}
    plan = egress_plan(settings, env, logging.getLogger("t"))
    assert plan["http://127.0.0.1:11434"] == (Egress("wire"), None)
    (line,) = [r for r in caplog.records if "gpu.lan" in r.getMessage()]
    assert line.levelno == logging.WARNING and "cannot use the proxy" in line.getMessage()
    assert "s3cret" not in line.getMessage()


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


def test_the_settings_names(tmp_path: Path) -> None:
    bundle = tmp_path / "ca.pem"
    bundle.write_text("")
    env = {"TOOLSHIM_CA_BUNDLE": str(bundle),
           "TOOLSHIM_UPSTREAM_TRANSPORT": "http://a:1/v1=httpx, https://b:2=WIRE"}
    s = load_settings(_args(), env)
    assert s.ca_bundle == str(bundle)
    assert s.upstream_transports == (("http://a:1", "httpx"), ("https://b:2", "wire"))
    assert s.transport_for("http://a:1") == "httpx" and s.transport_for("http://c:1") is None
    flags = load_settings(_args("--upstream-transport", "http://c:1=wire",
                                "--upstream-transport", "http://d:1=httpx"), env)
    assert flags.upstream_transports == (("http://c:1", "wire"), ("http://d:1", "httpx"))


@pytest.mark.parametrize(("env", "named"), [
    ({"TOOLSHIM_UPSTREAM_TRANSPORT": "http://a:1=aiohttp"}, "TOOLSHIM_UPSTREAM_TRANSPORT"),
    ({"TOOLSHIM_UPSTREAM_TRANSPORT": "httpx"}, "upstream transport"),
    ({"TOOLSHIM_CA_BUNDLE": "/nowhere/ca.pem"}, "TOOLSHIM_CA_BUNDLE"),
])
def test_bad_egress_settings_are_readable_errors(env: dict[str, str], named: str) -> None:
    with pytest.raises(SettingsError, match=named):
        load_settings(_args(), env)


def test_a_proxy_httpx_cannot_use_stops_the_start_with_a_hint() -> None:
    settings = Settings(upstreams=("http://gpu.lan:8000",))
    with pytest.raises(EgressError, match=r"pip install 'httpx\[socks\]'") as info:
        egress_plan(settings, {"ALL_PROXY": "socks5://u:s3cret@127.0.0.1:1080"}, None)
    assert "s3cret" not in str(info.value)


@pytest.mark.parametrize(("env", "said"), [
    ({"SSL_CERT_FILE": "/nowhere/ca.pem"}, "cannot load the CA certificates in /nowhere/ca.pem"),
    ({"HTTPS_PROXY": "ftp://proxy:21"}, "is not an http:// or https:// URL"),
])
def test_the_command_refuses_to_start_with_a_way_out_that_cannot_work(
        env: dict[str, str], said: str, tmp_path: Path) -> None:
    clean = {k: v for k, v in os.environ.items()
             if not k.lower().endswith("_proxy") and not k.startswith("SSL_CERT")}
    done = subprocess.run(
        [sys.executable, "-m", "proxy", "--upstream", "https://api.example.com",
         "--capabilities", str(tmp_path / "c.yaml"), "--port", "1"],
        env={**clean, **env}, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert said in done.stderr
