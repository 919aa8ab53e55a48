"""Settings -> which shared state and limiter; the new settings' contract."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import pytest
from pydantic import ValidationError

from proxy.capabilities.learning import LearnedFact
from proxy.settings import Settings, secrets
from proxy.settings_sources import ENV_NAMES, SettingsError, load_settings
from proxy.state import MemoryState, build_state
from proxy.state.limits import Limiter
from proxy.state.redis_state import RedisState
from proxy.state.semaphore import SharedLimiter


class Sink:
    def __init__(self) -> None:
        self.facts: list[LearnedFact] = []

    def record(self, facts: Sequence[LearnedFact]) -> None:
        self.facts.extend(facts)


def _build(settings: Settings) -> tuple[object, Limiter]:
    return build_state(settings, Sink(), Limiter(4, 4, 1.0), logging.getLogger("test"))


def test_env_names_are_the_contract() -> None:
    assert ENV_NAMES["redis_url"] == "TOOLSHIM_REDIS_URL"
    assert ENV_NAMES["redis_prefix"] == "TOOLSHIM_REDIS_PREFIX"
    assert ENV_NAMES["shared_limits"] == "TOOLSHIM_SHARED_LIMITS"
    settings = load_settings(None, environ={"TOOLSHIM_REDIS_URL": "rediss://u:p@r:6380/1",
                                             "TOOLSHIM_REDIS_PREFIX": "fleet1:",
                                             "TOOLSHIM_SHARED_LIMITS": "true"})
    assert (settings.redis_url, settings.redis_prefix, settings.shared_limits) == \
        ("rediss://u:p@r:6380/1", "fleet1:", True)
    assert "u:p@" not in repr(settings)


def test_defaults_need_no_redis() -> None:
    settings = load_settings(None, environ={})
    assert settings.redis_url is None and settings.redis_prefix == "toolshim:"
    state, limiter = _build(settings)
    assert isinstance(state, MemoryState) and type(limiter) is Limiter
    assert state.status() == "off"


@pytest.mark.parametrize(("env", "message"), [
    ({"TOOLSHIM_SHARED_LIMITS": "1"}, "needs TOOLSHIM_REDIS_URL"),
    ({"TOOLSHIM_REDIS_URL": "http://redis:6379"}, "TOOLSHIM_REDIS_URL: .*redis://"),
])
def test_bad_redis_settings_are_refused_clearly(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        load_settings(None, environ=env)


def test_an_empty_prefix_is_refused() -> None:
    with pytest.raises(ValidationError, match="redis_prefix"):
        Settings(redis_url="redis://r", redis_prefix="")


async def test_redis_url_picks_redis_state_and_shared_limits_the_limiter() -> None:
    shared = Settings(redis_url="redis://127.0.0.1:1/0", shared_limits=True)
    state, limiter = _build(shared)
    assert isinstance(state, RedisState) and isinstance(limiter, SharedLimiter)
    assert state.prefix == "toolshim:"
    await state.client.aclose()
    state, limiter = _build(Settings(redis_url="redis://127.0.0.1:1/0"))
    assert isinstance(state, RedisState) and type(limiter) is Limiter
    await state.client.aclose()


def test_the_redis_password_is_masked_in_logs() -> None:
    assert "hunter2" in secrets(Settings(redis_url="redis://app:hunter2@redis:6379/0"))


async def test_memory_state_probes_locally_and_shares_nothing() -> None:
    state = MemoryState()
    await state.start()
    async with state.probe_turn("m") as ours:
        assert ours
    await state.share([LearnedFact("m", {"tools": "off"}, "probe", "2026-11-24T10:00:00Z")])
    await state.close()


def test_worker_processes_mask_the_same_secrets_as_the_parent(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # `--workers N` starts each worker through app.from_env: its log formatter must
    # know the Redis password and upstream keys too, not only the proxy's own keys.
    from proxy.app import from_env
    from proxy.observability import logs
    from proxy.settings_sources import SETTINGS_ENV

    seen: list[list[str]] = []
    monkeypatch.setattr(logs, "setup_logging", lambda level, fmt, keys=(): seen.append(list(keys)))
    monkeypatch.setenv("MY_UPSTREAM_KEY", "sk-upstream-0000")
    settings = Settings(redis_url="redis://app:hunter2@redis:6379/0", api_keys=["sk-own-1234"],
                        upstream_key_envs=[("http://127.0.0.1:11434", "MY_UPSTREAM_KEY")])
    monkeypatch.setenv(SETTINGS_ENV, settings.model_dump_json())
    from_env()
    assert seen and {"hunter2", "sk-own-1234", "sk-upstream-0000"} <= set(seen[0])
