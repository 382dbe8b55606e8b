"""Tables 3 and 4 and Krippendorff's alpha of the political inconsistency benchmark, from its
published LLM runs and held-out human annotations, beside the paper's printed values.

The protocol (leave-one-annotator-out majorities, per-class MCC, the bootstrap upper bound)
is the package's own (`spacy_inconsistency.political.protocol_tables`, also used to score our
classifier); this script only adds the paper's numbers (`paper.json`) and the differences.

    python reproductions/political/reproduce.py --data ../shared/data/political/df_gold.csv \
        --output metrics/political_reproduced.json
"""
import json
from pathlib import Path
from typing import Any, Dict, Optional

import typer

from spacy_inconsistency.political import protocol_tables, read_political

PAPER = Path(__file__).resolve().with_name("paper.json")


def compare_with_paper(result: Dict[str, Any], paper: Dict[str, Any]) -> Dict[str, Any]:
    """Add the paper's values, mean - paper per cell and the largest |difference| to `result`.

    result (Dict[str, Any]): From `protocol_tables`.
    paper (Dict[str, Any]): `paper.json`: `table_3`, `table_4` (row -> class -> MCC), `alpha`.
    RETURNS (Dict[str, Any]): `result`, with `paper`, `mean_minus_paper` and `max_abs_diff` in
        each table and `paper` in `alpha`.
    """
    for key in ("table_3", "table_4"):
        table = result[key]
        printed = paper[key]
        diff = {
            row: {cls: table["over_seeds"][row][cls]["mean"] - value for cls, value in cells.items()}
            for row, cells in printed.items() if row in table["over_seeds"]
        }
        table["paper"] = printed
        table["mean_minus_paper"] = diff
        table["max_abs_diff"] = max((abs(v) for cells in diff.values() for v in cells.values()), default=None)
    result["alpha"]["paper"] = paper["alpha"]
    return result


def main(
    data: Path = typer.Option(..., "--data", help="df_gold.csv or the folder holding it."),
    output: Path = typer.Option(..., "--output", "-o", help="JSON file to write."),
    seeds: int = typer.Option(10, help="Protocol runs with seeds 0..N-1 (tie-breaks, resamples)."),
    predictions: Optional[Path] = typer.Option(
        None, help="Optional JSON {row name: [label per sample]} of more models (e.g. cross-validated)."),
    model_majority: str = typer.Option(
        "published", help="'published': the majority labels in df_gold.csv (the paper's tie-breaks); "
                          "'recompute': majority of the 5 runs, ties drawn per seed."),
    progress: bool = typer.Option(True, help="Progress bar on stderr."),
) -> None:
    """Tables 3/4 and Krippendorff's alpha of the political benchmark, beside the paper's."""
    from tqdm import tqdm

    records = read_political(data)
    extra = json.loads(predictions.read_text(encoding="utf-8")) if predictions else None
    with tqdm(total=2 * seeds, desc="protocol", disable=not progress) as bar:
        result = protocol_tables(records, seeds=list(range(seeds)), extra_predictions=extra,
                                 model_majority=model_majority, progress=bar.update)
    result = compare_with_paper(result, json.loads(PAPER.read_text(encoding="utf-8")))
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=2), encoding="utf-8")
    for key in ("table_3", "table_4"):
        table = result[key]
        typer.echo(f"{key} ({table['n_classes']} classes), mean over {seeds} seeds (paper):")
        for row, cells in table["over_seeds"].items():
            printed = table["paper"].get(row, {})
            shown = [f"{c}: {v['mean']:.3f}" + (f" ({printed[c]:.3f})" if c in printed else "")
                     for c, v in cells.items() if not printed or c in printed]
            typer.echo(f"  {row}: " + ", ".join(shown))
        typer.echo(f"  largest |mean - paper|: {table['max_abs_diff']:.3f}")
    alpha = result["alpha"]
    typer.echo(f"alpha 5 classes ordinal {alpha['first_seed']['5']:.3f} (paper {alpha['paper']['5']:.3f}), "
               f"3 classes nominal {alpha['first_seed']['3']:.3f} (paper {alpha['paper']['3']:.3f})")


if __name__ == "__main__":
    typer.run(main)
