"""`python -m densekv.tools.lab`: the lab command before it is registered in densekv/tools/cli.py."""

from densekv.tools.lab.cli import main

main()
