"""The README's quickstart prints what the README says it prints."""
import contextlib
import io
import re

from conftest import ROOT


def test_readme_quickstart_output_is_true():
    text = (ROOT / "README.md").read_text(encoding="utf8")
    code = re.search(r"```python\n(import spacy\n.*?)```", text, re.S).group(1)
    shown = re.search(r"prints \(`tests/test_readme.py` checks it\):\n\n```\n(.*?)```", text, re.S).group(1)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    assert out.getvalue() == shown
