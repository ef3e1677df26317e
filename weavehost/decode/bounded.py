"""A dict of bounded size that forgets the entry used least recently: every cache the decoder
keeps about a model (:class:`~weavehost.decode.state.DecodeState`) is one.

Stage: decoding (data only).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, TypeVar

__all__ = ["Bounded"]

K = TypeVar("K")
V = TypeVar("V")


class Bounded(Generic[K, V]):
    """A dict of at most ``cap`` entries: adding one past the cap drops the least recently
    used (read or written)."""

    __slots__ = ("_items", "cap")

    def __init__(self, cap: int) -> None:
        if cap < 1:
            raise ValueError(f"a cache holds at least one entry, not {cap}")
        self.cap = cap
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def __setitem__(self, key: K, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.cap:
            self._items.popitem(last=False)

    def pop(self, key: K) -> None:
        self._items.pop(key, None)

    def newest(self) -> list[V]:
        """The values, the most recently used first (reading them marks none as used)."""
        return list(reversed(self._items.values()))
