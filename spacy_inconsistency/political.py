"""The evaluation protocol of the political inconsistency benchmark (Section 6).

Seed: ``political-inconsistency-benchmark.txt``. For a sample with N
annotations, each annotation in turn is held out: the other N-1 give the
majority label (ties broken at random, seeded), the "ground truth", and the
held-out one is an individual human's prediction. A model's prediction for
the sample is compared with all N ground truths, so humans and models are
scored on the same N x M (ground truth, prediction) pairs, pooled, with
one-vs-rest MCC per class. The upper bound re-samples each N-1 tuple 10 times
with replacement and scores the bootstrapped majorities against that tuple's
majority. Krippendorff's alpha is ordinal over the 5-class scale and nominal
over 3 classes.
"""
import ast
import csv
import random
import statistics
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from .errors import Errors
from .metrics.agreement import krippendorff_alpha, majority_label
from .metrics.classification import mcc_per_class

UNRELATED = "Unrelated"
CONSISTENT = "Consistent"
INDIRECT = "Indirect inconsistency"
FACTUAL = "Factual inconsistency"
SURFACE = "Surface contradiction"
INCONSISTENT = "Inconsistent"

# The annotators' scale, "in growing order" (Appendix), used for ordinal alpha.
LABELS_5 = [UNRELATED, CONSISTENT, INDIRECT, FACTUAL, SURFACE]
LABELS_3 = [UNRELATED, CONSISTENT, INCONSISTENT]

# The published 5-run predictions in df_gold.csv and the paper's rows.
MODEL_RUN_COLUMNS = {
    "ChatGPT-4 turbo": "ChatGPT-4 5 runs",
    "LLaMA 70B": "LLaMA 70B 5 runs",
    "ChatGPT-3.5 turbo": "ChatGPT-3.5 5 runs",
    "LLaMA 8B": "LLaMA 8B 5 runs",
}

# The published majority of those runs (the paper's own draw of the tie-breaks).
MODEL_MAJORITY_COLUMNS = {
    "ChatGPT-4 turbo": {5: "ChatGPT-4 majority 5 classes", 3: "ChatGPT-4 majority 3 classes"},
    "LLaMA 70B": {5: "Llama 70B majority 5 classes", 3: "LLaMA 70B majority 3 classes"},
    "ChatGPT-3.5 turbo": {5: "ChatGPT-3.5 majority 5 classes", 3: "ChatGPT-3.5 majority 3 classes"},
    "LLaMA 8B": {5: "Llama 8B majority 5 classes", 3: "LLaMA 8B majority 3 classes"},
}

HUMANS = "Humans"
BOOTSTRAP = "Bootstrap humans"


def to_3_classes(label: str) -> str:
    """Map a 5-class label to 3 classes (every inconsistency type -> Inconsistent).

    label (str): A 5-class (or already 3-class) label.
    RETURNS (str): Unrelated, Consistent or Inconsistent.
    """
    if label in (UNRELATED, CONSISTENT, INCONSISTENT):
        return label
    if label in (INDIRECT, FACTUAL, SURFACE):
        return INCONSISTENT
    raise ValueError(Errors.E142.format(label=label, labels=LABELS_5))


def _mapper(n_classes: int) -> Callable[[str], str]:
    if n_classes == 5:
        return _check_5
    if n_classes == 3:
        return to_3_classes
    raise ValueError(Errors.E006.format(name="n_classes", expected="3 or 5", value=n_classes))


def _check_5(label: str) -> str:
    if label not in LABELS_5:
        raise ValueError(Errors.E142.format(label=label, labels=LABELS_5))
    return label


def _parse_list(value: str, *, row: int, column: str) -> List[str]:
    try:
        items = ast.literal_eval(value)
    except (ValueError, SyntaxError) as err:
        raise ValueError(Errors.E143.format(row=row, column=column, value=value[:80])) from err
    if not isinstance(items, (list, tuple)) or not items:
        raise ValueError(Errors.E143.format(row=row, column=column, value=value[:80]))
    return [str(x).strip() for x in items]


def split_input(text: str) -> List[str]:
    """Split the benchmark's "Text 1: ... Text 2: ..." field into the two texts.

    text (str): The `Input` column.
    RETURNS (List[str]): [text 1, text 2], stripped.
    """
    head, sep, tail = text.partition("Text 2:")
    if not sep or "Text 1:" not in head:
        raise ValueError(Errors.E144.format(value=text[:80]))
    return [head.split("Text 1:", 1)[1].strip(), tail.strip()]


def read_political(path: Union[str, Path]) -> List[Dict[str, Any]]:
    """Read df_gold.csv into plain records.

    path (Union[str, Path]): The CSV file, or a directory holding df_gold.csv.
    RETURNS (List[Dict[str, Any]]): Per sample: `text_a`, `text_b`,
        `label_5`, `label_3` (published majority labels), `annotations`
        (every annotator's 5-class label), `runs` ({model: [5 labels]}) and
        `majority` ({model: {5: label, 3: label}}, the published majorities).
    """
    path = Path(path)
    if path.is_dir():
        path = path / "df_gold.csv"
    if not path.is_file():
        raise FileNotFoundError(Errors.E145.format(path=path))
    records = []
    with path.open(encoding="utf-8", newline="") as f:
        for i, row in enumerate(csv.DictReader(f)):
            text_a, text_b = split_input(row["Input"])
            annotations = [_check_5(x) for x in _parse_list(row["All answers"], row=i, column="All answers")]
            runs = {}
            for model, column in MODEL_RUN_COLUMNS.items():
                if column in row and row[column]:
                    runs[model] = [_check_5(x) for x in _parse_list(row[column], row=i, column=column)]
            majority = {}
            for model, columns in MODEL_MAJORITY_COLUMNS.items():
                if all(row.get(c) for c in columns.values()):
                    majority[model] = {5: _check_5(row[columns[5]].strip()), 3: to_3_classes(row[columns[3]].strip())}
            records.append({
                "text_a": text_a, "text_b": text_b,
                "label_5": row["Answer_5_classes"], "label_3": row["Answer_3_classes"],
                "annotations": annotations, "runs": runs, "majority": majority,
            })
    return records


def leave_one_out(
    annotations: Sequence[Sequence[str]],
    *,
    n_classes: int,
    rng: random.Random,
) -> Dict[str, List[Any]]:
    """The N x M (ground truth, held-out human) pairs of the protocol.

    Labels are mapped to the class set first, so in 3 classes the majority is
    taken over Unrelated / Consistent / Inconsistent votes.

    annotations (Sequence[Sequence[str]]): Per sample, all its 5-class labels.
    n_classes (int): 5 or 3.
    rng (random.Random): Tie-break source.
    RETURNS (Dict[str, List[Any]]): `truth`, `human` and `sample` (the
        index of the sample each pair belongs to), aligned.
    """
    mapped = _mapper(n_classes)
    truth: List[str] = []
    human: List[str] = []
    sample: List[int] = []
    for i, labels in enumerate(annotations):
        labels = [mapped(x) for x in labels]
        if len(labels) < 2:
            raise ValueError(Errors.E146.format(index=i, n=len(labels)))
        for j in range(len(labels)):
            truth.append(majority_label(labels[:j] + labels[j + 1:], rng))
            human.append(labels[j])
            sample.append(i)
    return {"truth": truth, "human": human, "sample": sample}


def bootstrap_upper_bound(
    annotations: Sequence[Sequence[str]],
    *,
    n_classes: int,
    rng: random.Random,
    n_resamples: int = 10,
) -> Dict[str, float]:
    """The bootstrap upper bound: simulated annotators against each N-1 majority.

    Each N-1 tuple is resampled with replacement `n_resamples` times; the
    majority of each resample is a prediction of the tuple's own majority.
    (The paper's text names the held-out annotation as the ground truth, but
    its Tables 3/4 are only reproduced when the tuple's majority is; scoring
    against the held-out label gives figures below the humans' own, e.g.
    0.45 for Unrelated, which cannot be an upper bound.)

    annotations (Sequence[Sequence[str]]): Per sample, all its 5-class labels.
    n_classes (int): 5 or 3.
    rng (random.Random): Source of resamples and tie-breaks.
    n_resamples (int): Resamples per N-1 tuple (10 in the paper).
    RETURNS (Dict[str, float]): MCC per class.
    """
    mapped = _mapper(n_classes)
    truth: List[str] = []
    pred: List[str] = []
    for labels in annotations:
        labels = [mapped(x) for x in labels]
        for j in range(len(labels)):
            rest = labels[:j] + labels[j + 1:]
            gold = majority_label(rest, rng)
            for _ in range(n_resamples):
                pred.append(majority_label([rng.choice(rest) for _ in rest], rng))
                truth.append(gold)
    return mcc_per_class(truth, pred, LABELS_5 if n_classes == 5 else LABELS_3)


def evaluate_protocol(
    annotations: Sequence[Sequence[str]],
    predictions: Dict[str, Sequence[Union[str, Sequence[str]]]],
    *,
    n_classes: int,
    seed: int = 0,
    bootstrap: bool = True,
) -> Dict[str, Dict[str, float]]:
    """Per-class MCC of held-out humans and of models under the paper's protocol.

    annotations (Sequence[Sequence[str]]): Per sample, all its 5-class labels.
    predictions (Dict[str, Sequence]): Per model, per sample either one label
        or a list of runs (their majority is taken, ties at random).
    n_classes (int): 5 or 3.
    seed (int): Seeds every tie-break and resample (one stream per row).
    bootstrap (bool): Also compute the bootstrap upper bound.
    RETURNS (Dict[str, Dict[str, float]]): Row name -> class -> MCC; rows
        "Humans", each model, and "Bootstrap humans".
    """
    mapped = _mapper(n_classes)
    classes = LABELS_5 if n_classes == 5 else LABELS_3
    per_sample: Dict[str, List[str]] = {}
    for name, preds in predictions.items():
        if len(preds) != len(annotations):
            raise ValueError(Errors.E140.format(n_true=len(annotations), n_pred=len(preds)))
        # One random stream per row, so that adding a model changes no other row.
        rng = random.Random(f"{seed}:{name}")
        labels = []
        for p in preds:
            if isinstance(p, str):
                labels.append(mapped(p))
            else:
                labels.append(majority_label([mapped(x) for x in p], rng))
        per_sample[name] = labels
    pairs = leave_one_out(annotations, n_classes=n_classes, rng=random.Random(f"{seed}:{HUMANS}"))
    rows = {HUMANS: mcc_per_class(pairs["truth"], pairs["human"], classes)}
    for name, labels in per_sample.items():
        rows[name] = mcc_per_class(pairs["truth"], [labels[i] for i in pairs["sample"]], classes)
    if bootstrap:
        rows[BOOTSTRAP] = bootstrap_upper_bound(annotations, n_classes=n_classes,
                                                rng=random.Random(f"{seed}:{BOOTSTRAP}"))
    return rows


def agreement(
    annotations: Sequence[Sequence[str]],
    *,
    seed: int = 0,
    max_annotators: Optional[int] = 5,
) -> Dict[str, float]:
    """Krippendorff's alpha: ordinal over the 5-class scale, nominal over 3 classes.

    annotations (Sequence[Sequence[str]]): Per sample, all its 5-class labels.
    seed (int): Seed of the subsampling.
    max_annotators (Optional[int]): As in the paper, samples with more labels
        keep this many, drawn at random; None keeps all.
    RETURNS (Dict[str, float]): {"5": alpha, "3": alpha}.
    """
    rng = random.Random(seed)
    kept = [
        rng.sample(list(labels), max_annotators)
        if max_annotators is not None and len(labels) > max_annotators else list(labels)
        for labels in annotations
    ]
    return {
        "5": krippendorff_alpha(kept, LABELS_5, level="ordinal"),
        "3": krippendorff_alpha([[to_3_classes(x) for x in k] for k in kept], LABELS_3, level="nominal"),
    }


def _summarise(runs: List[Dict[str, Dict[str, float]]]) -> Dict[str, Dict[str, Dict[str, float]]]:
    out: Dict[str, Dict[str, Dict[str, float]]] = {}
    for row in runs[0]:
        out[row] = {}
        for cls in runs[0][row]:
            values = [r[row][cls] for r in runs]
            out[row][cls] = {
                "mean": statistics.fmean(values),
                "sd": statistics.pstdev(values) if len(values) > 1 else 0.0,
                "min": min(values), "max": max(values),
            }
    return out


def protocol_tables(
    records: Sequence[Dict[str, Any]],
    *,
    seeds: Sequence[int] = tuple(range(10)),
    models: Optional[Sequence[str]] = None,
    model_majority: str = "published",
    extra_predictions: Optional[Dict[str, Sequence[str]]] = None,
    progress: Optional[Callable[[int], None]] = None,
) -> Dict[str, Any]:
    """The benchmark's two tables (per-class MCC in 3 and 5 classes) and the alphas, over seeds.

    The rows are the held-out humans, the bootstrap upper bound, the
    published LLM runs and any `extra_predictions` (e.g. our classifier's),
    all scored on the same pairs. One draw of the random tie-breaks is what
    a single run reports; the spread over seeds (about 0.005-0.01 MCC) shows
    how much of any difference is chance. The comparison with the paper's
    printed Tables 3 and 4 lives in `reproductions/political/`.

    records (Sequence[Dict]): From `read_political`.
    seeds (Sequence[int]): One full protocol run per seed.
    models (Optional[Sequence[str]]): Published models to score (all by default).
    model_majority (str): "published": the majority labels in df_gold.csv,
        i.e. the paper's own random tie-breaks of the 5 runs (3-class ones
        taken over runs mapped to 3 classes); "recompute": the majority of
        the runs with ties drawn anew for every seed.
    extra_predictions (Optional[Dict[str, Sequence[str]]]): More rows, e.g.
        our classifier's cross-validated prediction per sample.
    progress (Optional[Callable[[int], None]]): Called after each seed.
    RETURNS (Dict[str, Any]): `table_3` / `table_4` (`n_classes`, the rows of
        the first seed, and `over_seeds`: mean, sd, min, max per row and
        class), `alpha` (first seed, mean over seeds, all annotations).
    """
    if model_majority not in ("published", "recompute"):
        raise ValueError(Errors.E006.format(name="model_majority", expected="'published' or 'recompute'",
                                            value=model_majority))
    annotations = [r["annotations"] for r in records]
    source = "runs" if model_majority == "recompute" else "majority"
    names = list(models) if models is not None else [m for m in MODEL_RUN_COLUMNS if all(m in r[source] for r in records)]
    result: Dict[str, Any] = {"n_samples": len(records), "n_pairs": sum(len(a) for a in annotations),
                              "seeds": list(seeds), "model_majority": model_majority}
    for n_classes, key in ((3, "table_3"), (5, "table_4")):
        if model_majority == "recompute":
            predictions: Dict[str, Sequence[Any]] = {m: [r["runs"][m] for r in records] for m in names}
        else:
            predictions = {m: [r["majority"][m][n_classes] for r in records] for m in names}
        predictions.update(extra_predictions or {})
        runs = []
        for seed in seeds:
            runs.append(evaluate_protocol(annotations, predictions, n_classes=n_classes, seed=seed))
            if progress is not None:
                progress(1)
        result[key] = {"n_classes": n_classes, "first_seed": runs[0], "over_seeds": _summarise(runs)}
    alphas = [agreement(annotations, seed=s) for s in seeds]
    result["alpha"] = {
        "first_seed": alphas[0],
        "mean": {k: statistics.fmean(a[k] for a in alphas) for k in ("5", "3")},
        "all_annotations": agreement(annotations, max_annotators=None),
    }
    return result
