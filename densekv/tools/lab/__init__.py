"""densekv lab: the seed experiments rerun on the user's own server, with plots and a report.

    python -m densekv.tools.lab [--url URL | --server NAME ...] [--n N] [--only KINDS] [--out DIR]

Modules: workloads (streamed data with fixed seeds), target (where the lab may measure and
what it may do there), experiments/ (one plug-in per experiment), runner (runs them with
progress), results (results.json and its schema), report (report.html and the PNGs), cli.
"""

from densekv.tools.lab.runner import LabConfig, LabRun, run_lab

__all__ = ["LabConfig", "LabRun", "run_lab"]
