#!/usr/bin/env python
"""What the second stage's pair score finds most contradictory in consistent news: each
article's highest pair, its score against the document threshold, and the alignment features
that fire.

The calibration articles' highest pair scores (every compared pair read by the second stage,
as `fit_pair_scorer.py` reads them) decide how high the document threshold must be, and that
threshold is what holds the suite's recall down. This lists what those pairs are. It reads the
second stage's probabilities from a fit cache (`fit_cache.py to-json`, or the `--cache` of
`fit_pair_scorer.py`) and scores what is missing with the model.

    python scripts/pairwise/news_top_pairs.py --cache training/mpnet-lora-bf16-fitcache.json \\
        --skip 0 --n 60 --output metrics/news_top_pairs.jsonl

`--skip 0 --n 60`: the calibration articles of `fit_pair_scorer.py` (the next 80 are fitted on as
negatives; from the 140th on none was used).
"""
import json
import sys
from pathlib import Path
from typing import Optional

import numpy
import typer

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "nli"))


def main(
    cache: Path = typer.Option(..., help="Fit cache of the second stage's probabilities (JSON)."),
    model: str = typer.Option("mpnet-lora", help="The model scoring pairs the cache lacks."),
    pair_scorer: Path = typer.Option(ROOT / "spacy_inconsistency" / "models" / "nli-mpnet-lora" / "pair_scorer.json"),
    true_dir: Path = typer.Option(ROOT.parent / "shared" / "data" / "true", help="TRUE CSVs (FRANK and SummEval sources)."),
    skip: int = typer.Option(0, help="Articles of `news_articles` to pass over."),
    n: int = typer.Option(60, help="Articles to read."),
    top: int = typer.Option(15, help="Articles to print, highest first."),
    output: Optional[Path] = typer.Option(None, help="One JSON line per article."),
) -> None:
    from fit_pair_scorer import CachedNLI, DetectorPairs, news_articles
    from spacy_inconsistency.alignment import FEATURE_NAMES
    from spacy_inconsistency.backends.nli import NLIBackend
    from spacy_inconsistency.pair_score import PairScoreModel

    scorer = PairScoreModel.from_disk(pair_scorer)
    backend = CachedNLI(NLIBackend(model, device="cpu"), cache)
    compared = DetectorPairs(backend, max_all_pairs=2000)
    rows = []
    for text in news_articles(true_dir, n, skip=skip):
        units, pairs, forward, backward, align = compared(text)
        if not len(pairs):
            rows.append({"n_pairs": 0, "score": 0.0, "threshold": scorer.document_threshold(0), "flagged": False})
            continue
        score = scorer(forward, backward, align)
        k = int(numpy.argmax(score))
        i, j = pairs[k].tolist()
        rows.append({
            "n_pairs": int(len(pairs)), "score": float(score[k]), "threshold": float(scorer.document_threshold(len(pairs))),
            "nli_only": float(scorer(forward[k:k + 1], backward[k:k + 1])[0]),
            "p_contradiction": [float(forward[k, 2]), float(backward[k, 2])],
            "a": units[i].text.strip(), "b": units[j].text.strip(), "distance": j - i,
            "features": [name for name, v in zip(FEATURE_NAMES, align[k].tolist()) if v],
        })
        rows[-1]["flagged"] = rows[-1]["score"] >= rows[-1]["threshold"]
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf8")
    scores = numpy.array([r["score"] for r in rows])
    print(f"{len(rows)} articles: flagged {sum(r['flagged'] for r in rows)}; highest pair score median "
          f"{numpy.median(scores):.3f}, 90th percentile {numpy.quantile(scores, 0.9):.3f}")
    for r in sorted(rows, key=lambda r: -r["score"])[:top]:
        print(f"{r['score']:.3f} (threshold {r['threshold']:.3f}, {r['n_pairs']} pairs; P(c) {r.get('p_contradiction')}, "
              f"NLI-only {r.get('nli_only', 0):.3f}) {r.get('features')}\n   A: {r.get('a')}\n   B: {r.get('b')}")


if __name__ == "__main__":
    typer.run(main)
