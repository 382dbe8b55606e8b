"""Pair Docs: two texts (a claim and its source, two statements) in one Doc.

Both texts go into one Doc so that a transformer attends across them; each is
marked as a span in ``doc.spans[PAIR_KEY]``, labelled "A" and "B" (or the
labels given). The source labels of cross-source comparisons travel in the
span labels and in ``doc.user_data``.
"""
from typing import Iterable, Iterator, Sequence, Tuple

from spacy.language import Language
from spacy.tokens import Doc, Span

from .errors import Errors

PAIR_KEY = "inconsistency_pair"
PAIR_SEPARATOR = "\n\n"


def make_pair_doc(
    nlp: Language,
    text_a: str,
    text_b: str,
    *,
    labels: Sequence[str] = ("A", "B"),
    separator: str = PAIR_SEPARATOR,
) -> Doc:
    """Tokenize two texts into one Doc and mark each as a span.

    nlp (Language): Pipeline whose tokenizer is used (no components are run).
    text_a (str): First text (e.g. the claim, or statement 1).
    text_b (str): Second text.
    labels (Sequence[str]): Span labels of the two sides.
    separator (str): Text put between the two sides; it is in neither span.
    RETURNS (Doc): The pair Doc; ``doc.spans[PAIR_KEY]`` holds the two sides.
    """
    for side, text in (("A", text_a), ("B", text_b)):
        if not isinstance(text, str) or not text.strip():
            raise ValueError(Errors.E011.format(side=side))
    if len(labels) != 2:
        raise ValueError(Errors.E006.format(name="labels", expected="two labels", value=labels))
    doc = nlp.make_doc(text_a + separator + text_b)
    start_b = len(text_a) + len(separator)
    bounds = ((0, len(text_a)), (start_b, start_b + len(text_b)))
    spans = []
    for (start, end), label in zip(bounds, labels):
        # Strip surrounding whitespace so each span starts and ends on a token.
        text = doc.text[start:end]
        start += len(text) - len(text.lstrip())
        end -= len(text) - len(text.rstrip())
        span = doc.char_span(start, end, label=label, alignment_mode="expand")
        spans.append(span)
    doc.spans[PAIR_KEY] = spans
    return doc


def make_pair_docs(
    nlp: Language,
    pairs: Iterable[Tuple[str, str]],
    **kwargs,
) -> Iterator[Doc]:
    """Pair Docs for a stream of (text_a, text_b); for `nlp.pipe`.

    nlp (Language): Pipeline whose tokenizer is used.
    pairs (Iterable[Tuple[str, str]]): The text pairs.
    YIELDS (Doc): One pair Doc per pair, in order.
    """
    for text_a, text_b in pairs:
        yield make_pair_doc(nlp, text_a, text_b, **kwargs)


def pair_spans(doc: Doc, key: str = PAIR_KEY) -> Tuple[Span, Span]:
    """The two sides of a pair Doc.

    doc (Doc): A Doc made by `make_pair_doc`.
    key (str): The span group holding the sides.
    RETURNS (Tuple[Span, Span]): Side A and side B.
    """
    group = doc.spans.get(key)
    n = 0 if group is None else len(group)
    if n != 2:
        raise ValueError(Errors.E012.format(key=key, n=n))
    return group[0], group[1]


def pair_texts(doc: Doc, key: str = PAIR_KEY) -> Tuple[str, str]:
    """The two texts of a pair Doc.

    doc (Doc): A Doc made by `make_pair_doc`.
    key (str): The span group holding the sides.
    RETURNS (Tuple[str, str]): Text A and text B.
    """
    a, b = pair_spans(doc, key)
    return a.text, b.text
