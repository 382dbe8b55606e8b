"""The detector's learned pair score for independent statement pairs (as `find_contradictions` scores them).

Each statement is parsed on its own (`alignment.facts_of_texts`), the pair's alignment features
are computed from the two parses, and the pair scorer shipped beside the NLI model combines them
with both directions' probabilities (`pair_score.PairScoreModel`). Used by the ProSeCCo and
political benchmarks, whose rows are pairs rather than documents.
"""
from typing import Dict, Sequence

import numpy


def learned_scores(backend, model: str, a: Sequence[str], b: Sequence[str],
                   forward: numpy.ndarray, backward: numpy.ndarray) -> Dict[str, object]:
    """Learned pair scores of pairs (a[i], b[i]).

    backend (NLIBackend): The NLI backend that gave the probabilities (its `pair_scorer.json` is used).
    model (str): Its name, for the error message when it has no pair scorer.
    a, b (Sequence[str]): The two statements of each pair.
    forward, backward (numpy.ndarray): shape (k, 3), P(entailment, neutral, contradiction) with
        a[i] / b[i] as premise.
    RETURNS (Dict[str, object]): "learned" (with alignment) and "learned_nli" (NLI features only)
        scores, and "threshold", the scorer's pair threshold (the one `find_contradictions` uses).
    """
    from spacy_inconsistency.alignment import facts_of_texts, pair_features
    from spacy_inconsistency.pair_score import find_pair_scorer

    scorer = find_pair_scorer(backend.local_dir, model_name=model)
    texts = list(dict.fromkeys(list(a) + list(b)))
    index = {t: i for i, t in enumerate(texts)}
    facts = facts_of_texts(texts)
    alignment = numpy.stack([pair_features(facts[index[x]], facts[index[y]]) for x, y in zip(a, b)])
    return {"learned": scorer(forward, backward, alignment), "learned_nli": scorer(forward, backward, None),
            "threshold": float(scorer.threshold)}
