"""Which pairs of a long document should the cascade's second stage read?

The default cascade reads the first model's 8 highest pairs plus the 4 others whose units share the
most rare content words (tf-idf cosine, `pairwise.similar_pairs`). In long documents the first model
ranks a contradicting pair low, so the second stage often never sees it. The probe runs the first
stage alone on behaviour-format records of one capability (long-distance by default) and prints,
for several ways of choosing the extra pairs, how often the gold pair (contradiction documents) and
the near-miss pair (controls) are among the pairs read. Reading the near miss as often as the gold
pair is fair: what matters is that the contradicting pair is read at all.

    python scripts/pairwise/long_distance_candidates.py --suite data/near_miss --pattern "train_*.jsonl"
    python scripts/pairwise/long_distance_candidates.py --suite tests/behaviour --pattern "dev_*.jsonl"

Choose on the training records and the dev split; the test splits only measure.
"""
import sys
from pathlib import Path
from typing import Dict, List

import numpy
import typer

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from evaluate_behaviour import build_pipeline, gold_pair_indices  # noqa: E402

from spacy_inconsistency.components.pairwise import term_similarities  # noqa: E402
from spacy_inconsistency.corpora.behaviour import read_behaviour_suite  # noqa: E402

TOP_K = 8


def chosen(first: numpy.ndarray, other: numpy.ndarray, extra: int) -> set:
    """The first model's TOP_K pairs plus the `extra` others that `other` ranks highest."""
    top = numpy.argsort(-first, kind="stable")[:TOP_K]
    rest = other.astype(float).copy()
    rest[top] = -numpy.inf
    more = numpy.argsort(-rest, kind="stable")[:extra]
    return set(top.tolist()) | {int(i) for i in more if numpy.isfinite(rest[i]) and rest[i] > 0}


def main(
    suite: Path = typer.Option(ROOT / "data" / "near_miss"),
    pattern: str = typer.Option("train_*.jsonl"),
    capability: str = typer.Option("long-distance"),
    model: str = typer.Option("default", help="The first model (a folder with its pair_scorer.json, or a name)."),
    encoders: List[str] = typer.Option(["minilm"], "--encoder", help="Sentence encoders for the embedding "
                                                                     "choice ('minilm' or a local model folder)."),
) -> None:
    from spacy_inconsistency.backends.embeddings import SentenceEncoder

    records = [r for r in read_behaviour_suite(suite, pattern) if r["capability"] == capability]
    nlp = build_pipeline(model, {"rescorer": None})
    detector = nlp.get_pipe("inconsistency_detector")
    encs = {name: SentenceEncoder(name) for name in encoders}
    hits: Dict[str, Dict[str, List[bool]]] = {}
    n_pairs = []
    for side in ("contradiction", "control"):
        docs = [nlp.make_doc(r[side]["text"]) for r in records]
        detector.segment(docs)
        for r, doc, scores in zip(records, docs, detector.predict(docs)):
            gold = gold_pair_indices(scores, r["gold"] if side == "contradiction" else r["control_gold"])
            if not gold:
                continue
            n_pairs.append(len(scores.pairs))
            pairs = scores.pairs
            tfidf = term_similarities(scores.units, pairs)
            ways = {f"tf-idf {k}": chosen(scores.score, tfidf, k) for k in (0, 4, 8)}
            for name, enc in encs.items():
                v = enc.encode([u.text.strip() for u in scores.units])
                cos = (v[pairs[:, 0]] * v[pairs[:, 1]]).sum(axis=1)
                label = "minilm" if name == "minilm" else Path(name).name
                ways[f"{label} 4"] = chosen(scores.score, cos, 4)
                ways[f"{label} 8"] = chosen(scores.score, cos, 8)
                ways[f"{label} + tf-idf 4"] = chosen(scores.score, cos + tfidf, 4)
            for way, picked in ways.items():
                hits.setdefault(way, {"contradiction": [], "control": []})[side].append(any(g in picked for g in gold))
    print(f"{len(records)} {capability} records of {suite}/{pattern}; compared pairs median {int(numpy.median(n_pairs))}")
    print("| pairs read besides the first model's 8 | gold pair read | control's near miss read |")
    print("|---|---|---|")
    for way, h in hits.items():
        print(f"| {way} | {numpy.mean(h['contradiction']):.2f} | {numpy.mean(h['control']):.2f} |")


if __name__ == "__main__":
    typer.run(main)
