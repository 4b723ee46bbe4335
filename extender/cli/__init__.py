"""The extender command: serve, schedule, check, explain (explain_command), simulate, replay.

Subcommands are imported only when invoked (as Flask loads its plugin commands):
`serve` must set up Prometheus' multiprocess directory before anything imports
prometheus_client, and `--help` should not pay for the kubernetes client.
"""

from __future__ import annotations

import importlib
from typing import cast

import click

from extender import __version__

COMMANDS = {
    "serve": "extender.cli.serve:serve",
    "schedule": "extender.cli.schedule:schedule",
    "check": "extender.cli.check:check",
    "explain": "extender.cli.explain_command:explain",
    "simulate": "extender.cli.simulate:simulate",
    "replay": "extender.cli.replay:replay",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return None
        module, attribute = target.split(":")
        # COMMANDS names click commands (tests/test_cli_commands.py loads each one).
        return cast(click.Command, getattr(importlib.import_module(module), attribute))


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="extender")
def main() -> None:
    """A Kubernetes scheduler extender, standalone scheduler and simulator sharing one policy engine."""
