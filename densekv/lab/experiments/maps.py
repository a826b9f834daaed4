"""Experiment 4 (seed 004): compact maps - placeholder until densekv.maps lands.

The experiment (plain SET vs hash buckets vs key zipping vs each codec, for integers,
short strings, HTML-like text and JSON objects from densekv/lab/workloads.py) drives
densekv.maps.CompactMap, which this build does not have yet. It is registered so the
report lists it honestly as not available; it measures nothing and fakes nothing.
"""

from __future__ import annotations

from densekv.lab.experiments.base import Unavailable

EXPERIMENT = Unavailable(
    "maps",
    "Maps: plain SET vs hash buckets vs key zipping vs codecs",
    "004",
    "not available in this build: it drives densekv.maps (CompactMap and its codecs), which has not landed yet",
)
