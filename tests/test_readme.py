"""The README's quickstart prints what the README says it prints."""
import contextlib
import io
import re

from conftest import ROOT, assert_same_printout


def test_readme_quickstart_output_is_true():
    text = (ROOT / "README.md").read_text(encoding="utf8")
    code = re.search(r"```python\n(import spacy\n.*?)```", text, re.S).group(1)
    shown = re.search(r"prints \(`tests/test_readme.py` checks it\):\n\n```\n(.*?)```", text, re.S).group(1)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    assert_same_printout(out.getvalue(), shown)


def test_ci_runs_the_readme_set_up_lines():
    readme = (ROOT / "README.md").read_text(encoding="utf8")
    install, main_job, tests = re.search(r"```bash\n(.*?)```", readme, re.S).group(1).strip().splitlines()
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf8")
    assert install.startswith("python3 -m venv .venv && . .venv/bin/activate && ")
    assert install.split(" && ", 2)[2] in ci.splitlines()
    # The main job writes to a temporary file in CI and runs without a progress bar.
    assert main_job.replace("-o findings.jsonl", "-o /tmp/spacy-inconsistency-ci-findings.jsonl --no-progress") in ci
    assert tests in ci.splitlines()
    assert ci.index(install.split(" && ", 2)[2]) < ci.index("python -m spacy_inconsistency detect") < ci.index(tests)
