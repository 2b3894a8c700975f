"""MkDocs hooks: the pages that are made at build time, not written in docs/.

- `cli.md`, the CLI reference, rendered from the real argument parsers
  (`tfdarshan.cli.build_parser()`): every subcommand's usage, description
  and arguments, so the reference cannot drift from the command.
- `architecture.md` and `case-studies/results.md` (with its plots): files
  that live outside docs/ (ARCHITECTURE.md stays one page at the
  repository's root; case_studies/RESULTS.md is written by the case
  studies), included as they are, so links to them stay inside the site.
"""
from __future__ import annotations

import argparse
import html
import os
import pathlib
import re

from mkdocs.structure.files import File

ROOT = pathlib.Path(__file__).resolve().parent.parent
# page in the site -> file of the repository it is made from
INCLUDED = {
    "architecture.md": "ARCHITECTURE.md",
    "case-studies/results.md": "case_studies/RESULTS.md",
}
# the plots RESULTS.md shows, next to it in the site as in the repository
INCLUDED_GLOBS = {"case-studies/results": ("case_studies/results", "*.png")}
CLI_PAGE = "cli.md"
USAGE_WIDTH = "88"   # columns argparse wraps usage lines at


def on_files(files, config):
    for page, source in INCLUDED.items():
        files.append(File.generated(config, page, abs_src_path=str(ROOT / source)))
    for site_dir, (source_dir, pattern) in INCLUDED_GLOBS.items():
        for path in sorted((ROOT / source_dir).glob(pattern)):
            files.append(File.generated(config, f"{site_dir}/{path.name}", abs_src_path=str(path)))
    files.append(File.generated(config, CLI_PAGE, content=cli_reference()))
    return files


def cli_parser() -> argparse.ArgumentParser:
    # importing tfdarshan installs its tf.profiler hooks; the docs need only the parsers
    os.environ.setdefault("TFDARSHAN_NO_HOOKS", "1")
    from tfdarshan.cli import build_parser
    return build_parser()


def subcommands(parser: argparse.ArgumentParser):
    """(name, one-line help, parser) of every subcommand, in the order `--help` lists them."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, helps.get(name) or "", sub


def text(value: str) -> str:
    """Help text as Markdown: code spans kept, everything else escaped, so a
    `<host>` or a `*.ext` in a docstring is shown, not taken as HTML or emphasis."""
    parts = re.split(r"(`[^`\n]+`)", value)
    return "".join(p if p.startswith("`") else re.sub(r"([\\*_\[\]#])", r"\\\1", html.escape(p, quote=False))
                   for p in parts)


def description(value: str) -> str:
    """A parser's description (a module docstring): paragraphs kept, lines re-flowed by Markdown."""
    paragraphs = re.split(r"\n\s*\n", value.strip())
    return "\n\n".join(text(" ".join(line.strip() for line in p.splitlines())) for p in paragraphs)


def invocation(action: argparse.Action) -> str:
    if action.option_strings:
        if action.nargs == 0:
            return ", ".join(action.option_strings)
        metavar = argparse.HelpFormatter("x")._format_args(action, action.dest.upper())
        return ", ".join(f"{o} {metavar}" for o in action.option_strings)
    return argparse.HelpFormatter("x")._metavar_formatter(action, action.dest)(1)[0]


def argument(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """One argument as a list item: how it is written, then its help (%(default)s expanded)."""
    help_text = parser._get_formatter()._expand_help(action) if action.help else ""
    line = f"- `{invocation(action)}`"
    if action.required and action.option_strings:
        line += " (required)"
    if help_text:
        line += ": " + text(" ".join(help_text.split()))
    return line


def cli_reference() -> str:
    """The CLI reference page, from the parsers `tfdarshan` itself builds."""
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = USAGE_WIDTH
    try:
        parser = cli_parser()
        out = ["# CLI reference", "",
               "Generated from `tfdarshan`'s own argument parsers when the site is built "
               "(`tfdarshan COMMAND --help` prints the same).", "",
               "```text", parser.format_usage().rstrip(), "```", "",
               "| command | what it does |", "|---|---|"]
        commands = list(subcommands(parser))
        out += [f"| [`{name}`](#tfdarshan-{name}) | {text(help_)} |" for name, help_, _ in commands]
        for name, help_, sub in commands:
            out += ["", f"## tfdarshan {name}", "", text(help_[:1].upper() + help_[1:]) + ".", "",
                    "```text", sub.format_usage().rstrip(), "```"]
            if sub.description:
                out += ["", description(sub.description)]
            for group in sub._action_groups:
                actions = [a for a in group._group_actions if not isinstance(a, argparse._HelpAction)]
                if actions:
                    out += ["", f"**{text(group.title[:1].upper() + group.title[1:])}**", ""]
                    out += [argument(sub, a) for a in actions]
        return "\n".join(out) + "\n"
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old
