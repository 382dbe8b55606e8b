"""How often a model calls the two sentences of a pair a contradiction, in one or both directions.

For the held-out pairs of `make_document_pairs.py` (ConTRoL validation passages) and
`make_unrelated_pairs.py` (unrelated sentences) every pair with P(contradiction) >= the
threshold is a false alarm of the pairwise detector; for `make_antonym_pairs.py`'s held-out
pairs (antonym swaps) the same rate is the share of contradictions found (`--by-source`
splits it by the file's `source` field).

    python scripts/nli/evaluate_document_pairs.py --models training/nli-minilm-l6 --models training/nli-minilm-l6-doc \
        --pairs assets/nli/docpairs_heldout.jsonl --output training/docpairs-eval.json
"""
import json
import sys
from pathlib import Path
from typing import List

import typer

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))


def main(
    models: List[str] = typer.Option(..., help="NLI models (repeat the flag for several)"),
    pairs_path: str = typer.Option(str(REPO_ROOT / "assets/nli/docpairs_heldout.jsonl"), "--pairs"),
    output: str = typer.Option(str(REPO_ROOT / "training/docpairs-eval.json")),
    threshold: float = typer.Option(0.5),
    by_source: bool = typer.Option(False, "--by-source", help="also report the rates per `source` field"),
):
    """How often a model calls the two sentences of a pair a contradiction, in one or both directions."""
    import numpy

    from spacy_inconsistency.backends.nli import NLIBackend

    rows = [json.loads(line) for line in open(pairs_path, encoding="utf8") if line.strip()]
    pairs = [(r["premise"], r["hypothesis"]) for r in rows]
    result = {"pairs": pairs_path, "n": len(rows), "threshold": threshold, "models": {}}
    for model in models:
        backend = NLIBackend(model, device="cpu")
        forward = backend.predict(pairs)["contradiction"]
        backward = backend.predict([(h, p) for p, h in pairs])["contradiction"]
        both = numpy.minimum(forward, backward)

        def rates(mask):
            return {
                "n": int(mask.sum()),
                "contradiction_rate_one_direction": float((forward[mask] >= threshold).mean()),
                "contradiction_rate_both_directions": float((both[mask] >= threshold).mean()),
                "mean_p_contradiction": float(forward[mask].mean()),
            }

        result["models"][model] = rates(numpy.ones(len(rows), dtype=bool))
        if by_source:
            sources = numpy.asarray([r.get("source", "") for r in rows], dtype=object)
            result["models"][model]["by_source"] = {
                src: rates(sources == src) for src in sorted(set(sources.tolist()))}
        print(model, json.dumps(result["models"][model]))
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    Path(output).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    typer.run(main)
