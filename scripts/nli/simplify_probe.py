"""Does reading the pair sentences simplified help the NLI model tell a contradiction from its near miss?

Written pair sentences carry extra detail ("The Saint Ilse, a ferry built in 1990, left at noon, a
deputy said."), and an NLI model tends to call a hypothesis with unsupported detail neutral. The
probe cuts each pair sentence of the suite down to its main statement with spaCy's parse (the clause
under a reporting verb, "according to ..." dropped, appositives, relative clauses and brackets
dropped) and scores, for each record, the gold pair and the control's near-miss pair (P(contradiction),
mean of both orders) as written, simplified, and the larger or the mean of the two. It prints the
matched win rate (gold pair above its near miss), recall and control alarms at 0.5 for each.

    python scripts/nli/simplify_probe.py --model mpnet-lora --pattern "dev_*.jsonl"
"""
import json
import sys
from pathlib import Path
from typing import Dict, List, Optional

import numpy
import typer

ROOT = Path(__file__).resolve().parents[2]
REPORTING = frozenset("say tell report claim state announce confirm insist add note explain write recall admit".split())


def simplify(doc) -> str:
    """The main statement of a parsed sentence, or its text where too little would be left."""
    drop = set()
    root = doc[:].root
    if root.lemma_ in REPORTING:
        comps = [c for c in root.children if c.dep_ in ("ccomp", "xcomp")]
        if comps:
            keep = {t.i for t in comps[0].subtree}
            drop |= {t.i for t in doc if t.i not in keep}
            drop |= {t.i for t in comps[0].children if t.dep_ == "mark" and t.lower_ == "that"}
    for t in doc:
        if t.dep_ in ("appos", "relcl") or (t.dep_ == "prep" and t.lower_ == "according"):
            sub = list(t.subtree)
            drop |= {x.i for x in sub}
            if sub[0].i > 0 and doc[sub[0].i - 1].text == ",":
                drop.add(sub[0].i - 1)
            if t.dep_ != "prep" and sub[-1].i + 1 < len(doc) and doc[sub[-1].i + 1].text == ",":
                drop.add(sub[-1].i + 1)
    depth = 0
    for t in doc:
        depth += t.text in "(["
        if depth:
            drop.add(t.i)
        if t.text in ")]":
            depth = max(0, depth - 1)
    tokens = [t for t in doc if t.i not in drop]
    while tokens and tokens[0].is_punct:
        tokens = tokens[1:]
    if len(tokens) < 3:
        return doc.text
    parts, prev = [], None
    for t in tokens:
        if prev is not None:
            gap = t.i != prev.i + 1
            parts.append(("" if t.is_punct and t.text not in "([" else " ") if gap else prev.whitespace_)
        parts.append(t.text)
        prev = t
    out = "".join(parts).strip().rstrip(",;:")
    out = out[0].upper() + out[1:]
    return out if out[-1] in ".!?\"'" else out + "."


def win_rate(gold: numpy.ndarray, near: numpy.ndarray) -> float:
    return float(((gold > near) + 0.5 * (gold == near)).mean())


def main(
    model: str = typer.Option("mpnet-lora", help="NLI model: 'default', 'mpnet-lora' or a path."),
    suite: Path = typer.Option(ROOT / "tests" / "behaviour", help="Folder of suite records."),
    pattern: str = typer.Option("dev_*.jsonl", help="Files of --suite to read."),
    output: Optional[Path] = typer.Option(None, help="Write each record's scores and simplified sentences here (JSON)."),
) -> None:
    from spacy_inconsistency.alignment import load_parser
    from spacy_inconsistency.backends.nli import make_nli_backend
    from spacy_inconsistency.corpora.behaviour import read_behaviour_suite

    records = read_behaviour_suite(suite, pattern)
    sentences = list(dict.fromkeys(s for r in records for side in ("contradiction", "control") for s in r[side]["pair"]))
    parser = load_parser()
    short: Dict[str, str] = {s: simplify(doc) for s, doc in zip(sentences, parser.pipe(sentences))}
    pairs: List[tuple] = []
    for r in records:
        (a, b), (c, d) = r["contradiction"]["pair"], r["control"]["pair"]
        for x, y in ((a, b), (c, d), (short[a], short[b]), (short[c], short[d])):
            pairs += [(x, y), (y, x)]
    unique = list(dict.fromkeys(pairs))
    p = make_nli_backend(model, truncation="warn").predict(unique)["contradiction"]
    score = dict(zip(unique, map(float, p)))
    s = numpy.array([score[q] for q in pairs]).reshape(len(records), 4, 2).mean(-1)  # record x (gold, near, gold', near')
    variants = {"as written": s[:, :2], "simplified": s[:, 2:], "larger of the two": numpy.maximum(s[:, :2], s[:, 2:]),
                "mean of the two": (s[:, :2] + s[:, 2:]) / 2}
    changed = sum(short[x] != x for r in records for x in r["contradiction"]["pair"])
    print(f"model {model}, {pattern}: {len(records)} records; {changed} of {2 * len(records)} gold sentences simplified")
    for name, v in variants.items():
        print(f"  {name:18s} matched {win_rate(v[:, 0], v[:, 1]):.3f}  recall@0.5 {(v[:, 0] >= 0.5).mean():.3f}"
              f"  controls@0.5 {(v[:, 1] >= 0.5).mean():.3f}")
    if output:
        output.write_text(json.dumps([{"id": r["id"], "scores": [round(float(x), 4) for x in row],
                                       "simplified": [short[x] for x in r["contradiction"]["pair"] + r["control"]["pair"]]}
                                      for r, row in zip(records, s)]), encoding="utf8")


if __name__ == "__main__":
    typer.run(main)
