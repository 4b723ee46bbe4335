"""The `extender` command's table of lazily imported subcommands (extender/cli/__init__.py)."""

from __future__ import annotations

import click

from extender.cli import COMMANDS, main


def test_every_subcommand_imports_as_a_click_command_of_its_name() -> None:
    """COMMANDS is typed by a cast (the import is lazy): this is what holds it true."""
    context = click.Context(main)
    assert main.list_commands(context) == list(COMMANDS)
    for name in COMMANDS:
        command = main.get_command(context, name)
        assert isinstance(command, click.Command), name
        assert command.name == name, (name, command.name)
    assert main.get_command(context, "no-such-command") is None
