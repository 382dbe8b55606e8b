"""How many pairs must the first model read in reverse order for the cascade's second stage
to see the same pairs? Agreement of each Doc's top `rescore_top_k` pairs, per `reverse_top_k`.

The first stage of the default detector (the embedded model, its dtype, the
learned pair score with alignment; no second stage) reads both orders of every
candidate pair once. Each budget is then simulated on those probabilities: the
reverse order is kept for the Doc's `reverse_top_k` pairs that rank highest when
each pair's text order is read as both (what `reverse_top_k` does), and the
others' score reads their text order as both. Reported per set: the share of
Docs whose top 8 is the set the full reading gives, the mean Jaccard overlap of
the two sets, the share of reverse readings kept, and for the behavioural suite
the gold pairs among the top 8 (the suite's `gold` sentences, both splits).

With `--second-budgets`, the same for the second stage (`rescore_reverse_top_k`):
mpnet-lora reads both orders of each Doc's top 8 (of the full first-stage
reading), and each budget keeps the reverse order of the pairs its text order
ranks highest and of any pair that would then be flagged; reported: the share
of Docs with the same findings (pairs at or over the Doc's threshold) and the
same flag, and the largest change of a Doc's score.

Sets: the behavioural suite (both sides of every record), ContraDoc-50, the
first 40 XSum source articles of `true/qags_xsum.csv` and the first 40
documents of `scripts/benchmark_detect.py`'s corpus.

    python scripts/pairwise/reverse_budget.py --data-dir ../shared/data --budgets 16,24,32,48 --second-budgets 1,2,3,4
"""
import json
import sys
from pathlib import Path
from typing import Dict, List

import numpy
import typer

ROOT = Path(__file__).resolve().parent.parent.parent


def _overlapping(units, span) -> set:
    return {i for i, u in enumerate(units) if u.start_char < span[1] and span[0] < u.end_char}


def main(
    data_dir: Path = typer.Option(ROOT.parent / "shared" / "data", help="The shared data folder."),
    suite: Path = typer.Option(ROOT / "tests" / "behaviour", help="Folder of the behavioural suite."),
    budgets: str = typer.Option("16,24,32,48", help="Comma-separated reverse_top_k values."),
    second_budgets: str = typer.Option("", help="Comma-separated rescore_reverse_top_k values to simulate too ('' for none)."),
    n_news: int = typer.Option(40, help="XSum news articles, and benchmark documents."),
    output: Path = typer.Option(None, help="Write the figures as JSON here."),
) -> None:
    import spacy

    sys.path.insert(0, str(ROOT / "scripts"))
    from benchmark_detect import load_corpus
    from spacy_inconsistency.corpora.behaviour import read_behaviour_suite
    from spacy_inconsistency.corpora.contradoc import read_contradoc
    from spacy_inconsistency.corpora.true import read_true
    from spacy_inconsistency.pair_score import stack_probabilities
    from spacy_inconsistency.pair_scoring import combine, doc_units, has_content, speaker_pairs, unit_alignment

    records = read_behaviour_suite(suite, "*.jsonl")
    sets: Dict[str, List[str]] = {"suite": [r[side]["text"] for r in records for side in ("contradiction", "control")]}
    golds = [r["gold"] if side == "contradiction" else None for r in records for side in ("contradiction", "control")]
    sets["contradoc"] = [r["text"] for r in read_contradoc(data_dir / "contradiction" / "contradoc_50.json",
                                                           keep_missing_evidence=True)]
    news = list(dict.fromkeys(e.source for e in read_true(data_dir / "true" / "qags_xsum.csv")))
    sets["news"] = news[:n_news]
    sets["benchmark"] = load_corpus(data_dir, n_news)

    nlp = spacy.blank("en")
    nlp.add_pipe("inconsistency_segmenter")
    detector = nlp.add_pipe("contradiction_detector", config={"rescorer": None})
    k = detector.cfg["rescore_top_k"]
    ks = [int(b) for b in budgets.split(",")]
    rs = [int(b) for b in second_budgets.split(",") if b]
    results: Dict[str, Dict] = {"rescore_top_k": k, "sets": {}}
    if rs:
        # The default cascade, for its second model, pair score and document threshold.
        cascade = spacy.blank("en").add_pipe("contradiction_detector")

    def rank(fwd, bwd, pairs, facts):
        return combine(fwd, bwd, pairs, aggregation=detector.aggregation, pair_scorer=detector.pair_scorer, facts=facts)

    def second(fwd, bwd, pairs, facts):
        return combine(fwd, bwd, pairs, aggregation=cascade.aggregation, pair_scorer=cascade.rescorer_pair_scorer,
                       facts=facts)

    for name, texts in sets.items():
        tally = {b: {"same": 0, "jaccard": 0.0, "reverse": 0, "gold": 0} for b in ks + ["all"]}
        second_tally = {r: {"same_findings": 0, "same_flag": 0, "largest_change": 0.0, "reverse": 0} for r in rs}
        second_n = 0
        docs_n, pairs_n, gold_n = 0, 0, 0
        for index, doc in enumerate(nlp.pipe(texts)):
            units = [u for u in doc_units(doc, detector.cfg["units_key"], detector.name) if has_content(u)]
            pairs = speaker_pairs(units, detector.unit_pairs(units), detector.cfg["speakers"])
            if not len(pairs):
                continue
            t = [u.text.strip() for u in units]
            both = [(t[i], t[j]) for i, j in pairs.tolist()] + [(t[j], t[i]) for i, j in pairs.tolist()]
            probs = stack_probabilities(detector.model.predict(both), len(both))
            fwd, bwd = probs[: len(pairs)], probs[len(pairs):]
            facts = unit_alignment(units, pairs) if detector.pair_scorer is not None and detector.cfg["alignment"] else None
            full = set(numpy.argsort(-rank(fwd, bwd, pairs, facts), kind="stable")[:k].tolist())
            gold = None
            if name == "suite" and golds[index] is not None:
                a, b = _overlapping(units, golds[index][0]), _overlapping(units, golds[index][1])
                gold = {p for p, (i, j) in enumerate(pairs.tolist()) if (i in a and j in b) or (i in b and j in a)}
                gold_n += 1
            one_way = rank(fwd, fwd, pairs, facts)
            for budget in ks + ["all"]:
                if budget == "all":
                    top = full
                    read = len(pairs)
                else:
                    reversed_ = numpy.argsort(-one_way, kind="stable")[: max(budget, k)]
                    partial = fwd.copy()
                    partial[reversed_] = bwd[reversed_]
                    top = set(numpy.argsort(-rank(fwd, partial, pairs, facts), kind="stable")[:k].tolist())
                    read = len(reversed_)
                entry = tally[budget]
                entry["same"] += top == full
                entry["jaccard"] += len(top & full) / len(top | full)
                entry["reverse"] += read
                entry["gold"] += bool(gold and gold & top)
            if rs:
                top = numpy.argsort(-rank(fwd, bwd, pairs, facts), kind="stable")[:k]
                chosen = pairs[top]
                texts2 = [(t[i], t[j]) for i, j in chosen.tolist()] + [(t[j], t[i]) for i, j in chosen.tolist()]
                probs2 = stack_probabilities(cascade.rescorer.predict(texts2), len(texts2))
                f2, b2 = probs2[: len(top)], probs2[len(top):]
                cut = cascade.threshold_for(len(pairs))
                full2 = second(f2, b2, chosen, facts)
                for r in rs:
                    done = numpy.zeros(len(top), bool)
                    done[numpy.argsort(-second(f2, f2, chosen, facts), kind="stable")[:r]] = True
                    partial = numpy.where(done[:, None], b2, f2)
                    done |= second(f2, partial, chosen, facts) >= cut
                    partial = numpy.where(done[:, None], b2, f2)
                    got = second(f2, partial, chosen, facts)
                    entry = second_tally[r]
                    entry["same_findings"] += set(numpy.flatnonzero(got >= cut)) == set(numpy.flatnonzero(full2 >= cut))
                    entry["same_flag"] += bool((got >= cut).any()) == bool((full2 >= cut).any())
                    entry["largest_change"] = max(entry["largest_change"], abs(float(got.max()) - float(full2.max())))
                    entry["reverse"] += int(done.sum())
                second_n += len(top)
            docs_n += 1
            pairs_n += len(pairs)
        results["sets"][name] = {"docs": docs_n, "pairs": pairs_n, "gold_pairs": gold_n, "by_budget": {}}
        for budget, entry in tally.items():
            row = {"same_top": entry["same"] / docs_n, "jaccard": entry["jaccard"] / docs_n,
                   "reverse_read": entry["reverse"] / pairs_n}
            if gold_n:
                row["gold_in_top"] = entry["gold"]
            results["sets"][name]["by_budget"][str(budget)] = row
            gold_text = f", gold pair in the top {k}: {entry['gold']} of {gold_n}" if gold_n else ""
            typer.echo(f"{name} ({docs_n} docs, {pairs_n / docs_n:.0f} pairs each), reverse_top_k={budget}: "
                       f"same top {k} {row['same_top']:.2f}, Jaccard {row['jaccard']:.3f}, "
                       f"reverse readings {row['reverse_read']:.0%}{gold_text}")
        if rs:
            results["sets"][name]["second_stage"] = {}
            for r, entry in second_tally.items():
                row = {"same_findings": entry["same_findings"] / docs_n, "same_flag": entry["same_flag"] / docs_n,
                       "largest_score_change": entry["largest_change"], "reverse_read": entry["reverse"] / second_n}
                results["sets"][name]["second_stage"][str(r)] = row
                typer.echo(f"{name}, rescore_reverse_top_k={r}: same findings {row['same_findings']:.3f}, same flag "
                           f"{row['same_flag']:.3f}, largest change of a document score {row['largest_score_change']:.3f}, "
                           f"reverse readings {row['reverse_read']:.0%} of the second stage's")
    if output:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(results, indent=2), encoding="utf8")


if __name__ == "__main__":
    typer.run(main)
