"""claim_relation_classifier: a trainable relation classifier over pair Docs.

The model (`spacy_inconsistency.ml.pair_relation`) reads both texts of a pair Doc
together; this component trains it with a class-weighted cross-entropy over
exclusive labels (doc.cats) and a rationale loss, and writes the rationale (the
phrases of claim A behind the relation) as doc.spans["claim_relation_rationale"].
The reader is `spacy_inconsistency.corpora.pair_corpus`, the scorer
`spacy_inconsistency.scoring.score_claim_relation`.
"""
import warnings
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import numpy
from spacy.language import Language
from spacy.pipeline import TrainablePipe
from spacy.tokens import Doc
from spacy.training import Example, validate_get_examples
from spacy.vocab import Vocab
from thinc.api import Config, Model, Optimizer, set_dropout_rate
from thinc.types import Floats2d

from ..corpora.pair_corpus import PairCorpus, create_pair_corpus  # noqa: F401 (the names this module had)
from ..errors import Errors, Warnings
from ..extensions import RATIONALE_KEY
from ..ml.pair_relation import (  # noqa: F401
    build_base_transformer, build_pair_relation, resolve_base_model, side_bounds,
)
from ..pairs import PAIR_KEY
from ..scoring import make_claim_relation_scorer, score_claim_relation  # noqa: F401

DEFAULT_CLAIM_RELATION_MODEL = """
[model]
@architectures = "spacy-inconsistency.PairRelation.v1"

[model.tok2vec]
@architectures = "spacy-inconsistency.BaseTransformer.v1"
name = "default"
max_length = 256
grad_factor = 1.0
"""
DEFAULT_MODEL = Config().from_str(DEFAULT_CLAIM_RELATION_MODEL)["model"]


@Language.factory(
    "claim_relation_classifier",
    assigns=["doc.cats", "doc.spans"],
    default_config={
        "model": DEFAULT_MODEL,
        "labels": [],
        "class_weights": "balanced",
        "rationale_weight": 1.0,
        "rationale_threshold": 0.5,
        "rationale_merge_gap": 0,
        "rationale_key": RATIONALE_KEY,
        "pair_key": PAIR_KEY,
        "scorer": {"@scorers": "spacy-inconsistency.claim_relation_scorer.v1"},
    },
    default_score_weights={"cats_macro_f": 1.0, "cats_score": None, "cats_macro_auc": None,
                           "rationale_token_f": None, "rationale_token_p": None, "rationale_token_r": None},
)
def make_claim_relation_classifier(
    nlp: Language,
    name: str,
    model: Model,
    labels: List[str],
    class_weights: Union[str, Dict[str, float], None],
    rationale_weight: float,
    rationale_threshold: float,
    rationale_merge_gap: int,
    rationale_key: str,
    pair_key: str,
    scorer: Optional[Callable],
) -> "ClaimRelationClassifier":
    """Build the claim-relation classifier (see `ClaimRelationClassifier`)."""
    return ClaimRelationClassifier(
        nlp.vocab, model, name, labels=labels, class_weights=class_weights,
        rationale_weight=rationale_weight, rationale_threshold=rationale_threshold,
        rationale_merge_gap=rationale_merge_gap, rationale_key=rationale_key, pair_key=pair_key, scorer=scorer,
    )


class ClaimRelationClassifier(TrainablePipe):
    """Exclusive relation labels of a text pair, plus rationale spans in side A."""

    def __init__(
        self,
        vocab: Vocab,
        model: Model,
        name: str = "claim_relation_classifier",
        *,
        labels: Sequence[str] = (),
        class_weights: Union[str, Dict[str, float], None] = "balanced",
        rationale_weight: float = 1.0,
        rationale_threshold: float = 0.5,
        rationale_merge_gap: int = 0,
        rationale_key: str = RATIONALE_KEY,
        pair_key: str = PAIR_KEY,
        scorer: Optional[Callable] = None,
    ) -> None:
        """Initialize the component.

        vocab (Vocab): The shared vocabulary.
        model (Model): A `spacy-inconsistency.PairRelation.v1` model.
        name (str): Component name.
        labels (Sequence[str]): The exclusive labels; read from the data at
            initialize when empty.
        class_weights (Union[str, Dict[str, float], None]): "balanced"
            (n / (k * count), from the training data), a dict per label, or
            None for equal weights.
        rationale_weight (float): Weight of the rationale loss.
        rationale_threshold (float): Token probability at which a token of
            side A is part of a rationale.
        rationale_merge_gap (int): Runs of rationale tokens separated by at
            most this many tokens are joined into one span (0: no joining).
        rationale_key (str): Span group of gold and predicted rationales.
        pair_key (str): Span group of the two sides.
        scorer (Optional[Callable]): Scoring function.
        """
        self.vocab = vocab
        self.model = model
        self.name = name
        self.scorer = scorer
        self.cfg: Dict[str, Any] = {
            "labels": list(labels),
            "class_weights": class_weights,
            "weights": None,
            "rationale_weight": float(rationale_weight),
            "rationale_threshold": float(rationale_threshold),
            "rationale_merge_gap": int(rationale_merge_gap),
            "rationale_key": rationale_key,
            "pair_key": pair_key,
        }

    @property
    def labels(self) -> Tuple[str, ...]:
        return tuple(self.cfg["labels"])

    def add_label(self, label: str) -> int:
        if label in self.cfg["labels"]:
            return 0
        self.cfg["labels"].append(label)
        return 1

    def _check_docs(self, docs: Iterable[Doc]) -> None:
        for i, doc in enumerate(docs):
            side_bounds(doc, i, self.cfg["pair_key"])

    def _gold_index(self, example: Example, index: int) -> int:
        cats = example.reference.cats
        unknown = sorted(k for k, v in cats.items() if v and k not in self.cfg["labels"])
        if unknown:
            raise ValueError(Errors.E148.format(found=unknown, index=index, component=self.name,
                                                labels=list(self.cfg["labels"])))
        positive = [k for k, v in cats.items() if v >= 0.5]
        if len(positive) != 1:
            raise ValueError(Errors.E150.format(index=index, n=len(positive), cats=dict(cats)))
        return self.cfg["labels"].index(positive[0])

    def score(self, examples: Iterable[Example], **kwargs: Any) -> Dict[str, Any]:
        """Score a batch of Examples with the component's labels.

        examples (Iterable[Example]): Predicted and reference Docs.
        RETURNS (Dict[str, Any]): The scores (see `score_claim_relation`).
        """
        kwargs.setdefault("labels", list(self.labels))
        kwargs.setdefault("rationale_key", self.cfg["rationale_key"])
        return score_claim_relation(examples, **kwargs)

    def predict(self, docs: Iterable[Doc]) -> Tuple[Floats2d, List[Floats2d]]:
        """Label probabilities and rationale logits; pure, handles an empty batch.

        docs (Iterable[Doc]): Pair Docs.
        RETURNS (Tuple[Floats2d, List[Floats2d]]): Probabilities and logits.
        """
        docs = list(docs)
        if not docs:
            return self.model.ops.alloc2f(0, len(self.labels)), []
        self._check_docs(docs)
        return self.model.predict(docs)

    def set_annotations(self, docs: Iterable[Doc], scores: Tuple[Floats2d, List[Floats2d]]) -> None:
        """Write doc.cats and the rationale spans of side A.

        docs (Iterable[Doc]): The Docs.
        scores (Tuple[Floats2d, List[Floats2d]]): Output of `predict`.
        """
        probs, logits = scores
        probs = self.model.ops.to_numpy(probs)
        threshold = self.cfg["rationale_threshold"]
        for i, doc in enumerate(docs):
            doc.cats = {label: float(probs[i, j]) for j, label in enumerate(self.labels)}
            a = doc.spans[self.cfg["pair_key"]][0]
            p = 1.0 / (1.0 + numpy.exp(-self.model.ops.to_numpy(logits[i])[:, 0]))
            spans, start = [], None
            for t in range(a.start, a.end + 1):
                inside = t < a.end and p[t] >= threshold
                if inside and start is None:
                    start = t
                elif not inside and start is not None:
                    spans.append((start, t))
                    start = None
            gap = int(self.cfg.get("rationale_merge_gap", 0))
            merged: List[Tuple[int, int]] = []
            for start_t, end_t in spans:
                if merged and start_t - merged[-1][1] <= gap:
                    merged[-1] = (merged[-1][0], end_t)
                else:
                    merged.append((start_t, end_t))
            doc.spans[self.cfg["rationale_key"]] = [doc[a_:b_] for a_, b_ in merged]

    def update(
        self,
        examples: Iterable[Example],
        *,
        drop: float = 0.0,
        sgd: Optional[Optimizer] = None,
        losses: Optional[Dict[str, float]] = None,
    ) -> Dict[str, float]:
        """Learn from a batch of pair Examples.

        examples (Iterable[Example]): Predicted Docs with pair spans; references
            with one positive label in cats and, optionally, rationale spans.
        drop (float): Dropout rate.
        sgd (Optional[Optimizer]): The optimizer.
        losses (Optional[Dict[str, float]]): Accumulated losses.
        RETURNS (Dict[str, float]): The losses.
        """
        if losses is None:
            losses = {}
        losses.setdefault(self.name, 0.0)
        examples = list(examples)
        validate_get_examples(lambda: examples, "ClaimRelationClassifier.update")
        if not examples:
            return losses
        docs = [eg.predicted for eg in examples]
        self._check_docs(docs)
        set_dropout_rate(self.model, drop)
        scores, backprop = self.model.begin_update(docs)
        loss, gradients = self.get_loss(examples, scores)
        backprop(gradients)
        if sgd is not None:
            self.finish_update(sgd)
        losses[self.name] += loss
        return losses

    def get_loss(self, examples: Iterable[Example], scores: Tuple[Floats2d, List[Floats2d]]) -> Tuple[float, Any]:
        """Class-weighted cross-entropy plus the rationale's binary cross-entropy.

        examples (Iterable[Example]): The batch.
        scores (Tuple[Floats2d, List[Floats2d]]): Probabilities and rationale logits.
        RETURNS (Tuple[float, Any]): The loss and the gradients.
        """
        examples = list(examples)
        probs, logits = scores
        xp = self.model.ops.xp
        n, k = probs.shape
        gold = numpy.zeros((n, k), dtype="f")
        weights = numpy.ones((n, 1), dtype="f")
        class_weights = self.cfg.get("weights") or {}
        for i, eg in enumerate(examples):
            j = self._gold_index(eg, i)
            gold[i, j] = 1.0
            weights[i, 0] = class_weights.get(self.labels[j], 1.0)
        gold_x = self.model.ops.asarray2f(gold)
        weights_x = self.model.ops.asarray2f(weights)
        d_probs = (probs - gold_x) * weights_x / n
        loss = float(-(xp.log(xp.clip(probs, 1e-8, 1.0)) * gold_x * weights_x).sum() / n)
        d_logits = []
        rw = self.cfg["rationale_weight"]
        key = self.cfg["rationale_key"]
        n_tokens = 0
        targets = []
        for i, eg in enumerate(examples):
            doc = eg.predicted
            a = doc.spans[self.cfg["pair_key"]][0]
            mask = numpy.zeros((len(doc), 1), dtype="f")
            target = numpy.zeros((len(doc), 1), dtype="f")
            if rw > 0 and key in eg.reference.spans:
                mask[a.start:a.end] = 1.0
                for span in eg.reference.spans[key]:
                    aligned = eg.predicted.char_span(span.start_char, span.end_char, alignment_mode="expand")
                    if aligned is not None:
                        target[aligned.start:aligned.end] = 1.0
                target *= mask
            n_tokens += int(mask.sum())
            targets.append((mask, target))
        for (mask, target), logit in zip(targets, logits):
            if n_tokens == 0:
                d_logits.append(self.model.ops.alloc2f(*logit.shape))
                continue
            p = 1.0 / (1.0 + xp.exp(-logit))
            m = self.model.ops.asarray2f(mask)
            t = self.model.ops.asarray2f(target)
            d_logits.append((p - t) * m * rw / n_tokens)
            loss += float(-(m * (t * xp.log(xp.clip(p, 1e-8, 1)) + (1 - t) * xp.log(xp.clip(1 - p, 1e-8, 1)))).sum() * rw / n_tokens)
        return loss, (d_probs, d_logits)

    def initialize(
        self,
        get_examples: Callable[[], Iterable[Example]],
        *,
        nlp: Optional[Language] = None,
        labels: Optional[Sequence[str]] = None,
    ) -> None:
        """Read labels and class weights from the data and initialize the model.

        get_examples (Callable[[], Iterable[Example]]): The training examples.
        nlp (Optional[Language]): The pipeline.
        labels (Optional[Sequence[str]]): Labels, overriding the config's.
        """
        validate_get_examples(get_examples, "ClaimRelationClassifier.initialize")
        if labels is not None:
            self.cfg["labels"] = list(labels)
        if not self.cfg["labels"]:
            found: List[str] = []
            for eg in get_examples():
                for label in eg.reference.cats:
                    if label not in found:
                        found.append(label)
            self.cfg["labels"] = sorted(found)
        if not self.cfg["labels"]:
            raise ValueError(Errors.E151.format(component=self.name))
        counts = {label: 0 for label in self.labels}
        sample: List[Doc] = []
        for i, eg in enumerate(get_examples()):
            counts[self.labels[self._gold_index(eg, i)]] += 1
            side_bounds(eg.predicted, i, self.cfg["pair_key"])
            if len(sample) < 10:
                sample.append(eg.predicted)
        setting = self.cfg["class_weights"]
        if setting == "balanced":
            total = sum(counts.values())
            self.cfg["weights"] = {
                label: (total / (len(counts) * c) if c else 1.0) for label, c in counts.items()
            }
        elif isinstance(setting, dict):
            extra = sorted(set(setting) - set(self.labels))
            if extra:
                warnings.warn(Warnings.W121.format(extra=extra, labels=list(self.labels)))
            self.cfg["weights"] = {label: float(setting.get(label, 1.0)) for label in self.labels}
        elif setting is None:
            self.cfg["weights"] = None
        else:
            raise ValueError(Errors.E006.format(name="class_weights", expected="'balanced', a dict or null", value=setting))
        self.model.set_dim("nO", len(self.labels))
        self.model.get_ref("output").set_dim("nO", len(self.labels))
        self.model.initialize(X=sample)
