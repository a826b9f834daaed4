"""`python -m densekv.planner`: the plan command before it is registered in densekv/cli.py."""

from densekv.planner.cli import main

main()
