"""Does reading a unit against the rest of its document tell contradictions from near misses?

The pair reading of the detector sees two units alone: "She was buried where she was born"
does not say who "she" is, and "Heating resumed at 11:05" does not say that heating had
stopped. This probe reads every unit u of a document as the hypothesis against the other
units as the premise (in document order, in chunks of at most `--chunk-words` words, as
SCALE reads a claim against a long source) and takes P(contradiction) of the best chunk.
The document's score is the highest over its units. Variants of the premise:

* `rest`: every other unit;
* `before`: the units before u (the first unit has none and scores 0).

It prints, per capability of the behavioural suite, the matched ROC-AUC (a contradiction
document above its own control), the pooled AUC, how often the highest unit is one of the
gold pair's, and for `--news` consistent XSum articles (the detector's news check) the
highest scores.

    python scripts/evaluate_behaviour.py --split dev --details /tmp/default_dev.jsonl
    python scripts/nli/context_probe.py --model mpnet-lora --split dev --news 40 \
        --detector-details /tmp/default_dev.jsonl
"""
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy
import typer

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))


def chunks(units: List[str], limit: int) -> List[str]:
    """Consecutive units joined, each chunk at most `limit` words (a longer unit alone)."""
    out: List[List[str]] = [[]]
    words = 0
    for unit in units:
        n = len(unit.split())
        if out[-1] and words + n > limit:
            out.append([])
            words = 0
        out[-1].append(unit)
        words += n
    return [" ".join(c) for c in out if c]


def xsum_articles(true_dir: Path, n: int) -> List[str]:
    """The first n distinct source articles of TRUE's qags_xsum.csv, in file order."""
    from spacy_inconsistency.corpora.true import read_true

    return list(dict.fromkeys(r.source for r in read_true(true_dir / "qags_xsum.csv")))[:n]


def main(
    model: str = typer.Option("mpnet-lora", help="NLI model: 'default', 'mpnet-lora' or a path."),
    split: str = typer.Option("dev", help="Suite split: 'dev' or 'test'."),
    news: int = typer.Option(40, help="Consistent XSum articles (the sources of TRUE's qags_xsum)."),
    chunk_words: int = typer.Option(300, help="Most words of one premise chunk."),
    data_dir: Path = typer.Option(ROOT.parent / "shared" / "data", help="The shared data folder."),
    output: Optional[Path] = typer.Option(None, help="Write every unit's scores here (JSONL)."),
    detector_details: Optional[Path] = typer.Option(
        None, help="`evaluate_behaviour.py --details` of the same split: also print the matched AUC of "
        "the detector's document score blended with this one."),
) -> None:
    from sklearn.metrics import roc_auc_score

    from spacy_inconsistency.backends.nli import make_nli_backend
    from suite_units import suite_documents, unit_segmenter

    units = unit_segmenter()
    docs = [  # ((id, side, capability, gold units), units)
        ((record["id"], side, record["capability"], tuple(record[side]["pair"])), us)
        for record, side, us in suite_documents(split, units)
    ]
    for i, text in enumerate(xsum_articles(data_dir / "true", news)):
        docs.append(((f"news-{i}", "news", "news", ()), units(text)))
    variants = ("rest", "before")
    jobs = []  # (doc, unit, variant, premise chunk)
    for d, (_, us) in enumerate(docs):
        for j, u in enumerate(us):
            for variant in variants:
                context = [x for k, x in enumerate(us) if (k != j if variant == "rest" else k < j)]
                for premise in chunks(context, chunk_words):
                    jobs.append((d, j, variant, premise, u))
    pairs = list(dict.fromkeys((p, h) for _, _, _, p, h in jobs))
    print(f"{len(docs)} documents, {len(pairs)} premise-hypothesis pairs", file=sys.stderr, flush=True)
    nli = make_nli_backend(model, truncation="warn")
    probs = nli.predict(pairs)
    index = {p: k for k, p in enumerate(pairs)}
    unit_score: Dict[Tuple[int, int, str], float] = defaultdict(float)
    for d, j, variant, p, h in jobs:
        key = (d, j, variant)
        unit_score[key] = max(unit_score[key], float(probs["contradiction"][index[(p, h)]]))
    print(f"model {model}, split {split}, chunks of <= {chunk_words} words; truncated pairs {nli.n_truncated}")
    rows = []
    for variant in variants:
        doc_score: Dict[int, Tuple[float, int]] = {}
        for d, (key, us) in enumerate(docs):
            scores = [unit_score[(d, j, variant)] for j in range(len(us))]
            top = int(numpy.argmax(scores)) if scores else -1
            doc_score[d] = (max(scores) if scores else 0.0, top)
            rows.append({"doc": list(key[:3]), "variant": variant, "units": us, "scores": scores})
        by_id: Dict[Tuple[str, str], Dict[str, Tuple[float, bool]]] = defaultdict(dict)
        for d, (key, us) in enumerate(docs):
            score, top = doc_score[d]
            gold = bool(key[3]) and top >= 0 and any(g in us[top] or us[top] in g for g in key[3])
            by_id[(key[0], key[2])][key[1]] = (score, gold)
        print(f"  premise = {variant}")
        for capability in sorted({c for _, c in by_id if c != "news"}) + ["all"]:
            scored = [(s["contradiction"], s["control"]) for (_, c), s in by_id.items()
                      if c != "news" and capability in (c, "all")]
            x = [a[0] for a, _ in scored]
            y = [b[0] for _, b in scored]
            auc = roc_auc_score([1] * len(x) + [0] * len(y), x + y)
            wins = numpy.mean([1.0 if a > b else 0.5 if a == b else 0.0 for a, b in zip(x, y)])
            hits = numpy.mean([a[1] for a, _ in scored])
            print(f"    {capability:14s} n={len(scored):3d} matched {wins:.3f} pooled {auc:.3f} "
                  f"top unit in gold pair {hits:.2f} contradiction >= 0.5 {numpy.mean([v >= 0.5 for v in x]):.2f} "
                  f"control >= 0.5 {numpy.mean([v >= 0.5 for v in y]):.2f}")
        if detector_details is not None:
            detector = {}
            for line in detector_details.open(encoding="utf8"):
                d = json.loads(line)
                detector[(d["id"], d["side"])] = d["score"]
            for weight in (0.0, 0.25, 0.5):
                wins = [
                    1.0 if a > b else 0.5 if a == b else 0.0
                    for (i, c), s in by_id.items() if c != "news"
                    for a, b in [tuple((1 - weight) * detector[(i, side)] + weight * s[side][0]
                                       for side in ("contradiction", "control"))]
                ]
                print(f"    the detector's score blended with this one at weight {weight}: matched {numpy.mean(wins):.3f}")
        news_scores = sorted((s["news"][0] for (_, c), s in by_id.items() if c == "news"), reverse=True)
        if news_scores:
            print(f"    news: {len(news_scores)} articles, >= 0.5 in {sum(v >= 0.5 for v in news_scores)}, "
                  f"highest {', '.join(f'{v:.2f}' for v in news_scores[:5])}")
    if output is not None:
        output.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf8")


if __name__ == "__main__":
    typer.run(main)
