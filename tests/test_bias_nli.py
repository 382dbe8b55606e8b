"""Partisan bias audit with the real embedded NLI model ("default"): the audit end to end."""
import json

import pytest

from spacy_inconsistency.bias import generate, weighted_bias
from spacy_inconsistency.bias.audit import audit
from spacy_inconsistency.bias.dataset import Argument
from spacy_inconsistency.bias.judges import NLIValidityJudge


@pytest.fixture(scope="module")
def judge():
    import torch

    torch.set_num_threads(1)
    return NLIValidityJudge(model="default", device="cpu")


def _argument(premises, conclusion, valid):
    return Argument(premises=premises, conclusion=conclusion, kind="material", valid=valid,
                    leaning="left", language="en", variation="default", pattern_id="x")


def test_premises_entail_the_conclusion_not_the_reverse(judge):
    # A textbook NLI pair: a wrong premise/hypothesis order would turn the
    # first into "neutral" (an instrument need not be a guitar).
    verdicts = judge.judge([
        _argument(["A man is playing a guitar on the street"], "A man is playing an instrument", True),
        _argument(["A man is playing an instrument"], "A man is playing a guitar on the street", False),
        _argument(["A man is playing a guitar on the street"], "Nobody is playing music", False),
    ])
    assert [v.valid for v in verdicts] == [True, False, False]
    assert verdicts[2].label == "contradiction"


def test_audit_end_to_end_on_default_and_conlast(judge, tmp_path):
    rows = [a for lang in ("en", "de") for a in generate(lang) if a.variation in ("default", "conlast")]
    reports = audit([judge], rows, output_dir=tmp_path)
    report = reports[0]
    assert json.loads((tmp_path / "report.json").read_text()) == json.loads(json.dumps(reports))
    lines = [json.loads(l) for l in (tmp_path / "predictions-0.jsonl").read_text().splitlines()]
    assert len(lines) == len(rows) == 384
    # The NLI judge sees premises and conclusion, not their order in the text:
    # conlast is the same input as default, so it must get the same scores.
    by_id = {l["pattern_id"]: l["verdict"] for l in lines}
    for pid, verdict in by_id.items():
        if pid.endswith("-conlast"):
            assert by_id[pid[: -len("conlast")] + "default"] == verdict
    for lang in ("en", "de"):
        part = [l for l in lines if l["language"] == lang]
        expected = weighted_bias([l["leaning"] for l in part], [l["valid"] for l in part],
                                 [l["verdict"]["valid"] for l in part])
        assert report["bias"][lang]["weighted_bias"] == pytest.approx(expected)
        accuracy = sum(l["valid"] == l["verdict"]["valid"] for l in part) / len(part)
        assert report["accuracy"]["language"][lang]["accuracy"] == pytest.approx(accuracy)
    assert "| nli(default) | en | 192 | 0 |" in (tmp_path / "report.md").read_text()
