#!/usr/bin/env python
"""Evaluate an NLI cross-encoder directory on the held-out pairs, per source.

3-way sources: 3-way accuracy (plus entailment-vs-not accuracy); binary sources
(DocNLI FEVER / MNLI, CANNOT): accuracy of "argmax == entailment" vs. not_entailment.

With ``--compare-fp16`` the same model is also evaluated with its weights rounded to
fp16 and cast back to fp32 (what the packaged model + an fp32 CPU loader computes), and
the per-source difference is reported. A model directory stored in fp16 is always
loaded as fp32.

Several held-out files can be given (e.g. the NLI sources, the Curriculum tasks' val
splits, the held-out edits). Rows labelled ``not_contradiction`` (sentences of one
coherent passage, controls of edits) are scored as "not predicted contradiction".
Symmetry: every held-out contradiction row of a 3-way source is also scored reversed,
and the median |P(contradiction | a, b) - P(contradiction | b, a)| is reported.
"""
from __future__ import annotations

import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import List

import torch
import typer

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_nli import LABEL2ID, NOT_CONTRADICTION, binary_rows_fix, encode, forward, log, read_jsonl  # noqa: E402


@torch.no_grad()
def predict(model, ids, tts, pad_id, max_tokens=8192):
    """Argmax predictions and probabilities; batches by token budget, sorted by length."""
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    preds = [None] * len(ids)
    probs = [None] * len(ids)
    s = 0
    while s < len(order):
        L = len(ids[order[min(len(order) - 1, s)]])
        n = 1
        while s + n < len(order) and len(ids[order[s + n]]) * (n + 1) <= max_tokens and n < 128:
            n += 1
        idx = order[s:s + n]
        L = max(len(ids[i]) for i in idx)
        a = torch.full((n, L), pad_id, dtype=torch.long)
        b = torch.zeros((n, L), dtype=torch.long)
        c = torch.zeros((n, L), dtype=torch.long)
        for j, i in enumerate(idx):
            k = len(ids[i])
            a[j, :k] = torch.tensor(ids[i]); b[j, :k] = torch.tensor(tts[i]); c[j, :k] = 1
        p = forward(model, a, b, c).float().softmax(-1)
        for j, i in enumerate(idx):
            preds[i] = int(p[j].argmax()); probs[i] = p[j].tolist()
        s += n
    return preds, probs


def score(rows, preds, binary_sources):
    c3, cb, n = defaultdict(int), defaultdict(int), defaultdict(int)
    not_contradiction = set()
    for r, p in zip(rows, preds):
        s = r["source"]
        n[s] += 1
        if r["label"] == NOT_CONTRADICTION:
            not_contradiction.add(s)
            cb[s] += p != LABEL2ID["contradiction"]
            c3[s] += p != LABEL2ID["contradiction"]
            continue
        gold_ent = r["label"] == "entailment"
        cb[s] += (p == 0) == gold_ent
        if s not in binary_sources:
            c3[s] += p == LABEL2ID[r["label"]]
    out = {}
    for s in sorted(n):
        if s in not_contradiction:
            out[s] = {"task": "3-way, not-contradiction rows scored as such", "n": n[s],
                      "accuracy": round(100 * c3[s] / n[s], 2)}
        elif s in binary_sources:
            out[s] = {"task": "binary", "n": n[s], "accuracy": round(100 * cb[s] / n[s], 2)}
        else:
            out[s] = {"task": "3-way", "n": n[s], "accuracy": round(100 * c3[s] / n[s], 2),
                      "accuracy_entail_vs_not": round(100 * cb[s] / n[s], 2)}
    return out


def symmetry(model, tok, rows, probs, binary_sources, max_length):
    """Median |P(c | a, b) - P(c | b, a)| over the 3-way contradiction rows, per source and in all."""
    import statistics

    idx = [i for i, r in enumerate(rows) if r["label"] == "contradiction" and r["source"] not in binary_sources]
    if not idx:
        return {"all": None}
    rev = [{"premise": rows[i]["hypothesis"], "hypothesis": rows[i]["premise"]} for i in idx]
    ids, tts = encode(tok, rev, max_length)
    _, rprobs = predict(model, ids, tts, tok.pad_token_id)
    c = LABEL2ID["contradiction"]
    diffs = defaultdict(list)
    for i, rp in zip(idx, rprobs):
        d = abs(probs[i][c] - rp[c])
        diffs[rows[i]["source"]].append(d)
        diffs["all"].append(d)
    return {s: {"n": len(v), "median_abs_diff": round(statistics.median(v), 4),
                "both_directions_contradiction": round(sum(1 for i, rp in zip(idx, rprobs)
                    if (s == "all" or rows[i]["source"] == s) and probs[i][c] >= 0.5 and rp[c] >= 0.5) / len(v), 4)}
            for s, v in sorted(diffs.items())}


def main(
    model_dir: str = typer.Option(str(REPO_ROOT / "training/nli-minilm-l6"), "--model"),
    heldout: List[str] = typer.Option([str(REPO_ROOT / "assets/nli/heldout.jsonl")],
                                      help="held-out JSONL files (repeat the flag for several)"),
    output: str = typer.Option("", help="JSON of the figures; default: MODEL-eval.json beside the model folder"),
    max_length: int = typer.Option(128),
    limit_per_source: int = typer.Option(0, help="0 = all held-out rows"),
    compare_fp16: bool = typer.Option(False, "--compare-fp16"),
    threads: int = typer.Option(2),
):
    """Evaluate an NLI cross-encoder directory on the held-out pairs, per source."""
    torch.set_num_threads(threads)
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    t0 = time.time()
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir, torch_dtype=torch.float32)
    model.eval()
    assert model.config.id2label[0] == "entailment", model.config.id2label
    rows = [r for path in heldout for r in read_jsonl(path)]
    if limit_per_source:
        seen = defaultdict(int)
        keep = []
        for r in rows:
            if seen[r["source"]] < limit_per_source:
                keep.append(r); seen[r["source"]] += 1
        rows = keep
    binary_sources = binary_rows_fix(rows)
    ids, tts = encode(tok, rows, max_length)
    result = {"model": str(model_dir), "heldout": str(heldout), "max_length": max_length,
              "rows": len(rows), "binary_sources": sorted(binary_sources)}
    preds32, probs32 = predict(model, ids, tts, tok.pad_token_id)
    result["fp32"] = score(rows, preds32, binary_sources)
    result["symmetry"] = symmetry(model, tok, rows, probs32, binary_sources, max_length)
    log(f"symmetry: {result['symmetry']['all']}")
    log(f"fp32: { {s: v['accuracy'] for s, v in result['fp32'].items()} } ({time.time() - t0:.0f}s)")
    if compare_fp16:
        model = model.half().float()
        preds16, probs16 = predict(model, ids, tts, tok.pad_token_id)
        result["fp16"] = score(rows, preds16, binary_sources)
        result["fp16_minus_fp32"] = {
            s: round(result["fp16"][s]["accuracy"] - result["fp32"][s]["accuracy"], 2)
            for s in result["fp32"]}
        result["fp16_prediction_agreement"] = round(
            sum(a == b for a, b in zip(preds32, preds16)) / len(rows), 5)
        result["fp16_max_abs_prob_diff"] = round(max(
            max(abs(x - y) for x, y in zip(p, q)) for p, q in zip(probs32, probs16)), 6)
        log(f"fp16: { {s: v['accuracy'] for s, v in result['fp16'].items()} }; "
            f"agreement {result['fp16_prediction_agreement']}")
    result["eval_wall_s"] = round(time.time() - t0, 1)
    output = output or f"{str(model_dir).rstrip('/')}-eval.json"
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    Path(output).write_text(json.dumps(result, indent=2) + "\n", encoding="utf8")
    log(f"wrote {output}")


if __name__ == "__main__":
    typer.run(main)
