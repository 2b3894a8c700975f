"""The documentation: the site under docs/ builds in MkDocs' strict mode (a
broken link, a missing anchor or a page left out of the navigation fails
it), its CLI reference holds every subcommand and option the real parser
has, and the README stays a short landing page whose links all lead
somewhere."""
import argparse
import html
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

pytest.importorskip("mkdocs", reason="mkdocs is not installed (the test extra installs it: make test)")

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
MAX_README_LINES = 250
# what a build needs besides docs/: mkdocs.yml and the files hooks.py includes
SITE_SOURCES = ["mkdocs.yml", "docs", "ARCHITECTURE.md", "case_studies/RESULTS.md", "case_studies/results"]


def build(config: pathlib.Path, site: pathlib.Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, TFDARSHAN_NO_HOOKS="1")
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
                           "--site-dir", str(site)], capture_output=True, text=True, timeout=300, env=env)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    proc = build(ROOT / "mkdocs.yml", out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "WARNING" not in proc.stderr, proc.stderr
    return out


def cli_parser() -> argparse.ArgumentParser:
    from tfdarshan.cli import build_parser
    return build_parser()


def subparsers(parser):
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return action.choices


def test_strict_build_passes_and_every_page_is_built(site):
    pages = sorted(p.relative_to(ROOT / "docs").with_suffix("") for p in (ROOT / "docs").rglob("*.md"))
    assert pages
    for page in pages:
        built = site / ("index.html" if page.name == "index" else page / "index.html")
        assert built.is_file(), f"{page}.md was not built"


def test_included_files_are_pages_of_the_site(site):
    # ARCHITECTURE.md stays at the root; the site shows it whole
    arch = (site / "architecture" / "index.html").read_text()
    first_heading = ROOT.joinpath("ARCHITECTURE.md").read_text().splitlines()[0].lstrip("# ")
    assert html.escape(first_heading.replace("`", ""), quote=False).split(":")[0] in arch
    for block in re.findall(r"\*\*(\w+)\*\*", ROOT.joinpath("ARCHITECTURE.md").read_text()):
        assert f"<strong>{block}</strong>" in arch
    results = site / "case-studies" / "results"
    for png in (ROOT / "case_studies" / "results").glob("*.png"):
        assert (results / png.name).read_bytes() == png.read_bytes()


def test_cli_reference_lists_every_subcommand_and_option(site):
    page = (site / "cli" / "index.html").read_text()
    sections = dict(re.findall(r'<h2 id="tfdarshan-([\w-]+)">(.*?)(?=<h2 |\Z)', page, flags=re.S))
    commands = subparsers(cli_parser())
    assert len(commands) >= 8
    assert set(sections) == set(commands), "the CLI page's sections differ from the parser's subcommands"
    for name, sub in commands.items():
        text = html.unescape(re.sub(r"<[^>]+>", "", sections[name]))
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            for option in action.option_strings:
                assert option in sections[name], f"tfdarshan {name} {option} is missing from the CLI page"
            if not action.option_strings:
                metavar = action.metavar or action.dest
                assert html.escape(str(metavar)) in sections[name], f"tfdarshan {name}'s {metavar}"
            words = " ".join((action.help or "").split()[:3])
            if words and "%" not in words:
                assert words in text, f"tfdarshan {name}: the help of {action.dest}"


def test_a_broken_link_fails_the_build(tmp_path):
    # the strict build is what catches it: a copy of the sources with one bad link
    for rel in SITE_SOURCES:
        src, dst = ROOT / rel, tmp_path / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, dst)
    (tmp_path / "tfdarshan" / "cli").mkdir(parents=True)      # watched by `mkdocs serve`; must exist
    limits = tmp_path / "docs" / "limits.md"
    limits.write_text(limits.read_text() + "\nSee [the missing page](no-such-page.md).\n")
    proc = build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert proc.returncode != 0
    assert "no-such-page.md" in proc.stderr


def readme_links():
    text = README.read_text()
    text = re.sub(r"```.*?```", "", text, flags=re.S)          # code blocks hold no links
    text = re.sub(r"`[^`\n]*`", "", text)                      # nor do code spans
    return re.findall(r"\]\(([^)\s]+)\)", text)


def test_readme_is_short():
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines"


def test_readme_documents_the_make_targets():
    text = README.read_text()
    targets = set(re.findall(r"^([a-z][\w-]*):", (ROOT / "Makefile").read_text(), flags=re.M))
    for target in ("demo", "test", "docs"):
        assert target in targets, f"the Makefile has no {target} target"
        assert f"make {target}" in text


def test_every_relative_link_in_the_readme_leads_to_a_file():
    links = readme_links()
    relative = [link for link in links if not re.match(r"[a-z][a-z0-9+.-]*:", link) and not link.startswith("#")]
    assert len(relative) >= 10, relative
    missing = [link for link in relative if not (ROOT / link.split("#")[0]).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"
    linked = {link.split("#")[0] for link in relative}
    assert {"docs/index.md", "ARCHITECTURE.md"} <= linked
