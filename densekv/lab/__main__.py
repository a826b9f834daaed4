"""`python -m densekv.lab`: the lab command before it is registered in densekv/cli.py."""

from densekv.lab.cli import main

main()
