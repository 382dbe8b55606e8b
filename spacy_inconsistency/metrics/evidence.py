"""Evidence-extraction metrics of the redact-and-retry paper (Section 3, Appendices B and H).

Notation of the paper: D+ are the documents with gold label Yes, D++ those
with gold and predicted label Yes. Per document, with gold evidence E and
predicted evidence Ê:

- EH = 1{E ⊆ Ê}, EP = |E ∩ Ê| / |Ê|, ER = |E ∩ Ê| / |E|;
- EHR, EPR, ERR average EH, EP, ER over D+; EHRC, EPRC, ERRC over D++.

Sentences match when their TF-IDF cosine similarity is at least `threshold`
(0.8 in the paper): a gold sentence is in E ∩ Ê when some predicted
sentence matches it. As in the paper, Ê is empty when the prediction is
"no", which gives the identities EHR = TPR x EHRC, EPR = TPR x EPRC and
ERR = TPR x ERRC.
"""
import math
import re
import warnings
from typing import Dict, List, Optional, Sequence

import numpy

from ..errors import Errors, Warnings

_NORMALIZE_RE = re.compile(r"\s+")
_WORD_RE = re.compile(r"\w+")


def tfidf_cosine(a: Sequence[str], b: Sequence[str]) -> numpy.ndarray:
    """TF-IDF cosine similarity of every sentence of `a` with every sentence of `b`.

    The vectorizer (scikit-learn defaults: lower-cased word unigrams,
    smoothed IDF, L2 norm) is fitted on `a` and `b` together. Sentences
    without a word token (e.g. "...") match only an identical sentence.

    a (Sequence[str]): First sentences.
    b (Sequence[str]): Second sentences.
    RETURNS (numpy.ndarray): Similarities, shape (len(a), len(b)).
    """
    from sklearn.feature_extraction.text import TfidfVectorizer

    a, b = list(a), list(b)
    out = numpy.zeros((len(a), len(b)), dtype=float)
    if not a or not b:
        return out
    vectorizer = TfidfVectorizer()
    try:
        matrix = vectorizer.fit_transform(a + b)
    except ValueError:
        # Empty vocabulary: no sentence has a word token.
        matrix = None
    if matrix is not None:
        out = (matrix[: len(a)] @ matrix[len(a):].T).toarray()
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            if _NORMALIZE_RE.sub(" ", x).strip() == _NORMALIZE_RE.sub(" ", y).strip():
                out[i, j] = 1.0
    return numpy.clip(out, 0.0, 1.0)


def evidence_scores(gold: Sequence[str], pred: Sequence[str], *, threshold: float = 0.8) -> Dict[str, float]:
    """EH, EP and ER of one document.

    gold (Sequence[str]): Gold evidence sentences E (non-empty).
    pred (Sequence[str]): Predicted evidence sentences Ê.
    threshold (float): Lowest TF-IDF cosine that counts as a match.
    RETURNS (Dict[str, float]): `EH`, `EP`, `ER` and `matched` (|E ∩ Ê|).
        EP is 0 when Ê is empty; |E ∩ Ê| counts gold sentences, so EP is
        capped at 1 (one predicted sentence matching two gold ones).
    """
    if not gold:
        raise ValueError(Errors.E006.format(name="gold evidence of a positive document", expected="non-empty", value=list(gold)))
    sim = tfidf_cosine(gold, pred)
    matched = int((sim >= threshold).any(axis=1).sum()) if len(pred) else 0
    return {
        "EH": float(matched == len(gold)),
        "EP": min(1.0, matched / len(pred)) if len(pred) else 0.0,
        "ER": matched / len(gold),
        "matched": matched,
    }


def unique_sentences(sentences: Sequence[str]) -> List[str]:
    """The distinct sentences (compared case-, space- and punctuation-blind), first occurrence kept.

    Evidence is a set in the paper; models sometimes quote one sentence many times.
    """
    seen, out = set(), []
    for sentence in sentences:
        key = " ".join(_WORD_RE.findall(sentence.casefold())) or sentence.strip()
        if key not in seen:
            seen.add(key)
            out.append(sentence)
    return out


def _ratio(num: float, den: float) -> float:
    return num / den if den else math.nan


def _mean(values: List[float]) -> float:
    return float(numpy.mean(values)) if values else math.nan


def evidence_metrics(
    gold_labels: Sequence[bool],
    gold_evidence: Sequence[Sequence[str]],
    pred_labels: Sequence[bool],
    pred_evidence: Sequence[Sequence[str]],
    *,
    threshold: float = 0.8,
    retries: Optional[Sequence[int]] = None,
) -> Dict[str, float]:
    """Classification and evidence-extraction metrics exactly as the paper defines them.

    gold_labels (Sequence[bool]): y_i (True = inconsistent).
    gold_evidence (Sequence[Sequence[str]]): E_i, the gold sentences (used
        for positive documents only; must be non-empty for them).
    pred_labels (Sequence[bool]): ŷ_i.
    pred_evidence (Sequence[Sequence[str]]): Ê_i, the extracted sentences.
        As a set: repeats (case-, space- and punctuation-blind) count once.
        The evidence of a "no" prediction counts as empty (warns W111).
    threshold (float): TF-IDF cosine needed for two sentences to match.
    retries (Optional[Sequence[int]]): Number of LLM calls per document
        (the paper's "#retries"); gives the `avg_retries_*` keys.
    RETURNS (Dict[str, float]): Keys (the paper's names; NaN when a
        denominator is 0):
        `accuracy`, `precision`, `recall` (= `TPR`), `f1`, `FPR`, `TNR`,
        `FNR`; `EHR`, `EHRC`, `EPR`, `EPRC`, `ERR`, `ERRC`;
        `avg_sentences_pos` / `_neg` / `_all`: mean |Ê| over the documents
        predicted "yes" whose gold label is yes / no / either (the tables'
        "avg #sen, pos/neg/all"; predicted-"no" documents have no evidence
        and are not averaged in); `avg_retries_pos` / `_neg` / `_all`: mean
        of `retries` over the documents whose gold label is yes / no /
        either (when `retries` is given); and the counts `n`, `n_pos`,
        `n_neg`, `TP`, `FP`, `TN`, `FN`.
    """
    lengths = (len(gold_labels), len(gold_evidence), len(pred_labels), len(pred_evidence))
    if len(set(lengths)) != 1 or (retries is not None and len(retries) != lengths[0]):
        extra = f", retries {len(retries)}" if retries is not None else ""
        raise ValueError(Errors.E128.format(a=lengths[0], b=lengths[1], c=lengths[2], d=lengths[3], extra=extra))
    if not 0.0 < threshold <= 1.0:
        raise ValueError(Errors.E006.format(name="threshold", expected="in (0, 1]", value=threshold))
    from sklearn.metrics import confusion_matrix

    pred_evidence = [unique_sentences(e) for e in pred_evidence]
    gold_evidence = [unique_sentences(e) for e in gold_evidence]
    y = numpy.array([bool(v) for v in gold_labels])
    y_hat = numpy.array([bool(v) for v in pred_labels])
    n_ignored = sum(1 for p, e in zip(y_hat, pred_evidence) if not p and len(e))
    if n_ignored:
        warnings.warn(Warnings.W111.format(n=n_ignored, total=len(y)))
    if len(y):
        tn, fp, fn, tp = confusion_matrix(y, y_hat, labels=[False, True]).ravel().tolist()
    else:
        tn = fp = fn = tp = 0
    precision = _ratio(tp, tp + fp)
    recall = _ratio(tp, tp + fn)
    if math.isnan(precision) or math.isnan(recall):
        f1 = math.nan
    else:
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    out: Dict[str, float] = {
        "accuracy": _ratio(tp + tn, len(y)),
        "precision": precision,
        "recall": recall,
        "TPR": recall,
        "f1": f1,
        "FPR": _ratio(fp, tn + fp),
        "TNR": _ratio(tn, tn + fp),
        "FNR": _ratio(fn, tp + fn),
    }
    per_doc = {"EH": [], "EP": [], "ER": []}
    per_doc_correct = {"EH": [], "EP": [], "ER": []}
    for i in numpy.flatnonzero(y).tolist():
        gold = [s for s in gold_evidence[i]]
        pred = list(pred_evidence[i]) if y_hat[i] else []
        scores = evidence_scores(gold, pred, threshold=threshold)
        for key in per_doc:
            per_doc[key].append(scores[key])
            if y_hat[i]:
                per_doc_correct[key].append(scores[key])
    for key, name in (("EH", "EHR"), ("EP", "EPR"), ("ER", "ERR")):
        out[name] = _mean(per_doc[key])
        out[name + "C"] = _mean(per_doc_correct[key])
    sizes = numpy.array([len(e) for e in pred_evidence], dtype=float)
    out["avg_sentences_pos"] = _mean(sizes[y & y_hat].tolist())
    out["avg_sentences_neg"] = _mean(sizes[~y & y_hat].tolist())
    out["avg_sentences_all"] = _mean(sizes[y_hat].tolist())
    if retries is not None:
        r = numpy.array(retries, dtype=float)
        out["avg_retries_pos"] = _mean(r[y].tolist())
        out["avg_retries_neg"] = _mean(r[~y].tolist())
        out["avg_retries_all"] = _mean(r.tolist())
    out.update({"n": int(len(y)), "n_pos": int(y.sum()), "n_neg": int((~y).sum()),
                "TP": int(tp), "FP": int(fp), "TN": int(tn), "FN": int(fn)})
    return out
