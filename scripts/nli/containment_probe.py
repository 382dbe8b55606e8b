#!/usr/bin/env python
"""Does the NLI model see that a premise CONTAINS its hypothesis word for word?

A premise of k consecutive sentences of a real article, with one of them (first, middle or
last) as the hypothesis, entails the hypothesis: whatever else the premise says, the
hypothesis is in it. A sentence of the same article that is NOT in the premise is the control:
it should come out neutral (or entailed), not contradicted. Both are scored for k = 1, 2, 3, 5
sentences, plus SCALE's actual input, a chunk of up to ``--chunk-tokens`` model tokens
(lowered to the model's input limit, 512 for the embedded model): once as one sentence-aligned
chunk holding the hypothesis (3-way probabilities) and once through
``spacy_inconsistency.scale.score_chunks`` on the whole article (the SCALE score: the highest
P(entailment) over its token windows).

Sentences are the ``inconsistency_segmenter`` units (``spacy.blank("en")``). Articles are the
``grounding`` column of TRUE CSVs (``qags_xsum``: XSum/BBC; ``summeval``: CNN/DailyMail).

    OMP_NUM_THREADS=1 python scripts/nli/containment_probe.py --model default \\
        --model /tmp/old_model --output metrics/containment_probe.json
"""
from __future__ import annotations

import csv
import json
import random
import sys
import time
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import typer

REPO_ROOT = Path(__file__).resolve().parents[2]
KS = (1, 2, 3, 5)
CONTROL = "control"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def positions(k: int) -> Dict[str, int]:
    """Position name -> index of the hypothesis inside a window of k sentences."""
    if k == 1:
        return {"only": 0}
    if k == 2:
        return {"first": 0, "last": 1}
    return {"first": 0, "middle": k // 2, "last": k - 1}


def usable(text: str, min_words: int, max_words: int) -> bool:
    n = len(text.split())
    return min_words <= n <= max_words and any(c.isalpha() for c in text)


def read_articles(path: Path) -> List[str]:
    csv.field_size_limit(10**9)
    with path.open(encoding="utf8", newline="") as f:
        seen: Dict[str, None] = {}
        for row in csv.DictReader(f):
            text = (row.get("grounding") or "").strip()
            if text:
                seen.setdefault(text, None)
    return list(seen)


def segment(texts: Sequence[str]) -> List[List[str]]:
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("inconsistency_segmenter")
    out = []
    for doc in nlp.pipe(texts):
        out.append([s.text.strip() for s in doc.spans["inconsistency_units"] if s.text.strip()])
    return out


def build_probes(
    corpus: str, articles: List[List[str]], rng: random.Random, *, per_cell: int, per_article: int,
    min_words: int, max_words: int,
) -> List[dict]:
    """Window probes: (corpus, k, position, premise, hypothesis, article)."""
    probes: List[dict] = []
    for k in KS:
        cells = dict(positions(k), **{CONTROL: None})
        for pos, offset in cells.items():
            rows: List[dict] = []
            order = list(range(len(articles)))
            rng.shuffle(order)
            for a in order:
                sents = articles[a]
                if len(sents) < k + (1 if pos == CONTROL else 0):
                    continue
                ok = [i for i, s in enumerate(sents) if usable(s, min_words, max_words)]
                found = 0
                for _ in range(20):
                    if found >= per_article or len(rows) >= per_cell:
                        break
                    start = rng.randrange(0, len(sents) - k + 1)
                    window = list(range(start, start + k))
                    if pos == CONTROL:
                        outside = [i for i in ok if i not in window]
                        if not outside:
                            continue
                        h = rng.choice(outside)
                    else:
                        h = start + offset
                        if h not in ok:
                            continue
                    premise = " ".join(sents[i] for i in window)
                    if any(r["premise"] == premise and r["hypothesis"] == sents[h] for r in rows):
                        continue
                    rows.append({"corpus": corpus, "k": k, "position": pos, "article": a,
                                 "premise": premise, "hypothesis": sents[h]})
                    found += 1
                if len(rows) >= per_cell:
                    break
            probes.extend(rows)
    return probes


def chunk_probes(
    corpus: str, articles: List[List[str]], rng: random.Random, tokenizer, budget: int, *, n: int,
    min_words: int, max_words: int,
) -> List[dict]:
    """Sentence-aligned chunks of up to `budget` model tokens (pair included) holding the
    hypothesis at a random place, and a control from the same article outside the chunk."""
    out: List[dict] = []
    order = list(range(len(articles)))
    rng.shuffle(order)
    n_found = 0
    for a in order:
        if n_found >= n:
            break
        sents = articles[a]
        lengths = [len(tokenizer(s, add_special_tokens=False)["input_ids"]) + 1 for s in sents]
        ok = [i for i, s in enumerate(sents) if usable(s, min_words, max_words)]
        if len(ok) < 2:
            continue
        h = rng.choice(ok)
        room = budget - lengths[h] - 4
        # Grow the window around h, randomly left or right, while it fits.
        lo, hi, used = h, h + 1, lengths[h]
        while True:
            options = [s for s in ("l", "r") if (s == "l" and lo > 0 and used + lengths[lo - 1] <= room)
                       or (s == "r" and hi < len(sents) and used + lengths[hi] <= room)]
            if not options:
                break
            if rng.choice(options) == "l":
                lo -= 1; used += lengths[lo]
            else:
                used += lengths[hi]; hi += 1
        premise = " ".join(sents[lo:hi])
        base = {"corpus": corpus, "k": "chunk", "article": a, "premise": premise,
                "n_sentences": hi - lo, "premise_tokens": used}
        where = (h - lo) / max(1, hi - lo - 1)
        out.append(dict(base, position="contained", hypothesis=sents[h], where=round(where, 2)))
        outside = [i for i in ok if not lo <= i < hi]
        if outside:
            out.append(dict(base, position=CONTROL, hypothesis=sents[rng.choice(outside)]))
        n_found += 1
    return out


def summarize(rows: List[dict], probs) -> Dict[str, float]:
    import numpy

    p = numpy.asarray(probs)
    return {
        "n": len(rows),
        "p_entailment": round(float(p[:, 0].mean()), 3),
        "p_neutral": round(float(p[:, 1].mean()), 3),
        "p_contradiction": round(float(p[:, 2].mean()), 3),
        "argmax_contradiction": round(float((p.argmax(1) == 2).mean()), 3),
        "argmax_entailment": round(float((p.argmax(1) == 0).mean()), 3),
    }


def main(
    model: List[str] = typer.Option(["default"], "--model", help="NLI model ('default', a directory or hub id); repeatable."),
    data: Path = typer.Option(Path("../shared/data/true"), help="Folder of TRUE CSVs (grounding column)."),
    corpus: List[str] = typer.Option(["qags_xsum", "summeval"], "--corpus", help="TRUE CSV names; repeatable."),
    per_cell: int = typer.Option(150, help="Most window probes per (corpus, k, position) cell."),
    per_article: int = typer.Option(2, help="Most probes of one article per cell."),
    chunk_per_corpus: int = typer.Option(100, help="Articles per corpus for the chunk and SCALE probes (0: none)."),
    chunk_tokens: int = typer.Option(1000, help="SCALE chunk size (lowered to the model's input limit)."),
    min_words: int = typer.Option(5, help="Shortest hypothesis sentence, in words."),
    max_words: int = typer.Option(60, help="Longest hypothesis sentence, in words."),
    seed: int = typer.Option(0),
    threads: int = typer.Option(1, help="torch threads."),
    output: Optional[Path] = typer.Option(None, help="Write the JSON report here."),
) -> None:
    import numpy
    import torch

    from spacy_inconsistency.backends.entailment import EntailmentBackend
    from spacy_inconsistency.backends.nli import NLIBackend
    from spacy_inconsistency.scale import clamp_chunk_size, score_chunks

    torch.set_num_threads(threads)
    texts: Dict[str, List[List[str]]] = {}
    for name in corpus:
        articles = read_articles(data / f"{name}.csv")
        texts[name] = segment(articles)
        log(f"{name}: {len(articles)} articles, {sum(map(len, texts[name]))} sentences")
    report = {"command": " ".join(sys.argv), "corpora": list(corpus), "seed": seed, "per_cell": per_cell,
              "per_article": per_article, "min_words": min_words, "max_words": max_words,
              "columns": ["entailment", "neutral", "contradiction"], "models": {}}
    for name in model:
        rng = random.Random(seed)  # same probes for every model
        t0 = time.perf_counter()
        nli = NLIBackend(name, device="cpu")
        cols = [nli.label_index[l] for l in ("entailment", "neutral", "contradiction")]
        budget = min(chunk_tokens, nli.max_length)
        probes: List[dict] = []
        for cname, arts in texts.items():
            probes += build_probes(cname, arts, rng, per_cell=per_cell, per_article=per_article,
                                   min_words=min_words, max_words=max_words)
            if chunk_per_corpus:
                probes += chunk_probes(cname, arts, rng, nli.tokenizer, budget, n=chunk_per_corpus,
                                       min_words=min_words, max_words=max_words)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            probs = nli.predict_proba([(r["premise"], r["hypothesis"]) for r in probes])[:, cols]
        t_windows = time.perf_counter() - t0
        cells: Dict[Tuple, List[int]] = defaultdict(list)
        for i, r in enumerate(probes):
            cells[(str(r["k"]), r["position"])].append(i)
            cells[(r["corpus"], str(r["k"]), r["position"])].append(i)
        table = {}
        for key, idx in sorted(cells.items(), key=lambda kv: (len(kv[0]), kv[0])):
            table["/".join(key)] = summarize([probes[i] for i in idx], probs[idx])
        chunk_rows = [i for i, r in enumerate(probes) if r["k"] == "chunk"]
        chunk_info = {}
        if chunk_rows:
            chunk_info = {
                "budget_tokens": budget,
                "mean_sentences": round(float(numpy.mean([probes[i]["n_sentences"] for i in chunk_rows])), 1),
                "mean_premise_tokens": round(float(numpy.mean([probes[i]["premise_tokens"] for i in chunk_rows])), 1),
                "truncated_inputs": nli.n_truncated,
            }
        # Worst contained cases: premise holds the hypothesis, model says contradiction.
        contained = [i for i, r in enumerate(probes) if r["position"] != CONTROL and r["k"] in (2, 3)]
        worst = sorted(contained, key=lambda i: -probs[i, 2])[:5]
        examples = [{"premise": probes[i]["premise"], "hypothesis": probes[i]["hypothesis"],
                     "probs": [round(float(x), 3) for x in probs[i]]} for i in worst]
        # SCALE as used: whole article, claim = one of its sentences (contained) or a sentence of
        # another article of the corpus (control); score = max P(entailment) over token windows.
        scale = {}
        if chunk_per_corpus:
            t1 = time.perf_counter()
            backend = EntailmentBackend(name, kind="nli", device="cpu")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                size = clamp_chunk_size(backend, chunk_tokens)
            for cname, arts in texts.items():
                order = [a for a in range(len(arts)) if len(arts[a]) >= 2]
                rng.shuffle(order)
                order = order[:chunk_per_corpus]
                premises, claims = [], []
                for a in order:
                    ok = [s for s in arts[a] if usable(s, min_words, max_words)]
                    other = rng.choice([b for b in order if b != a])
                    ok_other = [s for s in arts[other] if usable(s, min_words, max_words)]
                    if not ok or not ok_other:
                        continue
                    premises.append(" ".join(arts[a]))
                    claims.append([rng.choice(ok), rng.choice(ok_other)])
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    per_window = score_chunks(premises, claims, backend=backend, chunk_size=size, window_size=0.25)
                own = numpy.array([max(g[0]) for g in per_window])
                foreign = numpy.array([max(g[1]) for g in per_window])
                labels = numpy.r_[numpy.ones(len(own)), numpy.zeros(len(foreign))]
                from sklearn.metrics import roc_auc_score
                scale[cname] = {
                    "n": len(own), "chunk_size": size,
                    "mean_windows": round(float(numpy.mean([len(g[0]) for g in per_window])), 2),
                    "contained_mean_score": round(float(own.mean()), 3),
                    "contained_share_below_0.5": round(float((own < 0.5).mean()), 3),
                    "other_article_mean_score": round(float(foreign.mean()), 3),
                    "auc_contained_vs_other_article": round(float(roc_auc_score(labels, numpy.r_[own, foreign])), 3),
                }
            scale["seconds"] = round(time.perf_counter() - t1, 1)
        report["models"][name] = {"n_probes": len(probes), "seconds_window_probes": round(t_windows, 1),
                                  "cells": table, "chunk": chunk_info, "scale_score": scale,
                                  "worst_contained_k2_k3": examples}
        log(f"== {name} ({len(probes)} probes, {t_windows:.0f}s)")
        log(f"{'cell':<22}{'n':>5}{'P(ent)':>8}{'P(con)':>8}{'argmax con':>11}")
        for key, s in table.items():
            if key.count("/") == 1:
                log(f"{key:<22}{s['n']:>5}{s['p_entailment']:>8.3f}{s['p_contradiction']:>8.3f}{s['argmax_contradiction']:>11.3f}")
        log(f"chunk: {chunk_info}")
        log(f"SCALE: {json.dumps(scale)}")
    text = json.dumps(report, indent=1) + "\n"
    if output:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text, encoding="utf8")
        log(f"wrote {output}")
    else:
        print(text)


if __name__ == "__main__":
    typer.run(main)
