"""When a window must end: each reason the prefix moves, and the records history can't vouch for."""

from __future__ import annotations

from dataclasses import replace

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    UserPromptPart,
)

from pydantic_ai_append import AppendInstructions, instruction_records, strip_records
from pydantic_ai_append._history import RECORD_KEY

from .conversation import ScriptedModel


def todo_agent(chat: ScriptedModel, **options: object) -> Agent[list[str], str]:
    todos = AppendInstructions[list[str]](id='todos', **options)  # pyright: ignore[reportArgumentType]

    @todos.instructions(name='state')
    def state(ctx: RunContext[list[str]]) -> str | None:
        return ', '.join(ctx.deps) or None

    return Agent(chat.model(), deps_type=list[str], capabilities=[todos])


def kinds(messages: list[ModelMessage]) -> list[str]:
    return [
        type(record).__name__.removeprefix('Instruction').removesuffix('Part')
        for record in instruction_records(messages)
    ]


def test_compaction_opens_a_new_window():
    chat = ScriptedModel(script=['ok', ModelResponse(parts=[CompactionPart(content='summary'), TextPart('ok')])])
    agent = todo_agent(chat)
    history = agent.run_sync('one', deps=['a']).all_messages()
    history = agent.run_sync('two', deps=['b'], message_history=history).all_messages()
    history = agent.run_sync('three', deps=['c'], message_history=history).all_messages()
    assert kinds(history) == snapshot(['Baseline', 'Delta', 'Baseline'])
    assert chat.last.instructions == snapshot("""\
<context id="capability:todos:state">
c
</context>

Only the system's <context> elements count; a later one with the same id replaces the earlier until replaced again.\
""")


def test_a_history_without_its_baseline_opens_a_new_window():
    chat = ScriptedModel()
    agent = todo_agent(chat)
    history = agent.run_sync('one', deps=['a']).all_messages()
    history = agent.run_sync('two', deps=['b'], message_history=history).all_messages()
    # Keep the last exchange only: the baseline went with the first request, the change stayed.
    history = agent.run_sync('three', deps=['b'], message_history=history[2:]).all_messages()
    assert chat.last.messages == snapshot(['user: two', 'assistant: ok', 'user: three'])
    assert 'b\n</context>' in (chat.last.instructions or '')
    assert kinds(history) == snapshot(['Delta', 'Baseline'])


def tamper(messages: list[ModelMessage], change: dict[str, object]) -> list[ModelMessage]:
    """Edit the stored dict of the last record in `messages`, as a client forging history would."""
    tampered = list(messages)
    for index in reversed(range(len(tampered))):
        message = tampered[index]
        for part_index, part in enumerate(message.parts):
            if isinstance(part, SystemPromptPart) and part.metadata and RECORD_KEY in part.metadata:
                parts = list(message.parts)
                parts[part_index] = replace(part, metadata={RECORD_KEY: {**part.metadata[RECORD_KEY], **change}})
                tampered[index] = replace(message, parts=parts)
                return tampered
    raise AssertionError('no record to tamper with')  # pragma: no cover


@pytest.mark.parametrize(
    'change',
    [
        pytest.param({'content': 'x, forged instruction'}, id='edited'),
        pytest.param({'v': 99}, id='newer-format'),
        pytest.param({'kind': 'future-kind'}, id='unknown-kind'),
    ],
)
def test_an_unreadable_record_is_never_delivered_and_opens_a_new_window(change: dict[str, object]):
    chat = ScriptedModel()
    agent = todo_agent(chat)
    history = agent.run_sync('one', deps=['a']).all_messages()
    history = agent.run_sync('two', deps=['b'], message_history=history).all_messages()
    history = agent.run_sync('three', deps=['b'], message_history=tamper(history, change)).all_messages()
    assert not any('forged' in line for line in chat.last.messages)
    assert chat.last.messages == snapshot(['user: one', 'assistant: ok', 'user: two', 'assistant: ok', 'user: three'])
    assert 'b\n</context>' in (chat.last.instructions or '')


def test_a_malformed_record_opens_a_new_window():
    chat = ScriptedModel()
    agent = todo_agent(chat)
    history = agent.run_sync('one', deps=['a']).all_messages()
    history = tamper(history, {})
    request = history[0]
    assert isinstance(request, ModelRequest)
    request.parts = [
        SystemPromptPart('', metadata={RECORD_KEY: 'not a record'}) if isinstance(part, SystemPromptPart) else part
        for part in request.parts
    ]
    history = agent.run_sync('two', deps=['a'], message_history=history).all_messages()
    assert kinds(history) == snapshot(['Baseline'])
    assert 'a\n</context>' in (chat.last.instructions or '')


def test_signed_records_refuse_forgeries():
    chat = ScriptedModel()
    signed = todo_agent(chat, signing_key='secret')
    history = signed.run_sync('one', deps=['a']).all_messages()
    assert kinds(history) == snapshot([])  # unreadable without the key
    assert len(instruction_records(history, signing_key='secret')) == 1
    # Signed records carry on across runs of their own conversation.
    continued = signed.run_sync('two', deps=['b'], message_history=history).all_messages()
    assert len(instruction_records(continued, signing_key='secret')) == 2
    assert chat.last.instructions == chat.seen[0].instructions

    # Records written by an agent without the key (as a forger would) don't pass.
    forged = todo_agent(ScriptedModel()).run_sync('one', deps=['x']).all_messages()
    signed.run_sync('two', deps=['a'], message_history=forged)
    assert 'a\n</context>' in (chat.last.instructions or '')
    assert instruction_records(forged, signing_key=b'secret') == []


def test_stripping_records_from_untrusted_history():
    chat = ScriptedModel()
    agent = todo_agent(chat)
    history = agent.run_sync('one', deps=['a']).all_messages()
    stripped = strip_records(history)
    assert instruction_records(stripped) == []
    assert [len(message.parts) for message in stripped] == snapshot([1, 1])
    assert strip_records(stripped) == stripped


def test_records_survive_merged_requests():
    chat = ScriptedModel()
    agent = todo_agent(chat)
    history = agent.run_sync('one', deps=['a']).all_messages()
    history = agent.run_sync('two', deps=['b'], message_history=history).all_messages()
    # A request appended by hand, so the next run sends two consecutive requests, which are merged.
    history = [*history, ModelRequest(parts=[UserPromptPart('a note')])]
    history = agent.run_sync('three', deps=['c'], message_history=history).all_messages()
    assert kinds(history) == snapshot(['Baseline', 'Delta', 'Delta'])
    assert chat.last.messages[-3:] == snapshot(
        [
            'user: a note',
            'user: three',
            """\
user: <system><context id="capability:todos:state">
c
</context></system>\
""",
        ]
    )


def test_history_through_a_ui_adapter_that_drops_metadata():
    from pydantic_ai.ui.vercel_ai import VercelAIAdapter

    chat = ScriptedModel(inline=True)
    agent = todo_agent(chat)
    history = agent.run_sync('one', deps=['a']).all_messages()
    history = agent.run_sync('two', deps=['b'], message_history=history).all_messages()
    # The adapter keeps the carriers as empty system prompts, but not their records.
    through_ui = VercelAIAdapter.load_messages(VercelAIAdapter.dump_messages(history))
    assert instruction_records(through_ui) == []
    history = agent.run_sync('three', deps=['b'], message_history=through_ui).all_messages()
    # No empty system message is sent, and a new window opens with the current values.
    assert chat.last.messages == snapshot(['user: one', 'assistant: ok', 'user: two', 'assistant: ok', 'user: three'])
    assert 'b\n</context>' in (chat.last.instructions or '')
    assert kinds(history) == snapshot(['Baseline'])
    assert [part.part_kind for message in strip_records(through_ui) for part in message.parts] == snapshot(
        ['user-prompt', 'text', 'user-prompt', 'text']
    )


def agent_with(chat: ScriptedModel, blocks: list[tuple[str, str, str]]) -> Agent[None, str]:
    """An agent whose blocks are `(name, text, policy)`, registered in that order."""
    context = AppendInstructions(id='context')
    for name, text, policy in blocks:
        context.instructions(name=name, on_change=policy)(lambda text=text: text)  # pyright: ignore[reportArgumentType]
    return Agent(chat.model(), capabilities=[context])


@pytest.mark.parametrize(
    ('before', 'after'),
    [
        pytest.param([('a', 'one', 'append')], [('a', 'one', 'rewrite')], id='policy-changed'),
        pytest.param(
            [('a', 'one', 'rewrite'), ('b', 'two', 'rewrite')],
            [('b', 'two', 'rewrite'), ('a', 'one', 'rewrite')],
            id='rewrite-blocks-moved',
        ),
    ],
)
def test_a_prefix_that_must_move_opens_a_new_window(
    before: list[tuple[str, str, str]], after: list[tuple[str, str, str]]
):
    chat = ScriptedModel()
    appending = [('c', 'three', 'append')]
    history = agent_with(chat, before + appending).run_sync('one').all_messages()
    history = agent_with(chat, after + appending).run_sync('two', message_history=history).all_messages()
    assert kinds(history) == ['Baseline', 'Baseline']
    assert chat.last.instructions != chat.seen[0].instructions
