"""deploy/: the compose file and Kubernetes manifests refer to things that exist.

Parsed, not run: ports line up, every TOOLSHIM_* name is a real setting and the
values load, Redis and Ollama URLs name a service that listens there, probe
paths are routes of the app, volumes and ConfigMaps are declared.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from ruamel.yaml import YAML
from starlette.routing import Route

from proxy.app import create_app
from proxy.settings import ENV_NAMES, Settings, load_settings

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
ROUTES = {r.path for r in create_app(Settings()).routes if isinstance(r, Route)}


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in YAML(typ="safe").load_all(path.read_text()) if d]


def _check_env(env: dict[str, str]) -> Settings:
    unknown = [name for name in env if name.startswith("TOOLSHIM_")
               and name not in ENV_NAMES.values()]
    assert not unknown, f"not settings: {unknown}"
    return load_settings(None, environ=env)


# --- compose ------------------------------------------------------------------

def test_compose_replicas_reach_ollama_and_redis() -> None:
    compose = _docs(DEPLOY / "compose.yaml")[0]
    services = compose["services"]
    replicas = [s for s in services.values() if "build" in s]
    assert len(replicas) == 2
    for service in replicas:
        assert (DEPLOY / service["build"]["context"] / "Dockerfile").is_file()
        settings = _check_env(service["environment"])
        published = {int(p.split(":")[1]) for p in service["ports"]}
        assert published == {settings.port}
        upstream = urlsplit(settings.upstreams[0])
        assert upstream.hostname == "ollama" and upstream.port == 11434
        assert "ollama" in services and "ollama" in service["depends_on"]
        redis = urlsplit(settings.redis_url or "")
        assert redis.hostname in services and redis.port == 6379
        assert services[redis.hostname]["image"].startswith("redis")
        assert settings.shared_limits
        for volume in service["volumes"]:
            assert volume.split(":")[0] in compose["volumes"]
    assert len({s["volumes"][0] for s in replicas}) == 2  # each its own file


# --- kubernetes -----------------------------------------------------------------

def _manifests() -> list[dict[str, Any]]:
    docs = []
    for path in sorted((DEPLOY / "kubernetes").glob("*.yaml")):
        docs.extend(_docs(path))
    return docs


def _of_kind(kind: str) -> list[dict[str, Any]]:
    return [d for d in _manifests() if d["kind"] == kind]


def _container(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    for deployment in _of_kind("Deployment"):
        pod = deployment["spec"]["template"]
        for container in pod["spec"]["containers"]:
            if container["name"] == name:
                return pod, container
    raise AssertionError(f"no container {name}")


def _service_port(name: str) -> int:
    for service in _of_kind("Service"):
        if service["metadata"]["name"] == name:
            return int(service["spec"]["ports"][0]["port"])
    raise AssertionError(f"no Service {name}")


def test_every_service_selects_a_pod_and_targets_a_container_port() -> None:
    services = _of_kind("Service")
    assert services
    for service in services:
        matched = [d for d in _of_kind("Deployment") if all(
            d["spec"]["template"]["metadata"]["labels"].get(k) == v
            for k, v in service["spec"]["selector"].items())]
        assert matched, service["metadata"]["name"]
        pod_ports = {p["containerPort"] for d in matched
                     for c in d["spec"]["template"]["spec"]["containers"] for p in c["ports"]}
        for port in service["spec"]["ports"]:
            assert port["targetPort"] in pod_ports
        for deployment in matched:
            assert deployment["spec"]["selector"]["matchLabels"].items() <= \
                deployment["spec"]["template"]["metadata"]["labels"].items()


def _expanded_env(container: dict[str, Any], secrets: dict[str, str]) -> dict[str, str]:
    """A container's env as Kubernetes sets it: secretKeyRef values from `secrets`, and
    `$(NAME)` expanded from the variables defined above it (only those, in order)."""
    env: dict[str, str] = {}
    for entry in container.get("env", []):
        if "valueFrom" in entry:
            ref = entry["valueFrom"]["secretKeyRef"]
            env[entry["name"]] = secrets[f"{ref['name']}/{ref['key']}"]
        else:
            env[entry["name"]] = re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                                        lambda m: env.get(m.group(1), m.group(0)), entry["value"])
    return env


SECRETS = {"toolshim-redis/password": "pw-0123abcd"}


def test_the_sidecar_reaches_ollama_in_its_pod_and_redis_by_service() -> None:
    pod, toolshim = _container("toolshim")
    env = {k: v for k, v in _expanded_env(toolshim, SECRETS).items()
           if k.startswith("TOOLSHIM_")}
    settings = _check_env(env)
    assert [p["containerPort"] for p in toolshim["ports"]] == [settings.port]
    upstream = urlsplit(settings.upstreams[0])
    ollama_ports = [p["containerPort"] for c in pod["spec"]["containers"]
                    if c["name"] == "ollama" for p in c["ports"]]
    assert upstream.hostname == "127.0.0.1" and upstream.port in ollama_ports
    redis = urlsplit(settings.redis_url or "")
    assert redis.port == _service_port(str(redis.hostname))
    mounts = {m["mountPath"]: m["name"] for m in toolshim["volumeMounts"]}
    assert str(Path(settings.capabilities).parent) in mounts


@pytest.mark.parametrize("probe", ["readinessProbe", "livenessProbe"])
def test_health_probes_hit_real_routes_on_the_right_port(probe: str) -> None:
    _, toolshim = _container("toolshim")
    get = toolshim[probe]["httpGet"]
    assert get["path"] in ROUTES
    assert get["port"] in {p["containerPort"] for p in toolshim["ports"]}


def test_volumes_and_config_maps_are_declared() -> None:
    config_maps = {d["metadata"]["name"] for d in _of_kind("ConfigMap")}
    for deployment in _of_kind("Deployment"):
        spec = deployment["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for container in [*spec.get("initContainers", []), *spec["containers"]]:
            for mount in container.get("volumeMounts", []):
                assert mount["name"] in volumes
        for volume in volumes.values():
            if "configMap" in volume:
                assert volume["configMap"]["name"] in config_maps


def interpolate(text: str, env: dict[str, str]) -> str:
    """Compose's `${NAME}` and `${NAME:?message}`: a missing NAME fails, as compose does."""
    def value(match: re.Match[str]) -> str:
        name, required = match.group(1), match.group(2) is not None
        if name not in env:
            assert not required, f"compose would refuse to start without {name}"
            return ""
        return env[name]
    return re.sub(r"\$\{([A-Z_]+)(:\?[^}]*)?\}", value, text)


def test_compose_redis_requires_a_password_the_replicas_send() -> None:
    raw = (DEPLOY / "compose.yaml").read_text()
    with pytest.raises(AssertionError, match="refuse to start without REDIS_PASSWORD"):
        interpolate(raw, {})
    compose = YAML(typ="safe").load(interpolate(raw, {"REDIS_PASSWORD": "pw-0123abcd"}))
    command = compose["services"]["redis"]["command"]
    assert command[command.index("--requirepass") + 1] == "pw-0123abcd"
    for service in (s for s in compose["services"].values() if "build" in s):
        url = _check_env(service["environment"]).redis_url or ""
        assert urlsplit(url).password == "pw-0123abcd"



def test_kubernetes_redis_requires_the_password_the_sidecars_send() -> None:
    _, redis = _container("redis")
    env = _expanded_env(redis, SECRETS)
    args = [re.sub(r"\$\(([A-Z_]+)\)", lambda m: env[m.group(1)], a) for a in redis["args"]]
    assert args[args.index("--requirepass") + 1] == "pw-0123abcd"
    _, toolshim = _container("toolshim")
    url = _check_env({k: v for k, v in _expanded_env(toolshim, SECRETS).items()
                      if k.startswith("TOOLSHIM_")}).redis_url or ""
    assert urlsplit(url).password == "pw-0123abcd"
