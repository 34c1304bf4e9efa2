"""Putting a conversation's records back into history that came through a UI adapter, which drops part metadata.

Pydantic AI's UI adapters (Vercel AI, AG-UI) send history to the client and load it back without any part's
`metadata`, so the carriers of the plugin's records come back as remnants, and every turn would open a new window. A
server that keeps `records_entry` of each run's history (by conversation id) can `reattach` it to the history the
client sends next.

A carrier is found again by the content of the conversation up to the message it is in, a key chained over what the
adapters keep: `k_i = sha256(k_{i-1} + kind + canonical content)`, per *unit*, a run of consecutive messages of one
kind (the adapters' loaders merge consecutive requests, or responses, into one message). A request's content is its
user prompts (texts; files by kind and URL, or by media type and the digest of their data) and its tool results
(by `tool_call_id` alone: AG-UI changes a result's type; a retry without a tool by its text); a response's is its text, consecutive parts joined,
and its tool calls (`tool_call_id`, `tool_name`, the arguments as the canonical JSON of `args_as_dict()`, since AG-UI
re-serializes them). System prompts, instructions, thinking, timestamps, ids and provider fields are left out: the
adapters move, join, strip or regenerate them. Equal keys mean equal conversations up to that point, so two identical
messages in a row are told apart by what came before them, and after an edit or a dropped message no key matches:
the carriers from there on are left out, and the plugin opens a new window there.
"""

from __future__ import annotations

import hashlib
import importlib
import uuid
import warnings
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, cast

from pydantic import TypeAdapter
from pydantic_ai import AgentRunResult, RunContext
from pydantic_ai.capabilities import ReinjectSystemPrompt, WrapRunHandler
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ModelResponsePart,
    RetryPromptPart,  # pyright: ignore[reportDeprecated]
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_core import to_jsonable_python

from .._encoding import sorted_json
from .._history import RECORD_KEY, holds_record, is_carrier
from .protocol import CheckedStore, OnStoreError, RecordStoreError
from .tenant import EntryKeys

_durable = importlib.import_module('pydantic_ai.durable_exec')
derived_conversation_id: Callable[[str], str] = getattr(_durable, 'conversation_id_from_run_id', None) or (
    # Public on newer releases; 2.58 has it in a private module alone, read only here.
    importlib.import_module('pydantic_ai.durable_exec._base').conversation_id_from_run_id
)
"""The conversation id Pydantic AI's durability capabilities derive from a run's id, when the app gives none."""

ENTRY_FORMAT = 1
"""The version of the entry `records_entry` writes, and the only one `reattach` reads."""

_RETRY = RetryPromptPart  # pyright: ignore[reportDeprecated] (what 2.58 writes, and older histories hold)
_CARRIER = TypeAdapter(SystemPromptPart)


def _canonical(value: object) -> str:
    return sorted_json(to_jsonable_python(value, bytes_mode='base64'))


def _user_item(item: object) -> object:
    if isinstance(item, str):
        return item
    if isinstance(item, BinaryContent):
        # `BinaryImage` and the like come back as plain `BinaryContent` from AG-UI: keyed by what they hold.
        return ['binary', item.media_type, hashlib.sha256(item.data).hexdigest()]
    url = getattr(item, 'url', None)
    return [getattr(item, 'kind', None), url] if isinstance(url, str) else to_jsonable_python(item)


def _request_token(part: ModelRequestPart | ModelResponsePart) -> object:
    """What an adapter keeps of a request part, or `None` if it keeps nothing the key can rely on."""
    if isinstance(part, UserPromptPart):
        items = [part.content] if isinstance(part.content, str) else list(part.content)
        return ['user', [_user_item(item) for item in items]]
    if isinstance(part, ToolReturnPart) or (isinstance(part, _RETRY) and part.tool_name is not None):
        # By its call alone: a retry comes back as a return, and AG-UI turns a result that isn't a string into one
        # (`42` as `'42'`, `None` as `''`) and a string of JSON into what it holds.
        return ['tool', part.tool_call_id]
    if isinstance(part, _RETRY) or part.part_kind == 'retry-feedback':
        # A retry without a tool comes back as the feedback part Pydantic AI 2.68 writes instead.
        return ['feedback', _canonical(getattr(part, 'content', None))]
    return None


def _response_tokens(message: ModelResponse) -> list[object]:
    tokens: list[object] = []
    for part in message.parts:
        if isinstance(part, TextPart) and part.content:
            # The loaders join consecutive text parts into one.
            if tokens and isinstance(last := tokens[-1], str):
                tokens[-1] = last + part.content
            else:
                tokens.append(part.content)
        elif isinstance(part, ToolCallPart):
            # As the adapters dump them: parsed, `{}` for none, an invalid string wrapped.
            tokens.append(['call', part.tool_call_id, part.tool_name, _canonical(part.args_as_dict())])
    return tokens


def _units(messages: Sequence[ModelMessage]) -> list[tuple[str, list[int]]]:
    """Each run of consecutive messages of one kind: its key, and the indexes of its messages."""
    units: list[tuple[str, list[int]]] = []
    tokens: list[object] = []
    key = ''
    for index, message in enumerate(messages):
        if not units or message.kind != messages[units[-1][1][-1]].kind:
            units.append(('', []))
            tokens = []
        if isinstance(message, ModelRequest):
            tokens.extend(token for part in message.parts if (token := _request_token(part)) is not None)
        else:
            tokens.extend(_response_tokens(message))
        previous = units[-2][0] if len(units) > 1 else ''
        key = hashlib.sha256(f'{previous}\n{message.kind}\n{_canonical(tokens)}'.encode()).hexdigest()
        units[-1] = (key, [*units[-1][1], index])
    return units


def content_keys(messages: Sequence[ModelMessage]) -> list[str]:
    """The key of each message of `messages`: the chained digest of the conversation up to the end of its unit.

    Args:
        messages: A message history, as the agent wrote it or as a UI adapter loaded it.
    """
    keys = [''] * len(messages)
    for key, indexes in _units(messages):
        for index in indexes:
            keys[index] = key
    return keys


def _is_kept(part: ModelRequestPart | ModelResponsePart) -> bool:
    return _request_token(part) is not None


def records_entry(messages: Sequence[ModelMessage]) -> dict[str, Any]:
    """What to store of `messages` for `reattach`: each carrier of the open window's records, where it is, and the
    part itself.

    A carrier's place is the key of its unit, the number of parts an adapter keeps before it in the unit (`after`),
    and the number of other parts (a system prompt) between the last of those and it (`skip`). The carriers start at
    the last baseline: a window is read from its baseline on, and the changes of windows before it aren't sent again,
    so the entry grows with the open window, not with the conversation.

    Args:
        messages: The history a run returned, with its records (`result.all_messages()`).

    Returns:
        A JSON-able dict, with a `format` version and the `carriers` in history order.
    """
    carriers: list[tuple[str, int, int, SystemPromptPart]] = []
    for key, indexes in _units(messages):
        after = skip = 0
        for index in indexes:
            message = messages[index]
            if not isinstance(message, ModelRequest):
                break
            for part in message.parts:
                if _is_kept(part):
                    after, skip = after + 1, 0
                elif holds_record(part):
                    if _is_baseline(part):
                        carriers.clear()
                    carriers.append((key, after, skip, part))
                elif not is_carrier(part):
                    skip += 1
    return {
        'format': ENTRY_FORMAT,
        'carriers': [
            {'key': key, 'after': after, 'skip': skip, 'part': _CARRIER.dump_python(part, mode='json')}
            for key, after, skip, part in carriers
        ],
    }


def _is_baseline(part: SystemPromptPart) -> bool:
    stored: object = cast('dict[str, Any]', part.metadata)[RECORD_KEY]
    return isinstance(stored, dict) and cast('dict[str, object]', stored).get('kind') == 'baseline'


def reattach(messages: Sequence[ModelMessage], entry: dict[str, Any]) -> list[ModelMessage]:
    """A copy of `messages` with what is left of the plugin's carriers taken out, and `entry`'s carriers put back.

    Each stored carrier goes into the unit with its key, in its place among the parts there, in stored order, until
    the first whose key no history unit has: the conversation changed there (an edit, a dropped message), and the
    carriers from there on are left out, so the plugin opens a new window. Nothing else is dropped or moved. The
    carriers aren't checked here: the plugin checks each record when it reads it.

    Args:
        messages: History a client sent back, as a UI adapter loaded it.
        entry: What `records_entry` returned for the conversation's last history, or `{}` if nothing is stored.
    """
    # The parts of each request that changes, built whole before the request is copied once. The keys are the same
    # with carriers or without: they leave system prompts out.
    parts: dict[int, list[ModelRequestPart]] = {
        index: [part for part in message.parts if not is_carrier(part)]
        for index, message in enumerate(messages)
        if isinstance(message, ModelRequest) and any(is_carrier(part) for part in message.parts)
    }
    if entry.get('format') == ENTRY_FORMAT:
        units = dict(_units(messages))
        inserted: set[int] = set()
        for stored in entry['carriers']:
            if (indexes := units.get(stored['key'])) is None:
                break
            part = _CARRIER.validate_python(stored['part'])
            _insert(messages, parts, indexes, part, (stored['after'], stored['skip']), inserted)
            inserted.add(id(part))
    history = list(messages)
    for index, request_parts in parts.items():
        history[index] = replace(history[index], parts=request_parts)
    return history


def _insert(
    messages: Sequence[ModelMessage],
    parts: dict[int, list[ModelRequestPart]],
    indexes: list[int],
    part: SystemPromptPart,
    place: tuple[int, int],
    inserted: set[int],
) -> None:
    """Put `part` in the unit of `indexes`, after its `after`-th kept part, past `skip` other parts and earlier ones."""
    after, skip = place
    for index in indexes:
        if index not in parts:
            parts[index] = list(cast('ModelRequest', messages[index]).parts)
    kept = [(index, at) for index in indexes for at, item in enumerate(parts[index]) if _is_kept(item)]
    index, at = kept[after - 1] if after else (indexes[0], -1)
    request_parts = parts[index]
    at += 1
    while (
        at < len(request_parts) and not _is_kept(request_parts[at]) and (id(request_parts[at]) in inserted or skip > 0)
    ):
        skip -= id(request_parts[at]) not in inserted
        at += 1
    request_parts.insert(at, part)


def last_record(messages: Sequence[ModelMessage]) -> object:
    """The record held by the last carrier of `messages`, or `None`; looked for from the end, where records are added."""
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            for part in reversed(message.parts):
                if holds_record(part):
                    return cast('dict[str, Any]', part.metadata)[RECORD_KEY]
    return None


async def run_keeping_records(
    store: CheckedStore | None, on_error: OnStoreError, keys: EntryKeys, ctx: RunContext[Any], handler: WrapRunHandler
) -> AgentRunResult[Any]:
    """Run `handler` with the records its history lost put back from `store`, and save them if the run added any.

    Only history that comes without records uses the store: history with records is kept by the app, records and all.
    A run without history is a conversation's first turn when the app named the conversation (`app_named`), saved for
    the later turns whose history comes back without records (a hand-written endpoint's, a UI adapter's); otherwise
    it is a one-shot run, with nothing to keep. A run adds records only at the end of history, so it added one if the
    last record is another after the run; records are looked for from the end. The entry's key names the run's tenant
    (`tenant`). The save runs after the run returns its result (`CheckedStore.save_later`).
    """
    messages = ctx.messages
    if any(isinstance(cap, ReinjectSystemPrompt) and cap.replace_existing for cap in ctx.capabilities.values()):
        _apart_from_the_start(messages)
    if store is None or ctx.conversation_id is None or last_record(messages) is not None:
        return await handler()
    if not messages and not app_named(ctx.conversation_id, ctx.run_id):
        return await handler()
    key = keys.key(ctx)
    if messages:
        try:
            entry = await store.load(key)
        except RecordStoreError as error:
            if on_error == 'raise':
                raise
            warnings.warn(f'{error.failure} The request goes on with a new window.', UserWarning, stacklevel=2)
        else:
            if entry is not None:
                keys.warn_if_shared()
                messages[:] = reattach(messages, entry)
    before = last_record(messages)
    result = await handler()
    history = result.all_messages()
    if last_record(history) != before:
        # The turn is done, and a UI adapter has streamed it: a slow or failing store must not hold back its result.
        store.save_later(key, records_entry(history))
    return result


def app_named(conversation_id: str, run_id: str | None) -> bool:
    """Whether the app named the conversation, rather than Pydantic AI making up its id for a run given none.

    Pydantic AI gives every run a conversation id: the app's, or one it makes up when given none: derived from the run
    id under durable execution (whose history keeps the records), or else the UUID7 its process-wide generator draws
    right after the run id: in the same millisecond, the next count; else a later millisecond. An app's id was drawn
    before the run started.
    """
    if run_id is None:
        return True
    if conversation_id == derived_conversation_id(run_id):
        return False
    try:
        conversation, run = uuid.UUID(conversation_id), uuid.UUID(run_id)
    except ValueError:
        return True
    if not conversation.version == run.version == 7:
        return True
    # The first 48 bits are the millisecond; the count is the 12 bits after the version and the 30 after the variant.
    milliseconds = (conversation.int >> 80) - (run.int >> 80)
    if milliseconds == 0:
        return _uuid7_count(conversation) != _uuid7_count(run) + 1
    return not 0 < milliseconds < 1_000


def _uuid7_count(value: uuid.UUID) -> int:
    return (value.int >> 64 & 0xFFF) << 30 | (value.int >> 32 & 0x3FFF_FFFF)


def _apart_from_the_start(messages: list[ModelMessage]) -> None:
    """Make the history's carriers other parts than the run started with, in place, by a new timestamp (never sent).

    `ReinjectSystemPrompt(replace_existing=True)`, which the UI adapters add under `manage_system_prompt='server'`,
    drops from history every system prompt part equal to one the run started with, to replace a client's: with
    history kept on the server (an adapter's `conversation_store`), the records too, and every turn would open a new
    window. A record in history is the server's: a UI adapter keeps no part metadata from a client.
    """
    now = datetime.now(UTC)
    for index, message in enumerate(messages):
        if isinstance(message, ModelRequest) and any(holds_record(part) for part in message.parts):
            parts = [replace(part, timestamp=now) if holds_record(part) else part for part in message.parts]
            messages[index] = replace(message, parts=parts)
