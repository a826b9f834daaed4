"""Small general-purpose operations built as plans; they prove the plan mechanism on every
executor (tests/behaviour/test_plans.py) and serve the lab and users directly."""

from __future__ import annotations

from densekv.lua import script
from densekv.plan import Key, Plan, command, script_call


def plan_compare_and_set(key: Key, expected: bytes | None, new: bytes) -> Plan[bool]:
    """Replace `key`'s value with `new` only if it still is `expected` (None: absent)."""
    return script_call(
        script("compare_and_set"),
        keys=(key,),
        args=(expected or b"", new, "absent" if expected is None else "present"),
        decode=lambda reply: reply == 1,
    )


def plan_get(key: Key) -> Plan[bytes | None]:
    return command("GET", key, keys=(key,))


def plan_incrby(key: Key, amount: int = 1) -> Plan[int]:
    return command("INCRBY", key, amount, keys=(key,), decode=int)
