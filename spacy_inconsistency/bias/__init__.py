"""Partisan bias audit of validity judges (seed `partisan-inference-bias.txt`).

`dataset.generate(lang)` writes the paper's 384 argument patterns per language
from the data tables in `data/`; `judges` turns an NLI backend, a spaCy
pipeline with `doc.cats` or an LLM client into a validity judge; the scores
(weighted and unweighted bias, the one-sample Z test) live in
`spacy_inconsistency.metrics.bias` and are re-exported here.
"""
from ..metrics.bias import bias_counts, bias_values, bias_z_test, unweighted_bias, weighted_bias
from .dataset import Argument, generate, read_jsonl, write_jsonl

__all__ = [
    "Argument",
    "bias_counts",
    "bias_values",
    "bias_z_test",
    "generate",
    "read_jsonl",
    "unweighted_bias",
    "weighted_bias",
    "write_jsonl",
]
