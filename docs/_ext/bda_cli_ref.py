"""The CLI reference of the docs site (docs/cli-reference.rst), as reStructuredText generated from
the Typer app: ``typer.main.get_command`` of ``bda_jax.cli.app`` (importing ``bda_jax.cli``
registers every command module), walked command by command.

Typer vendors its own click (``typer._click``), so sphinx-click, which checks for ``click.Command``,
cannot read it; this walker uses the same command API ``bda --help`` uses (``get_usage``,
``params``, ``get_help_record``). Each command is one section: its usage line, its help text, and
one ``.. option::`` entry per argument and option (under ``.. program:: bda CMD``, so a page can
link one as ``bda fit --arm`` with Sphinx's ``option`` role), with the help text, the default and
whether it is required exactly as ``--help`` prints them. Hidden commands and options are left
out, as ``--help`` leaves them out.

This module imports no Sphinx: ``tests/integration/test_docs_site.py`` reads its text.
"""
from __future__ import annotations

import typer.main

import bda_rst
from bda_jax.cli import app

PROG = "bda"


def command():
    """The click group of ``bda`` with every command and subgroup (``stop``, ``label``, ``council``)."""
    return typer.main.get_command(app)


def walk(cmd=None, ctx=None, path: tuple[str, ...] = ()):
    """(path, command, context) for ``bda`` and every visible subcommand, depth first in the
    order ``bda --help`` lists them."""
    cmd = cmd or command()
    ctx = ctx or cmd.make_context(PROG, [], resilient_parsing=True)
    yield path, cmd, ctx
    for name in getattr(cmd, "list_commands", lambda _: [])(ctx):
        sub = cmd.get_command(ctx, name)
        if sub is None or sub.hidden:
            continue
        yield from walk(sub, sub.make_context(name, [], parent=ctx, resilient_parsing=True), path + (name,))


def params(cmd, ctx):
    """(option text, help text) of each visible argument and option, in ``--help`` order; the help
    option itself is left out (every command has it)."""
    out = []
    for param in cmd.get_params(ctx):
        if getattr(param, "hidden", False) or param.name == "help":
            continue
        record = param.get_help_record(ctx)
        if record is None:              # a plain click argument without a help record
            record = (param.human_readable_name, "")
        out.append(record)
    return out


def cli_rst() -> str:
    """The reStructuredText of the CLI reference: one section per command (``bda`` first)."""
    lines: list[str] = []
    for path, cmd, ctx in walk():
        name = " ".join((PROG,) + path)
        if path:                         # bda's own options sit under the page title
            lines += [name, "=-~^"[min(len(path), 4) - 1] * len(name), ""]
        lines += [f".. program:: {name}", "", "::", "", "   " + cmd.get_usage(ctx).strip(), ""]
        if cmd.help:
            lines += [bda_rst.escape_help(cmd.help.replace("\b\n", "")), ""]
        for opts, help_text in params(cmd, ctx):
            lines += [f".. option:: {opts}", ""]
            if help_text:
                lines += ["   " + bda_rst.escape_help(line) for line in help_text.splitlines()] + [""]
    return "\n".join(lines) + "\n"
