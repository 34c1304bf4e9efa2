"""A real `redis-server` for `RedisRecordStore`'s tests: started on a free loopback port in a temporary directory, with
no persistence, and stopped, hung or started again as a test says.

Where `redis-server` isn't on `PATH` the tests that need one are skipped, saying why, unless the environment variable
`PYDANTIC_AI_APPEND_REQUIRE_REDIS` is set (`.ci/run` sets it, after `.ci/redis-server` installs the server): then
they fail, so CI never passes without running them.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol, Self, cast

import pytest
import redis

REQUIRED = 'PYDANTIC_AI_APPEND_REQUIRE_REDIS'
"""Set (to anything) where the tests must run against a `redis-server`, as in CI."""

loopback = pytest.mark.block_network(allowed_hosts=[r'127\.0\.0\.1'])
"""The tests talk to the server on loopback even when the suite runs with `--block-network`."""


class RedisView(Protocol):
    """The commands a test reads the server with, typed as a blocking client without `decode_responses` answers them
    (redis-py leaves its options untyped)."""

    def ping(self) -> bool: ...
    def get(self, name: str | bytes) -> bytes | None: ...
    def exists(self, *names: str) -> int: ...
    def pttl(self, name: str) -> int: ...
    def keys(self, pattern: str = '*') -> list[bytes]: ...
    def zrange(self, name: str, start: int, end: int) -> list[bytes]: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, *exc_info: object) -> None: ...


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        return probe.getsockname()[1]


class RedisServer:
    """A `redis-server` process of the test's own, on `127.0.0.1:<port>`, keeping nothing on disk."""

    def __init__(self, executable: str, directory: Path) -> None:
        self.executable = executable
        self.directory = directory
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f'redis://127.0.0.1:{self.port}/0'

    def start(self) -> None:
        """Start the server (again, on the same port, empty) and wait until it answers."""
        options = ['--port', str(self.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no']
        self.process = subprocess.Popen(
            [self.executable, *options, '--dir', str(self.directory)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        with cast('RedisView', redis.Redis(port=self.port, socket_connect_timeout=1)) as client:
            for _ in range(200):
                try:
                    client.ping()
                    return
                except redis.ConnectionError:
                    time.sleep(0.05)
        raise RuntimeError(f'redis-server did not answer on port {self.port}')

    def stop(self) -> None:
        """Stop the server, as a machine going away does: its entries are gone with it."""
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)  # a hung server stops too
        self.process.terminate()
        self.process.wait(timeout=30)
        self.process = None

    def hang(self) -> None:
        """Freeze the server: it still accepts connections, and answers nothing until `resume`."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def client(self) -> RedisView:
        """A blocking client, for a test to look at what the store wrote."""
        return cast('RedisView', redis.Redis(port=self.port))


def redis_server_executable() -> str:
    """The path of `redis-server`; the test is skipped without one, or fails where it is required."""
    executable = shutil.which('redis-server')
    if executable is None:
        reason = (
            'redis-server is not installed: the RedisRecordStore tests start one of their own '
            '(`bash .ci/redis-server` installs it with apt-get)'
        )
        if os.environ.get(REQUIRED):
            pytest.fail(f'{reason}, and {REQUIRED} requires them to run')
        pytest.skip(reason)
    return executable


def running_server(directory: Path) -> Iterator[RedisServer]:
    server = RedisServer(redis_server_executable(), directory)
    server.start()
    try:
        yield server
    finally:
        if server.process is not None:
            server.stop()
