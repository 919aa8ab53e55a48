from __future__ import annotations

import time

from proxy.api.responses_store import ResponsesStore


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
