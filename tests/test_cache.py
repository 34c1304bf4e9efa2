"""The process-wide caches' storage: bounded by entries and by bytes, oldest first, and safe between threads.

Unit tests: the bounds are far too large to reach through an agent in a test.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Self, cast

from inline_snapshot import snapshot
from pydantic_ai.messages import ModelMessage, ModelRequest, SystemPromptPart

from pydantic_ai_append import InstructionBaselinePart, InstructionDeltaPart
from pydantic_ai_append._cache import BoundedCache, process_caches, size_of
from pydantic_ai_append._compat import instruction_id
from pydantic_ai_append._delivery import deliver
from pydantic_ai_append._rendering import InlineRenderer
from pydantic_ai_append._window import CurrentBlock, Delivery, WindowState, plan_request


def test_the_oldest_entries_go_first_past_the_entry_bound():
    cache = BoundedCache[str, str](max_entries=2, max_bytes=1_000)
    for key in 'abc':
        cache.put(key, key.upper(), size=10)
    assert (cache.get('a'), cache.get('b'), cache.get('c'), len(cache), cache.size) == snapshot((None, 'B', 'C', 2, 20))


def test_the_oldest_entries_go_first_past_the_byte_bound():
    cache = BoundedCache[str, str](max_entries=100, max_bytes=100)
    cache.put('a', 'A', size=60)
    cache.put('b', 'B', size=30)
    cache.put('c', 'C', size=30)
    assert (cache.get('a'), cache.get('b'), cache.get('c'), cache.size) == snapshot((None, 'B', 'C', 60))


def test_a_value_larger_than_the_byte_bound_is_never_kept():
    cache = BoundedCache[str, str](max_entries=100, max_bytes=100)
    cache.put('a', 'A', size=10)
    cache.put('huge', 'H', size=101)
    assert (cache.get('a'), cache.get('huge'), len(cache)) == snapshot(('A', None, 1))


def test_putting_a_key_again_replaces_its_size():
    cache = BoundedCache[str, str](max_entries=100, max_bytes=100)
    cache.put('a', 'A', size=40)
    cache.put('a', 'AA', size=50)
    assert (cache.get('a'), cache.size, len(cache)) == snapshot(('AA', 50, 1))


def test_size_of_counts_strings_and_skips_none():
    assert size_of([None]) == 0
    assert size_of(['x' * 1000]) > size_of(['x']) + 900


def test_threads_evicting_at_once_keep_the_bounds():
    cache = BoundedCache[tuple[int, int], int](max_entries=50, max_bytes=10_000)

    # An error in a thread fails the test: pytest turns it into a warning, and warnings are errors here.
    def fill(thread: int) -> None:
        for number in range(2_000):
            cache.put((thread, number), number, size=100)
            cache.get((thread, number - 1))

    threads = [threading.Thread(target=fill, args=(thread,)) for thread in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(cache) <= 50
    assert cache.size == 100 * len(cache) <= 10_000


def test_setdefault_keeps_the_first_value_and_never_one_over_the_byte_bound():
    cache = BoundedCache[str, list[str]](max_entries=100, max_bytes=100)
    first = cache.setdefault('a', list, size=10)
    assert cache.setdefault('a', list, size=10) is first
    huge = cache.setdefault('huge', list, size=101)
    assert (huge, cache.get('huge'), len(cache)) == snapshot(([], None, 1))


def test_content_key_tells_apart_types_and_refuses_what_is_not_json():
    from pydantic_ai_append._cache import content_key

    assert content_key({'a': [1, {'b': None}]}) == content_key({'a': [1, {'b': None}]})
    assert content_key({'a': [1]}) != content_key({'a': [True]})
    assert content_key({'a': {1: 'x'}}) is None
    assert content_key({'a': ('x',)}) is None


def test_a_cleared_cache_holds_nothing_and_fills_again():
    cache = BoundedCache[str, str](max_entries=4, max_bytes=1_000)
    cache.put('a', 'A', size=10)
    cache.clear()
    assert (len(cache), cache.size, cache.get('a')) == (0, 0, None)
    cache.put('b', 'B', size=10)
    assert (len(cache), cache.size, cache.get('b')) == (1, 10, 'B')


def _delivered_parts(timestamps: int, *, wrap: bool) -> tuple[list[object], int]:
    """The parts `deliver` sends for one change recorded in `timestamps` carriers of their own, and its entry's size."""
    change = InstructionDeltaPart(id=f'capability:c:wrap-{wrap}', content='- [x] one', base_hash=None)
    start = datetime(2026, 12, 1, tzinfo=UTC)
    messages: list[ModelMessage] = [
        ModelRequest(parts=[SystemPromptPart('', timestamp=start + timedelta(seconds=index))])
        for index in range(timestamps)
    ]
    deliveries = [Delivery(index, 0, change, False) for index in range(timestamps)]
    first = deliver(messages, deliveries, InlineRenderer(), wrap=wrap)
    again = deliver(messages, deliveries, InlineRenderer(), wrap=wrap)
    entry = process_caches()['change wordings'].get((change, False))
    assert entry is not None
    kept: list[object] = [
        before.parts[0] for before, after in zip(first, again, strict=True) if before.parts[0] is after.parts[0]
    ]
    size: int = entry.size
    return kept, size


def test_a_change_keeps_its_delivered_parts_up_to_a_bound_and_its_entry_counts_them():
    kept, size = _delivered_parts(100, wrap=False)
    # One part per carrier timestamp is kept and sent again, up to the bound; the rest are built on each request.
    assert len(kept) == 64
    assert size > 64 * 512
    # `<system>`-wrapped parts, each with a text of its own, are kept fewer.
    wrapped, wrapped_size = _delivered_parts(10, wrap=True)
    assert len(wrapped) == 4
    assert wrapped_size < size


class Lookalike(str):
    """A text that says it equals `claimed` and hashes as `claimed` does: a cache keyed by it finds `claimed`'s entry."""

    claimed: str

    def __new__(cls, text: str, claimed: str) -> Self:
        lookalike = super().__new__(cls, text)
        lookalike.claimed = claimed
        return lookalike

    def __eq__(self, other: object) -> bool:
        return True

    def __hash__(self) -> int:
        return hash(self.claimed)


def test_caches_keyed_by_text_never_take_a_str_subclass_for_the_text_it_claims():
    # Unit tests: Pydantic AI hands the plugin plain strings for ids and literal instructions, but a block function
    # may return a subclass, and a history built in Python may hold one. Each cache would give the claimed text's
    # entry (the first assertion of each pair shows the subclass does find it in a plain dict).
    literal = CurrentBlock('agent', 'Be brief.', 'literal')
    appending = CurrentBlock('capability:c:state', 'a', 'append')
    opened = plan_request(WindowState(), [literal, appending])
    assert opened.opened is not None
    baseline = cast('InstructionBaselinePart', opened.records[0])
    state = WindowState(baseline=baseline, received={'capability:c:state': 'a'})
    assert plan_request(state, [literal, appending]).opened is None
    edited = CurrentBlock('agent', Lookalike('Be long.', 'Be brief.'), 'literal')
    assert {'Be brief.': 1}.get(cast('str', edited.content)) == 1
    assert plan_request(state, [edited, appending]).opened is not None

    renderer = InlineRenderer()
    assert renderer.block('agent:memory', 'old') == '<context id="agent:memory">\nold\n</context>'
    assert renderer.block('agent:memory', Lookalike('new', 'old')) == '<context id="agent:memory">\nnew\n</context>'

    assert instruction_id('agent:memory').name == 'memory'
    assert instruction_id(Lookalike('agent:notes', 'agent:memory')).name == 'notes'
