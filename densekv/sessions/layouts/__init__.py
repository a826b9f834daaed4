"""Session layouts: key-per-session baselines (perkey.py) and partitioned ones (partitioned.py).

Which layouts exist, where each runs, its limits and placement rule: the registry,
densekv/sessions/meta.py SPECS. A new layout is its class here and one entry there.
"""
