"""One summary table (markdown + JSON) and a plot from the `evaluate` workflow's outputs.

Reads what `evaluate-behaviour`, `evaluate-documents` and `detect-examples`
(and `evaluate-behaviour-test2` / `-test3` where they ran) wrote to metrics/ and prints the headline figures with their targets:

    python scripts/summarize_evaluation.py --metrics metrics
"""
import json
from pathlib import Path
from typing import Any, Dict, List, Optional

import typer

# Targets of the detection-quality issue (docs/detection.md).
TARGETS = {
    "recall": ">= 0.90",
    "pair_hits": ">= 0.85",
    "false_alarms": "<= 0.10",
    "matched_auc": ">= 0.90",
    "contradoc_auc": ">= 0.75",
    "news_flagged": "<= 0.03",
}


def read_json(path: Path) -> Optional[Dict[str, Any]]:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _with_interval(entry: Dict[str, Any], key: str, row: Dict[str, Any]) -> Dict[str, Any]:
    """The row, with the matched AUC's bootstrap interval when the metrics file has one."""
    if key == "matched_auc" and entry.get("matched_auc_interval"):
        row["interval"] = list(entry["matched_auc_interval"])
    return row


def summarize(metrics: Path) -> Dict[str, Any]:
    """The headline figures from the files under `metrics`; a missing file leaves its rows out."""
    summary: Dict[str, Any] = {"rows": [], "by_capability": {}, "missing": []}
    rows: List[Dict[str, Any]] = summary["rows"]
    behaviour = read_json(metrics / "behaviour_test.json")
    if behaviour is None:
        summary["missing"].append(str(metrics / "behaviour_test.json"))
    else:
        split = behaviour["settings"]["split"]
        n = behaviour["all"]["n"]
        for key, label in [("recall", "recall (documents flagged)"), ("pair_hits", "pair hits (the right pair flagged)"),
                           ("false_alarms", "false alarms on near-miss controls"),
                           ("matched_auc", "matched-pair AUC (contradiction vs its control)")]:
            rows.append(_with_interval(behaviour["all"], key, {"set": f"behaviour suite, {split} ({n} pairs)", "figure": label,
                                                               "key": key, "value": behaviour["all"][key], "target": TARGETS[key]}))
        summary["by_capability"] = {
            name: {k: entry[k] for k in ("n", "recall", "false_alarms", "matched_auc")}
            for name, entry in behaviour["by_capability"].items()
        }
    # The second and third test splits (`evaluate-behaviour-test2`, `-test3`, in `evaluate-all`): optional here.
    for name in ("test2", "test3"):
        other = read_json(metrics / f"behaviour_{name}.json")
        if other is None:
            continue
        n = other["all"]["n"]
        for key, label in [("recall", "recall (documents flagged)"), ("false_alarms", "false alarms on near-miss controls"),
                           ("matched_auc", "matched-pair AUC (contradiction vs its control)")]:
            rows.append(_with_interval(other["all"], key, {"set": f"behaviour suite, {other['settings']['split']} ({n} pairs)",
                                                           "figure": label, "key": f"{name}_{key}",
                                                           "value": other["all"][key], "target": TARGETS[key]}))
    documents = read_json(metrics / "documents.json")
    if documents is None:
        summary["missing"].append(str(metrics / "documents.json"))
    else:
        learned = documents["by_aggregation"]["learned"]
        decision = learned["thresholds"]["document"]
        where = f"ContraDoc ({documents['contradoc_docs']} documents)"
        rows.append({"set": where, "figure": "ROC-AUC of the document score", "key": "contradoc_auc",
                     "value": learned["contradoc_auc"], "target": TARGETS["contradoc_auc"]})
        rows.append({"set": where, "figure": "contradictory documents flagged", "key": "contradoc_flagged",
                     "value": decision["contradoc_flagged_positive"], "target": ""})
        rows.append({"set": f"news ({documents['news_docs']} XSum articles)", "figure": "articles flagged (false alarms)",
                     "key": "news_flagged", "value": decision["news_flagged"], "target": TARGETS["news_flagged"]})
    examples = metrics / "example_findings.jsonl"
    if not examples.is_file():
        summary["missing"].append(str(examples))
    else:
        records = [json.loads(line) for line in examples.read_text(encoding="utf-8").splitlines() if line.strip()]
        flagged = sum(bool(r.get("has_inconsistency")) for r in records)
        rows.append({"set": f"examples/ ({len(records)} documents)", "figure": "documents flagged", "key": "examples_flagged",
                     "value": flagged, "target": ""})
    return summary


def to_markdown(summary: Dict[str, Any]) -> str:
    lines = ["# Evaluation of the default detector", "", "| set | figure | value | target |", "|---|---|---|---|"]
    for row in summary["rows"]:
        value = row["value"]
        shown = f"{value:.3f}" if isinstance(value, float) else str(value)
        if row.get("interval"):
            shown += " (95% interval {:.3f}-{:.3f})".format(*row["interval"])
        lines.append(f"| {row['set']} | {row['figure']} | {shown} | {row['target']} |")
    if summary["by_capability"]:
        lines += ["", "| capability | n | recall | false alarms | matched AUC |", "|---|---|---|---|---|"]
        for name, entry in summary["by_capability"].items():
            lines.append(f"| {name} | {entry['n']} | {entry['recall']:.2f} | {entry['false_alarms']:.2f} | "
                         f"{entry['matched_auc']:.2f} |")
    if summary["missing"]:
        lines += ["", "Not measured (file missing): " + ", ".join(summary["missing"])]
    return "\n".join(lines) + "\n"


def plot(summary: Dict[str, Any], path: Path) -> bool:
    """A bar chart of recall, false alarms and matched AUC per capability; False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    caps = summary["by_capability"]
    if not caps:
        return False
    names = list(caps)
    fig, ax = plt.subplots(figsize=(max(6, len(names) * 0.9), 4))
    width = 0.27
    for i, (key, label) in enumerate([("recall", "recall"), ("false_alarms", "false alarms"),
                                      ("matched_auc", "matched AUC")]):
        ax.bar([x + (i - 1) * width for x in range(len(names))], [caps[n][key] for n in names], width, label=label)
    ax.axhline(0.5, color="grey", linewidth=0.8, linestyle=":")
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=30, ha="right")
    ax.set_ylim(0, 1)
    ax.set_title("Behavioural suite per capability (default detector)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def main(
    metrics: Path = typer.Option(Path("metrics"), help="Folder with the evaluate workflow's outputs."),
) -> None:
    summary = summarize(metrics)
    if not summary["rows"]:
        typer.echo(f"error: nothing to summarize in {metrics}; run `spacy project run evaluate` first", err=True)
        raise typer.Exit(1)
    markdown = to_markdown(summary)
    (metrics / "summary.md").write_text(markdown, encoding="utf-8")
    (metrics / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    typer.echo(markdown)
    if plot(summary, metrics / "summary.png"):
        typer.echo(f"Plot: {metrics / 'summary.png'}")
    else:
        typer.echo("No plot (needs matplotlib: pip install -e '.[plot]').")
    typer.echo(f"Summary: {metrics / 'summary.md'}, {metrics / 'summary.json'}")


if __name__ == "__main__":
    typer.run(main)
