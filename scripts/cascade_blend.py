"""Would blending the cascade's two pair scores help? Matched AUC of each blend on the behavioural suite.

The default detector's two stages are run apart on each document of the
split: the first model's learned score s1 of every candidate pair, then the
rescorer's (mpnet-lora) score s2 of the first stage's `rescore_top_k` highest
pairs, as `ContradictionDetector._rescore` computes it. A document's score
under a blend is its highest blended pair among those; the matched AUC is
P(contradiction document > its control), as `evaluate_behaviour.py` counts
it. `s2` is the default's score and reproduces its matched AUC.

    python scripts/cascade_blend.py --split dev
"""
from pathlib import Path
from typing import Callable, Dict, List

import numpy
import typer

ROOT = Path(__file__).resolve().parent.parent
BLENDS: Dict[str, Callable[[float, float], float]] = {
    "s2": lambda s1, s2: s2,
    "s1": lambda s1, s2: s1,
    "0.75 s2 + 0.25 s1": lambda s1, s2: 0.75 * s2 + 0.25 * s1,
    "mean": lambda s1, s2: 0.5 * (s1 + s2),
    "geometric mean": lambda s1, s2: (max(s1, 1e-6) * max(s2, 1e-6)) ** 0.5,
    "min": lambda s1, s2: min(s1, s2),
}


def main(
    split: str = typer.Option("dev", help="'dev' or 'test'."),
    suite: Path = typer.Option(ROOT / "tests" / "behaviour", help="Folder of the suite files."),
    batch_size: int = typer.Option(32, help="Documents per batch."),
) -> None:
    import spacy

    from spacy_inconsistency.corpora.behaviour import read_behaviour_suite
    from spacy_inconsistency.pair_scoring import unit_alignment

    records = read_behaviour_suite(suite, f"{split}_*.jsonl")
    nlp = spacy.blank("en")
    detector = nlp.add_pipe("inconsistency_detector")
    pairwise = detector.pairwise
    rescorer = pairwise.rescorer
    if rescorer is None:
        raise typer.BadParameter("the default detector has no second stage here: run `python -m spacy_inconsistency download`")
    k = pairwise.cfg["rescore_top_k"]
    texts = [r[side]["text"] for r in records for side in ("contradiction", "control")]
    top: List[List[tuple]] = []
    for start in range(0, len(texts), batch_size):
        docs = [nlp.make_doc(t) for t in texts[start : start + batch_size]]
        detector.segment(docs)
        pairwise.rescorer = None
        try:
            first = pairwise.predict(docs)
        finally:
            pairwise.rescorer = rescorer
        facts = [unit_alignment(s.units, s.pairs) if len(s.pairs) else None for s in first]
        second = pairwise._rescore(first, facts)
        for f, s in zip(first, second):
            chosen = numpy.argsort(-f.score, kind="stable")[:k]
            top.append([(float(f.score[c]), float(s.score[c])) for c in chosen.tolist()])
        typer.echo(f"{min(start + batch_size, len(texts))} of {len(texts)} documents", err=True)
    capabilities = [r["capability"] for r in records]
    for name, blend in BLENDS.items():
        doc_scores = [max([blend(s1, s2) for s1, s2 in pairs] or [0.0]) for pairs in top]
        wins = numpy.array([
            1.0 if a > b else 0.5 if a == b else 0.0 for a, b in zip(doc_scores[0::2], doc_scores[1::2])
        ])
        per = " ".join(
            f"{c}: {wins[[x == c for x in capabilities]].mean():.2f}" for c in sorted(set(capabilities))
        )
        typer.echo(f"{name:18s} matched AUC {wins.mean():.3f} ({per})")


if __name__ == "__main__":
    typer.run(main)
