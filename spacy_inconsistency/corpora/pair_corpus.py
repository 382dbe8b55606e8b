"""`spacy-inconsistency.PairCorpus.v1`: spaCy's corpus reader for pair Docs."""
from typing import Callable, Iterable, Optional

from spacy.language import Language
from spacy.training import Example
from spacy.util import registry

from ..errors import Errors
from ..pairs import PAIR_KEY


@registry.readers("spacy-inconsistency.PairCorpus.v1")
def create_pair_corpus(
    path: Optional[str],
    *,
    pair_key: str = PAIR_KEY,
    gold_preproc: bool = False,
    max_length: int = 0,
    limit: int = 0,
) -> Callable[[Language], Iterable[Example]]:
    """spaCy's Corpus reader, with the pair spans copied onto the predicted Docs.

    `spacy.Corpus.v1` re-tokenizes the reference text into a bare predicted
    Doc, which loses doc.spans; the classifier reads the two sides from there.

    path (Optional[str]): A .spacy file or folder.
    pair_key (str): The span group of the two sides.
    gold_preproc (bool): As in `spacy.Corpus.v1`.
    max_length (int): As in `spacy.Corpus.v1` (0: no limit).
    limit (int): As in `spacy.Corpus.v1` (0: all).
    RETURNS (Callable[[Language], Iterable[Example]]): The reader.
    """
    from spacy.training import Corpus

    return PairCorpus(Corpus(path, gold_preproc=gold_preproc, max_length=max_length, limit=limit), pair_key)


class PairCorpus:
    """Yields a Corpus's Examples with reference.spans[pair_key] on the predicted Docs."""

    def __init__(self, corpus: Callable[[Language], Iterable[Example]], pair_key: str) -> None:
        self.corpus = corpus
        self.pair_key = pair_key

    def __call__(self, nlp: Language) -> Iterable[Example]:
        for i, eg in enumerate(self.corpus(nlp)):
            group = eg.reference.spans.get(self.pair_key)
            if group is None or len(group) != 2:
                raise ValueError(Errors.E147.format(index=i, key=self.pair_key, n=0 if group is None else len(group)))
            spans = [eg.predicted.char_span(s.start_char, s.end_char, label=s.label_, alignment_mode="expand")
                     for s in group]
            eg.predicted.spans[self.pair_key] = spans
            yield eg
