"""Fit the learned pair score of an NLI model (`pair_scorer.json`) on held-out pairs.

The pair score is a logistic regression over both directions' NLI probabilities and
the alignment features (see `spacy_inconsistency.pair_score`). It is fitted on pairs
the NLI model never trained on:

* every unit pair the detector compares in the documents of the behavioural suite's
  DEV split (`tests/behaviour/dev_*.jsonl`; `--suite-pattern` adds `dev2_*.jsonl`): the gold pair of each contradiction
  document is a contradiction, every other pair (the control's near miss included)
  is not;
* the held-out edits of real sentences (`edit_heldout.jsonl`: negations, number and
  date changes, and their controls: another subject, another time, a hedge, ...);
* held-out sentence pairs of one coherent passage, unrelated sentences, antonym and
  synonym swaps, and the held-out NLI rows (contradiction against the rest);
* every pair the detector compares in `--news-negatives` real news articles (TRUE's
  FRANK and SummEval source articles), taken as not contradictions: what the
  detector meets most is long, consistent text.

With `--gated` (the default) the alignment features have no weight of their own, only
times the larger P(contradiction): fitted freely, the score learned that an antonym or
two numbers in a pair mean contradiction, which holds in edited pairs and not in news.

Each source gets the same total weight, and within a source both classes do. The
regularisation is chosen by 5-fold cross-validation grouped by document.

Thresholds. The highest pair score of a consistent document grows with its number of
pairs, so the detector's threshold does too (`pair_score.DocumentThreshold`): the
out-of-fold scores of the news negatives' pairs give F, the distribution of pair
scores in consistent text, and a Doc of k pairs is flagged at F^-1((1 - alpha) ** (1/k)).
alpha is the largest (0.01 .. 0.30) that flags at most `--max-dev-false-alarms` of the
dev controls (out of fold) and at most `--max-news-alarms` of `--calibration-news`
further news articles (the first ones of TRUE's FRANK and SummEval sources, taken as
consistent; never an article of `qags_xsum.csv`, the news check of
`evaluate_documents.py`); when none keeps the news cap, the largest within the dev cap
of those that flag the fewest articles (`choose_alpha`). The fixed pair `threshold` (used across documents) is the one
that maximises recall minus false alarms on the dev documents, raised until those news
articles are flagged at most `--max-news-alarms`. The TEST split of the suite is never read.

The five fold models of the chosen regularisation and the dev records each held out are kept
in `info["out_of_fold"]`, so that pairs read later (`calibrate_cascade.py`) can be given
their out-of-fold scores without this fit's data.

    python scripts/nli/fit_pair_scorer.py --model training/nli-minilm-l6-skills \
        --nli-dir assets/nli --suite tests/behaviour --output training/nli-minilm-l6-skills/pair_scorer.json
"""
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy
import typer

ROOT = Path(__file__).resolve().parents[2]
NLI_HELDOUT = {
    "edit_heldout.jsonl": None,
    "docpairs_heldout.jsonl": None,
    "unrelated_heldout.jsonl": None,
    "antonym_heldout.jsonl": None,
    "heldout.jsonl": {"snli", "taxinli", "sick"},
}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class CachedNLI:
    """The NLI backend's label probabilities, remembered per (premise, hypothesis) and kept on disk,
    so that refitting with other alignment features does not score the pairs again."""

    def __init__(self, backend, path: Optional[Path]):
        self.backend = backend
        self.path = path
        self.memory: Dict[Tuple[str, str], List[float]] = {}
        if path is not None and path.exists():
            self.memory = {tuple(k): v for k, v in json.loads(path.read_text(encoding="utf8"))}
        self.label_index = backend.label_index

    def predict(self, pairs):
        from spacy_inconsistency.pair_score import stack_probabilities

        new = [p for p in dict.fromkeys(map(tuple, pairs)) if p not in self.memory]
        if new:
            probs = stack_probabilities(self.backend.predict(new), len(new))
            self.memory.update(zip(new, probs.tolist()))
        rows = numpy.array([self.memory[tuple(p)] for p in pairs], dtype=numpy.float32).reshape(-1, 3)
        return {"entailment": rows[:, 0], "neutral": rows[:, 1], "contradiction": rows[:, 2]}

    def save(self) -> None:
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(json.dumps([[list(k), v] for k, v in self.memory.items()]), encoding="utf8")


class PairList:
    """Stands in for the NLI backend to list the pairs a fit asks for (each once, in order),
    scoring none: what `lora_mpnet.py pack --score-pairs` has a GPU machine score with a
    model trained there, so that its pair score is fitted here from the cache
    `scores-to-cache` writes, without scoring ~100k pairs with mpnet on a CPU."""

    def __init__(self):
        self.memory: Dict[Tuple[str, str], None] = {}

    def predict(self, pairs):
        self.memory.update(dict.fromkeys(map(tuple, pairs)))
        third = numpy.full(len(pairs), 1 / 3, dtype=numpy.float32)
        return {"entailment": third, "neutral": third, "contradiction": third}

    def save(self) -> None:
        pass


class DetectorPairs:
    """What the default detector compares in a text: its units with content, the
    budgeted candidate pairs of one speaker, both directions' NLI probabilities and
    the alignment features of each pair (as `ContradictionDetector.predict`)."""

    def __init__(self, model, *, max_all_pairs: int):
        import spacy

        from spacy_inconsistency import defaults
        from spacy_inconsistency.candidates import BudgetStrategy
        from spacy_inconsistency.segment import Segmenter

        self.model = model
        self.nlp = spacy.blank("en")
        self.segmenter = Segmenter()
        self.budget = BudgetStrategy(max_pairs=max_all_pairs, window=defaults.WINDOW, k=defaults.LEXICAL_PARTNERS)

    def __call__(self, text: str):
        """(units, pairs, forward, backward, alignment); pairs is empty when there is nothing to compare."""
        from spacy_inconsistency.alignment import pair_feature_matrix
        from spacy_inconsistency.pair_scoring import has_content, nli_probabilities, speaker_pairs, unit_alignment

        doc = self.segmenter(self.nlp.make_doc(text))
        units = [u for u in doc.spans[self.segmenter.units_key] if has_content(u)]
        pairs = speaker_pairs(units, self.budget(units), "same")
        if not len(pairs):
            return units, pairs, None, None, None
        forward, backward = nli_probabilities(self.model, [u.text.strip() for u in units], pairs)
        return units, pairs, forward, backward, pair_feature_matrix(unit_alignment(units, pairs), pairs.tolist())


def suite_pairs(records, model, *, max_all_pairs: int):
    """Feature inputs of every compared unit pair of the suite's documents."""
    compared = DetectorPairs(model, max_all_pairs=max_all_pairs)
    out = {"forward": [], "backward": [], "align": [], "label": [], "group": [], "doc": [], "near_miss": []}
    for n_rec, record in enumerate(records):
        for side in ("contradiction", "control"):
            units, pairs, forward, backward, align = compared(record[side]["text"])
            if not len(pairs):
                continue
            gold = record["gold"] if side == "contradiction" else record["control_gold"]
            hits = numpy.zeros(len(pairs))
            for k, (i, j) in enumerate(pairs.tolist()):
                a, b = units[i], units[j]
                hit_a = [a.start_char < g[1] and g[0] < a.end_char for g in gold]
                hit_b = [b.start_char < g[1] and g[0] < b.end_char for g in gold]
                if (hit_a[0] and hit_b[1]) or (hit_a[1] and hit_b[0]):
                    hits[k] = 1
            labels = hits if side == "contradiction" else numpy.zeros(len(pairs))
            out["forward"].append(forward)
            out["backward"].append(backward)
            out["align"].append(align)
            out["label"].append(labels)
            out["group"].append(numpy.full(len(pairs), n_rec))
            out["near_miss"].append(hits if side == "control" else numpy.zeros(len(pairs)))
            out["doc"].append(numpy.full(len(pairs), 2 * n_rec + (side == "control")))
        if (n_rec + 1) % 50 == 0:
            log(f"suite: {n_rec + 1}/{len(records)} records")
    return {k: numpy.concatenate(v) for k, v in out.items()}


def row_pairs(rows: List[dict], model, group_offset: int):
    """Feature inputs of premise/hypothesis rows (both directions scored)."""
    from spacy_inconsistency.alignment import facts_of_texts, pair_feature_matrix
    from spacy_inconsistency.pair_scoring import nli_probabilities

    texts = []
    index: Dict[str, int] = {}
    pairs = []
    for r in rows:
        ids = []
        for t in (r["premise"], r["hypothesis"]):
            if t not in index:
                index[t] = len(texts)
                texts.append(t)
            ids.append(index[t])
        pairs.append(ids)
    pairs = numpy.asarray(pairs, dtype=numpy.int64)
    forward, backward = nli_probabilities(model, texts, pairs)
    facts = facts_of_texts(texts)
    labels = numpy.array([r["label"] == "contradiction" for r in rows], dtype=float)
    groups = []
    doc_ids: Dict[str, int] = {}
    for r in rows:
        key = r.get("doc") or r["premise"]
        groups.append(group_offset + doc_ids.setdefault(key, len(doc_ids)))
    return {"forward": forward, "backward": backward, "align": pair_feature_matrix(facts, pairs.tolist()),
            "label": labels, "group": numpy.asarray(groups)}


def news_articles(true_dir: Path, n: int, skip: int = 0) -> List[str]:
    """Distinct CNN/DailyMail and XSum source articles of TRUE's FRANK and SummEval files, in
    file order, from the `skip`-th on; never one that is also a source article of
    `qags_xsum.csv` (the news false-alarm check of `evaluate_documents.py`)."""
    import csv

    held = set()
    xsum = true_dir / "qags_xsum.csv"
    if xsum.exists():
        with xsum.open(encoding="utf8") as f:
            held = {row["grounding"].strip() for row in csv.DictReader(f)}
    seen: List[str] = []
    for name in ("frank.csv", "summeval.csv"):
        with (true_dir / name).open(encoding="utf8") as f:
            for row in csv.DictReader(f):
                text = row["grounding"]
                if text not in seen and text.strip() not in held:
                    seen.append(text)
                if len(seen) >= skip + n:
                    return seen[skip:]
    return seen[skip:]


def news_pairs(texts: List[str], model, *, max_all_pairs: int, group_offset: int):
    """Feature inputs of every pair the detector compares in real news articles, all taken
    as not contradictions (edited news is not among them)."""
    compared = DetectorPairs(model, max_all_pairs=max_all_pairs)
    out = {"forward": [], "backward": [], "align": [], "label": [], "group": []}
    for n_doc, text in enumerate(texts):
        _, pairs, forward, backward, align = compared(text)
        if not len(pairs):
            continue
        out["forward"].append(forward)
        out["backward"].append(backward)
        out["align"].append(align)
        out["label"].append(numpy.zeros(len(pairs)))
        out["group"].append(numpy.full(len(pairs), group_offset + n_doc))
        if (n_doc + 1) % 20 == 0:
            log(f"news: {n_doc + 1}/{len(texts)} articles")
    return {k: numpy.concatenate(v) for k, v in out.items()}


def document_scores(texts: List[str], backend, scorer, *, max_all_pairs: int) -> Tuple[numpy.ndarray, numpy.ndarray]:
    """The detector's document score (highest pair score) of each text, with `scorer`,
    and the number of pairs it compared."""
    compared = DetectorPairs(backend, max_all_pairs=max_all_pairs)
    out, sizes = [], []
    for text in texts:
        _, pairs, forward, backward, align = compared(text)
        sizes.append(len(pairs))
        out.append(float(scorer(forward, backward, align).max()) if len(pairs) else 0.0)
    return numpy.asarray(out), numpy.asarray(sizes)


def null_cdf(scores: numpy.ndarray, points: int = 1001) -> List[float]:
    """F(s) = P(score < s) of pairs of consistent documents at s = 0 .. 1 (add-one smoothed,
    so it never reaches 1 and the top of the range stays reachable only by scores above
    every one seen)."""
    null = numpy.sort(numpy.asarray(scores, dtype=numpy.float64))
    grid = numpy.linspace(0.0, 1.0, points)
    return ((numpy.searchsorted(null, grid, side="left") + 1) / (len(null) + 2)).tolist()


def flagged(doc_max: numpy.ndarray, doc_pairs: numpy.ndarray, rule) -> numpy.ndarray:
    return numpy.array([m >= rule(k) for m, k in zip(doc_max, doc_pairs)], dtype=bool)


def thresholds_by_pairs(rule) -> Dict[int, float]:
    """A document rule's threshold at a few numbers of pairs (for the record and the model card)."""
    return {k: rule(k) for k in (1, 3, 10, 30, 100, 300, 1000, 2000)}


def matched_auc_by_files(doc_scores: numpy.ndarray, doc_ids: numpy.ndarray,
                         records_by_glob: Dict[str, List[int]]) -> Tuple[float, Dict[str, float]]:
    """The matched AUC of documents' scores (a record's contradiction document above its control;
    ties half), over all records and per file glob: a fit over two dev splits is compared with one
    over the first on the first's records.

    doc_scores (numpy.ndarray): Per document in `doc_ids`, contradiction (2 r) and control (2 r + 1)
        of each record r in turn (both documents of a record have pairs).
    records_by_glob (Dict[str, List[int]]): Record indices of each glob.
    """
    from spacy_inconsistency.metrics.behaviour import matched_auc

    contradiction, control = doc_scores[0::2].tolist(), doc_scores[1::2].tolist()
    record_of = doc_ids[0::2] // 2
    by_files = {}
    for glob, rows in records_by_glob.items():
        keep = numpy.isin(record_of, rows)
        if keep.any():
            by_files[glob] = matched_auc([s for s, k in zip(contradiction, keep) if k],
                                         [s for s, k in zip(control, keep) if k])
    return matched_auc(contradiction, control), by_files


def worst_dev_false_alarms(row: dict) -> float:
    """A document rule's dev false alarms where they are highest: over all dev records, or in
    the dev split (file glob) that flags most, when the fit read several: two writer populations
    are held to the cap each, not only in their mix."""
    return max([row["dev_false_alarms"], *row.get("dev_false_alarms_by_files", {}).values()])


def choose_alpha(table: List[dict], *, max_dev_false_alarms: float, max_news_alarms: float) -> Tuple[dict, str]:
    """The document rule to ship, from rows of increasing alpha, and why it was chosen.

    "within_caps": the largest alpha that keeps both caps (the dev cap in every dev split
    the row has figures for: `worst_dev_false_alarms`). When every rule flags more
    news than its cap (a few articles score higher than any threshold reaches),
    "lowest_news": the largest alpha within the dev cap among the rules that flag the
    fewest news articles, so that no recall is given up for no news gained.
    "strictest": no rule keeps even the dev cap, so the smallest alpha.
    """
    if not table:
        raise ValueError("no document rule to choose from")
    within_dev = [row for row in table if worst_dev_false_alarms(row) <= max_dev_false_alarms]
    both = [row for row in within_dev if row.get("news_flagged", 0.0) <= max_news_alarms]
    if both:
        return max(both, key=lambda row: row["alpha"]), "within_caps"
    if within_dev:
        fewest = min(row.get("news_flagged", 0.0) for row in within_dev)
        return max((row for row in within_dev if row.get("news_flagged", 0.0) <= fewest),
                   key=lambda row: row["alpha"]), "lowest_news"
    return min(table, key=lambda row: row["alpha"]), "strictest"


def rechoose(fitted: Path, output: Path, *, max_dev_false_alarms: float, max_news_alarms: float) -> dict:
    """Choose a fitted pair score's document rule again from the table its fit recorded
    (the same pair score, CDFs and per-alpha figures), as this script now chooses it."""
    from spacy_inconsistency.pair_score import DocumentThreshold, PairScoreModel

    scorer = PairScoreModel.from_disk(fitted)
    doc_t = scorer.info.get("document_threshold")
    if not doc_t or not scorer.document_thresholds:
        raise ValueError(f"{fitted} has no document threshold table to choose from")
    chosen, why = choose_alpha(doc_t["by_alpha"], max_dev_false_alarms=max_dev_false_alarms,
                               max_news_alarms=max_news_alarms)
    for key in ("full", "nli_only"):
        rule = scorer.document_thresholds[key]
        scorer.document_thresholds[key] = DocumentThreshold(rule.cdf, alpha=chosen["alpha"], floor=rule.floor,
                                                            max_pairs=rule.max_pairs)
    previous = doc_t["chosen"]
    doc_t.update({
        "chosen": chosen, "chosen_because": why,
        "threshold_by_pairs": thresholds_by_pairs(scorer.document_thresholds["full"]),
        "rechosen": {"from_alpha": previous["alpha"], "max_dev_false_alarms": max_dev_false_alarms,
                     "max_news_alarms": max_news_alarms},
    })
    output.parent.mkdir(parents=True, exist_ok=True)
    scorer.to_disk(output)
    return doc_t


def sample_rows(path: Path, sources: Optional[set], per_source: int, rng) -> List[dict]:
    rows = [json.loads(line) for line in path.open(encoding="utf8")]
    if sources is not None:
        rows = [r for r in rows if r["source"] in sources]
    by_source = defaultdict(list)
    for r in rows:
        by_source[r["source"]].append(r)
    out = []
    for source, members in sorted(by_source.items()):
        rng.shuffle(members)
        out.extend(members[:per_source])
    return out


def balanced_weights(labels: numpy.ndarray, source: numpy.ndarray, natural: int = 0) -> numpy.ndarray:
    """Each source the same total weight; within a source both classes the same, except
    in source `natural` (the suite's document pairs), whose own class balance is kept so
    that the score is calibrated for the pairs of real documents."""
    w = numpy.zeros(len(labels))
    sources = numpy.unique(source)
    for s in sources:
        m = source == s
        if s == natural:
            w[m] = 1.0 / m.sum()
            continue
        for y in (0, 1):
            mm = m & (labels == y)
            if mm.any():
                w[mm] = 1.0 / mm.sum() / (2 if (m & (labels == 1 - y)).any() else 1)
    return w / w.sum() * len(w)


def fit_logistic(X, y, w, groups, C_grid=(0.01, 0.03, 0.1, 0.3, 1.0)):
    """Standardise, pick C by grouped 5-fold CV log-loss, refit; also out-of-fold predictions.
    The returned fit's "folds" are the chosen C's five models, each with the rows it did not see."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import log_loss
    from sklearn.model_selection import GroupKFold

    mean = X.mean(0)
    scale = X.std(0)
    scale[scale < 1e-6] = 1.0
    Z = (X - mean) / scale
    folds = list(GroupKFold(n_splits=5).split(Z, y, groups))
    best = None
    for C in C_grid:
        oof = numpy.zeros(len(y))
        fold_models = []
        for tr, te in folds:
            m = LogisticRegression(C=C, max_iter=2000)
            m.fit(Z[tr], y[tr], sample_weight=w[tr])
            oof[te] = m.predict_proba(Z[te])[:, 1]
            fold_models.append({"coef": m.coef_[0], "intercept": float(m.intercept_[0]), "held_out": te})
        loss = log_loss(y, oof, sample_weight=w)
        log(f"  C={C}: CV log-loss {loss:.4f}")
        if best is None or loss < best[0]:
            best = (loss, C, oof, fold_models)
    _, C, oof, fold_models = best
    m = LogisticRegression(C=C, max_iter=2000).fit(Z, y, sample_weight=w)
    return {"mean": mean, "scale": scale, "coef": m.coef_[0], "intercept": float(m.intercept_[0]), "C": C,
            "folds": fold_models}, oof


def fit_inputs(parts: Dict[str, dict], *, near_miss_weight: float = 1.0) -> Dict[str, numpy.ndarray]:
    """The parts' pairs in one table: `source` (the part's index; the suite's is 0 and its
    rows come first), forward, backward, align, label, group, `weight` and the `suite` and
    `near_miss` masks."""
    if next(iter(parts)) != "suite":
        raise ValueError("the suite's pairs must be the first part")
    out = {key: numpy.concatenate([p[key] for p in parts.values()])
           for key in ("forward", "backward", "align", "label", "group")}
    out["source"] = numpy.concatenate([numpy.full(len(p["label"]), i) for i, p in enumerate(parts.values())])
    w = balanced_weights(out["label"], out["source"])
    # The suite's documents are what the detector meets; weigh them as much as all the rest.
    out["suite"] = out["source"] == 0
    w[out["suite"]] *= (len(parts) - 1)
    # The near misses of the controls are what a contradiction must be told apart from.
    out["near_miss"] = numpy.zeros(len(w), dtype=bool)
    out["near_miss"][numpy.flatnonzero(out["suite"])] = parts["suite"]["near_miss"] > 0
    w[out["near_miss"]] *= near_miss_weight
    out["weight"] = w
    return out


def best_threshold(doc_scores: numpy.ndarray, doc_labels: numpy.ndarray) -> Tuple[float, Dict[str, float]]:
    """The document threshold maximising recall minus false alarms (ties: the higher threshold)."""
    best = None
    for t in numpy.unique(numpy.round(doc_scores, 4)):
        flagged = doc_scores >= t
        recall = flagged[doc_labels == 1].mean()
        fa = flagged[doc_labels == 0].mean()
        j = recall - fa
        if best is None or j > best[0] + 1e-12 or (abs(j - best[0]) <= 1e-12 and t > best[1]):
            best = (j, float(t), {"recall": float(recall), "false_alarms": float(fa)})
    return best[1], best[2]


def main(
    model: Optional[str] = typer.Option(None, help="NLI model directory (or 'default')."),
    nli_dir: Path = typer.Option(ROOT / "assets" / "nli", help="Folder of the held-out pair files."),
    suite: Path = typer.Option(ROOT / "tests" / "behaviour", help="Behavioural suite folder."),
    suite_pattern: str = typer.Option("dev_*.jsonl", help="Its files the fit reads (globs, comma-separated; "
                                      "'dev_*.jsonl,dev2_*.jsonl' for both dev splits); recorded in the fit's info."),
    dtype: str = typer.Option("auto", help="The NLI backend's dtype for pairs not in --cache (as `fit_cache.py score` "
                              "scored the cache: 'bfloat16' beside a bf16 cache)."),
    output: Optional[Path] = typer.Option(None, help="Where pair_scorer.json goes."),
    per_source: int = typer.Option(600, help="Held-out rows per source (seeded sample)."),
    max_all_pairs: int = typer.Option(2000, help="Pair budget per suite document (as the detector's)."),
    near_miss_weight: float = typer.Option(1.0, help="Weight of a control's near-miss pair against another suite pair."),
    seed: int = typer.Option(0),
    threads: int = typer.Option(2),
    cache: Optional[Path] = typer.Option(None, help="Keep the NLI probabilities here (JSON), to refit quickly."),
    true_dir: Path = typer.Option(ROOT.parent / "shared" / "data" / "true", help="TRUE CSVs (news for the threshold)."),
    calibration_news: int = typer.Option(60, help="CNN/DailyMail articles used to cap news false alarms (0: off)."),
    max_news_alarms: float = typer.Option(0.03, help="Largest share of those articles the threshold may flag."),
    max_dev_false_alarms: float = typer.Option(0.10, help="Largest share of the dev controls the document threshold may flag."),
    min_threshold: float = typer.Option(0.3, help="The document threshold's floor (documents of very few pairs)."),
    news_negatives: int = typer.Option(80, help="Further news articles whose compared pairs are fitted as not contradictions."),
    gated: bool = typer.Option(True, help="Alignment features only scale the NLI evidence (no weight of their own)."),
    rechoose_from: Optional[Path] = typer.Option(None, help="Fit nothing: choose this pair_scorer.json's document rule again from its recorded table."),
    drop_feature: List[str] = typer.Option([], help="An alignment feature the full model leaves out (its column and its "
                                                    "c_max* interaction), to measure what it adds; repeatable."),
    baseline: Optional[Path] = typer.Option(None, help="Also report this pair_scorer.json's matched AUC on the same dev "
                                            "documents' pairs, per file glob (in sample for the records it was fitted on)."),
    list_pairs: Optional[Path] = typer.Option(None, help="Fit nothing and need no model: write every (premise, hypothesis) the fit "
                                                         "would score to this JSON list (with the calibration news), for "
                                                         "`lora_mpnet.py pack --score-pairs`."),
) -> None:
    if output is None and list_pairs is None:
        raise typer.BadParameter("--output is required (or --list-pairs)")
    if rechoose_from is not None:
        doc_t = rechoose(rechoose_from, output, max_dev_false_alarms=max_dev_false_alarms, max_news_alarms=max_news_alarms)
        log(f"document threshold: {json.dumps(doc_t['chosen'])} ({doc_t['chosen_because']}); "
            f"by pairs {json.dumps(doc_t['threshold_by_pairs'])}; wrote {output}")
        return
    if model is None and list_pairs is None:
        raise typer.BadParameter("--model is required (or --rechoose-from, --list-pairs)")
    import random

    import torch
    from sklearn.metrics import roc_auc_score

    from spacy_inconsistency.backends.nli import NLIBackend
    from spacy_inconsistency.corpora.behaviour import read_behaviour_suite
    from spacy_inconsistency.metrics.calibration import expected_calibration_error
    from spacy_inconsistency.alignment import FEATURE_NAMES
    from spacy_inconsistency.pair_score import LogisticModel, PairScoreModel, design_matrix, feature_names

    unknown = sorted(set(drop_feature) - set(FEATURE_NAMES))
    if unknown:
        raise typer.BadParameter(f"--drop-feature: no alignment feature {unknown} (there are {list(FEATURE_NAMES)})")
    torch.set_num_threads(threads)
    rng = random.Random(seed)
    backend = PairList() if list_pairs is not None else CachedNLI(NLIBackend(model, device="cpu", dtype=dtype), cache)
    records = read_behaviour_suite(suite, suite_pattern)
    log(f"{len(records)} dev suite records ({suite_pattern})")
    globs = [g.strip() for g in suite_pattern.split(",") if g.strip()]
    index_of = {r["id"]: n for n, r in enumerate(records)}
    records_by_glob = {g: [index_of[r["id"]] for r in read_behaviour_suite(suite, g)] for g in globs}
    parts = {"suite": suite_pairs(records, backend, max_all_pairs=max_all_pairs)}
    offset = 10_000_000
    for name, sources in NLI_HELDOUT.items():
        path = nli_dir / name
        if not path.exists():
            log(f"skipped (missing): {path}")
            continue
        rows = sample_rows(path, sources, per_source, rng)
        log(f"{name}: {len(rows)} rows")
        parts[name] = row_pairs(rows, backend, offset)
        offset += 10_000_000
    if news_negatives:
        news_fit = news_articles(true_dir, news_negatives, skip=calibration_news)
        log(f"{len(news_fit)} news articles as negatives")
        parts["news"] = news_pairs(news_fit, backend, max_all_pairs=max_all_pairs, group_offset=offset)
    backend.save()
    if list_pairs is not None:
        compared = DetectorPairs(backend, max_all_pairs=max_all_pairs)
        for text in news_articles(true_dir, calibration_news) if calibration_news else []:
            compared(text)
        list_pairs.parent.mkdir(parents=True, exist_ok=True)
        list_pairs.write_text(json.dumps([list(p) for p in backend.memory]), encoding="utf8")
        log(f"{len(backend.memory)} pairs -> {list_pairs}")
        return
    inputs = fit_inputs(parts, near_miss_weight=near_miss_weight)
    source, forward, backward, align = inputs["source"], inputs["forward"], inputs["backward"], inputs["align"]
    y, groups, w, suite_mask = inputs["label"], inputs["group"], inputs["weight"], inputs["suite"]
    results = {}
    models = {}
    oofs = {}
    fold_models = {}
    for key, with_alignment in (("full", True), ("nli_only", False)):
        every = feature_names(with_alignment)
        names = [n for n in every if n not in drop_feature and not (n.startswith("c_max*") and n[6:] in drop_feature)]
        X = design_matrix(forward, backward, align if with_alignment else None).astype(numpy.float64)
        X = X[:, [every.index(n) for n in names]]
        # Gated: the alignment features' own columns are held at zero, so they can only
        # raise or lower a pair through P(contradiction) (the c_max* interactions): an
        # antonym or two numbers in unrelated sentences are no evidence on their own.
        free = numpy.array([not (gated and name in FEATURE_NAMES) for name in names])
        X[:, ~free] = 0.0
        log(f"fitting {key}: {int(free.sum())} features, {len(y)} pairs, {int(y.sum())} contradictions")
        fitted, oof = fit_logistic(X, y, w, groups)
        fitted["coef"][~free] = 0.0
        oofs[key] = oof
        models[key] = LogisticModel(names, fitted["mean"].tolist(), fitted["scale"].tolist(),
                                    fitted["coef"].tolist(), fitted["intercept"])
        # Each fold's model and the dev records it did not see: the dev documents' out-of-fold
        # scores can then be had for pairs read later (calibrate_cascade.py), without this fit's data.
        suite_groups = groups[suite_mask]
        fold_models[key] = []
        for fold in fitted["folds"]:
            coef = fold["coef"].copy()
            coef[~free] = 0.0
            held = fold["held_out"][fold["held_out"] < suite_mask.sum()]  # the suite's rows come first
            fold_models[key].append({
                "model": LogisticModel(names, fitted["mean"].tolist(), fitted["scale"].tolist(),
                                       coef.tolist(), fold["intercept"]).to_dict(),
                "dev_records": sorted({records[int(g)]["id"] for g in numpy.unique(suite_groups[held])}),
            })
        per_source_auc = {}
        for i, name in enumerate(parts):
            m = source == i
            if len(numpy.unique(y[m])) == 2:
                per_source_auc[name] = float(roc_auc_score(y[m], oof[m]))
        doc = parts["suite"]["doc"]
        doc_ids = numpy.unique(doc)
        doc_scores = numpy.array([oof[suite_mask][doc == d].max() for d in doc_ids])
        doc_labels = (doc_ids % 2 == 0).astype(int)
        threshold, at = best_threshold(doc_scores, doc_labels)
        matched, by_files = matched_auc_by_files(doc_scores, doc_ids, records_by_glob)
        results[key] = {
            "C": fitted["C"], "oof_auc_by_source": per_source_auc,
            "oof_ece_suite_pairs": float(expected_calibration_error(y[suite_mask], oof[suite_mask])),
            "oof_dev_matched_auc": float(matched), "oof_dev_matched_auc_by_files": by_files, "threshold": threshold, "oof_dev_at_threshold": at,
        }
        log(f"{key}: {json.dumps(results[key], indent=1)}")
        order = numpy.argsort(-numpy.abs(fitted["coef"]))
        for k in order[:15]:
            log(f"   {names[k]:>30s} {fitted['coef'][k]:+.3f}")
    if baseline is not None:
        # The same table's dev documents scored by another fit: a refit over more dev records is
        # compared with it on records it never saw (and, in its favour, on its own).
        other = PairScoreModel.from_disk(baseline)
        doc = parts["suite"]["doc"]
        doc_ids = numpy.unique(doc)
        for key, with_alignment in (("full", True), ("nli_only", False)):
            base = other(forward[suite_mask], backward[suite_mask], align[suite_mask] if with_alignment else None)
            maxima = numpy.array([base[doc == d].max() for d in doc_ids])
            results[key]["baseline_dev_matched_auc_by_files"] = matched_auc_by_files(maxima, doc_ids, records_by_glob)[1]
            log(f"baseline {baseline} {key}: {json.dumps(results[key]['baseline_dev_matched_auc_by_files'])}")
    info = {
        "model": model, "pairs": int(len(y)), "contradictions": int(y.sum()), "near_miss_weight": near_miss_weight,
        "sources": {name: int(len(p["label"])) for name, p in parts.items()},
        "dev_suite_records": len(records), "suite_pattern": suite_pattern, "per_source": per_source, "seed": seed, "results": results,
        "gated": gated, "news_negatives": news_negatives, "out_of_fold": fold_models, "dropped_features": list(drop_feature),
    }
    threshold = results["full"]["threshold"]
    # The document threshold: pair scores of consistent documents are the news
    # negatives' out-of-fold scores; alpha is the largest that keeps the dev
    # controls' and the calibration articles' false alarms under their caps.
    doc = parts["suite"]["doc"]
    doc_ids = numpy.unique(doc)
    dev_max = {key: numpy.array([oofs[key][suite_mask][doc == d].max() for d in doc_ids]) for key in oofs}
    dev_pairs = numpy.array([(doc == d).sum() for d in doc_ids])
    dev_labels = doc_ids % 2 == 0
    cdfs = {}
    if "news" in parts:
        news_mask = source == list(parts).index("news")
        cdfs = {key: null_cdf(oofs[key][news_mask]) for key in oofs}
    scorer = PairScoreModel(models["full"], models["nli_only"], threshold=threshold)
    news_max = news_pairs_n = None
    if calibration_news:
        news = news_articles(true_dir, calibration_news)
        news_max, news_pairs_n = document_scores(news, backend, scorer, max_all_pairs=max_all_pairs)
        backend.save()
        allowed = int(numpy.floor(max_news_alarms * len(news_max)))
        ranked = numpy.sort(news_max)[::-1]
        cap = float(numpy.nextafter(numpy.float32(ranked[allowed]), numpy.float32(1))) if allowed < len(ranked) else 0.0
        info["calibration_news"] = {
            "articles": len(news_max), "max_share": max_news_alarms, "dev_threshold": threshold,
            "news_cap": cap, "flagged_at_dev_threshold": float((news_max >= threshold).mean()),
            "median_pairs": float(numpy.median(news_pairs_n)),
        }
        threshold = max(threshold, cap)
        info["calibration_news"]["flagged_at_threshold"] = float((news_max >= threshold).mean())
        log(f"news calibration: {json.dumps(info['calibration_news'])}")
    document_thresholds = {}
    if cdfs:
        from spacy_inconsistency.pair_score import DocumentThreshold

        table = []
        for alpha in numpy.round(numpy.arange(0.01, 0.301, 0.01), 2):
            rule = DocumentThreshold(cdfs["full"], alpha=float(alpha), floor=min_threshold)
            flags = flagged(dev_max["full"], dev_pairs, rule)
            row = {"alpha": float(alpha), "dev_recall": float(flags[dev_labels].mean()),
                   "dev_false_alarms": float(flags[~dev_labels].mean())}
            if len(records_by_glob) > 1:
                row["dev_false_alarms_by_files"] = {
                    glob: float(flags[~dev_labels & numpy.isin(doc_ids // 2, rows)].mean())
                    for glob, rows in records_by_glob.items()}
            if news_max is not None:
                row["news_flagged"] = float(flagged(news_max, news_pairs_n, rule).mean())
            table.append(row)
        chosen, why = choose_alpha(table, max_dev_false_alarms=max_dev_false_alarms, max_news_alarms=max_news_alarms)
        for row in table:
            log(f"  document threshold {json.dumps(row)}")
        document_thresholds = {key: DocumentThreshold(cdf, alpha=chosen["alpha"], floor=min_threshold) for key, cdf in cdfs.items()}
        info["document_threshold"] = {
            "chosen": chosen, "chosen_because": why, "by_alpha": table, "floor": min_threshold, "null_pairs": int(news_mask.sum()),
            "threshold_by_pairs": thresholds_by_pairs(document_thresholds["full"]),
        }
        log(f"document threshold: {json.dumps(info['document_threshold']['chosen'])}; "
            f"by pairs {json.dumps(info['document_threshold']['threshold_by_pairs'])}")
    info["threshold"] = threshold
    scorer = PairScoreModel(models["full"], models["nli_only"], threshold=threshold,
                            document_thresholds=document_thresholds, info=info)
    output.parent.mkdir(parents=True, exist_ok=True)
    scorer.to_disk(output)
    log(f"wrote {output}")


if __name__ == "__main__":
    typer.run(main)
