"""What a map batch queues: one frozen dataclass per kind of queued operation, and the
Pending each operation hands back.

Gets and sets (QueuedGet, QueuedMGet, QueuedSet, QueuedMSet) are data, so the batch fast
path (maps/fast.py) can group them into few commands; every other operation is a
QueuedFlow: the flow to run (made from the map's core at execute time), what to apply to
its result, and the keys it writes (so an earlier get of one of them is read before it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from densekv.errors import DensekvError
from densekv.flows import Flow

if TYPE_CHECKING:
    from densekv.maps.core import MapCore

T = TypeVar("T")


class Pending(Generic[T]):
    """The future result of one batched operation (like a redis-py pipeline's result)."""

    _unset: Any = object()

    def __init__(self) -> None:
        self._value: Any = Pending._unset

    @property
    def ready(self) -> bool:
        return self._value is not Pending._unset

    def result(self) -> T:
        if self._value is Pending._unset:
            raise DensekvError("the batch has not run yet: call execute() (or leave the with block)")
        return self._value  # type: ignore[no-any-return]

    def fulfil(self, value: T) -> None:
        """Set by the batch when it ran (not for callers)."""
        self._value = value


@dataclass(frozen=True, slots=True)
class QueuedGet:
    key: str
    default: Any = None
    future: Pending[Any] = field(default_factory=Pending)


@dataclass(frozen=True, slots=True)
class QueuedMGet:
    keys: list[str]
    future: Pending[Any] = field(default_factory=Pending)


@dataclass(frozen=True, slots=True)
class QueuedSet:
    key: str
    value: Any
    ttl: float | None = None
    future: Pending[Any] = field(default_factory=Pending)


@dataclass(frozen=True, slots=True)
class QueuedMSet:
    items: list[tuple[str, Any]]
    ttl: float | None = None
    future: Pending[Any] = field(default_factory=Pending)


@dataclass(frozen=True, slots=True)
class QueuedFlow:
    make: Callable[[MapCore], Flow[Any]]
    writes: tuple[str, ...] = ()  # keys the operation writes
    future: Pending[Any] = field(default_factory=Pending)


Queued = QueuedGet | QueuedMGet | QueuedSet | QueuedMSet | QueuedFlow
Fast = QueuedGet | QueuedMGet | QueuedSet | QueuedMSet  # what maps/fast.py groups
