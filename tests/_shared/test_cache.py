"""The caches' storage: bounded by entries, by bytes and by the memory limit together, oldest first, thread-safe.

Unit tests: the bounds are far too large to reach through an agent in a test.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from inline_snapshot import snapshot
from pydantic_ai.exceptions import UserError

from pydantic_ai_append import set_memory_limit
from pydantic_ai_append._shared.cache import BoundedCache, memory_limit, size_of


@pytest.fixture
def limit() -> Iterator[None]:
    """The memory limit as the test sets it, restored afterwards."""
    before = memory_limit()
    yield
    set_memory_limit(before)


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


def test_a_cleared_cache_holds_nothing_and_fills_again():
    cache = BoundedCache[str, str](max_entries=4, max_bytes=1_000)
    cache.put('a', 'A', size=10)
    cache.clear()
    assert (len(cache), cache.size, cache.get('a')) == (0, 0, None)
    cache.put('b', 'B', size=10)
    assert (len(cache), cache.size, cache.get('b')) == (1, 10, 'B')


def test_the_memory_limit_is_64_mib_by_default():
    assert memory_limit() == 64 * 1024 * 1024


def test_caches_share_the_memory_limit_and_the_oldest_entry_of_any_goes_first(limit: None):
    first, second = (BoundedCache[str, str](max_entries=100, max_bytes=10_000, pooled=True) for _ in range(2))
    unpooled = BoundedCache[str, str](max_entries=100, max_bytes=10_000)
    set_memory_limit(1_000)
    first.put('a', 'A', size=400)
    second.put('b', 'B', size=400)
    unpooled.put('u', 'U', size=5_000)
    first.put('c', 'C', size=400)
    assert (first.get('a'), second.get('b'), first.get('c'), unpooled.get('u')) == snapshot((None, 'B', 'C', 'U'))
    assert first.size + second.size == 800


def test_a_lower_memory_limit_drops_the_oldest_entries_at_once(limit: None):
    cache = BoundedCache[str, str](max_entries=100, max_bytes=10_000, pooled=True)
    set_memory_limit(1_000)
    for key in 'abc':
        cache.put(key, key.upper(), size=300)
    set_memory_limit(400)
    assert (cache.get('a'), cache.get('b'), cache.get('c'), cache.size) == snapshot((None, None, 'C', 300))
    cache.put('huge', 'H', size=401)
    assert (cache.get('huge'), len(cache)) == snapshot((None, 1))


@pytest.mark.parametrize('value', [0, -1, 1.5, '64', True, None])
def test_the_memory_limit_refuses_anything_but_a_positive_number_of_bytes(value: object):
    with pytest.raises(UserError, match='`set_memory_limit` takes a positive number of bytes') as error:
        set_memory_limit(value)  # pyright: ignore[reportArgumentType]
    assert repr(value) in str(error.value)
