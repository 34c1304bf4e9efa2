"""A window kept in Redis behind Pydantic AI's UI adapters: the conversation of `test_reattach_ui_adapters.py` (ten
turns, two blocks changing, a tool loop on three turns), served with `RedisRecordStore` against a real `redis-server`
the test starts, by one server, by two server processes taking turns, and with Redis going away mid-conversation.

A server's event loop lives across turns, so a turn's save goes on after its answer was sent; the next turn in the
same loop waits for it. Between servers nothing waits: a user reads the answer first. The tests that move a turn to
another process, or stop Redis, let the save end before the next turn, as that time does, so what each turn finds in
Redis is the same on every run.
"""

from __future__ import annotations

import asyncio
import re
import time
import warnings
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_append import AppendInstructions, RedisRecordStore, strip_records
from pydantic_ai_append._store.protocol import as_async
from pydantic_ai_append._wire.segments import segments
from pydantic_ai_append.testing import assert_prefix_stable

from ..ui_chat import TURNS, Board, Protocol, converse, instructions, model_views
from .redis_chat import ENTRY, Server, redis_turn
from .redis_server import RedisServer, loopback
from .test_reattach_ui_adapters import assert_one_window, protocol, requests_per_turn, two_processes

__all__ = ('protocol', 'two_processes')  # fixtures

pytestmark = loopback

KEY = f'pydantic-ai-append:entry:{ENTRY}'


def served(server: Server, protocol: Protocol, between: Callable[[int], None] = lambda turn: None) -> list[bytes]:
    try:
        return converse(server.turn_server(protocol), between=between)
    finally:
        server.close()


def first_request(turn: int) -> int:
    """The index of the turn's first request among all the conversation's requests."""
    return sum(requests_per_turn()[:turn])


def assert_each_request_sees_its_turn(bodies: list[bytes]) -> None:
    """Nothing lost: each request's blocks, as the model reads them, are its turn's, and the last holds every turn."""
    boards = [Board(turn, looked_up=bool(at)) for turn, count in enumerate(requests_per_turn()) for at in range(count)]
    assert [model_views(body) for body in bodies] == [{'todos': board.todos, 'notes': board.notes} for board in boards]
    assert all(f'Message {turn}.'.encode() in bodies[-1] for turn in range(TURNS) if turn not in {2, 5, 8})


def test_one_window_over_ten_turns_kept_in_redis(protocol: Protocol, redis_server: RedisServer):
    assert_one_window(served(Server(redis_server.url), protocol))
    with redis_server.client() as client:
        assert 0 < client.pttl(KEY) <= 7 * 24 * 3600 * 1000


def test_two_server_processes_sharing_one_redis_alternate_turns(
    protocol: Protocol, redis_server: RedisServer, two_processes: tuple[Any, Any]
):
    with redis_server.client() as watcher:

        def turn_server(turn: int, client: list[Any]) -> tuple[list[Any], list[bytes]]:
            before = watcher.get(KEY)
            with warnings.catch_warnings():
                # Logfire, configured by other tests of this process, says its configuration doesn't go to the workers.
                warnings.filterwarnings('ignore', 'The Logfire configuration cannot be pickled', UserWarning)
                future = two_processes[turn % 2].submit(redis_turn, redis_server.url, protocol, client, turn)
            answered = future.result()
            for _ in range(600):  # the user reads the answer, and the turn's save lands in the meantime
                if watcher.get(KEY) != before:
                    break
                time.sleep(0.05)
            return answered

        assert_one_window(converse(turn_server))


def warned_texts(warned: pytest.WarningsRecorder) -> list[str]:
    return [str(warning.message) for warning in warned]


def test_redis_stopped_mid_conversation_opens_a_new_window_loses_nothing_and_recovers_on_restart(
    protocol: Protocol, redis_server: RedisServer
):
    server = Server(redis_server.url, store_timeout=1, on_store_error='new_window')

    def between(turn: int) -> None:
        if turn == 4:
            server.drain()  # turn 3's save lands before Redis goes
            redis_server.stop()
        elif turn == 5:
            server.drain()  # turn 4's save fails while Redis is away
            redis_server.start()  # empty: nothing was kept on disk

    with pytest.warns(UserWarning) as warned:
        bodies = served(server, protocol, between)
    # Refused, with redis-py's message, which names the port.
    assert [re.sub(r'ConnectionError\(.*\)', 'ConnectionError(...)', text) for text in warned_texts(warned)] == [
        (
            "The record store failed to load the records 'chat@alice:chat-1': ConnectionError(...). The request goes "
            'on with a new window.'
        ),
        (
            "The record store failed to save the records 'chat@alice:chat-1': ConnectionError(...). The next turn "
            'opens a new window.'
        ),
    ]
    first = [instructions(body) for body in bodies]
    four, five = first_request(4), first_request(5)
    # Turn 4 opens a window without the store; turn 5 finds Redis empty and opens one it keeps from then on.
    assert len({*first[:four]}) == len({*first[five:]}) == 1 and len({first[0], first[four], first[five]}) == 3
    assert_each_request_sees_its_turn(bodies)
    assert_prefix_stable([segments('openai-chat', body) for body in bodies], new_windows=[four, five])


def test_redis_hung_mid_conversation_times_out_opens_a_new_window_and_recovers(
    protocol: Protocol, redis_server: RedisServer
):
    server = Server(redis_server.url, store_timeout=0.5, on_store_error='new_window')

    def between(turn: int) -> None:
        if turn == 4:
            server.drain()
            redis_server.hang()
        elif turn == 5:
            server.drain()
            redis_server.resume()

    with pytest.warns(UserWarning) as warned:
        bodies = served(server, protocol, between)
    assert warned_texts(warned) == [
        (
            "The record store failed to load the records 'chat@alice:chat-1': TimeoutError('`load` gave no answer in "
            "0.5 s (`store_timeout`)'). The request goes on with a new window."
        ),
        (
            "The record store failed to save the records 'chat@alice:chat-1': TimeoutError('`save` gave no answer in "
            "0.5 s (`store_timeout`)'). The next turn opens a new window."
        ),
    ]
    first = [instructions(body) for body in bodies]
    four, five = first_request(4), first_request(5)
    assert len({*first[:four]}) == len({*first[five:]}) == 1 and first[four] != first[four - 1]
    assert_each_request_sees_its_turn(bodies)
    # Turn 5 reads turn 3's entry, or turn 4's if its timed-out save reached Redis before the hang ended.
    assert_prefix_stable([segments('openai-chat', body) for body in bodies], new_windows=[four, five])


def test_an_entry_redis_expired_opens_a_new_window(protocol: Protocol, redis_server: RedisServer):
    server = Server(redis_server.url, ttl=timedelta(seconds=3))

    def between(turn: int) -> None:
        if turn == 4:
            server.drain()
            with redis_server.client() as client:
                for _ in range(1_200):  # until Redis has expired turn 3's entry, by its clock
                    if not client.exists(KEY):
                        break
                    time.sleep(0.05)

    bodies = served(server, protocol, between)
    first = [instructions(body) for body in bodies]
    four = first_request(4)
    assert len({*first[:four]}) == len({*first[four:]}) == 1 and first[four] != first[four - 1]
    assert_each_request_sees_its_turn(bodies)
    assert_prefix_stable([segments('openai-chat', body) for body in bodies], new_windows=[four])


def test_an_entry_past_max_entry_bytes_warns_and_the_next_turn_opens_a_new_window(redis_server: RedisServer):
    server = Server(redis_server.url, max_entry_bytes=100)
    with pytest.warns(UserWarning) as warned:
        bodies = served(server, 'vercel')
    assert len(warned) == TURNS
    # The entry's size differs between Pydantic AI releases, as the records' parts do.
    assert re.fullmatch(
        r"The record store failed to save the records 'chat@alice:chat-1': ValueError\('An entry of \d+ bytes is "
        r"larger than `max_entry_bytes` \(100\)\.'\)\. The next turn opens a new window\.",
        warned_texts(warned)[0],
    )
    assert len({instructions(body) for body in bodies}) == TURNS


@pytest.mark.anyio
async def test_many_conversations_at_once_each_keep_their_window_in_redis(redis_server: RedisServer):
    sent: list[str | None] = []

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sent.append(info.instructions)
        return ModelResponse(parts=[TextPart('OK.')])

    store = RedisRecordStore(redis_server.url)
    checked = as_async(store)
    context = AppendInstructions[tuple[int, int]](id='ctx', record_store=checked, tenant=lambda ctx: 'alice')
    context.instructions(name='state')(lambda ctx: 'conversation {} at step {}'.format(*ctx.deps))
    agent = Agent(FunctionModel(reply), deps_type=tuple[int, int], capabilities=[context])

    async def conversation(n: int) -> None:
        history: list[ModelMessage] = []
        for turn in range(3):
            result = await agent.run('Hi', deps=(n, turn), message_history=history, conversation_id=f'chat-{n}')
            history = strip_records(result.all_messages())  # the records come back from Redis alone

    await asyncio.gather(*(conversation(n) for n in range(30)))
    # One window per conversation: the same instructions on each of its three requests.
    assert sorted(Counter(sent).values()) == [3] * 30
    for n in range(30):
        await checked.saved(f'ctx@alice:chat-{n}')
    await store.aclose()
