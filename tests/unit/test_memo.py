from __future__ import annotations

import threading

import pytest

from optimizer.estimator.memo import LruMemo


def test_least_recently_used_goes_first() -> None:
    memo: LruMemo[str, int] = LruMemo(2)
    assert memo.get_or_compute("a", lambda: 1) == 1
    assert memo.get_or_compute("b", lambda: 2) == 2
    assert memo.get_or_compute("a", lambda: -1) == 1  # a hit: "a" is now the newest
    memo.get_or_compute("c", lambda: 3)
    assert "a" in memo and "c" in memo and "b" not in memo
    assert len(memo) == 2


def test_threads_never_overfill_or_raise() -> None:
    memo: LruMemo[int, int] = LruMemo(16)
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        try:
            for i in range(2000):
                k = (i * 7 + seed) % 50
                assert memo.get_or_compute(k, lambda k=k: k * k) == k * k
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(memo) <= 16


def test_size_must_be_positive() -> None:
    with pytest.raises(ValueError):
        LruMemo(0)
