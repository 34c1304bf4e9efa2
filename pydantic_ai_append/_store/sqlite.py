"""`SQLiteRecordStore`: a record store in an SQLite file, from the standard library, for the processes of one machine.

What a record store is, and the protocol this one implements (`SyncRecordStore`), are in `_store`.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from contextlib import closing
from datetime import timedelta
from os import PathLike

from pydantic_ai.exceptions import UserError

from .protocol import DEFAULT_TTL, RecordEntry, check_bounds


class SQLiteRecordStore:
    """The records of each conversation, in an SQLite file: shared by the processes of one machine, kept on restart.

    A `SyncRecordStore`, as `sqlite3` blocks: the capability runs its calls in a worker thread. The file is in WAL
    mode, so processes read while one writes; each save is one transaction, which also deletes expired entries and
    those written longest ago past `max_entries`. Expiry is by wall clock (`updated_at`), which other processes and a
    later one share. Safe to share between threads: each call opens its own connection and closes it.

    ```python
    import tempfile
    from pathlib import Path

    from pydantic_ai_append import SQLiteRecordStore

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / 'records.sqlite'
        SQLiteRecordStore(path).save('conversation-1', {'format': 1, 'carriers': []})
        print(SQLiteRecordStore(path).load('conversation-1'))  # as a restarted process would
    #> {'format': 1, 'carriers': []}
    ```
    """

    def __init__(
        self,
        path: str | PathLike[str],
        *,
        ttl: timedelta = DEFAULT_TTL,
        max_entries: int = 100_000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """A store in the file at `path`, created if missing, whose entries expire `ttl` after their last write.

        Raises:
            UserError: If `ttl` or `max_entries` is not positive, or the file can't be opened as a database.
        """
        check_bounds(ttl, max_entries=max_entries)
        self.path = path
        """The database file."""
        self.ttl = ttl
        """How long after its last write an entry is kept."""
        self.max_entries = max_entries
        """The most entries the store holds."""
        self._clock = clock
        try:
            with self._connect() as connection:
                connection.execute('PRAGMA journal_mode=WAL')  # kept in the file, for every later connection
                connection.execute(
                    'CREATE TABLE IF NOT EXISTS records'
                    ' (key TEXT PRIMARY KEY, entry TEXT NOT NULL, updated_at REAL NOT NULL)'
                )
                connection.execute('CREATE INDEX IF NOT EXISTS records_updated_at ON records (updated_at)')
        except sqlite3.Error as error:
            raise UserError(f"Can't open {str(path)!r} as a record store: {error}. Check the path.") from error

    def _connect(self) -> closing[sqlite3.Connection]:
        # A connection per call: none is tied to a thread or outlives the call, so the store needs no `close`.
        # Autocommit, so the transactions are the explicit ones below.
        return closing(sqlite3.connect(self.path, isolation_level=None))

    def load(self, key: str) -> RecordEntry | None:
        """The entry last saved for `key`, or `None` if there is none or it expired."""
        oldest = self._clock() - self.ttl.total_seconds()
        with self._connect() as connection:
            row = connection.execute(
                'SELECT entry FROM records WHERE key = ? AND updated_at >= ?', (key, oldest)
            ).fetchone()
        return json.loads(row[0]) if row is not None else None

    def save(self, key: str, entry: RecordEntry) -> None:
        """Keep `entry` for `key` in one transaction, deleting expired entries, then the oldest past
        `max_entries`.

        Raises:
            TypeError: If `entry` is not JSON-able.
            sqlite3.Error: If the database fails; nothing is written then.
        """
        text = json.dumps(entry)
        now = self._clock()
        with self._connect() as connection:
            # The write lock is taken first, so a concurrent writer waits (up to `sqlite3`'s 5 s) instead of failing
            # midway. A failure leaves the transaction open, and closing the connection rolls it back.
            connection.execute('BEGIN IMMEDIATE')
            connection.execute('INSERT OR REPLACE INTO records VALUES (?, ?, ?)', (key, text, now))
            connection.execute('DELETE FROM records WHERE updated_at < ?', (now - self.ttl.total_seconds(),))
            # Counted first: at 100,000 entries `count(*)` took 0.04 ms here, sorting them all for the oldest 6 ms.
            (count,) = connection.execute('SELECT count(*) FROM records').fetchone()
            if count > self.max_entries:
                connection.execute(
                    'DELETE FROM records WHERE rowid IN (SELECT rowid FROM records ORDER BY updated_at, rowid LIMIT ?)',
                    (count - self.max_entries,),
                )
            connection.execute('COMMIT')
