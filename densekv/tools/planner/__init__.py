"""The planner: layout, partitions and config for a workload, with predicted bytes.

`plan(kind, items, payload=0, ttl=False, client=|url=|server=)` -> `Recommendation`.
The prediction comes from a cost model calibrated by measurement on a server of the
planned kind (densekv/tools/planner/model.py), cached per server kind and settings
(densekv/tools/planner/cache.py). `densekv plan` is the CLI (densekv/tools/planner/cli.py).
"""

from densekv.tools.planner.core import Recommendation, plan
from densekv.tools.planner.model import Calibration

__all__ = ["Calibration", "Recommendation", "plan"]
