"""In-process memos: the only module-level mutable state in embedlab (loaded models, token-state stores,
layouts, tables …) lives in :class:`Memo` objects made by :func:`memo` or :func:`cached`; :func:`clear`
empties them all (tests and benchmarks call it instead of poking private names)."""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")


class Memo:
    """A named in-process memo, least-recently-used first out when ``maxsize`` entries are exceeded."""

    def __init__(self, name: str, maxsize: int | None = None) -> None:
        self.name = name
        self.maxsize = maxsize
        self._entries: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.RLock()

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        """The value stored under ``key``, computed by ``compute()`` (and stored) when missing."""
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
        value = compute()
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while self.maxsize is not None and len(self._entries) > self.maxsize:
                self._entries.popitem(last=False)
        return value

    def put(self, key: Hashable, value: Any) -> None:
        self.get(key, lambda: value)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


_MEMOS: dict[str, Memo] = {}


def memo(name: str, maxsize: int | None = None) -> Memo:
    """The process-wide memo called ``name`` (created on first use)."""
    if name not in _MEMOS:
        _MEMOS[name] = Memo(name, maxsize)
    return _MEMOS[name]


def cached(name: str, maxsize: int | None = None) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Decorator: memoise a function of hashable arguments in the runtime memo ``name``."""

    def decorate(function: Callable[..., T]) -> Callable[..., T]:
        store = memo(name, maxsize)

        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> T:
            key = (args, tuple(sorted(kwargs.items())))
            return store.get(key, lambda: function(*args, **kwargs))

        return wrapper

    return decorate


def clear() -> None:
    """Forget every in-process memo (loaded models, stores, layouts, tables); disk caches stay."""
    for store in _MEMOS.values():
        store.clear()
