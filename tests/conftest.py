import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"

PARAGRAPH = (
    "The committee approved the budget on Monday. The budget was rejected by the "
    "committee. A man is playing a guitar on the street. Nobody is playing music. "
    "The sky is blue and the sun is shining over the old harbour. It is raining "
    "heavily in the city tonight. The minister said taxes will fall next year. "
    "Taxes will rise next year, the minister said. Alice: I was at home all evening. "
    "Bob: You were seen at the station. Dogs, cats and birds live in the garden."
)


_NUMBER = re.compile(r"\d+\.\d+")


def assert_same_printout(got: str, shown: str) -> None:
    """GOT prints what SHOWN says: the same text, and each decimal number within one unit of its
    last printed digit (scores move in the last digit between CPUs with and without native bf16,
    where the default dtype differs; a rounding flip is one unit)."""
    assert _NUMBER.sub("#", got) == _NUMBER.sub("#", shown), (got, shown)
    for g, w in zip(_NUMBER.findall(got), _NUMBER.findall(shown)):
        unit = 10 ** -len(w.split(".")[1])
        assert abs(float(g) - float(w)) <= unit + 1e-9, (got, shown)


def build_tiny_nli(path: Path, id2label, *, max_positions: int = 64, seed: int = 0) -> Path:
    """A randomly initialised BERT NLI classifier with a WordPiece vocabulary
    trained on one paragraph: real transformers code paths, no download."""
    import torch
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    wordpiece = BertWordPieceTokenizer(lowercase=True)
    wordpiece.train_from_iterator([PARAGRAPH], vocab_size=200, min_frequency=1)
    tokenizer = BertTokenizerFast(tokenizer_object=wordpiece._tokenizer, model_max_length=max_positions,
                                  unk_token="[UNK]", sep_token="[SEP]", pad_token="[PAD]",
                                  cls_token="[CLS]", mask_token="[MASK]")
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=64, max_position_embeddings=max_positions,
        id2label={int(k): v for k, v in id2label.items()},
        label2id={v: int(k) for k, v in id2label.items()},
    )
    model = BertForSequenceClassification(config)
    # Random logits near zero would make every probability about 1/3; a larger
    # classifier weight spreads them so that tests can tell pairs apart.
    with torch.no_grad():
        model.classifier.weight.mul_(20.0)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    write_min_pair_scorer(path / "pair_scorer.json")
    return path


def write_min_pair_scorer(path: Path, *, threshold: float = 0.5) -> Path:
    """A learned pair score whose only weight is 1 on logit(min P(contradiction)): it
    scores a pair as the `min` rule does, so tests can predict its value exactly."""
    from spacy_inconsistency.pair_score import LogisticModel, PairScoreModel, feature_names

    models = []
    for with_alignment in (True, False):
        names = feature_names(with_alignment)
        coef = [1.0 if name == "c_min" else 0.0 for name in names]
        models.append(LogisticModel(names, [0.0] * len(names), [1.0] * len(names), coef, 0.0))
    PairScoreModel(models[0], models[1], threshold=threshold, info={"test": "min"}).to_disk(path)
    return path


@pytest.fixture(scope="session")
def tiny_nli(tmp_path_factory) -> str:
    """Labels in an unusual order and casing, to check they are read by name."""
    path = tmp_path_factory.mktemp("tiny-nli")
    return str(build_tiny_nli(path, {0: "CONTRADICTION", 1: "Entailment", 2: "neutral"}))


@pytest.fixture(scope="session")
def tiny_binary_nli(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("tiny-binary-nli")
    return str(build_tiny_nli(path, {0: "not_entailment", 1: "entailment"}))


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def tiny_t5(tmp_path_factory) -> str:
    """A tiny T5 with a sentencepiece vocabulary (tests/scale_fixtures.py), built once per run."""
    from scale_fixtures import build_tiny_t5

    return str(build_tiny_t5(tmp_path_factory.mktemp("tiny-t5")))


@pytest.fixture(scope="session")
def t5_backend(tiny_t5):
    from spacy_inconsistency.backends.entailment import EntailmentBackend

    return EntailmentBackend(tiny_t5, device="cpu")
