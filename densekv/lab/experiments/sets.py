"""Experiment 2 (seed 001): compact sets - placeholder until densekv.sets lands.

The experiment (flat / set / hash / zset over a log sweep of partition counts, overhead
per ID over the theoretical minimum, CAS hit and miss throughput, the dense layout and
the Bloom filters on one chart) drives densekv.sets.CompactSet and BloomFilter, which
this build does not have yet. It is registered so the report lists it honestly as not
available; it measures nothing and fakes nothing.
"""

from __future__ import annotations

from densekv.lab.experiments.base import Unavailable

EXPERIMENT = Unavailable(
    "sets",
    "Sets: CAS of 128-bit IDs by layout and partition count, Bloom filters",
    "001",
    "not available in this build: it drives densekv.sets (CompactSet, BloomFilter), which has not landed yet",
)
