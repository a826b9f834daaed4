"""`python -m densekv.tools.planner`: the plan command before it is registered in densekv/tools/cli.py."""

from densekv.tools.planner.cli import main

main()
