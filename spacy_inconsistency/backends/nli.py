"""NLI cross-encoder backend: any Hugging Face sequence-classification NLI model."""
import logging
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy
from spacy.util import registry

from ..errors import Errors, Warnings
from .batching import BudgetedBatches, pad_features
from .loading import DEFAULT_MODEL, cpu_has_native_bf16, load_model, resolve_device, resolve_model

logger = logging.getLogger(__name__)

ENTAILMENT = "entailment"
NEUTRAL = "neutral"
CONTRADICTION = "contradiction"
NOT_ENTAILMENT = "not_entailment"
NLI_LABELS = (ENTAILMENT, NEUTRAL, CONTRADICTION, NOT_ENTAILMENT)
_NOT_ENTAILMENT_NAMES = {
    "not_entailment", "non_entailment", "not_entailed", "no_entailment", "not_entail",
}
# Pairs are tokenized and scored this many at a time, so memory does not grow
# with the number of pairs asked for in one call.
STREAM_CHUNK = 4096
DTYPES = ("auto", "float32", "bfloat16", "mixed", "int8")


def has_native_bf16(device: Any) -> bool:
    """Whether bf16 arithmetic is native on `device` (CUDA, or a CPU with AMX or
    AVX512-BF16); elsewhere torch emulates it, slower than float32."""
    return device.type == "cuda" or (device.type == "cpu" and cpu_has_native_bf16())


def canonical_label(name: str) -> Optional[str]:
    """Map a model's label name to one of `NLI_LABELS`, or None.

    name (str): A value of `config.id2label`, e.g. "CONTRADICTION" or "Entailment".
    RETURNS (Optional[str]): The canonical name.
    """
    key = name.strip().lower().replace("-", "_").replace(" ", "_")
    if key in _NOT_ENTAILMENT_NAMES:
        return NOT_ENTAILMENT
    if key.startswith("entail"):
        return ENTAILMENT
    if key.startswith("neutral"):
        return NEUTRAL
    if key.startswith("contradict"):
        return CONTRADICTION
    return None


def read_label_index(
    id2label: Dict[Any, str], *, model_name: str, label_map: Optional[Dict[str, str]] = None
) -> Dict[str, int]:
    """Find which output column holds which NLI label.

    id2label (Dict[int, str]): The model's `config.id2label`.
    model_name (str): For error messages.
    label_map (Optional[Dict[str, str]]): Model label name -> canonical name,
        for models whose names cannot be read (e.g. "LABEL_0").
    RETURNS (Dict[str, int]): Canonical label -> column.
    """
    index: Dict[str, int] = {}
    for i, name in sorted((int(k), v) for k, v in id2label.items()):
        canonical = canonical_label(label_map[name]) if label_map and name in label_map else canonical_label(name)
        if canonical is None or canonical in index:
            raise ValueError(
                Errors.E002.format(name=model_name, labels=sorted(id2label.values()))
            )
        index[canonical] = i
    if ENTAILMENT not in index and CONTRADICTION not in index:
        raise ValueError(Errors.E002.format(name=model_name, labels=sorted(id2label.values())))
    return index


class NLIBackend(BudgetedBatches):
    """Score premise/hypothesis pairs with an NLI cross-encoder.

    model (str): "default" (the model shipped in the package), a local
        directory or a Hugging Face hub id.
    device (str): "auto", "cpu", "cuda" or "cuda:N".
    max_batch_size (int): Most pairs in one forward pass.
    max_batch_tokens (int): Most tokens in one forward pass, padding included.
    revision (Optional[str]): Hub revision to pin.
    label_map (Optional[Dict[str, str]]): Model label -> NLI label, for
        models whose `id2label` names cannot be read.
    truncation (str): What to do with a pair longer than the model's limit:
        "warn" truncates the longer side and warns, "error" raises.
    local_files_only (bool): Never contact the hub.
    dtype (str): Number format of the forward passes: "auto" (bfloat16 on
        CUDA and on CPUs with native bf16, AMX or AVX512-BF16; float32 on other
        CPUs), "float32", "bfloat16" (weights in bf16; held-out NLI accuracy
        as float32's, P(contradiction) within ~0.04, see docs/speed.md),
        "mixed" (the matrix products in bf16 under `torch.autocast`, the
        linear layers' weights stored in bf16 as autocast would cast them; the
        embeddings, residual stream, LayerNorm and softmax stay float32) or
        "int8" (CPU only: dynamic int8 quantization of the linear layers).
    """

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        device: str = "auto",
        max_batch_size: int = 64,
        max_batch_tokens: int = 8192,
        revision: Optional[str] = None,
        label_map: Optional[Dict[str, str]] = None,
        truncation: str = "warn",
        local_files_only: bool = False,
        dtype: str = "auto",
    ) -> None:
        import torch

        if max_batch_size < 1:
            raise ValueError(Errors.E006.format(name="max_batch_size", expected="at least 1", value=max_batch_size))
        if max_batch_tokens < 1:
            raise ValueError(Errors.E006.format(name="max_batch_tokens", expected="at least 1", value=max_batch_tokens))
        if truncation not in ("warn", "error"):
            raise ValueError(Errors.E006.format(name="truncation", expected="'warn' or 'error'", value=truncation))
        if dtype not in DTYPES:
            raise ValueError(Errors.E006.format(name="dtype", expected=" or ".join(map(repr, DTYPES)), value=repr(dtype)))
        self._settings = dict(
            model=model, device=device, max_batch_size=max_batch_size,
            max_batch_tokens=max_batch_tokens, revision=revision, label_map=label_map,
            truncation=truncation, local_files_only=local_files_only, dtype=dtype,
        )
        self.name = model
        self.device = resolve_device(device)
        if dtype == "int8" and self.device.type != "cpu":
            raise ValueError(Errors.E006.format(name="dtype", expected="'int8' only on the CPU", value=self.device))
        if dtype == "auto":
            # bf16 has fp32's range, so no overflow (unlike fp16); on a CPU only where it is native.
            dtype = "bfloat16" if has_native_bf16(self.device) else "float32"
        self.dtype_name = dtype
        self.dtype = torch.bfloat16 if dtype == "bfloat16" else torch.float32
        self.max_batch_size = max_batch_size
        self.max_batch_tokens = max_batch_tokens
        self.truncation = truncation
        self.tokenizer, self.model = load_model(
            model, kind="sequence-classification", device=self.device, dtype=self.dtype,
            revision=revision, local_files_only=local_files_only, quantize=dtype == "int8",
            bf16_linears=dtype == "mixed",
        )
        self.label_index = read_label_index(
            self.model.config.id2label, model_name=model, label_map=label_map
        )
        self.max_length = self._max_length()
        self.n_truncated = 0
        self.n_oom_retries = 0
        # Whether pairs may be assembled from each text's tokens (`_encode_by_text`); None: not checked yet.
        self._assemble_pairs: Optional[bool] = None

    @property
    def settings(self) -> Dict[str, Any]:
        """The settings it was created with (the registered function's arguments)."""
        return dict(self._settings)

    def __getstate__(self) -> Dict[str, Any]:
        return dict(self._settings)

    def __setstate__(self, state: Dict[str, Any]) -> None:
        model = state.pop("model")
        self.__init__(model, **state)  # type: ignore[misc]

    @property
    def local_dir(self) -> Optional[Path]:
        """The model's local directory (None for a model reached by hub id)."""
        path, local = resolve_model(self.name)
        return Path(path) if local and Path(path).is_dir() else None

    @property
    def labels(self) -> Tuple[str, ...]:
        """The canonical NLI labels this model predicts, in column order."""
        return tuple(sorted(self.label_index, key=self.label_index.__getitem__))

    def _max_length(self) -> int:
        limit = getattr(self.tokenizer, "model_max_length", None) or 0
        positions = getattr(self.model.config, "max_position_embeddings", None)
        if positions:
            # RoBERTa-style models reserve two positions for the padding offset.
            if getattr(self.model.config, "model_type", "") in ("roberta", "xlm-roberta", "camembert"):
                positions -= 2
            limit = min(limit, positions) if 0 < limit < 10**6 else positions
        return int(limit) if 0 < limit < 10**6 else 512

    def predict(self, pairs: Sequence[Tuple[str, str]]) -> Dict[str, numpy.ndarray]:
        """Probabilities of each NLI label for each (premise, hypothesis) pair.

        pairs (Sequence[Tuple[str, str]]): The pairs.
        RETURNS (Dict[str, numpy.ndarray]): Canonical label -> float32 array of
            shape (len(pairs),), for the labels the model has (`self.labels`).
        """
        probs = self.predict_proba(pairs)
        return {label: probs[:, col] for label, col in self.label_index.items()}

    def predict_proba(self, pairs: Sequence[Tuple[str, str]]) -> numpy.ndarray:
        """The model's softmax output for each pair, columns as in `config.id2label`.

        pairs (Sequence[Tuple[str, str]]): The pairs.
        RETURNS (numpy.ndarray): float32, shape (len(pairs), n_labels).
        """
        n_labels = len(self.label_index)
        out = numpy.zeros((len(pairs), n_labels), dtype=numpy.float32)
        for start in range(0, len(pairs), STREAM_CHUNK):
            chunk = pairs[start : start + STREAM_CHUNK]
            out[start : start + len(chunk)] = self._predict_chunk(chunk)
        return out

    def _encode(self, pairs: Sequence[Tuple[str, str]]) -> List[Dict[str, List[int]]]:
        premises = [p for p, _ in pairs]
        hypotheses = [h for _, h in pairs]
        features = self._encode_by_text(pairs)
        if features is None:
            encoded = self.tokenizer(premises, hypotheses, truncation=False, verbose=False)
            features = [
                {key: encoded[key][i] for key in encoded.keys()} for i in range(len(pairs))
            ]
        too_long = [i for i, f in enumerate(features) if len(f["input_ids"]) > self.max_length]
        if too_long:
            longest = max(len(features[i]["input_ids"]) for i in too_long)
            if self.truncation == "error":
                raise ValueError(Errors.E010.format(n=len(too_long), limit=self.max_length, longest=longest))
            redo = self.tokenizer(
                [premises[i] for i in too_long], [hypotheses[i] for i in too_long],
                truncation="longest_first", max_length=self.max_length,
            )
            for j, i in enumerate(too_long):
                features[i] = {key: redo[key][j] for key in redo.keys()}
            self.n_truncated += len(too_long)
            warnings.warn(
                Warnings.W001.format(n=len(too_long), total=len(pairs), limit=self.max_length)
            )
        return features

    def _encode_by_text(self, pairs: Sequence[Tuple[str, str]]) -> Optional[List[Dict[str, List[int]]]]:
        """Each distinct text tokenized once, each pair assembled from its two texts'
        tokens by the fast tokenizer's own post-processor: what encoding the pair does,
        without tokenizing a unit again for each of the pairs it is in (a unit of a
        20-unit document is in 19). None where it does not apply: a slow tokenizer,
        or one whose assembled pair differs from its encoded pair (checked once, on
        the first pair)."""
        backend = getattr(self.tokenizer, "backend_tokenizer", None)
        if backend is None or self._assemble_pairs is False or not pairs:
            return None
        names = self.tokenizer.model_input_names
        # As the tokenizer's own call without truncation or padding sets it (a truncating
        # call before leaves its setting on the shared Rust tokenizer).
        if backend.truncation is not None:
            backend.no_truncation()
        if backend.padding is not None:
            backend.no_padding()
        texts = list(dict.fromkeys(text for pair in pairs for text in pair))
        tokens = dict(zip(texts, backend.encode_batch(texts, add_special_tokens=False)))
        features = []
        for premise, hypothesis in pairs:
            encoding = backend.post_process(tokens[premise], tokens[hypothesis], add_special_tokens=True)
            feature = {"input_ids": encoding.ids}
            if "token_type_ids" in names:
                feature["token_type_ids"] = encoding.type_ids
            if "attention_mask" in names:
                feature["attention_mask"] = encoding.attention_mask
            features.append(feature)
        if self._assemble_pairs is None:
            encoded = self.tokenizer([pairs[0][0]], [pairs[0][1]], truncation=False, verbose=False)
            self._assemble_pairs = {key: encoded[key][0] for key in encoded.keys()} == features[0]
            if not self._assemble_pairs:
                logger.info("%s: pairs assembled from each text's tokens differ from encoded pairs; "
                            "encoding each pair whole", self.name)
                return None
        return features

    def _predict_chunk(self, pairs: Sequence[Tuple[str, str]]) -> numpy.ndarray:
        n_labels = len(self.label_index)
        if not pairs:
            return numpy.zeros((0, n_labels), dtype=numpy.float32)
        features = self._encode(pairs)
        lengths = [len(f["input_ids"]) for f in features]
        out = numpy.zeros((len(pairs), n_labels), dtype=numpy.float32)
        return self.run_batches(lengths, lambda idx: self._forward([features[i] for i in idx]), out)

    def _forward(self, features: List[Dict[str, List[int]]]) -> numpy.ndarray:
        import torch

        batch = pad_features(self.tokenizer, features, side="right")
        arrays = {key: value.to(self.device) for key, value in batch.items()}
        with torch.inference_mode(), torch.autocast(
            self.device.type, dtype=torch.bfloat16, enabled=self.dtype_name == "mixed"
        ):
            logits = self.model(**arrays).logits
            probs = torch.softmax(logits.float(), dim=-1)
        return probs.cpu().numpy()


@registry.misc("spacy-inconsistency.NLIBackend.v1")
def make_nli_backend(
    model: str = DEFAULT_MODEL,
    device: str = "auto",
    max_batch_size: int = 64,
    max_batch_tokens: int = 8192,
    revision: Optional[str] = None,
    label_map: Optional[Dict[str, str]] = None,
    truncation: str = "warn",
    local_files_only: bool = False,
    dtype: str = "auto",
) -> NLIBackend:
    """Create an NLI backend (see `NLIBackend` for the settings)."""
    return NLIBackend(
        model,
        device=device,
        max_batch_size=max_batch_size,
        max_batch_tokens=max_batch_tokens,
        revision=revision,
        label_map=label_map,
        truncation=truncation,
        local_files_only=local_files_only,
        dtype=dtype,
    )
