#!/usr/bin/env python
"""Curriculum probing tasks and counterfactually-augmented SNLI as NLI training rows.

Writes to ``--output-dir``:

* ``curriculum_train.jsonl``  a seeded sample of each Curriculum task's ``train.jsonl``
  (Chen & Gao, 2022), source ``cur_<task>``. Tasks labelled ``entailed`` / ``not-entailed``
  are binary (``entailment`` / ``not_entailment``): no neutral/contradiction is invented.
* ``curriculum_heldout.jsonl`` each task's ``val.jsonl`` (up to ``--heldout-per-task`` rows),
  never trained on: the per-skill held-out accuracy.
* ``cad_train.jsonl`` the minimal pairs of counterfactually-augmented SNLI (Kaushik et al.,
  2020): revised premises and revised hypotheses of the training split, source ``cad``.
  Caption pairs assume one scene, so alone they teach that any differing detail
  contradicts; they are capped and mixed with the document-grounded controls.
* ``cad_heldout.jsonl`` the revised pairs of the dev split (their premises come from SNLI
  dev; the SNLI held-out rows are dropped from them).
* ``skills_stats.json`` counts.

    python scripts/nli/prepare_skills.py --curriculum-dir assets/nli/curriculum \
        --cad-dir assets/nli/cad --heldout-rows assets/nli/heldout.jsonl --output-dir assets/nli
"""
from __future__ import annotations

import csv
import json
import random
import zipfile
from collections import Counter
from pathlib import Path
from typing import Dict, List

import typer

# Rows sampled per task for training. The skills the detector needs most (negation,
# quantifiers, counting, comparison, time) get their whole training split; broad
# tasks a sample; tasks whose inputs do not fit 128 tokens (analytic, drop) none.
TRAIN_PER_TASK: Dict[str, int] = {
    "negation": 3000, "quantifier": 3000, "counting": 3000, "comparative": 3000,
    "temporal": 4248, "boolean": 2000, "conditional": 2000, "monotonicity_infer": 2000,
    "lexical": 1500, "coreference": 1500, "spatial": 1000, "syntactic_alternation": 1000,
    "syntactic_variation": 1000, "verbnet": 1000, "transitive": 1000, "defeasible": 1000,
    "counterfactual": 1000, "entailment_tree": 600, "analytic": 0, "drop": 0,
}
LABELS = {
    "entailment": "entailment", "neutral": "neutral", "contradiction": "contradiction",
    "entailed": "entailment", "not-entailed": "not_entailment",
}


def read_task(path: Path, member: str) -> List[dict]:
    with zipfile.ZipFile(path) as zf:
        return [json.loads(line) for line in zf.open(member) if line.strip()]


def to_row(r: dict, source: str, binary: bool) -> dict:
    label = LABELS[r["gold_label"]]
    if binary and label != "entailment":
        label = "not_entailment"
    return {"premise": r["premise"].strip(), "hypothesis": r["hypothesis"].strip(), "label": label, "source": source}


def read_cad(path: Path) -> List[dict]:
    with path.open(encoding="utf8") as f:
        return [
            {"premise": r["sentence1"].strip(), "hypothesis": r["sentence2"].strip(), "label": r["gold_label"], "source": "cad"}
            for r in csv.DictReader(f, delimiter="\t")
            if r["gold_label"] in ("entailment", "neutral", "contradiction")
        ]


def write(path: Path, rows: List[dict]) -> None:
    with path.open("w", encoding="utf8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def main(
    curriculum_dir: Path = typer.Option(..., help="Folder of the Curriculum task zips."),
    cad_dir: Path = typer.Option(..., help="Folder of the CAD TSV files."),
    heldout_rows: Path = typer.Option(None, help="NLI held-out rows: CAD pairs sharing a premise are dropped from training."),
    output_dir: Path = typer.Option(...),
    seed: int = typer.Option(0),
    heldout_per_task: int = typer.Option(1000),
    cad_cap: int = typer.Option(5000, help="Most CAD training rows."),
) -> None:
    rng = random.Random(seed)
    train: List[dict] = []
    held: List[dict] = []
    for task, n in sorted(TRAIN_PER_TASK.items()):
        zip_path = curriculum_dir / f"{task}.zip"
        t_rows = read_task(zip_path, f"{task}/train.jsonl")
        v_rows = read_task(zip_path, f"{task}/val.jsonl")
        binary = any(r["gold_label"] in ("entailed", "not-entailed") for r in t_rows + v_rows)
        rng.shuffle(t_rows)
        rng.shuffle(v_rows)
        train.extend(to_row(r, f"cur_{task}", binary) for r in t_rows[:n])
        held.extend(to_row(r, f"cur_{task}", binary) for r in v_rows[:heldout_per_task])
    rng.shuffle(train)
    output_dir.mkdir(parents=True, exist_ok=True)
    write(output_dir / "curriculum_train.jsonl", train)
    write(output_dir / "curriculum_heldout.jsonl", held)

    held_premises = set()
    if heldout_rows and heldout_rows.exists():
        held_premises = {json.loads(line)["premise"].strip().lower() for line in heldout_rows.open(encoding="utf8")}
    cad_train = [
        r for name in ("revised_premise_train.tsv", "revised_hypothesis_train.tsv")
        for r in read_cad(cad_dir / name) if r["premise"].lower() not in held_premises
    ]
    rng.shuffle(cad_train)
    cad_train = cad_train[:cad_cap]
    cad_held = [
        r for name in ("revised_premise_dev.tsv", "revised_hypothesis_dev.tsv") for r in read_cad(cad_dir / name)
    ]
    write(output_dir / "cad_train.jsonl", cad_train)
    write(output_dir / "cad_heldout.jsonl", cad_held)
    stats = {
        "seed": seed,
        "curriculum_train": dict(Counter(f"{r['source']}:{r['label']}" for r in train)),
        "curriculum_heldout": dict(Counter(f"{r['source']}:{r['label']}" for r in held)),
        "cad_train": dict(Counter(r["label"] for r in cad_train)),
        "cad_heldout": dict(Counter(r["label"] for r in cad_held)),
    }
    (output_dir / "skills_stats.json").write_text(json.dumps(stats, indent=1, sort_keys=True) + "\n", encoding="utf8")
    typer.echo(f"curriculum: {len(train)} train, {len(held)} held out; CAD: {len(cad_train)} train, {len(cad_held)} held out")


if __name__ == "__main__":
    typer.run(main)
