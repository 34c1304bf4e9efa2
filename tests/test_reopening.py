"""Windows opened by price (`_reopening`): a window whose carried changes cost more than writing the request again
gives way to a new one stating the current values; the decision is read from history, so a loaded history or a fresh
agent reaches it too; a cache the provider has let expire ends a window that carries changes; `windows='keep'` never
ends one; and a bad option is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from inline_snapshot import snapshot
from logfire.testing import CaptureLogfire
from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import AbstractCapability, ProcessHistory
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelResponse
from pydantic_ai.models import ModelRequestContext, ModelRequestParameters
from pydantic_ai.models.fallback import FallbackModel
from pydantic_ai.models.function import FunctionModel

from pydantic_ai_append import AppendInstructions, CachePrices, instruction_records
from pydantic_ai_append._history import holds_record
from pydantic_ai_append._reopening import CUT_KEY, MOVED_KEY, PriceRule
from pydantic_ai_append._window import Window

from .conversation import ScriptedModel

THIN = CachePrices(input=1, cache_read=0.5, cache_write=1)
"""A cache that halves the price: a window gives way once its changes were read for about as many tokens as a request
holds, within a few turns of a test conversation."""

NOTES = [f'note {number}: a fact the agent keeps about the project it works on' for number in range(12)]

TASK = 'Work through the project. ' + ' '.join(f'step{number}' for number in range(300))
"""The first prompt, which every request after it holds: about 300 tokens, so a request outweighs a few changes."""


def agent_for(
    chat: ScriptedModel, windows: Any = THIN, model: FunctionModel | None = None, *before: AbstractCapability[int]
) -> Agent[int, str]:
    context = AppendInstructions[int](id='agent', windows=windows)

    @context.instructions(name='notes')
    def notes(ctx: RunContext[int]) -> str:
        return '\n'.join(NOTES[: 4 + ctx.deps])

    return Agent(model or chat.model(), deps_type=int, capabilities=[*before, context])


def windows_of(history: list[ModelMessage]) -> list[str]:
    """Each record of history, by kind: `B` a baseline (a window opened), `d` a change."""
    return [type(record).__name__.removeprefix('Instruction')[0] for record in instruction_records(history)]


def converse(turns: int, carry: Callable[[list[ModelMessage]], list[ModelMessage]], **options: Any) -> ScriptedModel:
    """Run `turns` turns, each going on from what `carry` makes of the history, with a fresh agent each turn."""
    chat = ScriptedModel()
    history: list[ModelMessage] = []
    for turn in range(turns):
        prompt = TASK if turn == 0 else f'turn {turn}'
        history = carry(agent_for(chat, **options).run_sync(prompt, deps=turn, message_history=history).all_messages())
    return chat


def spanned(
    capfire: CaptureLogfire, prompts: list[tuple[str, int]]
) -> tuple[ScriptedModel, list[ModelMessage], list[dict[str, Any]]]:
    """Run a conversation of `(prompt, deps)` turns on an instrumented agent: what the model saw, the history, and the
    attributes of each request's span."""
    chat = ScriptedModel()
    agent = agent_for(chat)
    agent.instrument = True
    history: list[ModelMessage] = []
    for prompt, deps in prompts:
        history = agent.run_sync(prompt, deps=deps, message_history=history).all_messages()
    spans = capfire.exporter.exported_spans_as_dict()
    return chat, history, [span['attributes'] for span in spans if span['name'] == 'append_instructions']


def test_a_window_whose_changes_cost_more_than_writing_the_request_again_gives_way(capfire: CaptureLogfire):
    chat, history, spans = spanned(capfire, [(TASK if turn == 0 else f'turn {turn}', turn) for turn in range(8)])
    assert [
        (
            span.get('pydantic_ai_append.window'),
            span.get('pydantic_ai_append.window_reason'),
            span.get('pydantic_ai_append.window_keeping_cost'),
            span.get('pydantic_ai_append.window_opening_cost'),
        )
        for span in spans
    ] == snapshot(
        [
            (1, 'first', None, None),
            (1, None, None, None),
            (1, None, None, None),
            (1, None, None, None),
            (2, 'price', 0.000196, 0.0001655),
            (2, None, None, None),
            (2, None, None, None),
            (2, None, None, None),
        ]
    )
    assert windows_of(history) == snapshot(['B', 'D', 'D', 'D', 'B', 'D', 'D', 'D'])
    # The request that opened the window states every note in its prefix, and sends no change of the old window.
    opened = next(
        seen
        for seen, span in zip(chat.seen, spans, strict=True)
        if span.get('pydantic_ai_append.window_opened') == 'price'
    )
    assert (opened.instructions or '').count('note ') == snapshot(8)
    assert [line for line in opened.messages if 'context' in line] == []


def test_as_requests_grow_a_new_window_is_priced_at_the_middle_of_the_window(capfire: CaptureLogfire):
    # Each turn's prompt is as long as the first, so the request grows about 300 tokens a turn: the window gives way
    # once its changes cost the mean of a new window's price at its first request and now, before they cost the latter.
    _, history, spans = spanned(capfire, [(f'turn {turn}: {TASK}', turn % 8) for turn in range(12)])
    weighed = [
        (span['pydantic_ai_append.window_keeping_cost'], span['pydantic_ai_append.window_opening_cost'])
        for span in spans
        if span.get('pydantic_ai_append.window_opened') == 'price'
    ]
    assert weighed and all(keeping < opening for keeping, opening in weighed)
    assert windows_of(history) == snapshot(['B', 'D', 'D', 'D', 'D', 'D', 'D', 'D', 'B', 'D', 'D', 'D'])


def test_every_process_reaches_the_same_decisions():
    in_process = converse(8, lambda history: history)
    loaded = converse(
        8, lambda history: ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(history))
    )
    assert [(seen.instructions, seen.messages) for seen in loaded.seen] == [
        (seen.instructions, seen.messages) for seen in in_process.seen
    ]


def test_a_window_a_compaction_cut_changes_of_is_kept():
    # `PrefixGuard` marks the baseline of a window it moved past a cut. The same turns that gave way at the fifth
    # request without the mark keep the window, through a fresh agent and serialized history.
    chat = ScriptedModel()
    history: list[ModelMessage] = []
    for turn in range(8):
        result = agent_for(chat).run_sync(TASK if turn == 0 else f'turn {turn}', deps=turn, message_history=history)
        history = ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(result.all_messages()))
        for part in (part for message in history for part in message.parts if holds_record(part)):
            if not part.content:
                cast('dict[str, Any]', part.metadata)[CUT_KEY] = True
    assert windows_of(history) == ['B', 'D', 'D', 'D', 'D', 'D', 'D', 'D']


@pytest.mark.parametrize(('held', 'records'), [(0, 'BDDBDDDB'), (100_000, 'BDDDBDDD')], ids=['nothing', 'history'])
def test_where_a_compaction_moved_the_prefix_a_new_window_costs_what_the_cache_held(held: int, records: str):
    # `PrefixGuard` says so on the request (here the fourth), with the bytes of history it sends unchanged. The scripted
    # model reads the longest prefix it cached: holding none of history, the window gives way there, a request before
    # the price of writing the whole request again has it give way; holding all of it, it doesn't.
    def moved(messages: list[ModelMessage]) -> list[ModelMessage]:
        if len(messages) == 7:
            messages[-1].metadata = {MOVED_KEY: {'messages': 6 if held else 0, 'bytes': held}}
        return messages

    chat = ScriptedModel()
    history: list[ModelMessage] = []
    for turn in range(8):
        agent = agent_for(chat, THIN, None, ProcessHistory(moved))
        prompt = TASK if turn == 0 else f'turn {turn}'
        history = agent.run_sync(prompt, deps=turn, message_history=history).all_messages()
    assert ''.join(windows_of(history)) == records


def test_keep_carries_every_change():
    chat = converse(8, lambda history: history, windows='keep')
    assert [seen.instructions == chat.seen[0].instructions for seen in chat.seen] == [True] * 8


def test_a_model_of_no_known_provider_keeps_its_window():
    # The scripted model is a function model: no provider, so no prices to weigh by.
    chat = converse(8, lambda history: history, windows='price')
    assert [seen.instructions == chat.seen[0].instructions for seen in chat.seen] == [True] * 8


def aged(history: list[ModelMessage], age: timedelta) -> list[ModelMessage]:
    """The history with its last response `age` old."""
    at = max(index for index, message in enumerate(history) if isinstance(message, ModelResponse))
    last = history[at]
    assert isinstance(last, ModelResponse)
    return [*history[:at], replace(last, timestamp=datetime.now(UTC) - age), *history[at + 1 :]]


@pytest.mark.parametrize(
    ('values', 'records', 'last'),
    [((0, 1, 1), 'BDB', (2, 'expired')), ((0, 0, 1), 'BB', (2, 'expired')), ((0, 0, 0), 'B', (1, None))],
    ids=['carrying a change', 'delivering one', 'neither'],
)
def test_an_expired_cache_ends_a_window_with_changes(
    capfire: CaptureLogfire, values: tuple[int, int, int], records: str, last: tuple[int, str | None]
):
    # The last request goes an hour after the one before, past the profile's 5 minutes.
    chat = ScriptedModel()
    agent = agent_for(chat, windows='price', model=chat.model(retention=timedelta(minutes=5)))
    agent.instrument = True
    history = agent.run_sync('turn 0', deps=values[0]).all_messages()
    history = agent.run_sync('turn 1', deps=values[1], message_history=history).all_messages()
    history = agent.run_sync('turn 2', deps=values[2], message_history=aged(history, timedelta(hours=1))).all_messages()
    assert ''.join(windows_of(history)) == records
    spans = [span['attributes'] for span in capfire.exporter.exported_spans_as_dict()]
    facts = [
        (span['pydantic_ai_append.window'], span.get('pydantic_ai_append.window_reason'))
        for span in spans
        if 'pydantic_ai_append.capability_id' in span
    ]
    assert facts[-1] == last


def test_a_bad_windows_option_is_refused_with_the_value():
    with pytest.raises(UserError) as raised:
        AppendInstructions(id='agent', windows='sometimes')  # pyright: ignore[reportArgumentType]
    assert str(raised.value) == snapshot(
        "`AppendInstructions` option `windows` takes 'price', 'keep' or a `CachePrices`, not 'sometimes'."
    )


def test_a_response_no_fallback_member_is_named_after_keeps_its_window():
    # Whose cache the request meets can't be told (a provider that names the model otherwise, say): no retention, no
    # prices, so the window is kept however old the response.
    members = [FunctionModel(lambda messages, info: ModelResponse(parts=[]), model_name=name) for name in 'ab']
    fallback = FallbackModel(*members)
    old = ModelResponse(parts=[], model_name='renamed', timestamp=datetime.now(UTC) - timedelta(days=1))
    context = ModelRequestContext(
        model=fallback, messages=[old], model_settings=None, model_request_parameters=ModelRequestParameters()
    )
    assert PriceRule(None).reopening(Window(), [old], (100, 0), context) is None
