"""Moving in from another Django backend (DENSEKV_SESSIONS["fallback"]): a session of that
backend, by key, read with its seconds left and deleted once densekv holds it (the engine's
flows yield integrations/calls.py's ReadOld / ForgetOld on an OldBackend under the sync
driver, on its AsyncOldBackend under the async one). Django's backends are sync at heart, so
the async source runs the sync code in a thread."""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.utils import timezone  # type: ignore[import-untyped]

from densekv.integrations.django.values import EXPIRY_KEY, Data


class OldBackend:
    """The sessions of the Django backend class `backend`, by key: read them (data and
    seconds left), delete them."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend

    def read(self, key: str) -> tuple[Data, int] | None:
        old = self.backend(key)
        if hasattr(old, "_get_session_from_db"):  # db, cached_db: the row says when it ends
            # private: Django has no public call that returns the row (its expire_date)
            row = old._get_session_from_db()  # noqa: SLF001
            if row is None:
                return None
            left = (row.expire_date - timezone.now()).total_seconds()
            return old.decode(row.session_data), int(left)
        data = old.load()
        if old.session_key is None:
            return None
        return data, self._cache_ttl(old, data)

    @staticmethod
    def _cache_ttl(old: Any, data: Data) -> int:
        """Seconds left in a cache: exact on Django's RedisCache; otherwise the age Django
        gave the entry at its last save (the cache API does not say what is left)."""
        cache = getattr(old, "_cache", None)
        raw = getattr(cache, "_cache", None)
        if cache is not None and raw is not None and hasattr(raw, "get_client") and hasattr(old, "cache_key"):
            key = cache.make_and_validate_key(old.cache_key)
            left = raw.get_client(key).ttl(key)
            if isinstance(left, int) and left > 0:
                return left
            if left == -2:
                return 0
        return int(old.get_expiry_age(expiry=data.get(EXPIRY_KEY)))

    def forget(self, key: str) -> None:
        self.backend(key).delete()


class AsyncOldBackend:
    """An OldBackend's reads and deletes run in sync_to_async's thread."""

    def __init__(self, old: OldBackend) -> None:
        self.old = old

    async def read(self, key: str) -> tuple[Data, int] | None:
        return await sync_to_async(self.old.read)(key)

    async def forget(self, key: str) -> None:
        await sync_to_async(self.old.forget)(key)
