"""Every Python snippet in docs/ runs, and prints what the page says it prints.

A snippet is a ```python block. When the next paragraph starts with "prints",
the fenced block after it is the expected stdout (decimal numbers within one unit
of their last printed digit). A snippet whose first line
is `# needs: PATH (...)` runs only where PATH exists (e.g. a model trained by
a project workflow) and is skipped, saying so, elsewhere. The README's
quickstart is checked by tests/test_readme.py.
"""
import contextlib
import io
import re

import pytest

from conftest import ROOT, assert_same_printout

BLOCK_RE = re.compile(r"```python\n(.*?)```\n(?:\s*\nprints[^\n]*:\n\n```\n(.*?)```)?", re.S)
NEEDS_RE = re.compile(r"#\s*needs:\s*(\S+)")


def snippets():
    for page in sorted((ROOT / "docs").glob("*.md")):
        text = page.read_text(encoding="utf-8")
        for number, match in enumerate(BLOCK_RE.finditer(text), start=1):
            yield pytest.param(match.group(1), match.group(2), id=f"{page.name}-{number}")


SNIPPETS = list(snippets())


def test_docs_have_snippets():
    assert len(SNIPPETS) >= 3


@pytest.mark.parametrize("code,expected", SNIPPETS)
def test_snippet_runs(code, expected, tmp_path, monkeypatch):
    first = code.splitlines()[0]
    needs = NEEDS_RE.match(first)
    if needs and not (ROOT / needs.group(1)).exists():
        pytest.skip(f"needs {needs.group(1)}")
    monkeypatch.chdir(tmp_path if not needs else ROOT)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "snippet", "exec"), {"__name__": "__snippet__"})
    if expected is not None:
        assert_same_printout(out.getvalue(), expected)
