"""Floors on the behavioural suite's TEST split for the shipped default detector (the cascade:
the embedded model, then mpnet-lora on each document's 8 highest pairs and its 4 most alike others).

The suite's test documents were never used to train the NLI models, fit the pair scores
or choose the thresholds (`scripts/nli/fit_pair_scorer.py` reads the dev split only).
The floors sit a little under the figures measured when the default was set
(docs/detection.md), so a change that costs the detector its skill fails here.
"""
import importlib.util

import pytest
import spacy

from conftest import ROOT
from spacy_inconsistency.corpora.behaviour import read_behaviour_suite
from spacy_inconsistency.metrics.behaviour import behaviour_metrics

pytestmark = pytest.mark.slow

# Measured (docs/detection.md): the second stage ranked over 1,600 written records (2026-11-29, night;
# auto dtype = bf16 on a CPU with AVX512-BF16): matched AUC 0.914, pair AUC 0.910, recall 0.392, false
# alarms 0.076; negation recall 0.56, pair hits 0.52. Before it, fp32: the second stage continued on a
# CPU over 400 more written records (2026-11-28): matched AUC 0.874, pair AUC 0.888, recall 0.372, false alarms 0.072; negation recall
# 0.64, pair hits 0.60 (auto dtype on a CPU with AMX: 0.878, 0.888, 0.37, 0.07). Before it (2026-11-27,
# night): 0.874, 0.880, 0.332, 0.076, negation 0.48 / 0.48; the GPU step alone: 0.848, 0.858, 0.372,
# 0.096; before the written near-miss documents: 0.760, 0.796, 0.39, 0.18. The embedded model alone:
# 0.674, 0.687, 0.21, 0.10. One standard error of these figures is about 0.02-0.03 (0.1 for the 25
# negation documents).
MATCHED_AUC_FLOOR = 0.88
PAIR_AUC_FLOOR = 0.87
RECALL_FLOOR = 0.32
FALSE_ALARM_CEILING = 0.12
NEGATION_RECALL_FLOOR = 0.48
NEGATION_PAIR_HITS_FLOOR = 0.44


def _evaluate_behaviour_module():
    spec = importlib.util.spec_from_file_location("evaluate_behaviour", ROOT / "scripts" / "evaluate_behaviour.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def test_split_metrics():
    records = read_behaviour_suite(ROOT / "tests" / "behaviour", "test_*.jsonl")
    assert len(records) == 250
    nlp = spacy.blank("en")
    nlp.add_pipe("inconsistency_detector")
    outcomes, _ = _evaluate_behaviour_module().run_suite(nlp, records, progress=False)
    return behaviour_metrics(outcomes)


def test_default_detector_floors_on_unseen_suite_documents(test_split_metrics):
    a = test_split_metrics["all"]
    assert a["matched_auc"] >= MATCHED_AUC_FLOOR
    assert a["pair_auc"] >= PAIR_AUC_FLOOR
    assert a["recall"] >= RECALL_FLOOR
    assert a["false_alarms"] <= FALSE_ALARM_CEILING


def test_clear_contradictions_are_found_for_the_right_pair(test_split_metrics):
    neg = test_split_metrics["by_capability"]["negation"]
    assert neg["recall"] >= NEGATION_RECALL_FLOOR
    assert neg["pair_hits"] >= NEGATION_PAIR_HITS_FLOOR
