"""Where the rate limits count without Redis: a small SQLite file under the data directory, used
as a Django cache backend (``CACHES["throttle"]``, ``$PROBEBENCH_DATA_DIR/ratelimits.sqlite3``).

DRF's throttles keep one entry per client and scope: the times of its requests inside the window
(DRF's sliding window), stored with the window's length as its timeout. With Redis that entry
lives in Redis; here it is one row, read and written by its primary key, so a check costs the same
whatever the number of clients. Unlike Django's file cache this store never removes a live entry
to make room: a row goes only once it has expired (with its key's next write, or in one range
delete on the expiry index, at most every ``PURGE_EVERY_S`` seconds per process), or by
``delete``/``clear``.

``transaction()`` holds SQLite's write lock (``BEGIN IMMEDIATE``) around a throttle's
read-check-write (``probebench.throttling``), so two processes or threads serving requests at
the same moment cannot both take the last place of a budget. The file is SQLite's WAL mode:
readers never wait for a writer, and a commit does not wait for the disk.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.core.cache.backends.base import DEFAULT_TIMEOUT, BaseCache

#: how long a request waits for another process's count to commit before the store counts as
#: unreachable (``sqlite3.OperationalError``: the throttles then refuse a write with 503)
LOCK_WAIT_S = 5.0
#: expired rows of every key are removed at most this often per process
PURGE_EVERY_S = 60.0

SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, value BLOB NOT NULL, expires REAL);
CREATE INDEX IF NOT EXISTS entries_expires ON entries (expires);
"""
#: a row is live while its expiry (a Unix time; NULL: never) is in the future
LIVE = "(expires IS NULL OR expires > ?)"

_connections = threading.local()


class SQLiteCache(BaseCache):
    """A Django cache in one SQLite file (``LOCATION``): one connection per thread and process."""

    def __init__(self, location: str, params: dict[str, Any]):
        super().__init__(params)
        self.path = Path(location)
        self._next_purge = 0.0

    # ------------------------------------------------------------------ the connection

    def connection(self) -> sqlite3.Connection:
        """This thread's connection (a forked child opens its own: a connection is never shared)."""
        opened: dict[tuple[str, int], sqlite3.Connection] = _connections.__dict__.setdefault("opened", {})
        key = (str(self.path), os.getpid())
        conn = opened.get(key)
        if conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # autocommit (isolation_level None): transactions are begun explicitly, as IMMEDIATE
            conn = sqlite3.connect(self.path, timeout=LOCK_WAIT_S, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.executescript(SCHEMA)
            opened[key] = conn
        return conn

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """Hold the write lock from here to the end of the block (reads and writes in it are one
        atomic step for every other process); nested blocks join the outer one."""
        conn = self.connection()
        if conn.in_transaction:
            yield
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def _execute(self, sql: str, params: tuple = ()) -> sqlite3.Cursor:
        return self.connection().execute(sql, params)

    def _purge_expired(self, now: float) -> None:
        if now >= self._next_purge:
            self._execute("DELETE FROM entries WHERE expires <= ?", (now,))
            self._next_purge = now + PURGE_EVERY_S

    # ------------------------------------------------------------------ Django's cache API

    def get(self, key: Any, default: Any = None, version: int | None = None) -> Any:
        key = self.make_and_validate_key(key, version=version)
        row = self._execute(
            f"SELECT value FROM entries WHERE key = ? AND {LIVE}", (key, time.time())
        ).fetchone()
        return default if row is None else pickle.loads(row[0])  # noqa: S301 - our own file, our values

    def set(
        self, key: Any, value: Any, timeout: float | None = DEFAULT_TIMEOUT, version: int | None = None
    ) -> None:
        key = self.make_and_validate_key(key, version=version)
        expires = self.get_backend_timeout(timeout)
        now = time.time()
        with self.transaction():
            self._execute(
                "INSERT INTO entries (key, value, expires) VALUES (?, ?, ?)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires = excluded.expires",
                (key, pickle.dumps(value, pickle.HIGHEST_PROTOCOL), expires),
            )
            self._purge_expired(now)

    def add(
        self, key: Any, value: Any, timeout: float | None = DEFAULT_TIMEOUT, version: int | None = None
    ) -> bool:
        """Set the value only where the key has no live value; True if it was set."""
        key = self.make_and_validate_key(key, version=version)
        expires = self.get_backend_timeout(timeout)
        cursor = self._execute(
            "INSERT INTO entries (key, value, expires) VALUES (?, ?, ?)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires = excluded.expires"
            " WHERE entries.expires IS NOT NULL AND entries.expires <= ?",  # only over an expired row
            (key, pickle.dumps(value, pickle.HIGHEST_PROTOCOL), expires, time.time()),
        )
        return cursor.rowcount > 0

    def touch(self, key: Any, timeout: float | None = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        key = self.make_and_validate_key(key, version=version)
        expires = self.get_backend_timeout(timeout)
        cursor = self._execute(
            f"UPDATE entries SET expires = ? WHERE key = ? AND {LIVE}", (expires, key, time.time())
        )
        return cursor.rowcount > 0

    def delete(self, key: Any, version: int | None = None) -> bool:
        key = self.make_and_validate_key(key, version=version)
        return self._execute("DELETE FROM entries WHERE key = ?", (key,)).rowcount > 0

    def has_key(self, key: Any, version: int | None = None) -> bool:
        key = self.make_and_validate_key(key, version=version)
        row = self._execute(f"SELECT 1 FROM entries WHERE key = ? AND {LIVE}", (key, time.time())).fetchone()
        return row is not None

    def clear(self) -> None:
        self._execute("DELETE FROM entries")
