"""The record store tests' fixtures: a `redis-server` of the test's own (`redis_server.py`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .redis_server import RedisServer, running_server


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A `redis-server` on a free loopback port, empty, stopped after the test; skipped where none is installed."""
    yield from running_server(tmp_path)
