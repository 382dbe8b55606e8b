"""`spacy project run evaluate` on a fresh copy of the project, on small data and a tiny model."""
import csv
import json
import shutil
import subprocess
import sys

from conftest import ROOT


def make_project(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "project.yml", project)
    for folder in ("scripts", "examples"):
        shutil.copytree(ROOT / folder, project / folder)
    # The shipped model is a dependency of some commands (the tiny one is scored).
    (project / "spacy_inconsistency" / "models").mkdir(parents=True)
    for model in ("nli-minilm-l6", "nli-mpnet-lora"):
        (project / "spacy_inconsistency" / "models" / model).symlink_to(ROOT / "spacy_inconsistency" / "models" / model)
    suite = project / "tests" / "behaviour"
    suite.mkdir(parents=True)
    lines = (ROOT / "tests" / "behaviour" / "test_part1.jsonl").read_text(encoding="utf-8").splitlines()
    (suite / "test_small.jsonl").write_text("\n".join(lines[:12]) + "\n", encoding="utf-8")
    data = tmp_path / "data"
    (data / "contradiction").mkdir(parents=True)
    (data / "true").mkdir()
    contradoc = [
        {"id": "c1", "label": "contradictory", "evidence": "The bridge was never built.",
         "text": "The bridge opened in 1990. Thousands crossed it. The bridge was never built."},
        {"id": "c2", "label": "contradictory", "evidence": "She has no children.",
         "text": "Anna has three sons. She lives in Oslo. She has no children."},
        {"id": "n1", "label": "non_contradictory", "evidence": "",
         "text": "The museum opened in May. It shows modern art. Entry is free on Sundays."},
        {"id": "n2", "label": "non_contradictory", "evidence": "",
         "text": "The team won the final. The coach praised the players. Fans celebrated."},
    ]
    (data / "contradiction" / "contradoc_50.json").write_text(json.dumps(contradoc), encoding="utf-8")
    with (data / "true" / "qags_xsum.csv").open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["", "grounding", "generated_text", "label"])
        writer.writerow([0, "Police said three men took a sum from the van. No one was hurt.", "x", 1])
        writer.writerow([1, "The council approved the budget on Monday. Taxes stay the same.", "y", 1])
    return project, data


def run(project, *args):
    return subprocess.run([sys.executable, "-m", "spacy", "project", "run", *args], cwd=project,
                          capture_output=True, text=True)


def test_evaluate_workflow_runs_on_a_fresh_copy_and_writes_one_summary(tiny_nli, tmp_path):
    project, data = make_project(tmp_path)
    common = [f"--vars.detector_model={tiny_nli}", "--vars.behaviour_split=test_small.jsonl", "--vars.n_news=2"]
    missing = run(project, "evaluate", ".", f"--vars.data_dir={tmp_path / 'nowhere'}", *common)
    assert missing.returncode != 0
    assert "contradiction/contradoc_50.json not found in assets" in missing.stderr
    assert "--vars.data_dir PATH" in missing.stderr
    proc = run(project, "evaluate", ".", f"--vars.data_dir={data}", *common)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads((project / "metrics" / "summary.json").read_text(encoding="utf-8"))
    behaviour = json.loads((project / "metrics" / "behaviour_test.json").read_text(encoding="utf-8"))
    documents = json.loads((project / "metrics" / "documents.json").read_text(encoding="utf-8"))
    assert summary["missing"] == []
    rows = {row["key"]: row["value"] for row in summary["rows"]}
    assert behaviour["all"]["n"] == 12 and rows["recall"] == behaviour["all"]["recall"]
    assert documents["contradoc_docs"] == 4 and documents["news_docs"] == 2
    assert rows["contradoc_auc"] == documents["by_aggregation"]["learned"]["contradoc_auc"]
    examples = (project / "metrics" / "example_findings.jsonl").read_text(encoding="utf-8").splitlines()
    assert rows["examples_flagged"] == sum(json.loads(line)["has_inconsistency"] for line in examples)
    markdown = (project / "metrics" / "summary.md").read_text(encoding="utf-8")
    assert "| capability |" in markdown and "matched-pair AUC" in markdown
    assert "| set | figure | value | target |" in proc.stdout


def test_project_commands_page_is_generated_from_project_yml(tmp_path):
    out = tmp_path / "commands.md"
    proc = subprocess.run([sys.executable, "-m", "spacy", "project", "document", str(ROOT), "--output", str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert out.read_text(encoding="utf-8") == (ROOT / "docs" / "project-commands.md").read_text(encoding="utf-8"), (
        "docs/project-commands.md is stale: run `spacy project document . --output docs/project-commands.md`")


def test_summary_adds_the_second_test_split_where_it_ran(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("summarize_evaluation", ROOT / "scripts" / "summarize_evaluation.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert not any(row["key"].startswith("test2_") for row in module.summarize(tmp_path)["rows"])
    figures = {"n": 500, "recall": 0.25, "pair_hits": 0.2, "false_alarms": 0.125, "matched_auc": 0.7}
    (tmp_path / "behaviour_test2.json").write_text(json.dumps({"all": figures, "settings": {"split": "test2_*.jsonl"}}))
    summary = module.summarize(tmp_path)
    rows = {row["key"]: row for row in summary["rows"]}
    assert rows["test2_matched_auc"]["value"] == 0.7 and rows["test2_false_alarms"]["value"] == 0.125
    assert "test2_*.jsonl (500 pairs)" in rows["test2_recall"]["set"]
    # Optional: its absence is not reported as missing, the other files' is.
    assert str(tmp_path / "behaviour_test2.json") not in summary["missing"]
    assert not any(row["key"].startswith("test3_") for row in summary["rows"])
    third = dict(figures, n=200, matched_auc=0.8)
    (tmp_path / "behaviour_test3.json").write_text(json.dumps({"all": third, "settings": {"split": "test3_*.jsonl"}}))
    rows = {row["key"]: row for row in module.summarize(tmp_path)["rows"]}
    assert rows["test3_matched_auc"]["value"] == 0.8 and rows["test2_matched_auc"]["value"] == 0.7
    assert "test3_*.jsonl (200 pairs)" in rows["test3_recall"]["set"]
    # A metrics file with the matched AUC's interval (evaluate_behaviour.py since 2026-11-30) shows it; older ones do not.
    (tmp_path / "behaviour_test3.json").write_text(json.dumps({"all": dict(third, matched_auc_interval=[0.74, 0.86]),
                                                               "settings": {"split": "test3_*.jsonl"}}))
    summary = module.summarize(tmp_path)
    rows = {row["key"]: row for row in summary["rows"]}
    assert rows["test3_matched_auc"]["interval"] == [0.74, 0.86] and "interval" not in rows["test2_matched_auc"]
    text = module.to_markdown(summary)
    assert "| 0.800 (95% interval 0.740-0.860) | >= 0.90 |" in text and "| 0.700 | >= 0.90 |" in text
