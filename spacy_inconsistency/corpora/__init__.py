"""Readers for each benchmark: files in ../shared/data -> records, Docs or DocBins."""
from .claimdiff import claimdiff_docs, convert_claimdiff, read_claimdiff  # noqa: F401
from .contradoc import build_contradoc_paired, read_contradoc  # noqa: F401
from .political import convert_political, fold_indices, political_docs  # noqa: F401
from .qualomat import iter_qualomat_comments, load_qualomat_comments  # noqa: F401
from .true import TRUE_DATASETS, TrueExample, read_true  # noqa: F401
