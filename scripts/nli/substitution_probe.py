"""Does the NLI model know that one role has one holder? An entity-substitution probe.

The entity swaps of the behavioural suite ("The senior title went to Cormac Delahunt." /
"Aoife Brennan won the senior title.") are contradictions only because a title, an
authorship or a command has one holder. The probe asks the model two questions for
every unit pair of a document whose named entities of one label differ (a from one
unit, b from the other):

* is the swap a contradiction in itself: P(contradiction | a, a'), where a' is a with
  its entity replaced by b's ("The senior title went to Aoife Brennan.");
* is a' a claim of b: P(entailment | b, a').

Together they would give a contradiction by a chain (b entails a', a' contradicts a),
scored as max over orders of P(e | b, a') x max over orders of P(c | a, a'). The script
prints, per capability of the suite's documents and for `--news` consistent news
articles (TRUE's FRANK / SummEval sources), how often that chain passes 0.5, its
matched ROC-AUC on the documents with a substitution, and P(c | a, a') of the gold
pairs' PERSON / ORG swaps.

    python scripts/nli/substitution_probe.py --model mpnet-lora --split dev --news 12
"""
import itertools
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy
import typer

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
LABELS = frozenset(("PERSON", "ORG", "GPE", "LOC", "FAC", "NORP", "PRODUCT", "WORK_OF_ART", "EVENT"))


def substitutions(text: str, parsed_a, parsed_b) -> List[Tuple[str, str]]:
    """(a', label) for each entity of a replaced by an entity of b of the same label sharing no word."""
    out = []
    for ea in parsed_a.ents:
        if ea.label_ not in LABELS:
            continue
        for eb in parsed_b.ents:
            words_a = set(ea.text.lower().split()) - {"the"}
            words_b = set(eb.text.lower().split()) - {"the"}
            if eb.label_ == ea.label_ and not words_a & words_b:
                out.append((text[: ea.start_char] + eb.text + text[ea.end_char :], ea.label_))
    return out


def main(
    model: str = typer.Option("mpnet-lora", help="NLI model: 'default', 'mpnet-lora' or a path."),
    split: str = typer.Option("dev", help="Suite split: 'dev' or 'test'."),
    news: int = typer.Option(12, help="Consistent news articles (TRUE's FRANK / SummEval sources)."),
    data_dir: Path = typer.Option(ROOT.parent / "shared" / "data", help="The shared data folder."),
    output: Optional[Path] = typer.Option(None, help="Write every substitution's probabilities here (JSONL)."),
) -> None:
    from sklearn.metrics import roc_auc_score

    from fit_pair_scorer import news_articles
    from spacy_inconsistency.alignment import load_parser
    from spacy_inconsistency.backends.nli import make_nli_backend
    from suite_units import suite_documents, unit_segmenter

    units = unit_segmenter()
    docs = [  # ((id, side, capability, gold pair), units)
        ((record["id"], side, record["capability"], tuple(sorted(record[side]["pair"]))), us)
        for record, side, us in suite_documents(split, units)
    ]
    for i, text in enumerate(news_articles(data_dir / "true", news)):
        docs.append(((f"news-{i}", "news", "news", ()), units(text)))
    parser = load_parser()
    texts = sorted({u for _, us in docs for u in us})
    parsed = dict(zip(texts, parser.pipe(texts, batch_size=256)))
    jobs = []
    for d, (_, us) in enumerate(docs):
        for i, j in itertools.combinations(range(len(us)), 2):
            for a, b in ((us[i], us[j]), (us[j], us[i])):
                for variant, label in substitutions(a, parsed[a], parsed[b]):
                    jobs.append((d, (i, j), a, variant, b, label))
    print(f"{len(docs)} documents, {len(jobs)} substitutions", file=sys.stderr, flush=True)
    pairs = list(dict.fromkeys(p for _, _, a, v, b, _ in jobs for p in ((v, b), (b, v), (a, v), (v, a))))
    nli = make_nli_backend(model)
    probs = nli.predict(pairs)
    index = {p: k for k, p in enumerate(pairs)}

    def p(label: str, pair: Tuple[str, str]) -> float:
        return float(probs[label][index[pair]])

    doc_chain: Dict[int, float] = defaultdict(float)
    gold_swaps: Dict[str, List[float]] = defaultdict(list)
    rows = []
    for d, (i, j), a, v, b, label in jobs:
        key, us = docs[d]
        entail = max(p("entailment", (b, v)), p("entailment", (v, b)))
        swap = max(p("contradiction", (a, v)), p("contradiction", (v, a)))
        doc_chain[d] = max(doc_chain[d], entail * swap)
        gold = key[1] == "contradiction" and tuple(sorted((us[i], us[j]))) == key[3]
        if gold and label in ("PERSON", "ORG"):
            gold_swaps[key[2]].append(swap)
            gold_swaps["all"].append(swap)
        rows.append({"doc": list(key[:3]), "gold": gold, "a": a, "a_swapped": v, "b": b, "label": label,
                     "entailment_b_swapped": entail, "contradiction_a_swapped": swap})
    if output is not None:
        output.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf8")
    by_id: Dict[Tuple[str, str], Dict[str, float]] = defaultdict(dict)
    for d, (key, _) in enumerate(docs):
        by_id[(key[0], key[2])][key[1]] = doc_chain.get(d, 0.0)
    print(f"model {model}, split {split}")
    for capability in sorted({c for _, c in by_id if c != "news"}) + ["all"]:
        scored = [(s["contradiction"], s["control"]) for (i, c), s in by_id.items()
                  if c != "news" and (capability in (c, "all")) and (s["contradiction"] or s["control"])]
        if not scored:
            continue
        auc = roc_auc_score([1] * len(scored) + [0] * len(scored), [x for x, _ in scored] + [y for _, y in scored])
        wins = numpy.mean([1.0 if x > y else 0.5 if x == y else 0.0 for x, y in scored])
        print(f"  {capability}: {len(scored)} records with a substitution, chain >= 0.5 in "
              f"{sum(x >= 0.5 for x, _ in scored)} contradiction / {sum(y >= 0.5 for _, y in scored)} control "
              f"documents, matched {wins:.2f}, pooled AUC {auc:.2f}")
    news_scores = [s["news"] for (_, c), s in by_id.items() if c == "news"]
    print(f"  news: {sum(x >= 0.5 for x in news_scores)} of {len(news_scores)} articles with a chain >= 0.5")
    for capability, swaps in sorted(gold_swaps.items()):
        print(f"  {capability}: the gold pairs' PERSON / ORG swaps: {len(swaps)}, P(c | a, a') median "
              f"{numpy.median(swaps):.3f}, >= 0.5 in {sum(x >= 0.5 for x in swaps)}")


if __name__ == "__main__":
    typer.run(main)
