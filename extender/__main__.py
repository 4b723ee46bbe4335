"""`python -m extender` runs the `extender` command."""

from extender.cli import main

main()
