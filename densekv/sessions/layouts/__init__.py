"""Session layouts: key-per-session baselines (perkey.py) and partitioned ones (partitioned.py)."""
