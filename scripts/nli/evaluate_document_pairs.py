"""How often a model calls the two sentences of a pair a contradiction, in one or both directions.

For the held-out pairs of `make_document_pairs.py` (ConTRoL validation passages) and
`make_unrelated_pairs.py` (unrelated sentences) every pair with P(contradiction) >= the
threshold is a false alarm of the pairwise detector; for `make_antonym_pairs.py`'s held-out
pairs (antonym swaps) the same rate is the share of contradictions found (`--by-source`
splits it by the file's `source` field).

    python scripts/nli/evaluate_document_pairs.py --models training/nli-minilm-l6 training/nli-minilm-l6-doc \
        --pairs assets/nli/docpairs_heldout.jsonl --output training/docpairs-eval.json
"""
import argparse
import json
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", required=True)
    ap.add_argument("--pairs", default=str(REPO_ROOT / "assets/nli/docpairs_heldout.jsonl"))
    ap.add_argument("--output", default=str(REPO_ROOT / "training/docpairs-eval.json"))
    ap.add_argument("--threshold", type=float, default=0.5)
    ap.add_argument("--by-source", action="store_true", help="also report the rates per `source` field")
    args = ap.parse_args(argv)

    import numpy

    from spacy_inconsistency.backends.nli import NLIBackend

    rows = [json.loads(line) for line in open(args.pairs, encoding="utf8") if line.strip()]
    pairs = [(r["premise"], r["hypothesis"]) for r in rows]
    result = {"pairs": args.pairs, "n": len(rows), "threshold": args.threshold, "models": {}}
    for model in args.models:
        backend = NLIBackend(model, device="cpu")
        forward = backend.predict(pairs)["contradiction"]
        backward = backend.predict([(h, p) for p, h in pairs])["contradiction"]
        both = numpy.minimum(forward, backward)

        def rates(mask):
            return {
                "n": int(mask.sum()),
                "contradiction_rate_one_direction": float((forward[mask] >= args.threshold).mean()),
                "contradiction_rate_both_directions": float((both[mask] >= args.threshold).mean()),
                "mean_p_contradiction": float(forward[mask].mean()),
            }

        result["models"][model] = rates(numpy.ones(len(rows), dtype=bool))
        if args.by_source:
            sources = numpy.asarray([r.get("source", "") for r in rows], dtype=object)
            result["models"][model]["by_source"] = {
                src: rates(sources == src) for src in sorted(set(sources.tolist()))}
        print(model, json.dumps(result["models"][model]))
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
