"""A chat server on `RedisRecordStore`, for `test_redis_agent.py`: one agent, one store and one event loop kept
across turns, as a server's are, so each turn's save goes on after its answer was sent.

`Server` runs in the test's process. `redis_turn` is a worker process's turn (`ProcessPoolExecutor` with `spawn`):
each worker keeps a server of its own, its loop in a thread, for as long as the process lives.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from pydantic_ai_append import RedisRecordStore
from pydantic_ai_append._store.protocol import DEFAULT_STORE_TIMEOUT, OnStoreError, as_async
from pydantic_ai_append.testing import PromptWire

from ..ui_chat import Protocol, chat_agent, serve

ENTRY = 'chat@alice:chat-1'
"""The key of the conversation's entry, as the capability names it."""


class Server:
    """A server in this process on the Redis at `url`, its event loop kept across the turns it serves."""

    def __init__(
        self,
        url: str,
        *,
        store_timeout: float = DEFAULT_STORE_TIMEOUT,
        on_store_error: OnStoreError = 'raise',
        **store_options: Any,
    ) -> None:
        self.prompt_wire = PromptWire()
        self.store = RedisRecordStore(url, **store_options)
        # Checked here, so the test can wait for the saves the capability runs.
        self.checked = as_async(self.store, store_timeout)
        self.agent = chat_agent(self.prompt_wire, self.checked, on_store_error=on_store_error)
        self.runner = asyncio.Runner()

    def turn_server(self, protocol: Protocol) -> Callable[[int, list[Any]], tuple[list[Any], list[bytes]]]:
        def turn(turn: int, client: list[Any]) -> tuple[list[Any], list[bytes]]:
            before = len(self.prompt_wire.exchanges)
            client = self.runner.run(serve(self.agent, protocol, 'chat-1', client, turn, 'server'))
            return client, [exchange.request_body for exchange in self.prompt_wire.exchanges[before:]]

        return turn

    def drain(self) -> None:
        """Let the loop run until the last turn's save has ended, as it does while the user reads the answer."""
        self.runner.run(self.checked.saved(ENTRY))

    def close(self) -> None:
        self.drain()
        self.runner.run(self.store.aclose())
        self.runner.close()
        self.prompt_wire.close()


class _Worker:
    def __init__(self, url: str) -> None:
        self.prompt_wire = PromptWire()
        self.agent = chat_agent(self.prompt_wire, RedisRecordStore(url))
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()


_worker: _Worker | None = None


def redis_turn(url: str, protocol: Protocol, client: list[Any], turn: int) -> tuple[list[Any], list[bytes]]:
    """A turn served by this worker process's server on the Redis at `url`: the client's history after it, and the
    request bodies it sent."""
    global _worker
    if _worker is None:
        _worker = _Worker(url)
    before = len(_worker.prompt_wire.exchanges)
    served = asyncio.run_coroutine_threadsafe(
        serve(_worker.agent, protocol, 'chat-1', client, turn, 'server'), _worker.loop
    )
    client = served.result()
    return client, [exchange.request_body for exchange in _worker.prompt_wire.exchanges[before:]]
