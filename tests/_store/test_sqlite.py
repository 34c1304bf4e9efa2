"""`SQLiteRecordStore` on its own: its file, read by a new store and by other processes, a failed write, and a path it
cannot open. What every store keeps, and for how long, is in `test_protocol.py`.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from contextlib import closing
from datetime import timedelta
from pathlib import Path

import pytest
from inline_snapshot import snapshot
from pydantic_ai.exceptions import UserError

from pydantic_ai_append import RecordStoreError, SQLiteRecordStore
from pydantic_ai_append._store.protocol import as_async

from .test_protocol import Clock, entry

pytestmark = pytest.mark.anyio


async def test_expired_entries_leave_the_sqlite_file_on_a_write(tmp_path: Path):
    clock = Clock()
    store = SQLiteRecordStore(tmp_path / 'records.sqlite', clock=clock, ttl=timedelta(hours=1))
    for name in 'abc':
        store.save(name, entry())
    clock.now += 3601
    store.save('d', entry())
    assert rows(tmp_path / 'records.sqlite') == ['d']


def rows(path: Path) -> list[str]:
    with closing(sqlite3.connect(path)) as connection:
        return [row[0] for row in connection.execute('SELECT key FROM records ORDER BY key')]


async def test_a_new_sqlite_store_on_the_same_file_reads_what_an_old_one_wrote(tmp_path: Path):
    path = tmp_path / 'records.sqlite'
    await as_async(SQLiteRecordStore(path)).save('a', entry(1))
    restarted = as_async(SQLiteRecordStore(path))
    assert await restarted.load('a') == entry(1)


WRITER = textwrap.dedent("""
    import sys
    from pydantic_ai_append import SQLiteRecordStore

    path, prefix, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    store = SQLiteRecordStore(path)
    for n in range(count):
        store.save(f'{prefix}-{n}', {'n': n, 'after': store.load(f'{prefix}-{n - 1}') is not None})
    print(store.load('shared'))
    store.save('shared', {'by': prefix})
""")


def run_writer(path: Path, prefix: str, count: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, '-c', WRITER, str(path), prefix, str(count)], stdout=subprocess.PIPE, text=True
    )


def test_processes_writing_in_turn_read_each_others_entries(tmp_path: Path):
    path = tmp_path / 'records.sqlite'
    store = SQLiteRecordStore(path)
    store.save('shared', {'by': 'test'})
    assert run_writer(path, 'other', 1).communicate()[0] == "{'by': 'test'}\n"
    assert (store.load('shared'), store.load('other-0')) == snapshot(({'by': 'other'}, {'n': 0, 'after': False}))
    store.save('shared', {'by': 'test, again'})
    assert run_writer(path, 'other', 1).communicate()[0] == "{'by': 'test, again'}\n"


def test_processes_writing_at_once_lose_no_write(tmp_path: Path):
    path = tmp_path / 'records.sqlite'
    SQLiteRecordStore(path)  # the file and its table, before the writers race to create them
    writers = [run_writer(path, prefix, 40) for prefix in ('first', 'second')]
    for writer in writers:
        writer.communicate()
        assert writer.returncode == 0
    store = SQLiteRecordStore(path)
    for prefix in ('first', 'second'):
        assert [store.load(f'{prefix}-{n}') for n in range(40)] == [{'n': n, 'after': n > 0} for n in range(40)]


async def test_a_failed_sqlite_write_writes_nothing(tmp_path: Path):
    clock = Clock()
    path = tmp_path / 'records.sqlite'
    store = SQLiteRecordStore(path, clock=clock, ttl=timedelta(hours=1))
    store.save('a', entry(1))
    with closing(sqlite3.connect(path)) as connection:
        # A database refusing the delete of expired entries, which comes after the insert in the same transaction.
        connection.execute(
            "CREATE TRIGGER refuse BEFORE DELETE ON records BEGIN SELECT RAISE(ABORT, 'disk on fire'); END"
        )
        connection.commit()
    clock.now += 3601
    with pytest.raises(RecordStoreError) as raised:
        await as_async(store).save('b', entry(2))
    assert (raised.value.key, raised.value.action, repr(raised.value.__cause__)) == snapshot(
        ('b', 'save', "IntegrityError('disk on fire')")
    )
    assert rows(path) == ['a']


def test_an_sqlite_store_names_a_path_it_cannot_open(tmp_path: Path):
    path = tmp_path / 'missing' / 'records.sqlite'
    with pytest.raises(UserError) as raised:
        SQLiteRecordStore(path)
    assert (
        str(raised.value)
        == f"Can't open {str(path)!r} as a record store: unable to open database file. Check the path."
    )
