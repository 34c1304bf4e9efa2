"""The record store's cost per run: one `agent.run` behind a UI adapter, against the same run on history kept whole.

On a history of the chat scenario (`build_history`), each round runs, in rotated order:

- `kept`: the history with its records, as an app that keeps Pydantic AI's history passes it (the store unused);
- `lost`: the history as a UI adapter gives it back (every part's metadata gone), with no store: a new window;
- `memory` and `sqlite`: the same lost history with an `InMemoryRecordStore` or a `SQLiteRecordStore` holding the
  conversation's entry, which the run puts back into history and saves again after adding its change.

Each history is loaded afresh from JSON outside the clock. The figure is each variant's CPU time over `kept`'s in
the same round, the median of those ratios with their quartiles.

The function model has no known prices, so that history is one window, and its entry is the whole window. The entry's
size is also measured where windows open as on a provider: the same conversation run turn by turn (not built), its
windows opened by Anthropic's cache prices, against every record of the conversation, which an entry held before it
kept the open window alone.
"""

from __future__ import annotations

import asyncio
import gc
import json
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import TypeAdapter
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, SystemPromptPart

from pydantic_ai_append import (
    CachePrices,
    InMemoryRecordStore,
    InstructionBaselinePart,
    SQLiteRecordStore,
    instruction_records,
)
from pydantic_ai_append._history import holds_record
from pydantic_ai_append._store.reattach import records_entry

from .histories import build_history, function_model
from .measure import Spread, paired_ratios, rotated
from .scenario import build_agent, prompt
from .tables import table

__all__ = ('STORE_VARIANTS', 'EntrySize', 'StoreTiming', 'store_sections', 'time_stores')

STORE_VARIANTS = ('kept', 'lost', 'memory', 'sqlite')
ANTHROPIC = CachePrices(input=3.0, cache_read=0.3, cache_write=3.75)
"""Claude Sonnet's prices per million tokens: a cache write 1.25x the input price, a read 0.1x."""
_CARRIER = TypeAdapter(SystemPromptPart)


@dataclass(frozen=True)
class EntrySize:
    """A conversation's entry where windows open by price, after a number of turns."""

    windows: int
    """The windows the conversation opened."""

    entry_bytes: int
    """The entry's size as JSON: the open window's records."""

    every_record_bytes: int
    """The size of an entry of every record of the conversation, as entries were before."""


@dataclass(frozen=True)
class StoreTiming:
    """The runs of one history size, one CPU figure per variant per round."""

    turns: int
    seconds: dict[str, list[float]]
    entry_bytes: int
    """The size of the conversation's entry, as JSON."""

    priced: EntrySize
    """The entry of the same number of turns, windows opened by price."""

    def ratio(self, variant: str) -> Spread:
        """Per round, `variant`'s run over `kept`'s."""
        return Spread.of(paired_ratios(self.seconds[variant], self.seconds['kept']))

    def median_ms(self, variant: str) -> float:
        """The median CPU time of `variant`'s runs, in milliseconds."""
        return statistics.median(self.seconds[variant]) * 1000


def _without_metadata(history: Sequence[ModelMessage]) -> bytes:
    dumped = ModelMessagesTypeAdapter.dump_python(list(history), mode='json')
    for message in dumped:
        for part in message['parts']:
            part.pop('metadata', None)
    return ModelMessagesTypeAdapter.dump_json(ModelMessagesTypeAdapter.validate_python(dumped))


async def _time(turns: int, rounds: int, directory: Path, priced: EntrySize) -> StoreTiming:
    history = await build_history('append', turns)
    kept, lost = ModelMessagesTypeAdapter.dump_json(history), _without_metadata(history)
    entry = records_entry(history)
    memory, sqlite = InMemoryRecordStore(), SQLiteRecordStore(directory / f'records-{turns}.sqlite')
    stores = {'kept': None, 'lost': None, 'memory': memory, 'sqlite': sqlite}
    agents = {
        name: build_agent('append', function_model('inline'), record_store=store) for name, store in stores.items()
    }
    seconds: dict[str, list[float]] = {name: [] for name in STORE_VARIANTS}
    for round_index in range(rounds):
        # The entry of the history each run starts from, under the key the capability reads: what the turn before it
        # saved.
        await memory.save('scenario:memory', entry)
        sqlite.save('scenario:sqlite', entry)
        for name in rotated(STORE_VARIANTS, round_index):
            messages = ModelMessagesTypeAdapter.validate_json(kept if name == 'kept' else lost)
            gc.collect()
            start = time.process_time()
            await agents[name].run(prompt(turns + 1), deps=turns + 1, message_history=messages, conversation_id=name)
            seconds[name].append(time.process_time() - start)
    return StoreTiming(turns, seconds, len(json.dumps(entry)), priced)


async def _priced_entries(sizes: Sequence[int]) -> dict[int, EntrySize]:
    """The entry after each of `sizes` turns of the chat scenario, run turn by turn with windows opened by price."""
    agent = build_agent('append', function_model('inline'), record_store=None, windows=ANTHROPIC)
    history: list[ModelMessage] = []
    entries: dict[int, EntrySize] = {}
    for turn in range(1, max(sizes, default=0) + 1):
        history = (await agent.run(prompt(turn), deps=turn, message_history=history)).all_messages()
        if turn in sizes:
            carriers = [part for message in history for part in message.parts if holds_record(part)]
            windows = sum(isinstance(record, InstructionBaselinePart) for record in instruction_records(history))
            # Every carrier in an entry's shape: a 64-character key, and its place.
            every = [
                {'key': '0' * 64, 'after': 1, 'skip': 0, 'part': _CARRIER.dump_python(part, mode='json')}
                for part in carriers
            ]
            every_bytes = len(json.dumps({'format': 1, 'carriers': every}))
            entries[turn] = EntrySize(windows, len(json.dumps(records_entry(history))), every_bytes)
    return entries


async def time_stores(sizes: Sequence[int], rounds: int) -> list[StoreTiming]:
    """Time the variants on a history of each size, `rounds` rounds; measure the priced entry at each size."""
    priced = await _priced_entries(sizes)
    running = asyncio.all_tasks()
    with tempfile.TemporaryDirectory() as directory:
        timings = [await _time(turns, rounds, Path(directory), priced[turns]) for turns in sizes]
        # A store saves after the run returns its result: the last saves may still be writing the directory.
        await asyncio.gather(*(asyncio.all_tasks() - running))
        return timings


def store_sections(timings: Sequence[StoreTiming]) -> list[str]:
    """The report's table of the store's cost, if it was timed."""
    if not timings:
        return []
    rows: list[list[str]] = []
    for timing in timings:
        for variant in STORE_VARIANTS[1:]:
            spread = timing.ratio(variant)
            rows.append(
                [
                    str(timing.turns),
                    variant,
                    f'{timing.median_ms("kept"):.1f} ms',
                    f'{timing.median_ms(variant):.1f} ms',
                    f'{spread.median:.2f}x ({spread.p25:.2f}-{spread.p75:.2f})',
                    f'{timing.entry_bytes:,} bytes',
                ]
            )
    sizes = [
        [
            str(timing.turns),
            str(timing.priced.windows),
            f'{timing.priced.entry_bytes:,} bytes',
            f'{timing.priced.every_record_bytes:,} bytes',
            f'{64 * 1024 * 1024 // timing.priced.entry_bytes:,}',
        ]
        for timing in timings
    ]
    return [
        'The record store behind a UI adapter: one agent.run on history without metadata, against history kept whole '
        '(CPU, median of per-round ratios, p25-p75)\n\n'
        + table(['turns', 'variant', 'kept', 'variant time', 'over kept', 'entry'], rows),
        "The entry where windows open by price (Anthropic's): the open window's records, against every record of the "
        'conversation, and how many such entries 64 MiB holds\n\n'
        + table(['turns', 'windows', 'entry', 'every record', 'entries in 64 MiB'], sizes),
    ]
