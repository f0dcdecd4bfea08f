"""A bounded, thread-safe least-recently-used memo for the estimator's results.

Server threads share these memos, so insertions and evictions take a lock (a hit needs none); the
value itself is computed outside it (two threads may compute the same entry once each, which is
harmless: estimates are pure). ``functools.lru_cache`` cannot be used because the keys are built
from a workload digest and the callers need ``len`` and ``clear`` on a named memo.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
_MISSING = object()


class LruMemo(Generic[K, V]):
    def __init__(self, maxsize: int) -> None:
        if maxsize < 1:
            raise ValueError("maxsize must be at least 1")
        self.maxsize = maxsize
        self._data: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get_or_compute(self, key: K, compute: Callable[[], V]) -> V:
        data = self._data
        # A hit takes no lock: each OrderedDict call is atomic under the interpreter lock, and an
        # entry another thread evicts between the two calls is still the right value to return.
        value = data.get(key, _MISSING)  # a miss raises nothing: new workloads miss hundreds of times
        if value is not _MISSING:
            try:
                data.move_to_end(key)
            except KeyError:
                pass
            return value  # type: ignore[return-value,no-any-return,unused-ignore]
        value = compute()
        with self._lock:
            data[key] = value
            data.move_to_end(key)
            while len(data) > self.maxsize:
                data.popitem(last=False)
        return value

    def put(self, key: K, value: V) -> None:
        """``value`` under ``key`` in place of what it held (the most recently used)."""
        with self._lock:
            data = self._data
            data[key] = value
            data.move_to_end(key)
            while len(data) > self.maxsize:
                data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
