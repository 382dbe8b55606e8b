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

`--corpus english` uses 5,606 English statements instead (ClaimDiff claims,
the political benchmark's texts, ProSeCCo propositions; see
`load_english_statements`) and adds, at full size, the recall of the
human-labelled contradictory pairs in it:

    python scripts/pairwise/benchmark_corpus.py --corpus english --data ../shared/data \
        --threads 2 --sample-size 1000 --time-limit-s 2250 --scores scores.npz

With `--time-limit-s` the sample grows statement by statement (each new one
scored against all earlier ones) and stops when time is up, so the sample is
always a random set whose pairs are all scored. `--from-scores scores.npz`
re-evaluates the strategies without NLI calls.

After that, `contradiction_hubs` (with and without embedding neighbours) is
evaluated over the whole corpus against the same reference: its probe pairs
(--hub-probes per statement, both directions) are scored once and kept in
--probe-scores. `--disjoint-from earlier_scores.npz` draws a second sample
from the statements the first did not use: a check of the strategy chosen
on the first, on contradictions it has not seen.

`--reference forward` takes as reference the pairs whose first direction
alone reaches the threshold (for when the `min` reference is empty, as it is
for German text and the English-trained default model). `--reference learned`
takes what `find_contradictions` reports: both directions of every pair, the
alignment features of the two statements (each parsed on its own) and the
pair scorer beside the model, at its pair threshold (`--threshold` is then
ignored). `--scores` keeps every sample pair's scores; `--skip-full` skips
step 1.
"""
import json
import os
import resource
import sys
import time
from enum import Enum
from pathlib import Path
from typing import Optional

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy  # noqa: E402
import typer  # noqa: E402


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


def load_english_statements(root: str, min_tokens: int = 5):
    """Real English statements: ClaimDiff claims and the political benchmark's texts.

    ClaimDiff: claim_a and claim_b of every pair in the train and test files
    (strength and weak share most claims); source "claimdiff: <topic>".
    Political benchmark (df_gold.csv): both texts of each pair; source
    "political". ProSeCCo (contradiction/ProSeCCo_final.csv): both
    propositions of each pair, source "prosecco: <debate set> <speaker>"
    (ClaimDiff + political alone give only ~3,100 distinct statements,
    short of the 5,000 the benchmark needs). Deduplicated by exact text; at least `min_tokens` tokens.
    """
    import spacy

    from spacy_inconsistency.corpora.claimdiff import read_claimdiff
    from spacy_inconsistency.political import read_political

    root = Path(root)
    raw = []
    for path in sorted((root / "claimdiff").glob("ClaimDiff-*-*.json")):
        for r in read_claimdiff(path):
            for key in ("claim_a", "claim_b"):
                raw.append({"text": r[key].strip(), "source": f"claimdiff: {r['topic']}", "dataset": "claimdiff",
                            "date": r.get("date")})
    for r in read_political(root / "political" / "df_gold.csv"):
        for key in ("text_a", "text_b"):
            raw.append({"text": r[key].strip(), "source": "political", "dataset": "political", "date": None})
    prosecco = root / "contradiction" / "ProSeCCo_final.csv"
    if prosecco.is_file():
        import csv

        with prosecco.open(encoding="utf-8", newline="") as f:
            for r in csv.DictReader(f):
                for key in ("proposition_1", "proposition_2"):
                    raw.append({"text": r[key].strip(), "source": f"prosecco: {r['source']} {r['speaker_id']}",
                                "dataset": "prosecco", "date": None})
    nlp = spacy.blank("en")
    out, seen = [], set()
    for rec in raw:
        if rec["text"] in seen:
            continue
        if len(nlp.make_doc(rec["text"])) >= min_tokens:
            seen.add(rec["text"])
            out.append(rec)
    return out


def labelled_pairs(root: str, statements) -> dict:
    """Human-labelled contradictory pairs of the English corpus, as index pairs into `statements`.

    "prosecco_self_contradiction": ProSeCCo pairs labelled self-contradiction;
    "political_inconsistent": political benchmark pairs whose majority label is
    one of the three inconsistency types; "prosecco_none" and
    "political_consistent" as contrast. Pairs whose texts were dropped (under
    5 tokens) or are identical are left out.
    """
    import csv

    from spacy_inconsistency.political import CONSISTENT, read_political, to_3_classes

    index = {s["text"]: i for i, s in enumerate(statements)}
    out = {"prosecco_self_contradiction": set(), "prosecco_none": set(),
           "political_inconsistent": set(), "political_consistent": set()}

    def add(name, a, b):
        i, j = index.get(a.strip()), index.get(b.strip())
        if i is not None and j is not None and i != j:
            out[name].add((min(i, j), max(i, j)))

    with (Path(root) / "contradiction" / "ProSeCCo_final.csv").open(encoding="utf-8", newline="") as f:
        for r in csv.DictReader(f):
            name = "prosecco_self_contradiction" if r["label"] == "self-contradiction" else "prosecco_none"
            add(name, r["proposition_1"], r["proposition_2"])
    for r in read_political(Path(root) / "political" / "df_gold.csv"):
        label = to_3_classes(r["label_5"])
        if label == "Inconsistent" or label == CONSISTENT:
            add("political_inconsistent" if label != CONSISTENT else "political_consistent", r["text_a"], r["text_b"])
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


SAMPLE_STRATEGIES = ["knn:5", "knn:10", "knn:20", "knn:50", "ann:20", "lexical:10", "union:knn:20+lexical:10"]
FULL_STRATEGIES = ["knn:5", "knn:10", "knn:20", "knn:50", "knn:125", "ann:20", "lexical:10", "union:knn:20+lexical:10"]


def prefix_pairs(start: int, stop: int) -> numpy.ndarray:
    """All pairs (i, j), i < j, with start <= j < stop: statement j against every earlier one."""
    if stop <= max(start, 1):
        return numpy.zeros((0, 2), dtype=numpy.int64)
    js = numpy.concatenate([numpy.full(j, j, dtype=numpy.int64) for j in range(max(start, 1), stop)])
    is_ = numpy.concatenate([numpy.arange(j, dtype=numpy.int64) for j in range(max(start, 1), stop)])
    return numpy.stack([is_, js], axis=1)


def score_growing_sample(backend, texts, *, threshold, chunk_size, time_limit_s, checkpoint, save_every_s, extra,
                         pair_scorer=None, facts=None):
    """All pairs of a growing prefix of `texts`, scored statement by statement.

    Statement j is scored against statements 0..j-1 (forward; backward only
    where forward >= threshold, exact for `min`). After each chunk the first
    `complete` statements have every pair scored, so stopping at any time
    leaves an all-pairs reference on a random sample (the order of `texts` is
    a seeded random permutation). With `pair_scorer` (and the texts' alignment
    `facts`) both directions of every pair are scored and the learned score is
    kept too. Returns (complete, pairs, forward, backward, learned or None, seconds).
    """
    from spacy_inconsistency.components.pairwise import score_pairs

    m = len(texts)
    pairs_l, fwd_l, bwd_l, learned_l = [], [], [], []
    complete, t0, last_save = 1, time.time(), time.time()

    def save():
        if checkpoint:
            pairs = numpy.concatenate(pairs_l) if pairs_l else numpy.zeros((0, 2), dtype=numpy.int64)
            numpy.savez_compressed(
                checkpoint, complete=complete, pairs=pairs,
                forward=numpy.concatenate(fwd_l) if fwd_l else numpy.zeros(0, numpy.float32),
                backward=numpy.concatenate(bwd_l) if bwd_l else numpy.zeros(0, numpy.float32),
                texts=numpy.asarray(texts[:complete], dtype=object), threshold=threshold,
                elapsed_s=time.time() - t0, **extra,
                **({"learned": numpy.concatenate(learned_l) if learned_l else numpy.zeros(0, numpy.float32)}
                   if pair_scorer is not None else {}),
            )

    while complete < m:
        # Enough statements for about one chunk of pairs.
        stop = complete + 1
        while stop < m and (stop * (stop - 1) - complete * (complete - 1)) // 2 < chunk_size:
            stop += 1
        pairs = prefix_pairs(complete, stop)
        if pair_scorer is None:
            scores = score_pairs(backend, texts, pairs, aggregation="min", threshold=threshold, chunk_size=chunk_size)
        else:
            scores = score_pairs(backend, texts, pairs, aggregation="learned", chunk_size=chunk_size,
                                 pair_scorer=pair_scorer, facts=facts)
            learned_l.append(scores.score)
        pairs_l.append(pairs)
        fwd_l.append(scores.forward)
        bwd_l.append(scores.backward)
        complete = stop
        elapsed = time.time() - t0
        n_pairs = complete * (complete - 1) // 2
        print(f"  {complete} statements complete, {n_pairs:,} pairs, {elapsed:.0f}s, {n_pairs / elapsed:.1f} pairs/s",
              flush=True)
        if time.time() - last_save > save_every_s:
            save()
            last_save = time.time()
        if time_limit_s is not None and elapsed > time_limit_s:
            print(f"  time limit reached: sample = first {complete} statements", flush=True)
            break
    save()
    return (complete, numpy.concatenate(pairs_l), numpy.concatenate(fwd_l), numpy.concatenate(bwd_l),
            numpy.concatenate(learned_l) if learned_l else None, time.time() - t0)


def global_top_pairs(vectors: numpy.ndarray, n_pairs: int) -> numpy.ndarray:
    """The n_pairs most similar pairs of the whole set (cosine), i < j (small sets only: m x m)."""
    sims = vectors @ vectors.T
    iu = numpy.triu_indices(len(vectors), k=1)
    flat = sims[iu]
    if n_pairs >= len(flat):
        return numpy.stack(iu, axis=1).astype(numpy.int64)
    top = numpy.argpartition(-flat, n_pairs - 1)[:n_pairs]
    return numpy.stack([iu[0][top], iu[1][top]], axis=1).astype(numpy.int64)


def candidate_family(family: str, param: int, spans, vectors) -> numpy.ndarray:
    """One strategy of a family at one setting (for the budget search)."""
    from spacy_inconsistency.candidates import normalise_pairs

    if family == "knn":
        return strategy_pairs(f"knn:{param}", spans, vectors)
    if family == "lexical":
        return strategy_pairs(f"lexical:{param}", spans, vectors)
    if family == "knn+lexical":  # k neighbours + k//2 lexical partners
        return strategy_pairs(f"union:knn:{param}+lexical:{max(1, param // 2)}", spans, vectors)
    if family == "knn+lexical=":  # k neighbours + k lexical partners
        return strategy_pairs(f"union:knn:{param}+lexical:{param}", spans, vectors)
    if family == "top_cosine":  # the param most similar pairs overall
        return normalise_pairs(global_top_pairs(vectors, param), len(vectors))
    raise ValueError(family)


# Settings tried on the whole corpus (5% of 15.7M pairs allows k = 200 neighbours at 5,606).
FULL_GRID = {"knn": [1, 2, 5, 10, 20, 50, 100, 150, 200, 250, 300],
             "lexical": [1, 2, 5, 10, 20, 50, 100, 150, 200, 300],
             "knn+lexical=": [1, 2, 5, 10, 20, 50, 75, 100, 125, 150]}

FAMILY_GRID = {
    "knn": [1, 2, 3, 4, 5, 6, 8, 10, 12, 14, 16, 18, 20, 22, 25, 30, 35, 40, 50],
    "lexical": [1, 2, 3, 5, 8, 10, 12, 15, 20, 25, 30, 40, 50],
    "knn+lexical": [2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 25, 30, 40],
    "knn+lexical=": [1, 2, 3, 4, 5, 6, 8, 10, 12, 14, 16, 20, 25],
}


def hub_pairs(fmatrix: numpy.ndarray, r: int, h: int, seed: int = 0) -> numpy.ndarray:
    """`contradiction_hubs` (r probes per statement, h hubs) on the sample, from saved scores.

    fmatrix is the m x m matrix of forward scores (symmetric fill: the sample
    has no reverse scores below the threshold), so propensity here is the
    mean forward score; no new NLI calls.
    """
    from spacy_inconsistency.candidates import ContradictionHubs, run_strategy

    def scorer(pairs):
        return fmatrix[pairs[:, 0], pairs[:, 1]], fmatrix[pairs[:, 1], pairs[:, 0]]

    strategy = ContradictionHubs(probes=r, hub_share=1.0, max_hubs=h, seed=seed)
    return run_strategy(strategy, range(len(fmatrix)), scorer=scorer)


def recall_of(cand: numpy.ndarray, found_set) -> Optional[float]:
    """Share of `found_set` (pairs (i, j), i < j) among the candidate pairs (also i < j)."""
    if not found_set:
        return None
    found = numpy.asarray(sorted(found_set), dtype=numpy.int64).reshape(-1, 2)
    n = int(max(found.max(), cand.max() if len(cand) else 0)) + 1
    keys = cand[:, 0].astype(numpy.int64) * n + cand[:, 1]
    return float(numpy.isin(found[:, 0] * n + found[:, 1], keys).mean())


def best_under_budget(spans, vectors, found_set, budget: float, grid=None, fmatrix=None) -> dict:
    """Per family: the largest setting within `budget` (fraction of pairs) and its recall."""
    m = len(spans)
    total = m * (m - 1) // 2
    out = {}
    for family, fgrid in (grid or FAMILY_GRID).items():
        best = None
        for param in fgrid:
            cand = candidate_family(family, param, spans, vectors)
            frac = len(cand) / total
            if frac > budget:
                break
            best = {"param": param, "pairs": int(len(cand)), "fraction": frac, "recall": recall_of(cand, found_set)}
        out[family] = best
    if fmatrix is not None:
        for r in (2, 4, 8):
            best = None
            for h in range(0, m):
                cand = hub_pairs(fmatrix, r, h)
                if len(cand) / total > budget:
                    break
                best = {"param": f"r={r},h={h}", "pairs": int(len(cand)), "fraction": len(cand) / total,
                        "recall": recall_of(cand, found_set)}
            out[f"hubs:r{r}"] = best
        from spacy_inconsistency.candidates import normalise_pairs

        k, knn_half = 0, numpy.zeros((0, 2), dtype=numpy.int64)
        while k + 1 < m:  # the largest k within half the budget
            cand = candidate_family("knn", k + 1, spans, vectors)
            if len(cand) / total > budget / 2:
                break
            k, knn_half = k + 1, cand
        for r in (2, 4):  # hubs + embedding neighbours, budget split evenly
            best = None
            for h in range(0, m):
                cand = normalise_pairs(numpy.concatenate([hub_pairs(fmatrix, r, h), knn_half]), m)
                if len(cand) / total > budget:
                    break
                best = {"param": f"r={r},h={h},k={k}", "pairs": int(len(cand)), "fraction": len(cand) / total,
                        "recall": recall_of(cand, found_set)}
            out[f"hubs+knn:r{r}"] = best
    n_top = int(budget * total)
    cand = candidate_family("top_cosine", n_top, spans, vectors)
    out["top_cosine"] = {"param": n_top, "pairs": int(len(cand)), "fraction": len(cand) / total,
                         "recall": recall_of(cand, found_set)}
    return out


def evaluate_sample(s_texts, s_spans, s_vectors, pairs, forward, backward, threshold, reference, budget, seed,
                    s_sources=None, learned=None):
    """Step 2's evaluation from the scores of all pairs of the sample (re-runnable from --scores)."""
    m = len(s_texts)
    score = numpy.where(numpy.isnan(backward), forward, numpy.minimum(forward, backward))
    ref = {"min": score, "forward": forward, "learned": learned}[reference]
    found = numpy.flatnonzero(ref >= threshold)
    contradictions = pairs[found]
    found_set = set(map(tuple, contradictions.tolist()))
    total_m = len(pairs)
    out = {"n_statements": m, "pairs": int(total_m), "contradictions": int(len(found)),
           "forward_over_threshold": int((forward >= threshold).sum())}
    strategies = {}
    for name in SAMPLE_STRATEGIES:
        cand = strategy_pairs(name, s_spans, s_vectors)
        strategies[name] = {"pairs": int(len(cand)), "fraction": len(cand) / total_m, "recall": recall_of(cand, found_set)}
        print(f"sample {name}: {100 * len(cand) / total_m:.2f}% of pairs, recall {strategies[name]['recall']}", flush=True)
    out["strategies"] = strategies
    ranks = pair_ranks(s_vectors, contradictions) if len(contradictions) else numpy.zeros(0, dtype=numpy.int64)
    curve = []
    for k in [1, 2, 3, 5, 8, 10, 15, 20, 30, 50, 75, 100]:
        if k >= m:
            break
        cand = strategy_pairs(f"knn:{k}", s_spans, s_vectors)
        curve.append({"k": k, "fraction": len(cand) / total_m,
                      "recall": float((ranks <= k).mean()) if len(ranks) else None})
    out["knn_curve"] = curve
    # How topical are the reference contradictions? Cosine of their two
    # statements against that of all pairs, and how many share a source.
    sims = s_vectors @ s_vectors.T
    all_cos = sims[pairs[:, 0], pairs[:, 1]]
    qs = [0.1, 0.25, 0.5, 0.75, 0.9]
    out["cosine_quantiles"] = {"all_pairs": dict(zip(map(str, qs), numpy.quantile(all_cos, qs).round(3).tolist()))}
    if len(contradictions):
        ref_cos = sims[contradictions[:, 0], contradictions[:, 1]]
        out["cosine_quantiles"]["reference"] = dict(zip(map(str, qs), numpy.quantile(ref_cos, qs).round(3).tolist()))
        out["reference_cosine_percentile_among_all_pairs"] = float(
            numpy.mean([(all_cos < c).mean() for c in ref_cos.tolist()]))
    if s_sources is not None:
        src = numpy.asarray(s_sources, dtype=object)
        out["same_source_share"] = {"all_pairs": float((src[pairs[:, 0]] == src[pairs[:, 1]]).mean()),
                                    "reference": float((src[contradictions[:, 0]] == src[contradictions[:, 1]]).mean())
                                    if len(contradictions) else None}
        ds = numpy.asarray([x.split(":")[0] for x in s_sources], dtype=object)
        from collections import Counter

        out["reference_dataset_pairs"] = dict(Counter(
            " + ".join(sorted((ds[i], ds[j]))) for i, j in contradictions.tolist()))
        out["all_dataset_pairs"] = dict(Counter(" + ".join(sorted((ds[i], ds[j]))) for i, j in pairs.tolist()))
    fmatrix = numpy.zeros((m, m), dtype=numpy.float32)
    fmatrix[pairs[:, 0], pairs[:, 1]] = forward
    fmatrix[pairs[:, 1], pairs[:, 0]] = forward
    out["at_budget"] = best_under_budget(s_spans, s_vectors, found_set, budget, fmatrix=fmatrix)
    for fam, r in out["at_budget"].items():
        if r:
            print(f"sample <= {100 * budget:.0f}%: {fam} {r['param']}: {100 * r['fraction']:.2f}% recall {r['recall']}",
                  flush=True)
    # Held-out choice: halves of the sample's statements (seeded); choose the
    # family and setting on half A (its own all-pairs reference, its own 5%),
    # report that choice on half B, and the other way round.
    rng = numpy.random.default_rng(seed + 1)
    perm = rng.permutation(m)
    halves = [numpy.sort(perm[: m // 2]), numpy.sort(perm[m // 2:])]
    half_results = []
    for h in halves:
        pos = {int(g): i for i, g in enumerate(h.tolist())}
        hs = {(pos[i], pos[j]) for i, j in found_set if i in pos and j in pos}
        half_results.append({"n": len(h), "contradictions": len(hs),
                             "at_budget": best_under_budget([s_spans[i] for i in h], s_vectors[h], hs, budget,
                                                            fmatrix=fmatrix[numpy.ix_(h, h)])})
    holdout = []
    for tune, test in ((0, 1), (1, 0)):
        cands = {f: r for f, r in half_results[tune]["at_budget"].items() if r and r["recall"] is not None}
        if not cands:
            continue
        fam = max(cands, key=lambda f: cands[f]["recall"])
        test_r = half_results[test]["at_budget"][fam]
        holdout.append({"chosen_on": "AB"[tune], "reported_on": "AB"[test], "family": fam,
                        "tune": cands[fam], "test_at_budget": test_r,
                        "test_contradictions": half_results[test]["contradictions"]})
        print(f"held out: chosen on {'AB'[tune]}: {fam} (recall {cands[fam]['recall']}); on {'AB'[test]}: "
              f"{test_r}", flush=True)
    out["halves"] = half_results
    out["holdout"] = holdout
    out["reference_pairs"] = contradictions
    order = numpy.argsort(-ref[found])[:10]
    out["examples"] = [
        {"score": float(ref[found][o]), "directions": [float(forward[found][o]), float(backward[found][o])],
         "a": s_texts[contradictions[o][0]], "b": s_texts[contradictions[o][1]]}
        for o in order.tolist()
    ]
    return out


def hub_evaluation(spans, texts, vectors, references, budget, *, probes, seed, backend_factory, cache=None,
                   knn_grid=(0, 20, 50, 100, 150)) -> dict:
    """`contradiction_hubs` (+ embedding neighbours) over the whole corpus, at the pair budget.

    The probe pairs (each statement against `probes` random others) are
    scored in both directions by the NLI model, once (saved to `cache`, .npz,
    and reused from there). For each neighbour count k, the largest number of
    hubs (statements paired with all others) that keeps the union within the
    budget, and the share of each reference set (name -> pairs; the first is
    the sample's contradictions) it keeps. The rule fixed in advance (as on
    the sample, "hubs+knn"): half the budget to the neighbours (the largest k
    of the grid within it), the rest to probes and hubs.
    """
    from spacy_inconsistency.candidates import ContradictionHubs, normalise_pairs, run_strategy
    from spacy_inconsistency.components.pairwise import score_pairs

    n = len(texts)
    total = n * (n - 1) // 2
    probe_pairs = ContradictionHubs(probes=probes, hub_share=0.0, max_hubs=None, seed=seed).probe_pairs(n)
    out = {"probes": probes, "probe_pairs": int(len(probe_pairs)), "probe_fraction": len(probe_pairs) / total}
    if cache and os.path.exists(cache):
        z = numpy.load(cache)
        assert numpy.array_equal(z["pairs"], probe_pairs), f"{cache} holds other probe pairs"
        forward, backward = z["forward"], z["backward"]
        out["probe_seconds"] = float(z["elapsed"])
        out["probe_scores_from"] = cache
    else:
        backend = backend_factory()
        t = time.time()
        scores = score_pairs(backend, texts, probe_pairs, aggregation="mean", lazy_reverse=False, chunk_size=2048)
        forward, backward = scores.forward, scores.backward
        out["probe_seconds"] = time.time() - t
        if cache:
            numpy.savez(cache, pairs=probe_pairs, forward=forward, backward=backward, elapsed=out["probe_seconds"])
    out["probe_nli_calls_per_s"] = round(2 * len(probe_pairs) / max(out["probe_seconds"], 1e-9), 1)
    out["probe_seconds"] = round(out["probe_seconds"], 1)
    print(f"probes: {len(probe_pairs):,} pairs ({100 * out['probe_fraction']:.2f}%), both directions, "
          f"{out['probe_seconds']:.0f}s", flush=True)

    def scorer(pairs):
        assert numpy.array_equal(pairs, probe_pairs)
        return forward, backward

    knn = {0: numpy.zeros((0, 2), dtype=numpy.int64)}

    def candidates(k, h):
        if k not in knn:
            knn[k] = candidate_family("knn", k, spans, vectors)
        hubs = run_strategy(ContradictionHubs(probes=probes, hub_share=1.0, max_hubs=h, seed=seed), spans,
                            scorer=scorer)
        return normalise_pairs(numpy.concatenate([hubs, knn[k]]), n)

    propensity = ContradictionHubs(probes=probes, hub_share=0.0, max_hubs=None, seed=seed).propensity(
        n, probe_pairs, forward, backward)
    rank = numpy.empty(n, dtype=numpy.int64)
    rank[numpy.argsort(-propensity, kind="stable")] = numpy.arange(n)
    first = next(iter(references.values()))
    out["reference_best_propensity_rank"] = sorted(int(min(rank[i], rank[j])) for i, j in first)
    rows = []
    for k in knn_grid:
        if len(candidates(k, 0)) / total > budget:  # no room for hubs
            continue
        lo, hi = 0, n  # the largest h within the budget (the union grows with h)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if len(candidates(k, mid)) / total <= budget:
                lo = mid
            else:
                hi = mid - 1
        cand = candidates(k, lo)
        rows.append({"knn_k": k, "hubs": lo, "pairs": int(len(cand)), "fraction": len(cand) / total,
                     "recall": {name: recall_of(cand, ref) for name, ref in references.items()}})
        print(f"corpus: knn k={k} + {probes} probes + {lo} hubs: {100 * len(cand) / total:.2f}% of all pairs, keeps "
              + ", ".join(f"{name} {r:.3f}" for name, r in rows[-1]["recall"].items()), flush=True)
    out["grid"] = rows
    half = [r for r in rows if r["knn_k"] and len(knn[r["knn_k"]]) / total <= budget / 2]
    out["even_split"] = max(half, key=lambda r: r["knn_k"]) if half else None
    return out


class Corpus(str, Enum):
    qualomat = "qualomat"
    english = "english"


class Reference(str, Enum):
    min = "min"
    forward = "forward"
    learned = "learned"


def main(
    corpus: Corpus = typer.Option(Corpus.qualomat, help="qualomat: one party's Qual-O-Mat comments (German); english: "
                                  "ClaimDiff claims, the political benchmark's texts and ProSeCCo propositions"),
    data: str = typer.Option("../shared/data", help="shared data folder (for --corpus english)"),
    qualomat: str = typer.Option("../shared/data/qualomat"),
    party: str = typer.Option("SPD"),
    threshold: float = typer.Option(0.5),
    budget_s: float = typer.Option(1200.0, help="time for all-pairs scoring of the sample"),
    sample_size: Optional[int] = typer.Option(None, help="default: what fits --budget-s, at most 1000"),
    time_limit_s: Optional[float] = typer.Option(None, help="grow the sample statement by statement and stop scoring "
                                                 "after this many seconds; the sample is then the statements whose "
                                                 "pairs are all scored"),
    pair_budget: float = typer.Option(0.05, help="fraction of pairs allowed (target 5%)"),
    model: str = typer.Option("default"),
    threads: int = typer.Option(1, help="torch threads"),
    seed: int = typer.Option(0),
    max_statements: Optional[int] = typer.Option(None, help="cut the corpus (for smoke tests)"),
    skip_full: bool = typer.Option(False, "--skip-full", help="skip step 1; encode only the sample"),
    skip_sample: bool = typer.Option(False, "--skip-sample", help="skip step 2 (unless --from-scores)"),
    reference_kind: Reference = typer.Option(Reference.min, "--reference",
                                             help="contradictions of the reference: both directions >= threshold "
                                                  "(min), the first direction alone (forward), or the learned pair "
                                                  "score at its pair threshold, as find_contradictions reports (learned)"),
    scores: Optional[str] = typer.Option(None, help="save every sample pair's scores here (.npz; written every "
                                         "--save-every-s)"),
    save_every_s: float = typer.Option(120.0),
    from_scores: Optional[str] = typer.Option(None, help="evaluate step 2 from saved scores, no NLI"),
    output: str = typer.Option("metrics/pairwise_corpus.json"),
    hub_probes: int = typer.Option(8, help="probes per statement for the contradiction_hubs evaluation on the "
                                   "whole corpus (0: skip it)"),
    probe_scores: Optional[str] = typer.Option(None, help="save (or reuse) the probe pairs' scores here (.npz)"),
    hub_seed: int = typer.Option(0, help="seed of the hub strategy's random probe partners"),
    disjoint_from: Optional[str] = typer.Option(None, help="saved scores (.npz) of an earlier sample: draw this "
                                                "sample from the other statements"),
) -> None:
    """Corpus-scale benchmark: how few pairs the candidate strategies score, and what they keep."""
    corpus, reference_kind = corpus.value, reference_kind.value

    import spacy
    import torch

    torch.set_num_threads(threads)
    from spacy_inconsistency.backends.embeddings import SentenceEncoder
    from spacy_inconsistency.backends.nli import NLIBackend

    report = {"corpus": corpus, "threshold": threshold, "model": model, "threads": threads,
              "pair_budget": pair_budget}
    t0 = time.time()
    if corpus == "english":
        statements = load_english_statements(data)
        lang = "en"
    else:
        report["party"] = party
        statements = load_statements(qualomat, party)
        lang = "de"
    if max_statements:
        statements = statements[:max_statements]
    n = len(statements)
    report["n_statements"] = n
    report["n_sources"] = len({s["source"] for s in statements})
    if corpus == "english":
        from collections import Counter

        report["datasets"] = dict(Counter(s["dataset"] for s in statements))
    print(f"{n} statements from {report['n_sources']} sources ({time.time() - t0:.1f}s)", flush=True)
    nlp = spacy.blank(lang)
    spans = [nlp.make_doc(s["text"])[:] for s in statements]
    texts = [s["text"] for s in statements]
    encoder = SentenceEncoder(device="cpu", batch_size=64)
    total = n * (n - 1) // 2
    full = {}
    vectors = None
    labelled = {}
    if not skip_full:
        t = time.time()
        vectors = encoder.encode(texts)
        report["encode_s"] = round(time.time() - t, 1)
        report["encode_per_s"] = round(n / (time.time() - t), 1)
        print(f"encoded in {report['encode_s']}s", flush=True)
        for name in FULL_STRATEGIES:
            t = time.time()
            pairs = strategy_pairs(name, spans, vectors)
            full[name] = {"pairs": int(len(pairs)), "fraction": len(pairs) / total, "seconds": round(time.time() - t, 2)}
            print(f"full corpus {name}: {len(pairs):,} pairs = {100 * len(pairs) / total:.2f}% ({time.time() - t:.1f}s)",
                  flush=True)
        # The strategies at the sizes chosen under the budget on the sample, at full-corpus size.
        full_budget = {}
        for family, grid in FAMILY_GRID.items():
            for param in grid:
                if family == "knn" and param > 50:
                    break
                pairs = candidate_family(family, param, spans, vectors)
                full_budget[f"{family}:{param}"] = {"pairs": int(len(pairs)), "fraction": len(pairs) / total}
        report["full_corpus_grid"] = full_budget
        if corpus == "english":
            labelled = labelled_pairs(data, statements)
            lab_report = {}
            for name, found_set in labelled.items():
                res = best_under_budget(spans, vectors, found_set, pair_budget, grid=FULL_GRID)
                ranks = pair_ranks(vectors, numpy.asarray(sorted(found_set), dtype=numpy.int64).reshape(-1, 2))
                lab_report[name] = {"pairs": len(found_set), "at_budget": res,
                                    "knn_recall": {k: float((ranks <= k).mean()) for k in [5, 10, 20, 50, 100, 200]}}
                print(f"labelled {name} ({len(found_set)}): " + "; ".join(
                    f"{f} {r['param']} {100 * r['fraction']:.2f}% -> "
                    + ("-" if r["recall"] is None else f"{r['recall']:.3f}") for f, r in res.items() if r),
                    flush=True)
            report["full_corpus_labelled"] = lab_report
    report["full_corpus"] = {"all_pairs": total, "strategies": full}

    pair_scorer = None
    learned = None
    if reference_kind == "learned":
        from spacy_inconsistency.pair_score import find_pair_scorer

        pair_scorer = find_pair_scorer(NLIBackend(model, device="cpu").local_dir, model_name=model)
        threshold = report["threshold"] = pair_scorer.threshold
    rng = numpy.random.default_rng(seed)
    if from_scores:
        z = numpy.load(from_scores, allow_pickle=True)
        m = int(z["complete"])
        sample = z["sample"][:m]
        keep = z["pairs"].max(axis=1) < m if len(z["pairs"]) else numpy.zeros(0, bool)
        pairs, forward, backward = z["pairs"][keep], z["forward"][keep], z["backward"][keep]
        if reference_kind == "learned":
            if "learned" not in z.files:
                raise SystemExit(f"{from_scores} has no learned scores: score it with --reference learned")
            learned = z["learned"][keep]
        assert len(pairs) == m * (m - 1) // 2, "saved scores do not cover all pairs of the prefix"
        assert [texts[i] for i in sample] == list(z["texts"][:m]), "saved scores are from another corpus"
        report["all_pairs_sample"] = {"pairs": int(len(pairs)), "seconds": float(z["elapsed_s"]),
                                      "pairs_per_s": round(len(pairs) / float(z["elapsed_s"]), 1),
                                      "from_scores": from_scores}
    elif skip_sample:
        m = 0
    else:
        backend = NLIBackend(model, device="cpu", max_batch_size=64)
        probe = rng.choice(n, size=(512, 2))
        probe = probe[probe[:, 0] != probe[:, 1]]
        rate = float("nan")
        if sample_size is None:
            t = time.time()
            backend.predict([(texts[i], texts[j]) for i, j in probe.tolist()])
            rate = len(probe) / (time.time() - t)
        m = sample_size
        if m is None:
            m = int((1 + (1 + 8 * rate * budget_s) ** 0.5) / 2)
            m = min(m, 1000)
        report["probe_pairs_per_s"] = None if rate != rate else round(rate, 1)
        print(f"probe: {rate:.1f} pairs/s (one direction); sample of up to {m} statements, "
              f"{m * (m - 1) // 2:,} pairs", flush=True)
        # A seeded random permutation; its first m are the sample (any prefix is a random sample).
        order = rng.permutation(n)
        if disjoint_from:
            z = numpy.load(disjoint_from, allow_pickle=True)
            earlier = set(z["sample"][: int(z["complete"])].tolist())
            order = numpy.asarray([i for i in order.tolist() if i not in earlier], dtype=numpy.int64)
            report["disjoint_from"] = {"scores": disjoint_from, "statements_excluded": len(earlier)}
        sample = order[:m]
        s_texts = [texts[i] for i in sample]
        facts = None
        if pair_scorer is not None:
            from spacy_inconsistency.alignment import facts_of_texts

            facts = facts_of_texts(s_texts)
        m, pairs, forward, backward, learned, elapsed = score_growing_sample(
            backend, s_texts, threshold=threshold, chunk_size=2048, time_limit_s=time_limit_s,
            checkpoint=scores, save_every_s=save_every_s, extra={"sample": sample, "seed": seed},
            pair_scorer=pair_scorer, facts=facts,
        )
        sample = sample[:m]
        n_backward = int((~numpy.isnan(backward)).sum())
        report["all_pairs_sample"] = {
            "pairs": int(len(pairs)), "backward_scored": n_backward, "seconds": round(elapsed, 1),
            "pairs_per_s": round(len(pairs) / elapsed, 1),
            "nli_calls_per_s": round((len(pairs) + n_backward) / elapsed, 1),
            "stopped_by_time_limit": bool(sample_size is not None and m < sample_size),
        }
        print(f"all pairs: {len(pairs):,} in {elapsed:.0f}s", flush=True)
    report["sample_size"] = m
    report["reference"] = reference_kind
    if m:
        s_texts = [texts[i] for i in sample]
        s_spans = [spans[i] for i in sample]
        s_vectors = vectors[sample] if vectors is not None else encoder.encode(s_texts)
        result = evaluate_sample(s_texts, s_spans, s_vectors, pairs, forward, backward, threshold,
                                 reference_kind, pair_budget, seed,
                                 s_sources=[statements[i]["source"] for i in sample], learned=learned)
        for ex in result["examples"]:
            for key in ("a", "b"):
                src = statements[sample[s_texts.index(ex[key])]]["source"]
                ex[key] = {"text": ex[key], "source": src}
        report["examples"] = result.pop("examples")
        reference = result.pop("reference_pairs")
        report["sample"] = result
        if vectors is not None and len(reference):
            # The measure: the pruned search runs over the whole corpus (its share of
            # *all* corpus pairs is what is paid); the all-pairs scores of the sample say which
            # pairs it should have kept.
            ref_full = {tuple(sorted((int(sample[i]), int(sample[j])))) for i, j in reference.tolist()}
            res = best_under_budget(spans, vectors, ref_full, pair_budget, grid=FULL_GRID)
            report["full_corpus_recall_of_sample_reference"] = {"contradictions": len(ref_full), "at_budget": res}
            for fam, r in res.items():
                if r:
                    print(f"corpus <= {100 * pair_budget:.0f}% of all pairs: {fam} {r['param']}: "
                          f"{100 * r['fraction']:.2f}% keeps {r['recall']:.3f} of the sample's contradictions",
                          flush=True)
            if hub_probes:
                report["full_corpus_recall_of_sample_reference"]["contradiction_hubs"] = hub_evaluation(
                    spans, texts, vectors, {"sample_contradictions": ref_full, **labelled}, pair_budget,
                    probes=hub_probes, seed=hub_seed,
                    backend_factory=lambda: NLIBackend(model, device="cpu", max_batch_size=64),
                    cache=probe_scores)
    report["peak_rss_mb"] = round(peak_rss_mb(), 1)
    report["wall_s"] = round(time.time() - t0, 1)
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    Path(output).write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8")
    print(json.dumps({k: v for k, v in report.items() if k not in ("examples", "sample", "full_corpus_grid")},
                     indent=2), file=sys.stderr)


if __name__ == "__main__":
    typer.run(main)
