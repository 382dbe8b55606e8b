"""Pair-level probe: does the first model's view add to the second's?

For every record of the behavioural suite (dev, test, test2) both models read the gold pair and
the control's near-miss pair in both orders. The figure is the matched AUC (the share of records
whose gold pair scores above its control's pair, ties half), for the second model's P(contradiction)
averaged over both orders, for mixes of the two models' averages, and for logistic regressions
fitted on the dev split over each model's order-free log-odds (the larger and smaller of each class
over the two orders), read on the test splits.

    python scripts/nli/probe_stacking.py   # the shipped models; --second DIR for another merged one
"""
import json
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np
import typer

ROOT = Path(__file__).resolve().parents[2]
SPLITS = ("dev", "test", "test2")


def suite_records(suite: Path) -> List[Tuple[str, List[str], List[str]]]:
    """(split, gold pair, control pair) of every record of the suite's files."""
    records = []
    for path in sorted(suite.glob("*.jsonl")):
        for line in path.read_text(encoding="utf8").splitlines():
            if line.strip():
                rec = json.loads(line)
                records.append((path.name.split("_")[0], rec["contradiction"]["pair"], rec["control"]["pair"]))
    return records


def record_pairs(records) -> List[Tuple[str, str]]:
    """Four pairs per record: gold (a, b), (b, a), control (c, d), (d, c)."""
    pairs = []
    for _, (a, b), (c, d) in records:
        pairs += [(a, b), (b, a), (c, d), (d, c)]
    return pairs


def order_free_features(probs: np.ndarray) -> np.ndarray:
    """(4 * records, 3) probabilities -> (records, 2, 6): log-odds of the larger and the smaller
    of each class over the two orders, for the gold pair and the control's pair."""
    p = np.clip(probs.reshape(-1, 2, 2, 3), 1e-6, 1 - 1e-6)
    logit = np.log(p / (1 - p))
    return np.concatenate([logit.max(2), logit.min(2)], -1)


def matched_auc(scores: np.ndarray) -> float:
    """(records, 2) scores of the gold and the control pair -> share of gold above control, ties half
    (the suite's matched AUC, `metrics.behaviour.matched_auc`)."""
    from spacy_inconsistency.metrics.behaviour import matched_auc as shared

    return shared(scores[:, 0].tolist(), scores[:, 1].tolist())


def nli_probs(model: str, pairs: List[Tuple[str, str]]) -> np.ndarray:
    """(pairs, 3) P(entailment, neutral, contradiction), fp32 on the CPU, through the package's backend."""
    from spacy_inconsistency.backends.nli import NLIBackend

    probs = NLIBackend(model, device="cpu", dtype="float32", local_files_only=True).predict(pairs)
    return np.stack([probs["entailment"], probs["neutral"], probs["contradiction"]], 1)


def by_split(scores: np.ndarray, split: np.ndarray) -> Dict[str, float]:
    return {name: round(matched_auc(scores[split == name]), 4) for name in SPLITS}


def main(
    second: str = typer.Option("mpnet-lora", help="The second stage: 'mpnet-lora' or a merged model folder."),
    first: str = typer.Option("default", help="The first stage: 'default' (the embedded model) or a folder."),
    suite: Path = typer.Option(ROOT / "tests" / "behaviour"),
    threads: int = typer.Option(2),
):
    import torch
    from sklearn.linear_model import LogisticRegression

    torch.set_num_threads(threads)

    records = suite_records(suite)
    split = np.array([r[0] for r in records])
    pairs = record_pairs(records)
    p2, p1 = nli_probs(second, pairs), nli_probs(first, pairs)
    mean_c = {name: p.reshape(-1, 2, 2, 3)[..., 2].mean(2) for name, p in (("second", p2), ("first", p1))}
    print("second, mean P(c)", by_split(mean_c["second"], split))
    print("first, mean P(c)", by_split(mean_c["first"], split))
    for w in (0.1, 0.2, 0.3):
        print(f"mix, first weighing {w}", by_split((1 - w) * mean_c["second"] + w * mean_c["first"], split))
    dev = split == "dev"
    for name, feats in (("second", order_free_features(p2)),
                        ("second + first", np.concatenate([order_free_features(p2), order_free_features(p1)], -1))):
        X = np.concatenate([feats[dev, 0], feats[dev, 1]])
        y = np.r_[np.ones(dev.sum()), np.zeros(dev.sum())]
        for c in (0.1, 1.0):
            model = LogisticRegression(C=c, max_iter=2000).fit(X, y)
            scores = model.decision_function(feats.reshape(-1, feats.shape[-1])).reshape(-1, 2)
            print(f"logistic regression on dev, {name}, C={c}", by_split(scores, split))


if __name__ == "__main__":
    typer.run(main)
