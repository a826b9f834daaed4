"""A session dict that reports every top-level change, shared by the Flask and Starlette
backends: each saves with `store.apply(token, changed keys, removed keys)`, so it must see
every way a dict can change (item assignment and deletion, pop, popitem, setdefault,
update, |=, clear). A subclass says what a change means to it in three hooks."""

from __future__ import annotations

from typing import Any


class TrackedDict(dict[str, Any]):
    def _set(self, key: str) -> None:
        """`key` was assigned."""
        raise NotImplementedError

    def _deleted(self, key: str) -> None:
        """`key` was removed."""
        raise NotImplementedError

    def _on_clear(self) -> None:
        """clear() ran (after _deleted for every key)."""

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)
        self._set(key)

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        self._deleted(key)

    def pop(self, key: str, *default: Any) -> Any:
        if key in self:
            self._deleted(key)
        return super().pop(key, *default)

    def popitem(self) -> tuple[str, Any]:
        key, value = super().popitem()
        self._deleted(key)
        return key, value

    def setdefault(self, key: str, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def __ior__(self, other: Any) -> Any:  # type: ignore[misc]
        self.update(other)
        return self

    def clear(self) -> None:
        for key in list(self):
            self._deleted(key)
        super().clear()
        self._on_clear()
