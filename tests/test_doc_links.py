"""Relative links in the README, docs/ and the model cards lead to a file that exists and,
where they name an anchor, to a heading of that file (GitHub's heading slugs)."""
import re

import pytest

from conftest import ROOT

LINK_RE = re.compile(r"\]\(([^)\s]+)\)")
# docs/project-commands.md is written by `spacy project document`, whose links are meant for a
# page at the project's root (tests/test_evaluate_workflow.py checks it is project.yml's own).
GENERATED = "WEASEL: AUTO-GENERATED DOCS"
PAGES = [page for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
                           *sorted((ROOT / "spacy_inconsistency" / "models").glob("*/README.md"))]
         if GENERATED not in page.read_text(encoding="utf-8")]


def slug(heading: str) -> str:
    text = heading.lstrip("#").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page) -> set:
    found, fenced = set(), False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif line.startswith("#") and not fenced:
            found.add(slug(line))
    return found


def test_slug_follows_github():
    assert slug("## Similar pairs (the default since 2026-11-27, night) and the cascade's own threshold (opt-in)") == \
        "similar-pairs-the-default-since-2026-11-27-night-and-the-cascades-own-threshold-opt-in"
    assert slug("### The next GPU run, prepared") == "the-next-gpu-run-prepared"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    broken = []
    for target in LINK_RE.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue  # http:, https:, mailto:
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no file {path}")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading #{anchor} in {file.name}")
    assert not broken, broken
