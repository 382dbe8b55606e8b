"""Reader for the TRUE factual-consistency datasets as packaged with the SCALE code.

Each CSV has the columns `grounding` (the source), `generated_text` (the
text to check) and `label` (1 = consistent with the source, 0 = not).
"""
import csv
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Union

from ..errors import Errors

TRUE_DATASETS = ("frank", "summeval", "qags_xsum", "paws")
TRUE_COLUMNS = ("grounding", "generated_text", "label")


@dataclass
class TrueExample:
    """One TRUE row.

    source (str): The grounding text.
    claim (str): The generated text.
    label (int): 1 = consistent, 0 = inconsistent.
    row (int): Row number in the file (0-based, header excluded).
    """

    source: str
    claim: str
    label: int
    row: int


def read_true(
    path: Union[str, Path], *, limit: Optional[int] = None, seed: int = 0
) -> List[TrueExample]:
    """Read one TRUE CSV file.

    path (Union[str, Path]): The CSV file (e.g. ../shared/data/true/frank.csv).
    limit (Optional[int]): Keep a seeded random sample of this many rows
        (in file order); None keeps every row.
    seed (int): Seed of the sample.
    RETURNS (List[TrueExample]): The rows.
    """
    path = Path(path)
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    examples: List[TrueExample] = []
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in TRUE_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(
                Errors.E006.format(name=f"the columns of {path}", expected=f"to include {list(TRUE_COLUMNS)}",
                                   value=reader.fieldnames)
            )
        for i, record in enumerate(reader):
            label = int(float(record["label"]))
            if label not in (0, 1):
                raise ValueError(Errors.E006.format(name=f"label of row {i} in {path}", expected="0 or 1", value=label))
            examples.append(TrueExample(record["grounding"], record["generated_text"], label, i))
    if limit is not None and limit < len(examples):
        keep = sorted(random.Random(seed).sample(range(len(examples)), limit))
        examples = [examples[i] for i in keep]
    return examples
