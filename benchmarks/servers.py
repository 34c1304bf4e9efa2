"""The server cases: many conversations served round-robin by one agent, and instrumented runs with a tool loop.

A server holds one agent and serves every conversation with it, each request on history loaded from its store.
`time_many_conversations` serves `conversations` conversations that way, in turn, from one `AppendInstructions`
capability, each request's history freshly loaded from JSON before the run (outside the clock), each conversation
with its own `conversation_id`. Every conversation has the same stored history (the scenario is a pure function of
the turn), built once by `build_history`: what sets the conversations apart for the plugin is their id, by which
its process caches are kept. Beside them, in the same rounds, the same agent serves one conversation on the same
history (`append-loaded`), and the figure is the per-round ratio of the hooks' time per request.

Before the rounds, every conversation (the one too) is served twice, outside the ratio: the rounds measure a server
that has served each conversation for a while, as one serving them in turn has. A conversation's first requests in
a process cost the plugin more (its first request keeps a scan of history that the next load won't match, and its
second drops that scan), so the hooks' time on those two passes is reported apart (`first_hook_seconds`,
`second_hook_seconds`). Those passes skip the collection before each request that the rounds make: a full
collection of the benchmark's heap takes several times the run, and a pass is 100 requests; their figures are
medians, which a collection inside a few of the requests doesn't move much.

`time_instrumented` runs the scenario's static and append agents with Pydantic AI's OpenTelemetry instrumentation
(`agent.instrument`, spans recorded by an SDK tracer provider with no exporter) and without it, on a model that
calls the scenario's tool once each turn before it answers. Their histories are `build_history`'s, with each turn's
tool call and its return put between its request and its reply (`with_tool_calls`), which `tests/test_benchmark.py`
checks against real runs. Each run's history is freshly loaded from JSON (outside the clock), as a server's is. The
rounds run the same turn again, which history kept in process can't stand for here: the plugin's kept scan follows
a conversation forward, the scan a run's second request keeps ends in that run's new request, which the next
round's history doesn't hold, and so every round after the first would take the loaded path anyway.
"""

from __future__ import annotations

import gc
import itertools
import statistics
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from opentelemetry.sdk.trace import TracerProvider
from pydantic_ai import Agent, InstrumentationSettings
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.profiles import ModelProfile

from .histories import REPLY, Profile, build_history, function_model, stored_bytes
from .measure import HookTimer, Spread, paired_ratios, rotated
from .overhead import Timing, Variant, run_rounds
from .scenario import Policy, build_agent, lookup, prompt

__all__ = (
    'INSTRUMENTED',
    'MANY',
    'ONE',
    'ManyConversations',
    'run_share',
    'time_instrumented',
    'time_many_conversations',
    'tool_model',
    'with_tool_calls',
)

MANY = 'many-conversations'
ONE = 'append-loaded'
TOPIC = 'the next task'
"""What the tool-loop model looks up each turn."""
INSTRUMENTED = ('static', 'append', 'static-instrumented', 'append-instrumented')
"""The variants `time_instrumented` times, in the order tables show them."""


@dataclass
class ManyConversations:
    """One agent serving many conversations round-robin on loaded history, beside one conversation, on one profile."""

    profile: Profile
    turns: int
    """The length of every conversation's history."""

    conversations: int
    """How many conversations the agent serves in turn."""

    first_hook_seconds: list[float] = field(default_factory=list[float])
    """The hooks' CPU seconds on each conversation's first request in the process, served before the rounds."""

    second_hook_seconds: list[float] = field(default_factory=list[float])
    """The same on each conversation's second request, served before the rounds too."""

    hook_seconds: list[list[float]] = field(default_factory=list[list[float]])
    """Per round, the hooks' CPU seconds on each request to the next conversations in turn."""

    seconds: list[list[float]] = field(default_factory=list[list[float]])
    """Per round, the CPU seconds of each of those requests' `agent.run`."""

    one_hook_seconds: list[float] = field(default_factory=list[float])
    """Per round, the hooks' CPU seconds on one request to the one conversation."""

    one_seconds: list[float] = field(default_factory=list[float])
    """Per round, the CPU seconds of that request's `agent.run`."""

    def per_request(self) -> list[float]:
        """Per round, the hooks' mean CPU seconds on a request to one of the many conversations."""
        return [statistics.fmean(requests) for requests in self.hook_seconds]

    def hook_ratio(self) -> Spread:
        """Per round, the hooks' time on a request to one of the many conversations over their time on the one."""
        return Spread.of(paired_ratios(self.per_request(), self.one_hook_seconds))

    def hook_ms(self) -> dict[str, float]:
        """The median of the hooks' per-request CPU time, in milliseconds: many, one, and the first two passes."""
        return {
            MANY: statistics.median(self.per_request()) * 1000,
            ONE: statistics.median(self.one_hook_seconds) * 1000,
            'first request': statistics.median(self.first_hook_seconds) * 1000,
            'second request': statistics.median(self.second_hook_seconds) * 1000,
        }

    def run_ms(self) -> dict[str, float]:
        """The median of the runs' per-request CPU time, in milliseconds: many and one."""
        runs = [statistics.fmean(requests) for requests in self.seconds]
        return {MANY: statistics.median(runs) * 1000, ONE: statistics.median(self.one_seconds) * 1000}


async def _serve(
    agent: Agent[int, str], hooks: HookTimer, stored: bytes, conversation_id: str, turn: int, *, collect: bool = True
) -> tuple[float, float]:
    """Load the history from `stored`, collect garbage unless told not to, and time one run: its and its hooks' CPU."""
    history = ModelMessagesTypeAdapter.validate_json(stored)
    if collect:
        gc.collect()
    hooks.reset()
    start = time.process_time()
    await agent.run(prompt(turn), deps=turn, message_history=history, conversation_id=conversation_id)
    return time.process_time() - start, hooks.seconds


async def time_many_conversations(
    profile: Profile, turns: int, conversations: int, per_round: int, repeats: int
) -> ManyConversations:
    """Serve `conversations` conversations of `turns` turns in turn, `per_round` requests per round, beside one.

    Each round runs the one conversation's request and the many conversations' `per_round` requests in rotated
    order; the many conversations are served in turn across rounds, so `conversations - 1` requests to the others
    come between two to the same one.
    """
    hooks = HookTimer()
    agent = build_agent('append', function_model(profile), hooks)
    stored = ModelMessagesTypeAdapter.dump_json(await build_history('append', turns))
    run = uuid.uuid4().hex[:8]
    one, many = f'{run}:one', [f'{run}:conversation-{index}' for index in range(conversations)]
    result = ManyConversations(profile, turns, conversations)
    for warmed in (result.first_hook_seconds, result.second_hook_seconds):
        await _serve(agent, hooks, stored, one, turns + 1, collect=False)
        for conversation_id in many:
            warmed.append((await _serve(agent, hooks, stored, conversation_id, turns + 1, collect=False))[1])
    served = itertools.cycle(many)
    for round_index in range(repeats):
        for name in rotated([ONE, MANY], round_index):
            conversation_ids = [one] if name == ONE else [next(served) for _ in range(per_round)]
            timed = [
                await _serve(agent, hooks, stored, conversation_id, turns + 1) for conversation_id in conversation_ids
            ]
            if name == ONE:
                result.one_seconds.append(timed[0][0])
                result.one_hook_seconds.append(timed[0][1])
            else:
                result.seconds.append([seconds for seconds, _ in timed])
                result.hook_seconds.append([hook_seconds for _, hook_seconds in timed])
    return result


def _tool_loop(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    last = messages[-1]
    if isinstance(last, ModelRequest) and any(isinstance(part, ToolReturnPart) for part in last.parts):
        return ModelResponse(parts=[TextPart(REPLY)])
    return ModelResponse(parts=[ToolCallPart('lookup', {'topic': TOPIC})])


def tool_model(profile: Profile) -> FunctionModel:
    """A model that calls the scenario's tool once each turn and then answers, with or without inline support."""
    return FunctionModel(_tool_loop, profile=ModelProfile(supports_inline_system_prompts=profile == 'inline'))


def with_tool_calls(history: Sequence[ModelMessage]) -> list[ModelMessage]:
    """`history` (a request and a reply each turn) with each turn's tool call and its return between the two."""
    messages: list[ModelMessage] = []
    for turn, (request, response) in enumerate(zip(history[::2], history[1::2], strict=True), start=1):
        assert isinstance(request, ModelRequest) and isinstance(response, ModelResponse)
        call = ToolCallPart('lookup', {'topic': TOPIC}, tool_call_id=f'call-{turn}')
        returned = ToolReturnPart('lookup', lookup(TOPIC), tool_call_id=call.tool_call_id)
        messages += [request, replace(response, parts=[call]), replace(request, parts=[returned]), response]
    return messages


async def time_instrumented(profile: Profile, turns: int, repeats: int) -> Timing:
    """Time the static and append agents with and without instrumentation on a loaded tool loop of `turns` turns."""
    model = tool_model(profile)
    hooks = HookTimer()
    policies: tuple[Policy, ...] = ('static', 'append')
    histories = {policy: with_tool_calls(await build_history(policy, turns)) for policy in policies}
    variants: dict[str, Variant] = {}
    for policy, instrumented in itertools.product(policies, (False, True)):
        agent = build_agent(policy, model, hooks)
        if instrumented:
            agent.instrument = InstrumentationSettings(tracer_provider=TracerProvider())
        timed = hooks if policy == 'append' else None
        variants[f'{policy}-instrumented' if instrumented else policy] = Variant(
            agent, histories[policy], turns + 1, loaded=True, hooks=timed
        )
    rounds = await run_rounds(variants, repeats, turns + 1)
    sizes = {policy: stored_bytes(history) for policy, history in histories.items()}
    return Timing(profile, turns, rounds.seconds, rounds.hook_seconds, sizes, rounds.by_hook)


def run_share(timing: Timing, variant: str) -> Spread:
    """Per round, the plugin's hooks in `variant`'s run as a share of that run."""
    return Spread.of(paired_ratios(timing.hook_seconds[variant], timing.seconds[variant]))
