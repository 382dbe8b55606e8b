"""The behavioural suite's documents cut into statement units, for the probes in this folder."""
from pathlib import Path
from typing import Callable, List, Tuple

ROOT = Path(__file__).resolve().parents[2]
SIDES = ("contradiction", "control")


def unit_segmenter() -> Callable[[str], List[str]]:
    """text -> its statement units, as `inconsistency_segmenter` cuts them."""
    import spacy

    from spacy_inconsistency.segment import Segmenter

    blank = spacy.blank("en")
    segmenter = Segmenter(units_key="units")

    def units(text: str) -> List[str]:
        doc = segmenter(blank.make_doc(text))  # held: a SpanGroup needs its Doc alive
        return [span.text for span in doc.spans["units"]]

    return units


def suite_documents(split: str, units: Callable[[str], List[str]]) -> List[Tuple[dict, str, List[str]]]:
    """(record, side, units) for both documents of every record of a split ("dev", "test")."""
    from spacy_inconsistency.corpora.behaviour import read_behaviour_suite

    records = read_behaviour_suite(ROOT / "tests" / "behaviour", f"{split}_*.jsonl")
    return [(record, side, units(record[side]["text"])) for record in records for side in SIDES]
