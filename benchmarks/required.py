"""What the hook-time targets leave the plugin: a capability that does only the work its guarantees require.

The targets on the plugin's hooks are shares of a whole `agent.run`. Part of what the hooks do on each request is
not a choice of this plugin but the price of what it promises, and any plugin that appends changes pays it:

- resolve the blocks, record each change (its diff, digests and integrity check), put the records on the request
  that goes into history, deliver them in the copy that is sent, send the prefix, and open a span;
- for every change already in the window, make sure its record wasn't edited in place (an edited record is never
  trusted: equal values of another type, `True` for `1`, count as edits), and send the request that carries it as
  a new message object with a new parts list, the record swapped for its text (Pydantic AI may change the message
  objects it is given, so none is handed over twice).

`RequiredWork` does exactly that, as cheaply as we know how, on the benchmark's scenario, and is timed the way the
plugin's hooks are (`measure.time_hooks`), in the same rounds. It does less than any real plugin must, so its time
is a lower bound: it knows the values the window received from the scenario rather than from the history, checks
the history's messages by identity but not their parts lists, checks the flat records of changes but not the
window's baseline or any other metadata (a record that stops being flat is left out, and one that becomes flat again
isn't seen), sends each change's stored diff or text rather than wording it for the delivery path, escapes
nothing, bounds no memory, and serves one conversation at a time.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from itertools import repeat
from operator import attrgetter, getitem, is_, is_not, itemgetter
from typing import Any, cast

from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import InstructionPart, ModelMessage, ModelRequest, ModelRequestPart, SystemPromptPart
from pydantic_ai.models import Model, ModelRequestContext

from pydantic_ai_append._delivery import copy_reused
from pydantic_ai_append._history import RECORD_KEY, carrier
from pydantic_ai_append._records import InstructionDeltaPart, content_hash
from pydantic_ai_append._rendering import SUPERSESSION_SENTENCE, context_element, record_change

from .measure import HookTimer, time_hooks
from .scenario import BLOCKS, STATIC_INSTRUCTIONS, lookup

__all__ = ('RequiredWork', 'required_agent')

_METADATA = attrgetter('metadata')
_RECORD = itemgetter(RECORD_KEY)
_FLAT = frozenset({str, int, type(None)})


@dataclass
class _Window:
    """What `RequiredWork` keeps of one conversation's history between its requests; only ever extended."""

    messages: list[ModelMessage] = field(default_factory=list[ModelMessage])
    """The history's messages read so far, as objects."""
    carriers: list[SystemPromptPart] = field(default_factory=list[SystemPromptPart])
    """The carriers of its changes' records, in order."""
    records: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    """A copy of each of those records, taken when it was read."""
    integer_of: list[int] = field(default_factory=list[int])
    """For each integer in a record, which record holds it."""
    integer_keys: list[str] = field(default_factory=list[str])
    """... under which key."""
    integers: list[int] = field(default_factory=list[int])
    """... and the object itself, which an equal value of another type is not."""
    sent: dict[int, tuple[ModelRequestPart, ...]] = field(default_factory=dict[int, tuple[ModelRequestPart, ...]])
    """The outgoing parts of each request that carries a record, by index."""

    def unchanged(self, messages: list[ModelMessage]) -> bool:
        """Whether `messages` starts with the messages read, whose records hold what they held then."""
        if len(messages) < len(self.messages) or not all(map(is_, messages, self.messages)):
            return False
        try:
            live: list[Any] = list(map(_RECORD, map(_METADATA, self.carriers)))
        except (KeyError, TypeError):
            # A carrier's metadata was replaced by one without a record, or by no dict at all.
            return False
        if live != self.records or not all(map(is_, map(type, live), repeat(dict))):
            return False
        gathered = list(map(live.__getitem__, self.integer_of))
        return all(map(is_, map(getitem, gathered, self.integer_keys), self.integers))

    def extend(self, messages: list[ModelMessage], stop: int) -> None:
        """Read `messages[len(self.messages):stop]`: their records, and the parts each request is sent with."""
        for index in range(len(self.messages), stop):
            message = messages[index]
            self.messages.append(message)
            if not isinstance(message, ModelRequest):
                continue
            parts: list[ModelRequestPart] = []
            for part in message.parts:
                record = _flat_record(part)
                if record is None:
                    parts.append(part)
                    continue
                assert isinstance(part, SystemPromptPart)
                for name, value in record.items():
                    if type(value) is int:
                        self.integer_of.append(len(self.records))
                        self.integer_keys.append(name)
                        self.integers.append(value)
                self.carriers.append(part)
                self.records.append(dict(record))
                text = record.get('diff') or record.get('content') or ''
                parts.append(SystemPromptPart(text, timestamp=part.timestamp))
            if any(map(is_not, parts, message.parts)):
                self.sent[index] = tuple(parts)


def _flat_record(part: ModelRequestPart) -> dict[str, Any] | None:
    """The record of a change `part` carries, if it is one: a dict of strings, integers and `None`."""
    if type(part) is not SystemPromptPart or part.content or type(metadata := part.metadata) is not dict:
        return None
    record: object = metadata.get(RECORD_KEY)
    if type(record) is not dict:
        return None
    values = cast('dict[str, object]', record)
    # Only a flat record is checked by a shallow copy: an edit inside a nested value would go unseen.
    if values.get('kind') != 'delta' or not _FLAT.issuperset(map(type, values.values())):
        return None
    return cast('dict[str, Any]', record)


class RequiredWork(AbstractCapability[int]):
    """Only the work the plugin's guarantees require on each request, on the benchmark's scenario (see the module).

    ```python
    from benchmarks.overhead import function_model
    from benchmarks.required import required_agent

    agent = required_agent(function_model('inline'))
    print(agent.run_sync('Hello', deps=1).output)
    #> Noted.
    ```
    """

    def __init__(self) -> None:
        self._windows: dict[str | None, _Window] = {}

    async def before_model_request(
        self, ctx: RunContext[int], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Check the window's records, send the requests that carry them anew, record this request's changes."""
        messages = list(request_context.messages)
        window = self._windows.get(ctx.conversation_id)
        if window is None or not window.unchanged(messages):
            window = self._windows[ctx.conversation_id] = _Window()
        stop = len(messages) - 1
        window.extend(messages, stop)
        # The plugin's own way of making them, the cheapest known.
        copy_reused(messages, messages, window.sent)
        # The values the window received are the blocks' at the turn before: the scenario's, not folded from history.
        received = {name: function(ctx.deps - 1) for name, function in BLOCKS}
        now = {name: function(ctx.deps) for name, function in BLOCKS}
        changes: list[InstructionDeltaPart] = [
            record_change(
                f'capability:required:{name}', received[name], now[name], previous_hash=content_hash(received[name])
            )
            for name in now
            if received[name] != now[name]
        ]
        carriers = [carrier(change) for change in changes]
        stored = ctx.messages[-1] if ctx.messages else None
        if isinstance(stored, ModelRequest):
            stored.parts = [*stored.parts, *carriers]
        last = messages[stop]
        assert isinstance(last, ModelRequest)
        delivered = [SystemPromptPart(change.diff or change.content or '') for change in changes]
        messages[stop] = replace(last, parts=[*last.parts, *delivered])
        request_context.messages = messages
        prefix = [
            InstructionPart(content=STATIC_INSTRUCTIONS),
            *(
                InstructionPart(content=context_element(f'capability:required:{name}', value))
                for name, value in received.items()
            ),
            InstructionPart(content=SUPERSESSION_SENTENCE),
        ]
        with ctx.tracer.start_as_current_span('required_work'):
            request_context.model_request_parameters = replace(
                request_context.model_request_parameters, instruction_parts=prefix
            )
        return request_context


def required_agent(model: Model, hooks: HookTimer | None = None) -> Agent[int, str]:
    """The benchmark's agent with `RequiredWork` in place of the plugin; with `hooks`, its hooks are timed into it."""
    capability = RequiredWork()
    if hooks is not None:
        time_hooks(capability, hooks)
    return Agent(model, deps_type=int, tools=[lookup], capabilities=[capability])
