"""The planner: layout, partitions and config for a workload, with predicted bytes.

`plan(kind, items, payload=0, ttl=False, client=|url=|server=)` -> `Recommendation`.
The prediction comes from a cost model calibrated by measurement on a server of the
planned kind (densekv/planner/model.py), cached per server kind and settings
(densekv/planner/cache.py). `densekv plan` is the CLI (densekv/planner/cli.py).
"""

from densekv.errors import DensekvError
from densekv.errors import moved as _moved
from densekv.planner.core import Recommendation, plan
from densekv.planner.model import Calibration

__all__ = ["Calibration", "Recommendation", "plan"]


#: errors that moved to densekv.errors (CHANGELOG.md): the old path warns for one minor release
_MOVED = ("PlannerError",)


def __getattr__(name: str) -> type[DensekvError]:
    return _moved(__name__, name, _MOVED)
