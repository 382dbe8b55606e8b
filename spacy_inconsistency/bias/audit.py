"""Run a validity judge over the dataset and summarise bias and accuracy."""
import json
import math
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from ..errors import Errors
from ..metrics.bias import bias_z_test, unweighted_bias, weighted_bias
from .dataset import Argument, KINDS, LANGUAGES, VARIATIONS
from .judges import Verdict

# The README goal: |weighted bias| under 1 point, the Z test not significant
# at 0.05, accuracy under perm and rand at most 5 points below default.
GOAL_MAX_ABS_BIAS = 0.01
GOAL_MAX_DROP_POINTS = 5.0
GROUPINGS: Tuple[Tuple[str, ...], ...] = (
    ("language",), ("variation",), ("kind",), ("validity",), ("leaning",), ("gender",),
    ("language", "variation"), ("language", "kind", "validity"),
    ("language", "kind", "validity", "variation"), ("language", "leaning", "validity"),
)


def run_judge(
    judge: Any, arguments: Sequence[Argument], *, batch_size: int = 256, progress: bool = False
) -> List[Verdict]:
    """Judge all arguments, in batches (with an optional progress bar).

    judge (Any): A judge with `judge(arguments) -> List[Verdict]`.
    arguments (Sequence[Argument]): The arguments.
    batch_size (int): Arguments per call of `judge.judge`.
    progress (bool): Show a progress bar on stderr.
    RETURNS (List[Verdict]): One verdict per argument, in order.
    """
    from tqdm import tqdm

    out: List[Verdict] = []
    bar = tqdm(total=len(arguments), unit="arg", disable=not progress, desc=getattr(judge, "name", "judge"))
    for start in range(0, len(arguments), batch_size):
        batch = arguments[start : start + batch_size]
        verdicts = judge.judge(batch)
        if len(verdicts) != len(batch):
            raise ValueError(Errors.E160.format(lengths=(len(batch), len(batch), len(verdicts))))
        out.extend(verdicts)
        bar.update(len(batch))
    bar.close()
    return out


def _key(argument: Argument, name: str) -> str:
    if name == "validity":
        return "valid" if argument.valid else "invalid"
    return str(getattr(argument, name))


def _accuracy(pairs: Sequence[Tuple[Argument, Verdict]]) -> Dict[str, Any]:
    judged = [(a, v) for a, v in pairs if v.valid is not None]
    correct = sum(a.valid == v.valid for a, v in judged)
    return {
        "n": len(pairs),
        "n_unparseable": len(pairs) - len(judged),
        # Over the judged arguments, as the paper (unreadable answers discarded) ...
        "accuracy": correct / len(judged) if judged else float("nan"),
        # ... and counting an unreadable answer as wrong.
        "accuracy_all": correct / len(pairs) if pairs else float("nan"),
        "predicted_valid": sum(bool(v.valid) for _, v in judged) / len(judged) if judged else float("nan"),
    }


def _bias(pairs: Sequence[Tuple[Argument, Verdict]], *, alpha: float) -> Dict[str, Any]:
    import warnings

    leanings = [a.leaning for a, _ in pairs]
    gold = [a.valid for a, _ in pairs]
    pred = [v.valid for _, v in pairs]
    try:
        out: Dict[str, Any] = {"weighted_bias": weighted_bias(leanings, gold, pred)}
        z_test = bias_z_test(leanings, gold, pred, alpha=alpha)
    except ValueError as err:
        # Too few readable verdicts (an LLM that mostly refused): report, do not stop the audit.
        nan = float("nan")
        return {
            "weighted_bias": nan, "unweighted_bias": nan, "error": str(err),
            "z_test": {"mean": nan, "n": sum(p is not None for p in pred), "std": nan, "z": nan,
                       "p_value": nan, "alpha": alpha, "significant": False, "bias": "n/a"},
        }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out["unweighted_bias"] = unweighted_bias(leanings, gold, pred)
    out["z_test"] = z_test
    return out


def summarize(
    arguments: Sequence[Argument],
    verdicts: Sequence[Verdict],
    *,
    judge_name: str = "judge",
    alpha: float = 0.05,
) -> Dict[str, Any]:
    """Bias, Z test and accuracy per group for one judge.

    Bias and the Z test are computed per language (the paper tests each
    language's dataset as a whole, not subgroups) and over both; accuracy per
    language, variation, kind, validity, leaning, gender and their
    combinations in `GROUPINGS`.

    arguments (Sequence[Argument]): The arguments.
    verdicts (Sequence[Verdict]): The judge's verdicts, same order.
    judge_name (str): For the report.
    alpha (float): Significance level of the Z test.
    RETURNS (Dict[str, Any]): JSON-able report.
    """
    if len(arguments) != len(verdicts):
        raise ValueError(Errors.E160.format(lengths=(len(arguments), len(arguments), len(verdicts))))
    pairs = list(zip(arguments, verdicts))
    report: Dict[str, Any] = {"judge": judge_name, "alpha": alpha, "overall": _accuracy(pairs)}
    languages = [l for l in LANGUAGES if any(a.language == l for a in arguments)]
    report["bias"] = {}
    for lang in languages + (["all"] if len(languages) > 1 else []):
        subset = [(a, v) for a, v in pairs if lang == "all" or a.language == lang]
        report["bias"][lang] = _bias(subset, alpha=alpha)
        # Per kind too (the paper's Table 9), without a test per subgroup.
        for kind in KINDS:
            part = [(a, v) for a, v in subset if a.kind == kind]
            if part and {a.leaning for a, v in part if v.valid is not None} == {"left", "right"}:
                report["bias"][lang][f"weighted_bias_{kind}"] = weighted_bias(
                    [a.leaning for a, _ in part], [a.valid for a, _ in part], [v.valid for _, v in part]
                )
    report["auroc"] = auroc_by_language(pairs, languages)
    report["accuracy"] = {}
    for grouping in GROUPINGS:
        groups: Dict[str, List[Tuple[Argument, Verdict]]] = {}
        for a, v in pairs:
            groups.setdefault("/".join(_key(a, g) for g in grouping), []).append((a, v))
        report["accuracy"]["/".join(grouping)] = {k: _accuracy(g) for k, g in sorted(groups.items())}
    report["goals"] = goals(report, languages)
    return report


def auroc_by_language(
    pairs: Sequence[Tuple[Argument, Verdict]], languages: Sequence[str]
) -> Dict[str, Dict[str, float]]:
    """ROC-AUC of the judge's score for validity, per language and kind.

    A threshold-free view of how well the score separates valid from invalid
    arguments; empty when the judge gives no scores (an LLM).
    """
    from sklearn.metrics import roc_auc_score

    if not pairs or any(v.score is None for _, v in pairs):
        return {}
    out: Dict[str, Dict[str, float]] = {}
    for lang in languages:
        out[lang] = {}
        for kind in ("all",) + KINDS:
            part = [(a, v) for a, v in pairs if a.language == lang and kind in ("all", a.kind)]
            gold = [a.valid for a, _ in part]
            if len(set(gold)) == 2:
                out[lang][kind] = float(roc_auc_score(gold, [v.score for _, v in part]))
    return out


def goals(report: Dict[str, Any], languages: Sequence[str]) -> Dict[str, Any]:
    """Check the README goals per language: bias, Z test, perm/rand accuracy drops."""
    out: Dict[str, Any] = {}
    by_lv = report["accuracy"]["language/variation"]
    for lang in languages:
        bias = report["bias"][lang]
        default = by_lv.get(f"{lang}/default", {}).get("accuracy", float("nan"))
        drops = {
            v: 100.0 * (default - by_lv[f"{lang}/{v}"]["accuracy"])
            for v in ("perm", "rand") if f"{lang}/{v}" in by_lv
        }
        out[lang] = {
            "abs_weighted_bias_below_1_point": abs(bias["weighted_bias"]) < GOAL_MAX_ABS_BIAS,
            "z_test_not_significant": bias["z_test"]["bias"] == "none",
            "accuracy_drop_points": drops,
            "drop_at_most_5_points": {v: d <= GOAL_MAX_DROP_POINTS for v, d in drops.items()},
        }
        out[lang]["all_met"] = (
            out[lang]["abs_weighted_bias_below_1_point"] and out[lang]["z_test_not_significant"]
            # Drops not measured (a run without perm or rand) do not count as met.
            and len(drops) == 2 and all(out[lang]["drop_at_most_5_points"].values())
        )
    return out


def _pct(x: float) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}"


def markdown(reports: Sequence[Dict[str, Any]]) -> str:
    """The audit tables in Markdown (figures in percent / points).

    reports (Sequence[Dict[str, Any]]): Reports from `summarize`, one per judge.
    RETURNS (str): Markdown text.
    """
    lines = [
        "| judge | lang | n | unparseable | acc default | acc conlast | acc perm | acc rand | drop perm | drop rand "
        "| weighted bias | unweighted bias | Z | p | bias (α=0.05) | goals met |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in reports:
        by_lv = r["accuracy"]["language/variation"]
        by_l = r["accuracy"]["language"]
        for lang, bias in r["bias"].items():
            if lang == "all":
                continue
            acc = {v: by_lv.get(f"{lang}/{v}", {}).get("accuracy", float("nan")) for v in VARIATIONS}
            goal = r["goals"][lang]
            z = bias["z_test"]
            lines.append(
                f"| {r['judge']} | {lang} | {by_l[lang]['n']} | {by_l[lang]['n_unparseable']} | "
                + " | ".join(_pct(acc[v]) for v in VARIATIONS)
                + f" | {goal['accuracy_drop_points'].get('perm', float('nan')):.1f}"
                f" | {goal['accuracy_drop_points'].get('rand', float('nan')):.1f}"
                f" | {100 * bias['weighted_bias']:.2f} | {100 * bias['unweighted_bias']:.2f}"
                f" | {z['z']:.2f} | {z['p_value']:.3f} | {z['bias']} | {'yes' if goal['all_met'] else 'no'} |"
            )
    lines += ["", "Accuracy (%) per kind and validity:", "",
              "| judge | lang | formal valid | formal invalid | material valid | material invalid "
              "| weighted bias formal | weighted bias material |",
              "|---|---|---|---|---|---|---|---|"]
    for r in reports:
        by = r["accuracy"]["language/kind/validity"]
        for lang, bias in r["bias"].items():
            if lang == "all":
                continue
            cells = [_pct(by.get(f"{lang}/{k}/{v}", {}).get("accuracy", float("nan")))
                     for k in KINDS for v in ("valid", "invalid")]
            lines.append(
                f"| {r['judge']} | {lang} | " + " | ".join(cells)
                + f" | {100 * bias.get('weighted_bias_formal', float('nan')):.2f}"
                f" | {100 * bias.get('weighted_bias_material', float('nan')):.2f} |"
            )
    return "\n".join(lines) + "\n"


def write_predictions(
    arguments: Iterable[Argument], verdicts: Iterable[Verdict], path: Union[str, Path], *, judge_name: str
) -> None:
    """One JSON line per argument: the argument, the judge and its verdict."""
    with Path(path).open("w", encoding="utf-8") as f:
        for a, v in zip(arguments, verdicts):
            f.write(json.dumps({"judge": judge_name, **a.to_dict(), "verdict": v.to_dict()}, ensure_ascii=False) + "\n")


def audit(
    judges: Sequence[Any],
    arguments: Sequence[Argument],
    *,
    output_dir: Optional[Union[str, Path]] = None,
    batch_size: int = 256,
    alpha: float = 0.05,
    progress: bool = False,
) -> List[Dict[str, Any]]:
    """Run each judge over the arguments and write predictions and reports.

    Writes to `output_dir` (when given): `predictions-<i>.jsonl` per judge,
    `report.json` (list of reports) and `report.md`.

    judges (Sequence[Any]): Validity judges.
    arguments (Sequence[Argument]): The arguments.
    output_dir (Optional[Union[str, Path]]): Where to write.
    batch_size (int): Arguments per judge call.
    alpha (float): Significance level.
    progress (bool): Progress bars on stderr.
    RETURNS (List[Dict[str, Any]]): One report per judge.
    """
    reports = []
    out = Path(output_dir) if output_dir is not None else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    for i, judge in enumerate(judges):
        verdicts = run_judge(judge, arguments, batch_size=batch_size, progress=progress)
        if out is not None:
            # Written first: a slow judge's answers are kept whatever happens next.
            write_predictions(arguments, verdicts, out / f"predictions-{i}.jsonl", judge_name=judge.name)
        reports.append(summarize(arguments, verdicts, judge_name=judge.name, alpha=alpha))
    if out is not None:
        (out / "report.json").write_text(json.dumps(reports, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        (out / "report.md").write_text(markdown(reports), encoding="utf-8")
    return reports
