"""The tools: what proves, plans and moves densekv's savings, beside the runtime.

Everything under densekv/tools/ is a tool: the `densekv` command (cli_main.py, cli.py and its
parts cli_params.py, cli_run.py, cli_migrate.py for `densekv migrate`), the lab (lab/), the
planner (planner/), the analyzer (analyze/), the memory meter (measure.py,
measure_cluster.py), bulk loading (bulk.py) and the server fixtures (server/: binaries of
the matrix, throwaway processes and clusters, the embedded server). Everything else under
densekv/ is the runtime: the kinds, their layouts and cores, codec, wire, plans and
executors, connect, the capability probe, errors and the web integrations.

Imports go one way: a tool imports the runtime (only names in a runtime module's
`__all__`), the runtime never imports a tool, not even inside a function or under
TYPE_CHECKING (tests/unit/test_layers.py). `import densekv` loads no tool; the tools' names
in `densekv.__all__` (embedded, plan_layout, bulk_load, ...) are imported on first use.
"""
