"""The project's data commands run as project.yml says, in a copy of the project."""
import json
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, SHARED_DATA

pytestmark = pytest.mark.skipif(not (SHARED_DATA / "nli").is_dir(), reason="needs ../shared/data")


def run(cmd, cwd):
    proc = subprocess.run([sys.executable, "-m", "spacy", "project", "run", *cmd], cwd=cwd,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def test_data_commands(tmp_path):
    shutil.copy(ROOT / "project.yml", tmp_path)
    shutil.copytree(ROOT / "scripts", tmp_path / "scripts")
    shared = f"--vars.data_dir={SHARED_DATA}"
    run(["copy-data", ".", shared], tmp_path)
    assert (tmp_path / "assets/nli/control.zip").stat().st_size == (SHARED_DATA / "nli/control.zip").stat().st_size
    run(["prepare-nli", ".", "--vars.heldout_per_source=50"], tmp_path)
    stats = json.loads((tmp_path / "assets/nli/stats.json").read_text())
    held = [json.loads(line) for line in (tmp_path / "assets/nli/heldout.jsonl").open()]
    train = [json.loads(line) for line in (tmp_path / "assets/nli/train.jsonl").open()]
    sources = {r["source"] for r in held}
    assert {"snli", "taxinli", "sick"} <= sources
    # Held-out splits are drawn by premise, so a split may pass 50 by one premise's pairs.
    assert all(50 <= sum(r["source"] == s for r in held) < 100 for s in sources)
    held_premises = {r["premise"] for r in held}
    assert not any(r["premise"] in held_premises for r in train)
    assert stats["seed"] == 0
    run(["document-pairs", "."], tmp_path)
    pairs = [json.loads(line) for line in (tmp_path / "assets/nli/docpairs_heldout.jsonl").open()]
    assert len(pairs) == 1000 and {p["label"] for p in pairs} == {"not_contradiction"}
