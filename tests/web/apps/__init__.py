"""The contract's test apps, one per framework: <framework>_app.py exposes make_driver()."""
