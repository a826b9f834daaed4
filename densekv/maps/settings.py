"""What a map needs of the server: a pure projection of the probe's Capabilities.

The server is read in one place only (densekv/capabilities.py, a flow the sync and the
asyncio map both run); a map keeps these few numbers, and its stored meta (maps/meta.py)
fixes the geometry from them when the map is created.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from densekv.capabilities import Capabilities


@dataclass(frozen=True)
class MapFacts:
    """What a map needs of the server (from the probe)."""

    entries_limit: int
    value_limit: int
    field_ttl: str = "none"  # "none" | "hexpire" | "hsetex"
    field_ttl_encoding: str | None = None  # what a small hash with one expiring field becomes
    cluster: bool = False


def facts_of(caps: Capabilities) -> MapFacts:
    return MapFacts(caps.hash_max_listpack_entries, caps.hash_max_listpack_value,
                    caps.field_ttl, caps.field_ttl_encoding, caps.cluster)
