"""claim_relation_classifier: mechanics with a tiny offline BERT, bad input, configs."""
import subprocess
import sys

import pytest
import spacy
from spacy.tokens import DocBin
from spacy.training import Example
from thinc.api import fix_random_seed

import spacy_inconsistency.components.claim_relation  # noqa: F401
from spacy_inconsistency.components.claim_relation import RATIONALE_KEY, PairCorpus
from spacy_inconsistency.metrics.rationale import iou_f1, token_prf
from spacy_inconsistency.pairs import PAIR_KEY, make_pair_doc

from conftest import ROOT, build_tiny_nli

LABELS = ["CONTRA", "CONS", "UNREL"]
DATA = [
    ("The budget was approved.", "The budget was rejected.", "CONTRA", (1, 2)),
    ("The sky is blue.", "The sky is blue and the sun is shining.", "CONS", (3, 4)),
    ("Taxes will fall next year.", "Taxes will rise next year.", "CONTRA", (2, 3)),
    ("A man is playing a guitar.", "Dogs live in the garden.", "UNREL", (0, 2)),
]


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory) -> str:
    return str(build_tiny_nli(tmp_path_factory.mktemp("tiny-bert"), {0: "a", 1: "b"}, max_positions=64))


def _nlp(model: str, **cfg):
    nlp = spacy.blank("en")
    nlp.add_pipe("claim_relation_classifier", config={"model": {"tok2vec": {"name": model}}, **cfg})
    return nlp


def _examples(nlp, data=DATA, labels=LABELS):
    examples = []
    for a, b, label, (start, end) in data:
        doc = make_pair_doc(nlp, a, b)
        ref = doc.copy()
        ref.cats = {x: float(x == label) for x in labels}
        ref.spans[RATIONALE_KEY] = [ref[start:end]]
        examples.append(Example(doc, ref))
    return examples


@pytest.fixture(scope="module")
def trained(tiny_bert):
    fix_random_seed(0)
    nlp = _nlp(tiny_bert)
    examples = _examples(nlp)
    optimizer = nlp.initialize(lambda: examples)
    losses = [nlp.update(examples, sgd=optimizer)["claim_relation_classifier"] for _ in range(40)]
    return nlp, examples, losses


def test_initialize_reads_labels_and_balanced_weights(trained):
    nlp, _, _ = trained
    pipe = nlp.get_pipe("claim_relation_classifier")
    assert pipe.labels == ("CONS", "CONTRA", "UNREL")
    # n / (k * count): 4 / (3 * 2) for CONTRA, 4 / (3 * 1) for the others.
    assert pipe.cfg["weights"] == pytest.approx({"CONS": 4 / 3, "CONTRA": 2 / 3, "UNREL": 4 / 3})


def test_learns_the_training_pairs(trained):
    nlp, examples, losses = trained
    assert losses[-1] < 0.5 * losses[0]
    docs = list(nlp.pipe([eg.predicted.copy() for eg in examples]))
    for doc, (_, _, label, (start, end)) in zip(docs, DATA):
        assert max(doc.cats, key=doc.cats.get) == label
        assert sum(doc.cats.values()) == pytest.approx(1.0, abs=1e-5)
        a = doc.spans[PAIR_KEY][0]
        rationale = doc.spans[RATIONALE_KEY]
        assert all(a.start <= s.start and s.end <= a.end for s in rationale)
        assert {t.i for s in rationale for t in s} == set(range(start, end))
    scores = nlp.evaluate(examples)
    assert scores["cats_macro_f"] == 1.0
    assert scores["rationale_token_f"] == 1.0


def test_pipe_equals_call_and_survives_docbin(trained):
    nlp, examples, _ = trained
    inputs = [eg.predicted.copy() for eg in examples]
    piped = list(nlp.pipe([d.copy() for d in inputs], batch_size=3))
    single = [nlp(d.copy()) for d in inputs]
    for p, s in zip(piped, single):
        assert p.cats == pytest.approx(s.cats, abs=1e-5)
        assert [(x.start, x.end) for x in p.spans[RATIONALE_KEY]] == [(x.start, x.end) for x in s.spans[RATIONALE_KEY]]
    back = list(DocBin(docs=piped).get_docs(nlp.vocab))
    assert back[0].cats == pytest.approx(piped[0].cats)
    assert len(back[0].spans[RATIONALE_KEY]) == len(piped[0].spans[RATIONALE_KEY])


def test_n_process_2(trained):
    nlp, examples, _ = trained
    inputs = [eg.predicted.copy() for eg in examples]
    expected = [nlp(d.copy()).cats for d in inputs]
    got = [d.cats for d in nlp.pipe([d.copy() for d in inputs], n_process=2, batch_size=2)]
    for e, g in zip(expected, got):
        assert g == pytest.approx(e, abs=1e-5)


def test_to_disk_from_disk(trained, tmp_path):
    nlp, examples, _ = trained
    nlp.to_disk(tmp_path / "pipe")
    loaded = spacy.load(tmp_path / "pipe")
    doc = examples[0].predicted.copy()
    assert loaded(doc.copy()).cats == pytest.approx(nlp(doc.copy()).cats, abs=1e-5)
    assert loaded.get_pipe("claim_relation_classifier").cfg["weights"] == pytest.approx(
        nlp.get_pipe("claim_relation_classifier").cfg["weights"])


def test_empty_batch(trained):
    nlp, _, _ = trained
    probs, logits = nlp.get_pipe("claim_relation_classifier").predict([])
    assert probs.shape == (0, 3) and logits == []


def test_bad_input(trained, tiny_bert):
    nlp, examples, _ = trained
    with pytest.raises(ValueError, match="E147"):
        nlp("A Doc that is not a pair.")
    with pytest.raises(ValueError, match="E147"):
        nlp("")
    one_token = nlp.make_doc("Hello")
    with pytest.raises(ValueError, match="E147"):
        nlp(one_token)
    doc = nlp.make_doc("Taxes will fall .")
    doc.spans[PAIR_KEY] = [doc[0:4], doc[4:4]]
    with pytest.raises(ValueError, match="E149"):
        nlp(doc)
    with pytest.raises(ValueError, match="E011"):
        make_pair_doc(nlp, "Taxes will fall.", "   ")
    unknown = _examples(nlp, DATA[:1], labels=["CONTRA", "SARCASM"])
    unknown[0].reference.cats = {"SARCASM": 1.0}
    with pytest.raises(ValueError, match="E148"):
        nlp.update(unknown)
    two = _examples(nlp, DATA[:1])
    two[0].reference.cats = {"CONTRA": 1.0, "CONS": 1.0, "UNREL": 0.0}
    with pytest.raises(ValueError, match="E150"):
        nlp.update(two)
    fresh = _nlp(tiny_bert)
    with pytest.raises(ValueError, match="E151"):
        bare = make_pair_doc(fresh, "Taxes will fall.", "Taxes will rise.")
        fresh.initialize(lambda: [Example(bare, bare.copy())])


def test_pair_corpus_restores_pair_spans_and_rejects_plain_docbins(trained, tmp_path):
    nlp, examples, _ = trained
    DocBin(docs=[eg.reference for eg in examples]).to_disk(tmp_path / "pairs.spacy")
    from spacy.training import Corpus

    read = list(PairCorpus(Corpus(tmp_path / "pairs.spacy"), PAIR_KEY)(nlp))
    assert [len(eg.predicted.spans[PAIR_KEY]) for eg in read] == [2] * 4
    assert read[0].predicted.spans[PAIR_KEY][1].text == "The budget was rejected."
    DocBin(docs=[nlp.make_doc("no pair here")]).to_disk(tmp_path / "plain.spacy")
    with pytest.raises(ValueError, match="E147"):
        list(PairCorpus(Corpus(tmp_path / "plain.spacy"), PAIR_KEY)(nlp))


def test_registry_names_resolve():
    from spacy.util import registry

    assert "claim_relation_classifier" in spacy.registry.factories
    for name in ("spacy-inconsistency.PairRelation.v1", "spacy-inconsistency.BaseTransformer.v1"):
        assert registry.architectures.get(name)
    assert registry.readers.get("spacy-inconsistency.PairCorpus.v1")
    assert registry.scorers.get("spacy-inconsistency.claim_relation_scorer.v1")


def test_rationale_metrics_by_hand():
    gold = [[(0, 4)], [(2, 4), (6, 8)]]
    pred = [[(2, 6)], [(2, 4)]]
    # Instance 1: 2 of 4 predicted tokens right, 2 of 4 gold found; instance 2: P 1, R 0.5.
    tok = token_prf(gold, pred)
    assert tok["p"] == pytest.approx(0.75) and tok["r"] == pytest.approx(0.5)
    assert tok["f1"] == pytest.approx(0.6)
    # IOU (2,6) vs (0,4) = 2/6 < 0.5; (2,4) vs (2,4) = 1: 1 match of 2 predicted, 3 gold.
    iou = iou_f1(gold, pred)
    assert iou["micro_p"] == pytest.approx(0.5) and iou["micro_r"] == pytest.approx(1 / 3)


@pytest.mark.parametrize("config", ["claim_relation_political5.cfg", "claim_relation_political3.cfg",
                                    "claim_relation_claimdiff_s.cfg", "claim_relation_claimdiff_w.cfg"])
def test_configs_resolve(config, tiny_bert):
    from spacy.util import load_config, load_model_from_config

    cfg = load_config(ROOT / "configs" / config, overrides={"paths.base_model": tiny_bert})
    nlp = load_model_from_config(cfg, auto_fill=True, validate=True)
    pipe = nlp.get_pipe("claim_relation_classifier")
    assert len(pipe.labels) == (5 if "political5" in config else 3 if "political3" in config else 2)


def test_spacy_train_runs_on_config(tiny_bert, tmp_path):
    nlp = spacy.blank("en")
    DocBin(docs=[eg.reference for eg in _examples(nlp)]).to_disk(tmp_path / "d.spacy")
    labels = '["CONTRA","CONS","UNREL"]'
    cmd = [sys.executable, "-m", "spacy", "train", str(ROOT / "configs" / "claim_relation_claimdiff_s.cfg"),
           "--output", str(tmp_path / "out"),
           "--paths.train", str(tmp_path / "d.spacy"), "--paths.dev", str(tmp_path / "d.spacy"),
           "--paths.base_model", tiny_bert, "--training.max_steps", "4", "--training.eval_frequency", "2",
           "--components.claim_relation_classifier.labels", labels,
           "--training.optimizer.learn_rate.warmup_steps", "1"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                         env={**__import__("os").environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"})
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    loaded = spacy.load(tmp_path / "out" / "model-last")
    doc = loaded(make_pair_doc(loaded, "Taxes will fall.", "Taxes will rise."))
    assert set(doc.cats) == {"CONTRA", "CONS", "UNREL"}


def test_evaluate_claimdiff_on_fitted_pairs(trained, tmp_path):
    from spacy_inconsistency.relations_commands import evaluate_claimdiff

    nlp, examples, _ = trained
    nlp.to_disk(tmp_path / "model")
    DocBin(docs=[eg.reference for eg in examples]).to_disk(tmp_path / "test.spacy")
    result = evaluate_claimdiff(tmp_path / "model", tmp_path / "test.spacy", positive="CONTRA")
    # The tiny model fits its four pairs: both CONTRA pairs found, no false alarm.
    assert result["relation"]["f1"] == pytest.approx(100.0)
    assert result["relation"]["auroc"] == pytest.approx(100.0)
    assert result["rationale"]["n_pairs_with_gold_rationale"] == 4
    assert result["rationale"]["token_f1"] == pytest.approx(100.0)
    assert result["rationale"]["iou_f1_0.5"] == pytest.approx(100.0)


def test_rationale_runs_and_merge_gap(trained):
    import numpy

    nlp, _, _ = trained
    pipe = nlp.get_pipe("claim_relation_classifier")
    doc = make_pair_doc(nlp, "Taxes will fall next year.", "Taxes will rise.")
    probs = numpy.asarray([[0.2, 0.5, 0.3]], dtype="f")
    logits = numpy.full((len(doc), 1), -5.0, dtype="f")
    logits[[0, 1, 3]] = 5.0   # "Taxes will" and "next" in side A
    logits[len(doc) - 2] = 5.0  # a token of side B is never a rationale
    pipe.cfg["rationale_merge_gap"] = 0
    pipe.set_annotations([doc], (probs, [logits]))
    assert [s.text for s in doc.spans[RATIONALE_KEY]] == ["Taxes will", "next"]
    assert doc.cats == pytest.approx({"CONS": 0.2, "CONTRA": 0.5, "UNREL": 0.3})
    pipe.cfg["rationale_merge_gap"] = 1
    pipe.set_annotations([doc], (probs, [logits]))
    assert [s.text for s in doc.spans[RATIONALE_KEY]] == ["Taxes will fall next"]
    pipe.cfg["rationale_merge_gap"] = 0
