"""How often a model calls two sentences of one coherent passage a contradiction.

The held-out pairs (`make_document_pairs.py`, ConTRoL validation passages)
do not contradict, so every pair with P(contradiction) >= the threshold is a
false alarm of the pairwise detector.

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
        result["models"][model] = {
            "contradiction_rate_one_direction": float((forward >= args.threshold).mean()),
            "contradiction_rate_both_directions": float((both >= args.threshold).mean()),
            "mean_p_contradiction": float(forward.mean()),
        }
        print(model, json.dumps(result["models"][model]))
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
