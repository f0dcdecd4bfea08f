"""Answers already given, kept for the same question on the same prices.

A quote, break-even or estimate is a pure function of the request (path, query, body, the
``Accept`` header) and of the prices: the store's set of current snapshots, which
``snapshot_id()`` names. Keys are a SHA-256 digest of all of that, so a new refresh (from this
process or another one) makes every older entry unreachable at once. Entries also expire after
``ttl_s``, because warnings such as "prices are stale" depend on the clock. Bounded by entry count
and total bytes, least recently used out first.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

CACHED_PATHS = frozenset({"/v1/quote", "/v1/breakeven", "/v1/estimate"})


@dataclass(frozen=True)
class CachedAnswer:
    status: int
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes
    stored_at: float


class AnswerCache:
    def __init__(self, max_entries: int = 512, max_bytes: int = 64_000_000, ttl_s: float = 60.0) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.ttl_s = ttl_s
        self._entries: OrderedDict[str, CachedAnswer] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(path: str, query: bytes, accept: bytes, body: bytes, version: str) -> str:
        digest = hashlib.sha256()
        for part in (path.encode(), query, accept, version.encode(), body):
            digest.update(len(part).to_bytes(8, "big"))
            digest.update(part)
        return digest.hexdigest()

    def get(self, key: str) -> CachedAnswer | None:
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None and time.monotonic() - hit.stored_at > self.ttl_s:
                self._drop(key)
                hit = None
            if hit is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return hit

    def put(self, key: str, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        if len(body) > self.max_bytes // 8:
            return  # one huge answer must not flush everything else
        entry = CachedAnswer(status, tuple(headers), body, time.monotonic())
        with self._lock:
            if key in self._entries:
                self._drop(key)
            self._entries[key] = entry
            self._bytes += len(body)
            while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
                self._drop(next(iter(self._entries)))

    def _drop(self, key: str) -> None:
        entry = self._entries.pop(key)
        self._bytes -= len(entry.body)


class StoreVersion:
    """The prices' version that keys the cache: which snapshots are current, the runs and bills
    learnt from, the stored measurements (three small reads in one transaction: 0.1-0.2 ms on
    SQLite, about 1 ms on PostgreSQL over loopback, ``bench/store_reads.py``; on a thread of its
    own, ``middleware``). ``if_unchanged`` gives the last version read without reading
    it again when the store can tell cheaply that nothing was committed since
    (``PriceStore.change_mark``: SQLite's data version, or on PostgreSQL the change notices a
    server's store listens for), so a request misses the cache, or hits it, without that thread
    hop; elsewhere it gives None and the version is read."""

    def __init__(self, store_of: Callable[[], Any]) -> None:
        self._store_of = store_of
        self._last: tuple[Any, int, str] | None = None  # (store, change mark, version), replaced whole

    def read(self) -> str | None:
        store = self._store_of()
        if store is None:
            return None
        from pricing.store.measurements import measurements_version
        from pricing.store.runs import version

        # Taken before the reads: a write between the two leaves a mark the next look sees differ.
        mark = store.change_mark()
        # Quotes also read the factors learnt from bills: a new import or run is a new version;
        # and the stored measurements (optimizer.measured): adding or removing one is one too.
        # One transaction for the three (``PriceStore.reading``).
        with store.reading():
            seen = f"{store.snapshot_id()}|{version(store)}|{measurements_version(store)}"
        if mark is not None:
            self._last = (store, mark, seen)
        return seen

    def if_unchanged(self) -> str | None:
        """The last version read, when the store says no write was committed since; else None."""
        last = self._last
        store = self._store_of()
        if last is None or store is None or last[0] is not store:
            return None
        mark = store.change_mark()
        return last[2] if mark is not None and mark == last[1] else None
