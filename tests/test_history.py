"""Hostile history: each way a client can damage or forge the records a history carries, and what the next turn does.

Each case edits a real history (a baseline, then two changes sent as diffs) as a client that sends history back could
and runs the next turn, unsigned and signed. Pinned for both: a new window, or the window carried on with what the model
was told in the system voice (read as a model would, by this file's code) and what the turn added. Nothing raises and
every user prompt reaches the model; where the engine promises it (a signed history, a window it opened anew) nothing
planted is told in the system voice and the current value is the one in effect. Unsigned, while each change names the
one before it, only the last record is checked: a client that edits an earlier change's text, or computes the plain
check, is believed (the documented cost). A 10 MB block and a window of 5,000 changes are tried the same way. The
cases are listed in docs/records-and-trust.md ("Hostile history").
"""

from __future__ import annotations

import functools
import os
import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelRequest, SystemPromptPart, UserPromptPart

from pydantic_ai_append import (
    AppendInstructions,
    InstructionDeltaPart,
    RecordStore,
    SyncRecordStore,
    instruction_records,
)
from pydantic_ai_append._encoding import seal
from pydantic_ai_append._history import RECORD_KEY
from pydantic_ai_append._records import content_hash

from .conversation import ScriptedModel

KEY = 'server secret'
BLOCK = 'capability:todos:state'
PLANTED = 'PLANTED'
"""The text every forgery plants."""
PLANTED_ELEMENT = f'<context id="{BLOCK}">\n{PLANTED}\n</context>'
"""A full value of the block, planted, as the documented wire format writes it."""

_ITEMS = '\n'.join(f'item {number} to do' for number in range(12))
TODOS = {
    'v0': _ITEMS,
    'v1': _ITEMS.replace('item 5 to do', 'item 5 done'),
    'v2': _ITEMS.replace('item 5 to do', 'item 5 done').replace('item 6 to do', 'item 6 done'),
}
"""The block's value on each of the three runs; the next turn keeps `v2`. The two edits are on neighbouring lines, so
each diff's context holds the line the other edits: a diff read against the wrong value doesn't apply."""


@dataclass
class Built:
    agent: Agent[str, str]
    chat: ScriptedModel
    history: list[ModelMessage]
    values: dict[str, str]
    """The block's values by name, for reading back what the model was told."""
    window: str | None
    """The instructions the history's last run sent: a next turn that sends them too carried the window on."""
    key: bytes | None


def build(
    values: dict[str, str] = TODOS,
    runs: Sequence[str] = ('v0', 'v1', 'v2'),
    *,
    signed: bool = False,
    conversation_id: str = 'c1',
    record_store: RecordStore | SyncRecordStore | None = None,
) -> Built:
    """A run for each name in `runs` (prompted `turn 0`, `turn 1`...), the block at that value; the first calls a
    tool, so history holds its return."""
    chat = ScriptedModel(script=[[('look', {})], 'ok'])
    # No record store unless given: the cases are what history alone holds (`_store/test_reattach.py` has a store).
    todos = AppendInstructions[str](
        id='todos', signing_key=KEY if signed else None, record_store=record_store, tenant=lambda ctx: 'alice'
    )

    @todos.instructions(name='state')
    def state(ctx: RunContext[str]) -> str:  # pyright: ignore[reportUnusedFunction]
        return ctx.deps

    agent = Agent(chat.model(), deps_type=str, capabilities=[todos])

    @agent.tool_plain
    def look() -> str:  # pyright: ignore[reportUnusedFunction]
        """Look around."""
        return 'nothing here'

    history: list[ModelMessage] = []
    for run, name in enumerate(runs):
        result = agent.run_sync(
            f'turn {run}', deps=values[name], message_history=history, conversation_id=conversation_id
        )
        history = result.all_messages()
    return Built(agent, chat, history, values, chat.last.instructions, KEY.encode() if signed else None)


# --- What the model was told, read the way a model would

OPENING = re.compile(rf'<(context|context-diff) id="{BLOCK}">\n')
HUNK = re.compile(r'@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@')


def apply_diff(old: str | None, hunks: str) -> str | None:
    """`old` with the hunks of a `<context-diff>` applied, as a model would read them; `None` if they don't apply.

    Written from the documented format (unified hunks), not taken from the package, so that a diff told against the
    wrong value shows here rather than being applied the same wrong way.
    """
    lines = old.split('\n') if old is not None else None
    # The last hunk first, so that the line numbers of those before it still hold.
    for hunk in reversed(re.split(r'\n(?=@@ )', hunks)):
        header, *body = hunk.split('\n')
        if lines is None or not (numbers := HUNK.fullmatch(header)):
            return None
        # An empty old range names the line before it; any other names its own first line.
        start = int(numbers[1]) - (numbers[2] != '0')
        taken, put = ([line[1:] for line in body if line[:1] in tags] for tags in (' -', ' +'))
        if lines[start : start + len(taken)] != taken:
            return None
        lines[start : start + len(taken)] = put
    return '\n'.join(lines) if lines is not None else None


def reading(values: dict[str, str], texts: list[str], value: str | None = None) -> tuple[list[str], str | None]:
    """Each element of the block in `texts` (as the documented wire format writes them), labelled by the value a
    model holds after it (`full v0`, `diff v1`; `PLANTED` for one holding planted text, `?` for another, `✗` where a
    diff doesn't apply), and the value held at the end, from `value` held before."""
    labels: list[str] = []
    for text in texts:
        at = 0
        while opening := OPENING.search(text, at):
            at = text.index(f'\n</{opening[1]}>', opening.end())
            body = text[opening.end() : at]
            value = body if opening[1] == 'context' else apply_diff(value, body)
            named = next((name for name, known in values.items() if known == value), '?')
            named = '✗' if value is None else PLANTED if PLANTED in value else named
            labels.append(f'{"full" if opening[1] == "context" else "diff"} {named}')
    return labels, value


def listed(labels: list[str]) -> str:
    """`labels` in order or, for hundreds, each once in order of first use with how often it comes."""
    if len(labels) > 100:
        labels = [f'{label} ×{count}' if count > 1 else label for label, count in Counter(labels).items()]
    return ', '.join(labels) or 'nothing'


def next_turn(built: Built, history: list[ModelMessage], current: str) -> str:
    """Run the next turn on `history` with the block at the value named `current`, check what the engine promises,
    and describe the turn: `new` (a new window), or `window: told | added`, where `window` is `continued` (the prefix
    of the history's last run) or `planted` (a prefix the client wrote), `told` the elements of the prefix and of
    history, and `added` those the turn added."""
    value = built.values[current]
    built.agent.run_sync('four', deps=value, message_history=history, conversation_id='c1')
    # The histories of the large cases are shared: what this turn saw (megabytes, for a huge block) is let go.
    seen = built.chat.seen.pop()
    prompts = [part.content for message in history for part in message.parts if isinstance(part, UserPromptPart)]
    users = [line[6:] for line in seen.messages if line.startswith('user: ') and '<system>' not in line]
    assert users == [*prompts, 'four']
    asked = len(seen.messages) - seen.messages[::-1].index('user: four')
    before, added = (
        [line for line in lines if line.startswith('system:') or '<system>' in line]
        for lines in (seen.messages[:asked], seen.messages[asked:])
    )
    prefix, held = reading(built.values, [seen.instructions or ''])
    told, held = reading(built.values, before, held)
    fresh, held = reading(built.values, added, held)
    window = 'continued' if seen.instructions == built.window else 'new' if prefix == [f'full {current}'] else 'planted'
    if built.key is not None or window == 'new':
        assert held == value and not any(PLANTED in text for text in [seen.instructions or '', *before, *added])
    if window == 'new':
        # The prefix states the current value, and nothing of the old window is sent.
        assert not told and not fresh
        return window
    return f'{window}: {listed([*prefix, *told])} | {listed(fresh)}'


def outcomes(edit: Edit, unsigned: Built, signed: Built, current: str = 'v2') -> object:
    """The next turn after `edit`, unsigned then signed: one outcome where signing changes nothing."""
    first, second = (next_turn(built, edit(built), current) for built in (unsigned, signed))
    return first if first == second else (first, second)


# --- Editing a history

Edit = Callable[[Built], list[ModelMessage]]
At = tuple[int, int]


def carriers(history: list[ModelMessage]) -> list[At]:
    """Where each record sits, as `(message index, part index)`, in history order: the baseline first."""
    return [
        (message_index, part_index)
        for message_index, message in enumerate(history)
        if isinstance(message, ModelRequest)
        for part_index, part in enumerate(message.parts)
        if isinstance(part, SystemPromptPart) and part.metadata and RECORD_KEY in part.metadata
    ]


def part_at(history: list[ModelMessage], at: At) -> SystemPromptPart:
    part = history[at[0]].parts[at[1]]
    assert isinstance(part, SystemPromptPart)
    return part


def record_of(part: SystemPromptPart) -> dict[str, Any]:  # a copy, to edit
    return dict((part.metadata or {})[RECORD_KEY])


def edited(history: list[ModelMessage], index: int, edit: Callable[[list[Any]], object]) -> list[ModelMessage]:
    """A copy of `history` whose message at `index` has its list of parts edited by `edit`."""
    parts = list(history[index].parts)
    edit(parts)
    return [*history[:index], replace(history[index], parts=parts), *history[index + 1 :]]


def with_part(history: list[ModelMessage], at: At, part: object) -> list[ModelMessage]:
    return edited(history, at[0], lambda parts: parts.__setitem__(at[1], part))


def sealed(text: str, record: dict[str, Any], key: bytes | None = None) -> SystemPromptPart:
    """A carrier whose record passes its check (the plain one a client can compute, or signed with `key`)."""
    payload = {name: value for name, value in record.items() if name != 'check'}
    return SystemPromptPart(text, metadata={RECORD_KEY: seal(payload, key, text or None)})


def appended(built: Built, part: SystemPromptPart) -> list[ModelMessage]:
    """`part` added after the last change, as by a client adding a record of its own."""
    last = carriers(built.history)[-1]
    return edited(built.history, last[0], lambda parts: parts.insert(last[1] + 1, part))


def changed(change: int, edit: Callable[[Built, SystemPromptPart, dict[str, Any]], SystemPromptPart]) -> Edit:
    """The carrier of the `change`-th record (the baseline is 0, -1 the last change) replaced by what `edit` makes of
    it and its record."""

    def apply(built: Built) -> list[ModelMessage]:
        at = carriers(built.history)[change]
        part = part_at(built.history, at)
        return with_part(built.history, at, edit(built, part, record_of(part)))

    return apply


def text_planted(_: Built, part: SystemPromptPart, __: dict[str, Any]) -> SystemPromptPart:
    """The planted word added to the first line a change's diff adds, its record left as it was."""
    return replace(part, content=re.sub(r'^(\+.*)$', rf'\1 {PLANTED}', part.content, count=1, flags=re.MULTILINE))


def state_undone(_: Built, part: SystemPromptPart, record: dict[str, Any]) -> SystemPromptPart:
    """A change's record made to say the value it replaced is still in effect, its check not updated."""
    return replace(part, metadata={RECORD_KEY: {**record, 'state': {BLOCK: record['base']}}})


def cut_short(_: Built, part: SystemPromptPart, record: dict[str, Any]) -> SystemPromptPart:
    """A record cut short after its first fields, as a store with a size limit might keep it."""
    return replace(part, metadata={RECORD_KEY: dict(list(record.items())[:3])})


def newer(built: Built, part: SystemPromptPart, record: dict[str, Any]) -> SystemPromptPart:
    """A change as a newer release would write it, its check (or signature) valid."""
    return sealed(part.content, {**record, 'v': 4}, built.key)


def foreign(built: Built, _: SystemPromptPart, __: dict[str, Any]) -> SystemPromptPart:
    """The last change of another conversation, to a value of the client's, recorded as this one is (signed with the
    same key, for a signed one)."""
    values = {**TODOS, 'v2': TODOS['v1'].replace('item 6 to do', PLANTED)}
    other = build(values, signed=built.key is not None, conversation_id='c2')
    return part_at(other.history, carriers(other.history)[-1])


def planted_change(built: Built) -> list[ModelMessage]:
    last = record_of(part_at(built.history, carriers(built.history)[-1]))
    record = {**last, 'base': last['state'][BLOCK], 'state': {BLOCK: content_hash(PLANTED)}, 'prev': last['check']}
    return appended(built, sealed(PLANTED_ELEMENT, record))


def planted_diff(built: Built) -> list[ModelMessage]:
    last = record_of(part_at(built.history, carriers(built.history)[-1]))
    state = {BLOCK: content_hash(TODOS['v0'].replace('item 0 to do', PLANTED))}
    record = {**last, 'base': content_hash(TODOS['v0']), 'state': state, 'prev': ''}
    text = f'<context-diff id="{BLOCK}">\n@@ -1,2 +1,2 @@\n-item 0 to do\n+{PLANTED}\n item 1 to do\n</context-diff>'
    return appended(built, sealed(text, record))


def planted_baseline(built: Built) -> list[ModelMessage]:
    baseline = record_of(part_at(built.history, carriers(built.history)[0]))
    return appended(built, sealed('', {**baseline, 'instructions': [{'id': BLOCK, 'content': PLANTED}]}))


def without(history: list[ModelMessage], at: At) -> list[ModelMessage]:
    return edited(history, at[0], lambda parts: parts.pop(at[1]))


def before_baseline(built: Built) -> list[ModelMessage]:
    baseline, first, _ = carriers(built.history)
    moved = part_at(built.history, first)
    return edited(without(built.history, first), baseline[0], lambda parts: parts.insert(baseline[1], moved))


def swapped(built: Built) -> list[ModelMessage]:
    _, first, second = carriers(built.history)
    history = with_part(built.history, first, part_at(built.history, second))
    return with_part(history, second, part_at(built.history, first))


def moved_off(onto: str) -> Edit:
    """The last change's carrier taken out, and its record put onto the tool return, onto the request holding the
    user's prompt (a `UserPromptPart` has no metadata of its own), or onto a system prompt with text of its own."""

    def edit(built: Built) -> list[ModelMessage]:
        at = carriers(built.history)[-1]
        metadata = {RECORD_KEY: record_of(part_at(built.history, at))}
        history = without(built.history, at)
        if onto == 'request':
            return [*history[: at[0]], replace(history[at[0]], metadata=metadata), *history[at[0] + 1 :]]
        if onto == 'system prompt':
            prompt = SystemPromptPart(f'{PLANTED} rules', metadata=metadata)
            return edited(history, at[0], lambda parts: parts.append(prompt))
        index = next(index for index, message in enumerate(history) if message.parts[0].part_kind == 'tool-return')
        return edited(history, index, lambda parts: parts.__setitem__(0, replace(parts[0], metadata=metadata)))

    return edit


def metadata_dropped(built: Built) -> list[ModelMessage]:
    history = built.history
    for at in carriers(history):
        history = with_part(history, at, SystemPromptPart(part_at(history, at).content))
    return history


EDITS: dict[str, Edit] = {
    'untouched': lambda built: built.history,
    # The last change, or the first of the two, edited in place.
    'text-edited-last': changed(-1, text_planted),
    'text-edited-middle': changed(1, text_planted),
    'record-edited-last': changed(-1, state_undone),
    'record-edited-middle': changed(1, state_undone),
    'truncated': changed(-1, cut_short),
    'newer-format': changed(-1, newer),
    'cross-conversation': changed(-1, foreign),
    # The first change taken out (as a history processor that trims parts may do), moved in front of the baseline it
    # was made against, made to trade places with the second, or repeated after it.
    'change-dropped': lambda built: without(built.history, carriers(built.history)[1]),
    'change-before-baseline': before_baseline,
    'changes-swapped': swapped,
    'change-duplicated': lambda built: appended(built, part_at(built.history, carriers(built.history)[1])),
    # Records of the client's with the plain check: a change to a value of its own, naming the last change as the one
    # before it; a diff against the first value, naming no record before it; a baseline opening a window of its own.
    'planted-change': planted_change,
    'planted-diff': planted_diff,
    'planted-baseline': planted_baseline,
    # The last change's record moved off its carrier.
    'on-tool-return': moved_off('tool return'),
    'on-user-request': moved_off('request'),
    'on-system-text': moved_off('system prompt'),
    # What a UI adapter that drops part metadata leaves: the baseline's empty part, the changes' elements alone; and
    # an element of the client's left the same way.
    'metadata-dropped': metadata_dropped,
    'remnant-planted': lambda built: appended(built, SystemPromptPart(PLANTED_ELEMENT)),
}


@pytest.mark.parametrize('case', list(EDITS))
def test_hostile_history(case: str):
    expected = snapshot(
        {
            'untouched': 'continued: full v0, diff v1, diff v2 | nothing',
            'text-edited-last': 'new',
            'text-edited-middle': ('continued: full v0, diff PLANTED, diff ✗ | nothing', 'new'),
            'record-edited-last': 'new',
            'record-edited-middle': ('continued: full v0, diff v1, diff v2 | nothing', 'new'),
            'truncated': 'new',
            'newer-format': 'new',
            'cross-conversation': ('continued: full v0, diff v1, diff PLANTED | diff v2', 'new'),
            'change-dropped': 'continued: full v0 | full v2',
            'change-before-baseline': 'continued: full v0 | full v2',
            'changes-swapped': 'continued: full v0, diff v1 | diff v2',
            'change-duplicated': 'continued: full v0, diff v1, diff v2 | nothing',
            'planted-change': ('continued: full v0, diff v1, diff v2, full PLANTED | full v2', 'new'),
            'planted-diff': ('continued: full v0, diff v1, diff v2 | nothing', 'new'),
            'planted-baseline': ('planted: full PLANTED | full v2', 'new'),
            'on-tool-return': 'continued: full v0, diff v1 | diff v2',
            'on-user-request': 'continued: full v0, diff v1 | diff v2',
            'on-system-text': 'new',
            'metadata-dropped': 'new',
            'remnant-planted': 'new',
        }
    )[case]
    assert outcomes(EDITS[case], build(), build(signed=True)) == expected


# --- Large windows: a 10 MB block, and 5,000 changes in one window

HUGE_BYTES = int(os.environ.get('PYDANTIC_AI_APPEND_HUGE_BLOCK_BYTES', str(10 * 1024 * 1024)))
"""The size of the huge block: 10 MB, as issue 12 asks; set `PYDANTIC_AI_APPEND_HUGE_BLOCK_BYTES` to try others."""


@functools.cache
def huge_values() -> dict[str, str]:
    """A block of `HUGE_BYTES` in lines of 100 bytes, then a one-line edit in its middle, then a line added."""
    lines = [f'line {number:09d} '.ljust(99, '.') for number in range(HUGE_BYTES // 100)]
    middle = len(lines) // 2
    edited = [*lines[:middle], lines[middle].replace('.', 'e'), *lines[middle + 1 :]]
    return {'v0': '\n'.join(lines), 'v1': '\n'.join(edited), 'v2': '\n'.join([*edited, 'line added at the end'])}


@functools.cache
def huge_history(signed: bool) -> Built:
    """The three runs of the huge block, built once for the cases that share it (each edits a copy)."""
    return build(huge_values(), signed=signed)


@pytest.fixture(scope='module', autouse=True)
def forget_large_histories() -> Iterator[None]:
    # A huge block's history and what its runs saw take a few hundred MB; they are kept only while the module runs.
    yield
    for cached in (huge_values, huge_history, toggled):
        cached.cache_clear()


def halved(_: Built, part: SystemPromptPart, record: dict[str, Any]) -> SystemPromptPart:
    """A baseline's block text cut to its first half, as a store with a limit on a value's size might keep it."""
    value = record['instructions'][0]['content']
    record['instructions'] = [{'id': BLOCK, 'content': value[: len(value) // 2]}]
    return replace(part, metadata={RECORD_KEY: record})


def rewritten(_: Built, __: SystemPromptPart, record: dict[str, Any]) -> SystemPromptPart:
    """A change rewritten as a full value of the client's, linked as it was, with the plain check."""
    value = f'{huge_values()["v2"]} {PLANTED}'
    return sealed(f'<context id="{BLOCK}">\n{value}\n</context>', {**record, 'state': {BLOCK: content_hash(value)}})


HUGE_EDITS: dict[str, Edit] = {
    'untouched': lambda built: built.history,
    # What a server that stores history does: every record is a fresh object, read again.
    'reloaded': lambda built: ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(built.history)),
    'text-edited-last': changed(-1, text_planted),
    'text-edited-middle': changed(1, text_planted),
    'baseline-truncated': changed(0, halved),
    'rewritten-whole': changed(-1, rewritten),
}


@pytest.mark.parametrize('case', list(HUGE_EDITS))
def test_a_10_mb_block(case: str):
    expected = snapshot(
        {
            'untouched': 'continued: full v0, diff v1, diff v2 | nothing',
            'reloaded': 'continued: full v0, diff v1, diff v2 | nothing',
            'text-edited-last': 'new',
            'text-edited-middle': ('continued: full v0, diff PLANTED, diff PLANTED | nothing', 'new'),
            'baseline-truncated': 'new',
            'rewritten-whole': ('continued: full v0, diff v1, full PLANTED | diff v2', 'new'),
        }
    )[case]
    assert outcomes(HUGE_EDITS[case], huge_history(False), huge_history(True)) == expected


CHANGES = 5_000

_TO_DO = '\n'.join(f'item {number:02d} to do' for number in range(20))
TOGGLED = {
    't0': _TO_DO,
    't1': _TO_DO.replace('item 10 to do', 'item 10 done'),
    # The next turn's value, which neither the baseline nor any change held.
    'latest': _TO_DO.replace('item 19 to do', 'item 19 done'),
}
"""The two values a long window's block toggles between, each change sent as a diff; then the next turn's."""


@functools.cache
def toggled(changes: int, *, signed: bool = False) -> Built:
    """A history whose window holds `changes` changes, the block toggling between `t0` and `t1`.

    A request for each would take minutes at 5,000; but every change to `t1` is the same element with the same
    digests, and so is every change back, but for `prev`. So the last two runs of a real history are repeated, each
    change naming the one before it and sealed again, and the whole loaded from JSON as a stored history would be.
    `test_a_toggled_history_is_what_the_agent_writes` checks that against running every request.
    """
    built = build(TOGGLED, ('t0', 't1', 't0'), signed=signed)
    starts = [index for index, message in enumerate(built.history) if isinstance(message.parts[0], UserPromptPart)]
    runs = built.history[starts[1] : starts[2]], built.history[starts[2] :]
    history = built.history[: starts[1]]
    check = record_of(part_at(history, carriers(history)[0]))['check']
    for change in range(changes):
        for message in runs[change % 2]:
            parts: list[Any] = []
            for part in message.parts:
                if isinstance(part, UserPromptPart):
                    part = replace(part, content=f'turn {change + 1}')
                elif isinstance(part, SystemPromptPart):
                    part = sealed(part.content, {**record_of(part), 'prev': check}, built.key)
                    check = record_of(part)['check']
                parts.append(part)
            history.append(replace(message, parts=parts))
    return replace(built, history=ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(history)))


@pytest.mark.parametrize('signed', [False, True], ids=['unsigned', 'signed'])
def test_a_toggled_history_is_what_the_agent_writes(signed: bool):
    # Twelve changes, run for real and built by `toggled`: the same carriers, the same prompts, and the next turn
    # sends the same.
    changes = 12
    ran = build(TOGGLED, [('t0', 't1')[run % 2] for run in range(changes + 1)], signed=signed)
    made = toggled(changes, signed=signed)
    stored = [
        [(part.content, record_of(part)) for part in (part_at(built.history, at) for at in carriers(built.history))]
        for built in (ran, made)
    ]
    assert stored[0] == stored[1] and len(stored[1]) == changes + 1
    for built in (ran, made):
        built.agent.run_sync('four', deps=TOGGLED['t0'], message_history=built.history, conversation_id='c1')
    assert made.chat.last == ran.chat.last


def turns_lost(built: Built) -> list[ModelMessage]:
    # A store lost 999 turns (each a request and its response) from the middle, an odd number, so the change after
    # the gap was made against the other value.
    first, after = carriers(built.history)[2_000][0], carriers(built.history)[2_999][0]
    return built.history[:first] + built.history[after:]


LONG_EDITS: dict[str, Edit] = {
    'untouched': lambda built: built.history,
    'text-edited-in-the-middle': changed(CHANGES // 2, text_planted),
    'truncated-in-the-middle': changed(CHANGES // 2, cut_short),
    'turns-lost-in-the-middle': turns_lost,
}


@pytest.mark.parametrize('case', list(LONG_EDITS))
def test_5000_changes_in_one_window(case: str):
    expected = snapshot(
        {
            'untouched': 'continued: full t0, diff t1 ×2500, diff t0 ×2500 | diff latest',
            'text-edited-in-the-middle': (
                'continued: full t0, diff t1 ×1250, diff t0 ×1249, diff PLANTED, diff ✗ ×2500 | diff ✗',
                'new',
            ),
            'truncated-in-the-middle': 'new',
            'turns-lost-in-the-middle': 'continued: full t0, diff t1 ×2000, diff t0 ×2000 | diff latest',
        }
    )[case]
    assert outcomes(LONG_EDITS[case], toggled(CHANGES), toggled(CHANGES, signed=True), 'latest') == expected


def test_a_diff_whose_base_was_trimmed_from_history_is_left_out_of_the_records():
    notes = ['\n'.join(f'{line}. a note long enough that a one-line edit is sent as a diff' for line in range(20))]
    context = AppendInstructions(id='notes')
    context.instructions(name='memory')(lambda: notes[-1])
    agent = Agent(ScriptedModel().model(), capabilities=[context])
    history = agent.run_sync('one').all_messages()
    notes.append(notes[-1].replace('3. a note', '3. an edited note'))
    history = agent.run_sync('two', message_history=history).all_messages()
    full = instruction_records(history)
    assert [type(record).__name__ for record in full] == snapshot(['InstructionBaselinePart', 'InstructionDeltaPart'])
    assert isinstance(full[1], InstructionDeltaPart) and full[1].diff is not None
    # Without the baseline the diff has no text to apply to, so its value can't be rebuilt.
    assert instruction_records(history[2:]) == []
