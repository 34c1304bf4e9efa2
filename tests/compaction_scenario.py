"""A long tool-using conversation with changing instructions, run with a compaction a user installs, for the guard.

Each run asks a question; the model reads two files with parallel calls, then answers (every fourth answer is long,
for the strategies that clamp one). The todo list changes every run, in append mode. The conversation is run with the
compaction alone and with the compaction plus `PrefixGuard` (default options, enforce mode), and each request the
model received is written down, so a test can hold the guarded conversation to what the design promises:

- history stays as short as the compaction alone keeps it, plus at most the marker;
- no tool call goes out without its result, nor a result without its call (Pydantic AI would repair either silently:
  it drops an orphaned result and answers a dangling call with a made-up result, which is looked for);
- the messages move only where a compaction opened a window of the prefix, and between compactions each request
  starts with the previous request and its reply, byte for byte; the instructions never move, as the function model
  has no cache prices for a window to be opened by;
- the todo list's current value is in the prefix (a new window) or in the latest change delivered after it;
- the guard warns only where the design says to (every warning is written down).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_append import AppendInstructions
from pydantic_ai_append._telemetry.observe import DROPPED_KEY
from pydantic_ai_append.guard import PrefixGuard, WireVerifier, tool_pair_problems
from pydantic_ai_append.guard._bytes import message_bytes
from pydantic_ai_append.testing import Api, WireCapture
from pydantic_ai_append.testing.fake_provider import (
    FakeProvider,
    Text,
    ToolCalls,
    Turn,
    anthropic_model,
    openai_chat_model,
)

RUNS = 32
"""Runs of each conversation: the issue asks for at least 30, with changing instructions."""

BLOCK = 'capability:todos:state'
"""The id of the todo list's block."""

_SYNTHESIZED = 'pydantic_ai_synthesized_tool_return'
"""The metadata key Pydantic AI marks a tool return it made up with (for a call that had none)."""


def todo(run: int) -> str:
    """The todo list during `run`: a new value every run."""
    return f'- [x] read the files {run} times\n- [ ] answer question {run}'


@dataclass
class Request:
    """One request as the model received it."""

    instructions: str
    messages: list[ModelMessage]
    todo: str
    """The todo list's value when the request was made."""


@dataclass
class Conversation:
    """What the model received over a conversation, and the history after each run."""

    requests: list[Request] = field(default_factory=list[Request])
    histories: list[list[ModelMessage]] = field(default_factory=list[list[ModelMessage]])
    opened: list[int] = field(default_factory=list[int])
    """The requests the guard said open a new window of the prefix (by compaction)."""
    warnings: list[str] = field(default_factory=list[str])
    """Every warning raised during the conversation, with its class."""

    def open_window(self, model: str | None = None) -> None:
        """What a `WireVerifier` is told by the guard, before the request is made; written down here."""
        self.opened.append(len(self.requests))

    @property
    def lengths(self) -> list[int]:
        """How many messages each request sent."""
        return [len(request.messages) for request in self.requests]

    @property
    def parts(self) -> list[int]:
        """How many parts each request sent: a history bounded in messages can still grow inside one."""
        return [sum(len(message.parts) for message in request.messages) for request in self.requests]

    def prefix_moves(self) -> list[int]:
        """The requests whose messages don't start with the previous request's and its reply, byte for byte."""
        moved: list[int] = []
        for index in range(1, len(self.requests)):
            before, now = self.requests[index - 1].messages, self.requests[index].messages
            if [message_bytes(m) for m in now[: len(before)]] != [message_bytes(m) for m in before]:
                moved.append(index)
        return moved

    def priced_windows(self) -> list[int]:
        """The requests that opened a window by price or expiry: their new window's carrier, never sent, says what it
        dropped. Read from the history after each run, whose last two requests are the run's."""
        found: list[int] = []
        for run, history in enumerate(self.histories):
            requests = [message for message in history if isinstance(message, ModelRequest)][-2:]
            found += [
                2 * run + offset
                for offset, request in enumerate(requests)
                if any(
                    isinstance(part, SystemPromptPart) and DROPPED_KEY in (part.metadata or {})
                    for part in request.parts
                )
            ]
        return found

    def instruction_moves(self) -> list[int]:
        """The requests whose instructions differ from the previous request's."""
        requests = self.requests
        return [i for i in range(1, len(requests)) if requests[i].instructions != requests[i - 1].instructions]


def texts(messages: Sequence[ModelMessage]) -> list[str]:
    """Every text part of `messages` the model reads, in order."""
    found: list[str] = []
    for message in messages:
        for part in message.parts:
            content = getattr(part, 'content', None)
            if isinstance(part, UserPromptPart | SystemPromptPart | TextPart) and isinstance(content, str):
                found.append(content)
    return found


def broken_pairs(messages: Sequence[ModelMessage]) -> list[str]:
    """What is wrong with the tool pairs of messages as the model received them, described."""
    problems = [problem.describe() for problem in tool_pair_problems(messages, sending=True)]
    problems += [
        f'a made-up result for call {part.tool_call_id!r}'
        for message in messages
        for part in message.parts
        if isinstance(part, ToolReturnPart) and part.metadata and _SYNTHESIZED in part.metadata
    ]
    return problems


def stale_deliveries(conversation: Conversation) -> list[int]:
    """The requests whose latest word on the todo list is not its current value."""
    stale: list[int] = []
    for index, request in enumerate(conversation.requests):
        elements = [text for text in texts(request.messages) if f'id="{BLOCK}"' in text]
        latest = elements[-1] if elements else request.instructions
        if request.todo not in latest:
            stale.append(index)
    return stale


def converse(
    *capabilities: AbstractCapability[Any], guarded: bool, runs: int = RUNS, windows: Any = 'price'
) -> Conversation:
    """Run the conversation with `capabilities` (the compaction), and the guard if `guarded`; the todo list's windows
    open by `windows`."""
    conversation = Conversation()
    state = {'run': 0, 'calls': 0}

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        conversation.requests.append(Request(info.instructions or '', list(messages), todo(state['run'])))
        last = messages[-1]
        if isinstance(last, ModelRequest) and any(isinstance(part, ToolReturnPart) for part in last.parts):
            run = state['run']
            return ModelResponse(
                parts=[TextPart(f'Answer {run}. ' + ('All of it, again. ' * 300 if run % 4 == 3 else ''))]
            )
        calls = [ToolCallPart('read_file', {'path': path}) for path in ('a.txt', 'b.txt')]
        if state['run'] % 5 == 4 and any(tool.name == 'compact_context' for tool in info.function_tools):
            # Where the model may ask for a compaction (harness's `CompactOnRequest`), it does every fifth run.
            calls.append(ToolCallPart('compact_context', {}))
        for call in calls:
            state['calls'] += 1
            call.tool_call_id = f'call_{state["calls"]}'
        return ModelResponse(parts=list(calls))

    def read_file(path: str) -> str:
        """Read a file."""
        return f'The contents of {path} at run {state["run"]}. ' * 20

    context = AppendInstructions[None](id='todos', windows=windows)

    @context.instructions(name='state')
    def todos(ctx: RunContext[None]) -> str:  # pyright: ignore[reportUnusedFunction]
        return todo(state['run'])

    guard = [PrefixGuard[None](verifier=conversation)] if guarded else []
    agent = Agent(
        FunctionModel(answer),
        deps_type=type(None),
        tools=[read_file],
        capabilities=[*capabilities, *guard, context],
    )
    history: list[ModelMessage] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        for run in range(runs):
            state['run'] = run
            history = agent.run_sync(f'Question {run}: what do the files say?', message_history=history).all_messages()
            conversation.histories.append(history)
    conversation.warnings = [f'{type(warning.message).__name__}: {warning.message}' for warning in caught]
    return conversation


def summary_model() -> FunctionModel:
    """A summarizer that says how many messages it was asked to summarize."""

    def summarize(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(f'The user asked about the files {len(texts(messages))} times.')])

    return FunctionModel(summarize)


def judge_model() -> FunctionModel:
    """A relevance judge (harness's `RelevanceCompaction`) that finds every earlier step of little use."""

    def judge(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        tool = info.output_tools[0]
        return ModelResponse(parts=[ToolCallPart(tool.name, {'needed_verbatim': 0.1, 'still_matters': 0.1})])

    return FunctionModel(judge)


def file_key(call: ToolCallPart) -> str | None:
    """The file a `read_file` call reads, for `DeduplicateFileReads`."""
    return str(call.args_as_dict()['path']) if call.tool_name == 'read_file' else None


WIRE_RUNS = 8
"""Runs of a conversation on the wire: enough for several compactions, few enough for a short cassette."""


def wire_script(runs: int = WIRE_RUNS) -> list[Turn]:
    """The fake provider's turns for `converse_on_the_wire`: each run reads two files in parallel, then answers."""
    script: list[Turn] = []
    for run in range(runs):
        script += [
            ToolCalls([('read_file', {'path': 'a.txt'}), ('read_file', {'path': 'b.txt'})]),
            Text(f'Answer {run}.'),
        ]
    return script


async def converse_on_the_wire(api: Api, *capabilities: AbstractCapability[Any]) -> tuple[list[bytes], list[str]]:
    """The wire conversation through the real SDK of `api` on the fake provider, with the guard (default options) and
    a `WireVerifier` in enforce mode: the request bodies sent, and every warning raised."""
    state = {'run': 0}
    verifier = WireVerifier(mode='enforce')
    capture = WireCapture()
    context = AppendInstructions[None](id='todos')

    @context.instructions(name='state')
    def todos(ctx: RunContext[None]) -> str:  # pyright: ignore[reportUnusedFunction]
        return todo(state['run'])

    def read_file(path: str) -> str:
        """Read a file."""
        return f'The contents of {path} at run {state["run"]}. ' * 5

    factory = {'openai-chat': openai_chat_model, 'anthropic': anthropic_model}[api]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        with FakeProvider(script=wire_script()) as server:
            async with capture.http_client(transport=verifier.transport()) as http_client:
                agent = Agent(
                    factory(server.url, http_client=http_client),
                    deps_type=type(None),
                    tools=[read_file],
                    capabilities=[*capabilities, PrefixGuard[None](verifier=verifier), context],
                )
                history: list[ModelMessage] = []
                for run in range(WIRE_RUNS):
                    state['run'] = run
                    history = (await agent.run(f'Question {run}?', message_history=history)).all_messages()
    assert verifier.divergences == []
    return [exchange.request_body for exchange in capture.exchanges], [str(w.message) for w in caught]


def unpaired_on_the_wire(api: Api, body: bytes) -> list[str]:
    """The tool calls without their results, and results without their calls, in a request body as the provider
    reads it (from the JSON, not through this package's code)."""
    messages: list[dict[str, Any]] = json.loads(body)['messages']
    problems: list[str] = []
    open_calls: set[str] = set()
    for message in messages:
        if api == 'openai-chat':
            if message['role'] == 'assistant':
                problems += [f'call {call} unanswered' for call in sorted(open_calls)]
                calls: list[dict[str, Any]] = message.get('tool_calls') or []
                open_calls = {call['id'] for call in calls}
            elif message['role'] == 'tool':
                if message['tool_call_id'] not in open_calls:
                    problems.append(f'result {message["tool_call_id"]} without its call')
                open_calls.discard(message['tool_call_id'])
            continue
        content: object = message['content']
        blocks = cast('list[dict[str, Any]]', content) if isinstance(content, list) else []
        if message['role'] == 'assistant':
            problems += [f'call {call} unanswered' for call in sorted(open_calls)]
            open_calls = {block['id'] for block in blocks if block['type'] == 'tool_use'}
        else:
            answered = {block['tool_use_id'] for block in blocks if block['type'] == 'tool_result'}
            problems += [f'result {call} without its call' for call in sorted(answered - open_calls)]
            problems += [f'call {call} unanswered' for call in sorted(open_calls - answered)]
            open_calls = set()
    return problems + [f'call {call} unanswered' for call in sorted(open_calls)]
