"""Corpus-scale benchmark: how few pairs the candidate strategies score, and what they keep.

Corpus: one party's Qual-O-Mat comments across all elections, split into
sentences (one statement each, at least 5 tokens, duplicates removed); the
election is the source label.

1. Whole corpus (n statements): the pairs each strategy proposes, as a
   fraction of all n(n-1)/2 pairs; encoding and search time.
2. A random sample of m statements: every pair scored by the NLI model
   (forward; backward only where forward >= threshold, which is exact for
   `min` aggregation). The contradictions found this way are the reference;
   each strategy's recall is the share of them among its candidate pairs.
   m is chosen so that all-pairs scoring fits --budget-s (or given).

    python scripts/pairwise/benchmark_corpus.py --qualomat ../shared/data/qualomat \
        --party SPD --output metrics/pairwise_corpus.json

`--reference forward` takes as reference the pairs whose first direction
alone reaches the threshold (for when the `min` reference is empty, as it is
for German text and the English-trained default model); `--scores` keeps
every sample pair's scores; `--skip-full` skips step 1.
"""
import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy  # noqa: E402


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def load_statements(root: str, party: str, min_tokens: int = 5):
    import spacy

    from spacy_inconsistency.corpora.qualomat import load_qualomat_comments

    records = load_qualomat_comments(root, party=party)
    nlp = spacy.blank("de")
    nlp.add_pipe("sentencizer")
    out, seen = [], set()
    for doc, rec in nlp.pipe(((r["text"], r) for r in records), as_tuples=True):
        for sent in doc.sents:
            text = sent.text.strip()
            if len(sent) >= min_tokens and text not in seen:
                seen.add(text)
                out.append({"text": text, "source": rec["election"], "date": rec["date"], "answer": rec["answer"]})
    return out


def pair_ranks(vectors: numpy.ndarray, pairs: numpy.ndarray) -> numpy.ndarray:
    """For each pair (i, j): the smaller of j's rank among i's neighbours and i's among j's (1 = nearest)."""
    sims = vectors @ vectors.T
    numpy.fill_diagonal(sims, -numpy.inf)
    out = []
    for i, j in pairs.tolist():
        r_ij = int((sims[i] > sims[i, j]).sum()) + 1
        r_ji = int((sims[j] > sims[j, i]).sum()) + 1
        out.append(min(r_ij, r_ji))
    return numpy.asarray(out, dtype=numpy.int64)


def strategy_pairs(name, spans, vectors):
    from spacy_inconsistency.backends.embeddings import nearest_neighbours
    from spacy_inconsistency.candidates import (
        make_entity_strategy, make_lexical_strategy, neighbour_pairs, normalise_pairs,
    )

    kind, _, arg = name.partition(":")
    if kind == "knn":
        return neighbour_pairs(nearest_neighbours(vectors, int(arg), ann_min_size=None))
    if kind == "ann":
        return neighbour_pairs(nearest_neighbours(vectors, int(arg), ann_min_size=0))
    if kind == "lexical":
        return make_lexical_strategy(k=int(arg))(spans)
    if kind == "union":
        parts = [strategy_pairs(p, spans, vectors) for p in arg.split("+")]
        return normalise_pairs(numpy.concatenate(parts), len(spans))
    if kind == "entities":
        return make_entity_strategy()(spans)
    raise ValueError(name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--qualomat", default="../shared/data/qualomat")
    parser.add_argument("--party", default="SPD")
    parser.add_argument("--threshold", type=float, default=0.5)
    parser.add_argument("--budget-s", type=float, default=1200.0, help="time for all-pairs scoring of the sample")
    parser.add_argument("--sample-size", type=int, default=None, help="default: what fits --budget-s, at most 1000")
    parser.add_argument("--model", default="default")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-statements", type=int, default=None, help="cut the corpus (for smoke tests)")
    parser.add_argument("--skip-full", action="store_true", help="skip step 1; encode only the sample")
    parser.add_argument("--reference", default="min", choices=["min", "forward"],
                        help="contradictions of the reference: both directions >= threshold (min, the "
                             "detector's default) or the first direction alone (forward)")
    parser.add_argument("--scores", default=None, help="also save every sample pair's scores here (.npz)")
    parser.add_argument("--output", default="metrics/pairwise_corpus.json")
    args = parser.parse_args()

    import spacy
    import torch

    torch.set_num_threads(1)
    from spacy_inconsistency.backends.embeddings import SentenceEncoder
    from spacy_inconsistency.backends.nli import NLIBackend
    from spacy_inconsistency.candidates import all_pairs
    from spacy_inconsistency.components.pairwise import score_pairs

    report = {"party": args.party, "threshold": args.threshold, "model": args.model}
    t0 = time.time()
    statements = load_statements(args.qualomat, args.party)
    if args.max_statements:
        statements = statements[: args.max_statements]
    n = len(statements)
    report["n_statements"] = n
    report["n_sources"] = len({s["source"] for s in statements})
    print(f"{n} statements from {report['n_sources']} elections ({time.time() - t0:.1f}s)", flush=True)
    nlp = spacy.blank("de")
    spans = [nlp.make_doc(s["text"])[:] for s in statements]
    encoder = SentenceEncoder(device="cpu", batch_size=64)
    configs = ["knn:5", "knn:10", "knn:20", "knn:50", "knn:125", "ann:20", "lexical:10", "union:knn:20+lexical:10"]
    total = n * (n - 1) // 2
    full = {}
    if not args.skip_full:
        t = time.time()
        vectors = encoder.encode([s["text"] for s in statements])
        report["encode_s"] = round(time.time() - t, 1)
        report["encode_per_s"] = round(n / (time.time() - t), 1)
        print(f"encoded in {report['encode_s']}s", flush=True)
    for name in configs if not args.skip_full else []:
        t = time.time()
        pairs = strategy_pairs(name, spans, vectors)
        full[name] = {"pairs": int(len(pairs)), "fraction": len(pairs) / total, "seconds": round(time.time() - t, 2)}
        print(f"full corpus {name}: {len(pairs):,} pairs = {100 * len(pairs) / total:.2f}% ({time.time() - t:.1f}s)", flush=True)
    report["full_corpus"] = {"all_pairs": total, "strategies": full}

    backend = NLIBackend(args.model, device="cpu", max_batch_size=64)
    rng = numpy.random.default_rng(args.seed)
    probe = rng.choice(n, size=(512, 2))
    probe = probe[probe[:, 0] != probe[:, 1]]
    texts = [s["text"] for s in statements]
    rate = float("nan")
    if args.sample_size is None:
        t = time.time()
        backend.predict([(texts[i], texts[j]) for i, j in probe.tolist()])
        rate = len(probe) / (time.time() - t)
    m = args.sample_size
    if m is None:
        m = int((1 + (1 + 8 * rate * args.budget_s) ** 0.5) / 2)
        m = min(m, 1000)
    report["probe_pairs_per_s"] = None if rate != rate else round(rate, 1)
    report["sample_size"] = m
    print(f"probe: {rate:.1f} pairs/s (one direction); sample of {m} statements, {m * (m - 1) // 2:,} pairs", flush=True)

    sample = numpy.sort(rng.choice(n, size=m, replace=False))
    s_texts = [texts[i] for i in sample]
    s_vectors = vectors[sample] if not args.skip_full else encoder.encode(s_texts)
    s_spans = [spans[i] for i in sample]
    pairs = all_pairs(m)
    t = time.time()
    scores = score_pairs(backend, s_texts, pairs, aggregation="min", threshold=args.threshold, chunk_size=2048)
    elapsed = time.time() - t
    n_backward = int((~numpy.isnan(scores.backward)).sum())
    reference = scores.score if args.reference == "min" else scores.forward
    found = numpy.flatnonzero(reference >= args.threshold)
    report["reference"] = args.reference
    if args.scores:
        numpy.savez_compressed(args.scores, sample=sample, pairs=pairs, forward=scores.forward,
                               backward=scores.backward)
    contradictions = pairs[found]
    report["all_pairs_sample"] = {
        "pairs": int(len(pairs)),
        "backward_scored": n_backward,
        "seconds": round(elapsed, 1),
        "pairs_per_s": round(len(pairs) / elapsed, 1),
        "nli_calls_per_s": round((len(pairs) + n_backward) / elapsed, 1),
        "contradictions": int(len(found)),
        "forward_over_threshold": n_backward,
    }
    print(f"all pairs: {len(pairs):,} in {elapsed:.0f}s; {len(found)} contradictions", flush=True)

    found_set = set(map(tuple, contradictions.tolist()))
    sample_results = {}
    total_m = len(pairs)
    for name in configs:
        if name == "knn:125":
            continue
        cand = strategy_pairs(name, s_spans, s_vectors)
        hit = sum(1 for p in map(tuple, cand.tolist()) if p in found_set)
        sample_results[name] = {
            "pairs": int(len(cand)), "fraction": len(cand) / total_m,
            "recall": hit / len(found_set) if found_set else None,
        }
        print(f"sample {name}: {100 * len(cand) / total_m:.2f}% of pairs, recall {hit}/{len(found_set)}", flush=True)
    # Recall and fraction for every k of the exact neighbour search.
    ranks = pair_ranks(s_vectors, contradictions) if len(contradictions) else numpy.zeros(0, dtype=numpy.int64)
    curve = []
    for k in [1, 2, 3, 5, 8, 10, 15, 20, 30, 50, 75, 100]:
        if k >= m:
            break
        cand = strategy_pairs(f"knn:{k}", s_spans, s_vectors)
        curve.append({
            "k": k, "fraction": len(cand) / total_m,
            "recall": float((ranks <= k).mean()) if len(ranks) else None,
            "full_corpus_k_same_fraction": int(round(k * (n - 1) / (m - 1))),
        })
    report["sample"] = {"strategies": sample_results, "knn_curve": curve}
    order = numpy.argsort(-reference[found])[:10]
    report["examples"] = [
        {"score": float(reference[found][o]), "directions": [float(scores.forward[found][o]), float(scores.backward[found][o])],
         "a": {"text": s_texts[contradictions[o][0]], "source": statements[sample[contradictions[o][0]]]["source"]},
         "b": {"text": s_texts[contradictions[o][1]], "source": statements[sample[contradictions[o][1]]]["source"]}}
        for o in order.tolist()
    ]
    report["peak_rss_mb"] = round(peak_rss_mb(), 1)
    report["wall_s"] = round(time.time() - t0, 1)
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8")
    print(json.dumps({k: v for k, v in report.items() if k != "examples"}, indent=2), file=sys.stderr)


if __name__ == "__main__":
    main()
