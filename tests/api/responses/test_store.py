from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.api.responses.store import ResponsesStore, weigh


def test_bounded_oldest_goes_first() -> None:
    store = ResponsesStore(2, 60)
    for n in range(3):
        store.put({"id": f"r{n}"}, [{"role": "user", "content": str(n)}])
    assert store.get("r0") is None and len(store) == 2
    stored = store.get("r2")
    assert stored is not None and stored.conversation == [{"role": "user", "content": "2"}]


def test_expiry_and_delete() -> None:
    store = ResponsesStore(10, 0.05)
    store.put({"id": "a"}, [])
    store.put({"id": "b"}, [])
    assert store.delete("a") and not store.delete("a")
    time.sleep(0.1)
    assert store.get("b") is None


def test_size_zero_keeps_nothing() -> None:
    store = ResponsesStore(0, 60)
    store.put({"id": "a"}, [])
    assert store.get("a") is None and not store.delete("a") and len(store) == 0


def _weight(text: str) -> int:
    return weigh({"id": "x"}, [{"role": "user", "content": text}])


def test_bytes_bound_drops_oldest_first() -> None:
    one = _weight("a" * 1000)
    store = ResponsesStore(100, 60, max_bytes=2 * one + 10)
    for n in range(3):
        assert store.put({"id": f"r{n}"}, [{"role": "user", "content": "a" * 1000}])
    assert store.get("r0") is None and store.get("r1") is not None and store.get("r2") is not None
    assert store.bytes <= store.max_bytes


def test_an_entry_larger_than_the_budget_is_not_kept() -> None:
    store = ResponsesStore(100, 60, max_bytes=5000)
    assert store.put({"id": "small"}, [])
    assert not store.put({"id": "big"}, [{"role": "user", "content": "b" * 6000}])
    assert store.get("big") is None and store.get("small") is not None


def test_replacing_an_id_does_not_count_twice() -> None:
    store = ResponsesStore(100, 60, max_bytes=10_000)
    store.put({"id": "a"}, [{"role": "user", "content": "x" * 100}])
    store.put({"id": "a"}, [{"role": "user", "content": "y" * 100}])
    assert len(store) == 1 and store.bytes == _weight("y" * 100)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abcdefgh"), st.integers(0, 3000),
                          st.booleans()), max_size=40),
       st.integers(1, 6), st.integers(100, 8000))
def test_both_bounds_always_hold(ops: list[tuple[str, int, bool]], size: int,
                                 budget: int) -> None:
    store = ResponsesStore(size, 60, max_bytes=budget)
    for key, length, delete in ops:
        if delete:
            store.delete(key)
        else:
            store.put({"id": key}, [{"role": "user", "content": "z" * length}])
        assert len(store) <= size and store.bytes <= budget
        assert store.bytes == sum(s.size for s in store._entries.values())
