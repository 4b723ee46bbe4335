"""The `extender` command: serve, schedule, check, explain, simulate."""

from __future__ import annotations

import click

from extender import __version__
from extender.cli.check import check
from extender.cli.explain import explain
from extender.cli.serve import serve
from extender.cli.simulate import simulate


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="extender")
def main() -> None:
    """A Kubernetes scheduler extender, standalone scheduler and simulator sharing one policy engine."""


main.add_command(serve)
main.add_command(check)
main.add_command(explain)
main.add_command(simulate)
