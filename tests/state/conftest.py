"""The Redis state tests' client on the test's own redis-server (tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from support.redis_server import RedisServer


@pytest.fixture
def rdb(redis_server: RedisServer) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_server.url)
    yield client
    client.close()
