"""The corpus benchmark's hub evaluation (scripts/pairwise/benchmark_corpus.py) on a toy corpus."""
import importlib.util

import numpy
import spacy

from conftest import ROOT
from spacy_inconsistency.candidates import ContradictionHubs, normalise_pairs, run_strategy

spec = importlib.util.spec_from_file_location("benchmark_corpus", ROOT / "scripts" / "pairwise" / "benchmark_corpus.py")
bc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bc)


class HotBackend:
    """Pairs with statement 5 in them contradict (0.9), others do not (0.02)."""

    def __init__(self, texts):
        self.hot = texts[5]
        self.calls = 0

    def predict(self, pairs):
        self.calls += len(pairs)
        return {"contradiction": numpy.asarray([0.9 if self.hot in p else 0.02 for p in pairs], dtype=numpy.float32)}


def test_hub_evaluation_respects_the_budget_and_finds_the_hub(tmp_path):
    n = 60
    texts = [f"Statement {i} is here." for i in range(n)]
    nlp = spacy.blank("en")
    spans = [nlp.make_doc(t)[:] for t in texts]
    vectors = numpy.random.default_rng(0).normal(size=(n, 16)).astype(numpy.float32)
    vectors /= numpy.linalg.norm(vectors, axis=1, keepdims=True)
    sims = vectors @ vectors.T
    far = int(numpy.argmin(sims[5]))  # the least similar statement to the hub: no neighbour search keeps it
    references = {"sample": {tuple(sorted((5, far)))}, "other": {(0, 1)}}
    backends = []

    def factory():
        backends.append(HotBackend(texts))
        return backends[-1]

    budget = 0.2
    cache = str(tmp_path / "probes.npz")
    out = bc.hub_evaluation(spans, texts, vectors, references, budget, probes=2, seed=0, backend_factory=factory,
                            cache=cache, knn_grid=(0, 2, 5))
    total = n * (n - 1) // 2
    assert backends[0].calls == 2 * out["probe_pairs"]  # each probe pair once, both directions
    assert out["reference_best_propensity_rank"] == [0]
    for row in out["grid"]:
        assert row["fraction"] <= budget
        assert row["hubs"] >= 1 and row["recall"]["sample"] == 1.0
        assert set(row["recall"]) == {"sample", "other"}
    # The most hubs that fit: one more would go over the budget.
    saved = numpy.load(cache)
    for row in out["grid"]:
        more = run_strategy(ContradictionHubs(probes=2, hub_share=1.0, max_hubs=row["hubs"] + 1, seed=0), spans,
                            scorer=lambda pairs: (saved["forward"], saved["backward"]))
        if row["knn_k"]:
            more = normalise_pairs(numpy.concatenate([more, bc.candidate_family("knn", row["knn_k"], spans, vectors)]), n)
        assert len(more) / total > budget
    # Even split: the largest k whose neighbours alone stay within half the budget (here 2, not 5).
    share = {k: len(bc.candidate_family("knn", k, spans, vectors)) / total for k in (2, 5)}
    assert share[2] <= budget / 2 < share[5]
    assert out["even_split"]["knn_k"] == 2
    # The probe scores are read back from the cache: no new NLI calls.
    again = bc.hub_evaluation(spans, texts, vectors, references, budget, probes=2, seed=0, backend_factory=factory,
                              cache=cache, knn_grid=(0, 2, 5))
    assert len(backends) == 1 and again["grid"] == out["grid"]
