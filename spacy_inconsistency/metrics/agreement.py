"""Agreement between annotators: majority labels and Krippendorff's alpha."""
import random
from collections import Counter
from typing import Hashable, List, Sequence

from ..errors import Errors


def majority_label(labels: Sequence[Hashable], rng: random.Random) -> Hashable:
    """The most frequent label; a tie is broken at random among the tied labels.

    labels (Sequence[Hashable]): The votes (at least one).
    rng (random.Random): Source of the tie-break, seeded by the caller.
    RETURNS (Hashable): The majority label.
    """
    if not labels:
        raise ValueError(Errors.E141)
    counts = Counter(labels)
    top = max(counts.values())
    # Sorted so that the draw depends only on the seed, not on vote order.
    tied = sorted((label for label, n in counts.items() if n == top), key=str)
    return tied[0] if len(tied) == 1 else rng.choice(tied)


def krippendorff_alpha(
    annotations: Sequence[Sequence[Hashable]],
    categories: Sequence[Hashable],
    *,
    level: str = "nominal",
) -> float:
    """Krippendorff's alpha from the labels each item received.

    Alpha depends only on how many times each value was given per item, so
    anonymous annotator lists of different lengths are fine.

    annotations (Sequence[Sequence[Hashable]]): Per item, its annotators' labels.
    categories (Sequence[Hashable]): All values, in scale order for "ordinal".
    level (str): "nominal", "ordinal", "interval" or "ratio".
    RETURNS (float): Alpha.
    """
    import krippendorff
    import numpy as np

    index = {c: i for i, c in enumerate(categories)}
    counts: List[List[int]] = []
    for item in annotations:
        row = [0] * len(categories)
        for label in item:
            if label not in index:
                raise ValueError(Errors.E142.format(label=label, labels=list(categories)))
            row[index[label]] += 1
        counts.append(row)
    return float(
        krippendorff.alpha(
            value_counts=np.asarray(counts, dtype=float),
            value_domain=list(range(len(categories))),
            level_of_measurement=level,
        )
    )
