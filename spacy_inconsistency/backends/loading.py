"""Find and load Hugging Face models from a local path, the embedded default or a hub name."""
import json
import logging
import os
import sys
import threading
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Optional, Tuple

from ..errors import Errors, Warnings

logger = logging.getLogger("spacy_inconsistency")
logger.addHandler(logging.NullHandler())

DEFAULT_MODEL = "default"
# The default cascade's second stage, built from PyPI's all-mpnet-base-v2 (backends/mpnet_lora.py).
MPNET_LORA_MODEL = "mpnet-lora"
# The shipped NLI models (the embedded MiniLM, mpnet-lora) were trained on English only.
ENGLISH_ONLY_MODELS = (DEFAULT_MODEL, MPNET_LORA_MODEL)


# "Does this text look English?" (W144): the share of a Doc's words that are English stop words.
# English prose is 0.36-0.6 (SummEval's articles, the behaviour suite's documents); German 0.03 (median
# of Qual-O-Mat's party comments; 99% under 0.12). Headlines and lists of names also fall under
# 0.12 (8% of ClaimDiff's headlines of 8+ words), hence the 20 words a Doc needs to be judged.
MIN_ENGLISH_SHARE = 0.12
MIN_WORDS = 20
MAX_CHARS = 10000  # the start of a long Doc decides


def english_share(doc: Any) -> Optional[float]:
    """How English a Doc's text looks: 0.0 where most of its first 10,000 characters' letters
    are of a script other than Latin, else the share of its words (alphabetic tokens) that are
    English stop words; None for a Doc with too few letters or words to tell.

    doc (Doc): A tokenized Doc.
    RETURNS (Optional[float]): The share, or None.
    """
    from spacy.lang.en.stop_words import STOP_WORDS

    letters = [char for char in doc.text[:MAX_CHARS].lower() if char.isalpha()]
    if len(letters) >= 20 and sum("a" <= c <= "z" or "\u00e0" <= c <= "\u024f" for c in letters) < len(letters) / 2:
        return 0.0
    end = doc.char_span(0, min(len(doc.text), MAX_CHARS), alignment_mode="contract")
    words = [token.lower_ for token in (end if end is not None else doc) if token.is_alpha]
    if len(words) < MIN_WORDS:
        return None
    return sum(word in STOP_WORDS for word in words) / len(words)


def warn_other_language(component: str, model_name: str, docs: Iterable[Any]) -> bool:
    """Warn when a shipped English-only model is about to read another language: W143 for a
    pipeline of another language, W144 for an English pipeline's Doc whose text does not look
    English (`english_share` under 0.12), so German text run with `--lang en` is not scored in silence.

    component (str): The component's name, for the message.
    model_name (str): The model setting ("default", "mpnet-lora", a path, a hub id).
    docs (Iterable[Doc]): The Docs about to be read.
    RETURNS (bool): Whether it warned.
    """
    if model_name not in ENGLISH_ONLY_MODELS:
        return False
    docs = list(docs)
    other = sorted({doc.lang_ for doc in docs} - {"en"})
    if other:
        warnings.warn(Warnings.W143.format(name=component, lang=", ".join(other), model=model_name))
        return True
    for doc in docs:
        share = english_share(doc)
        if share is not None and share < MIN_ENGLISH_SHARE:
            warnings.warn(Warnings.W144.format(name=component, model=model_name, share=share, start=doc.text[:40]))
            return True
    return False


EMBEDDED_MODEL_DIR = "nli-minilm-l6"

_CACHE: Dict[Tuple[Any, ...], Any] = {}
_CACHE_LOCK = threading.Lock()


def _after_fork_in_child() -> None:
    # A forked child (e.g. `nlp.pipe(n_process=2)`) inherits torch's OpenMP
    # pool in a state it cannot use: its first parallel op hangs. One thread
    # per worker process avoids the pool, and the workers share the cores anyway.
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


_FORK_GUARD = []


def guard_forks() -> None:
    """Give forked workers one torch thread (see `_after_fork_in_child`); once per process.
    Called where this package builds a torch model: the loader below, and the claim-relation
    model, whose spacy-transformers encoder does not load through it."""
    if not _FORK_GUARD and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork_in_child)
        _FORK_GUARD.append(True)


guard_forks()


def require_backend(model: Any, *, factory: str, backend: str, setting: str = "model") -> None:
    """Raise a hint at the nested config when a factory's `model` is a plain string.

    `config={"model": "path/to/model"}` is an easy slip for
    `config={"model": {"model": "path/to/model"}}`; spaCy's own message
    ("is not <class NLIBackend>") does not say what to write.

    model (Any): The factory's `model` argument.
    factory (str): The factory's name.
    backend (str): The registered name of the backend (`@misc`).
    setting (str): The factory setting that holds it ("model", "rescorer").
    """
    if isinstance(model, str):
        raise ValueError(Errors.E220.format(factory=factory, value=json.dumps(model), backend=backend, setting=setting))


def cached(key: Tuple[Any, ...], build: Callable[[], Any]) -> Any:
    """`build()` once per process per key, shared by every backend that loads models.

    key (Tuple[Any, ...]): What identifies the loaded object (path, kind, device, dtype, revision).
    build (Callable[[], Any]): Loads it; called under the cache lock, at most once per key.
    RETURNS (Any): The shared object.
    """
    with _CACHE_LOCK:
        if key not in _CACHE:
            _CACHE[key] = build()
        return _CACHE[key]


def embedded_model_path() -> Path:
    """The directory of the NLI model shipped inside the package.

    RETURNS (Path): The directory (Hugging Face format).
    """
    return Path(__file__).resolve().parent.parent / "models" / EMBEDDED_MODEL_DIR


def _looks_like_path(name: str) -> bool:
    # Hub ids are "name" or "org/name"; anything else can only be a path.
    return (
        name.startswith((".", "/", "~"))
        or name.count("/") > 1
        or os.sep != "/" and os.sep in name
    )


def resolve_model(name: str) -> Tuple[str, bool]:
    """Turn a model setting into something `from_pretrained` takes.

    name (str): "default", "mpnet-lora", a local directory or a hub id.
    RETURNS (Tuple[str, bool]): The path or hub id, and whether it is local.
    """
    if name == DEFAULT_MODEL:
        return str(embedded_model_path()), True
    if name == MPNET_LORA_MODEL:
        from .mpnet_lora import mpnet_lora_path

        return str(mpnet_lora_path()), True
    path = Path(name).expanduser()
    if path.is_dir():
        return str(path), True
    return name, _looks_like_path(name)


def resolve_device(device: str) -> Any:
    """Turn a device setting into a torch device.

    device (str): "auto" (CUDA when available), "cpu", "cuda" or "cuda:N".
    RETURNS (torch.device): The device.
    """
    import torch

    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cpu":
        return torch.device("cpu")
    if device == "cuda" or device.startswith("cuda:"):
        if not torch.cuda.is_available():
            raise ValueError(Errors.E009.format(device=device))
        return torch.device(device)
    raise ValueError(Errors.E004.format(device=device))


# CPU flags of native bf16 arithmetic (Intel AMX, AVX512-BF16); without them torch
# emulates bf16 and it is slower than float32.
NATIVE_BF16_FLAGS = ("amx_bf16", "avx512_bf16")


def cpu_has_native_bf16(cpuinfo: Optional[str] = None) -> bool:
    """Whether this CPU computes bf16 natively (AMX or AVX512-BF16), read from
    /proc/cpuinfo's flags (False where there is none, e.g. macOS or Windows).

    cpuinfo (Optional[str]): The text of /proc/cpuinfo; None reads it.
    RETURNS (bool): True when a flags line names amx_bf16 or avx512_bf16.
    """
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf8", errors="replace")
        except OSError:
            return False
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features") and set(value.split()) & set(NATIVE_BF16_FLAGS):
            return True
    return False


def _missing_model_error(name: str, revision: Optional[str], err: Exception) -> OSError:
    from huggingface_hub import constants

    offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0") or constants.HF_HUB_OFFLINE
    return OSError(
        Errors.E001.format(
            name=name,
            path=Path(name).expanduser().resolve(),
            revision=revision or "main",
            cache=constants.HF_HUB_CACHE,
            offline=offline,
            err=str(err).splitlines()[0] if str(err) else type(err).__name__,
        )
    )


def load_model(
    name: str,
    *,
    kind: str,
    device: Any,
    dtype: Any,
    revision: Optional[str] = None,
    local_files_only: bool = False,
    quantize: bool = False,
    bf16_linears: bool = False,
) -> Tuple[Any, Any]:
    """Load a tokenizer and model once per process and share them.

    name (str): "default", a local directory or a hub id.
    kind (str): "sequence-classification" (the only kind so far).
    device (torch.device): Where to put the model.
    dtype (torch.dtype): The weights' dtype on that device.
    revision (Optional[str]): A hub revision to pin.
    local_files_only (bool): Never contact the hub.
    quantize (bool): Quantize the linear layers to int8 (dynamic, CPU only).
    bf16_linears (bool): Store the linear layers' weights in bfloat16 and the rest
        in `dtype`: for `torch.autocast` to bf16 (the NLI backend's "mixed"), which
        otherwise casts every linear weight again in each forward pass.
    RETURNS (Tuple[PreTrainedTokenizerBase, PreTrainedModel]): Both, the model in eval mode.
    """
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    if quantize:
        # The float model first (outside the cache lock, which is not re-entrant).
        tokenizer, float_model = load_model(name, kind=kind, device=device, dtype=dtype, revision=revision,
                                            local_files_only=local_files_only)

        def build_quantized() -> Tuple[Any, Any]:
            import copy
            import warnings

            import torch

            with warnings.catch_warnings():
                # torch.ao.quantization announces its move to torchao; the API still works in 2.x.
                warnings.simplefilter("ignore", DeprecationWarning)
                warnings.filterwarnings("ignore", message=".*quantize_per_tensor.*")
                quantized = torch.ao.quantization.quantize_dynamic(
                    copy.deepcopy(float_model), {torch.nn.Linear}, dtype=torch.qint8
                )
            quantized.eval()
            return tokenizer, quantized

        return cached((name, kind, str(device), str(dtype), revision, "int8"), build_quantized)

    target, is_local = resolve_model(name)

    def build() -> Tuple[Any, Any]:
        if is_local and not Path(target).is_dir():
            raise _missing_model_error(name, revision, FileNotFoundError(target))
        kwargs: Dict[str, Any] = {"revision": revision}
        if local_files_only or is_local:
            kwargs["local_files_only"] = True
        try:
            tokenizer = AutoTokenizer.from_pretrained(target, **kwargs)
            model = AutoModelForSequenceClassification.from_pretrained(
                target, torch_dtype=dtype, **kwargs
            )
        except (OSError, ValueError) as err:
            raise _missing_model_error(name, revision, err) from err
        model.to(device)
        model.eval()
        logger.info("Loaded %s on %s (%s)", target, device, dtype)
        return tokenizer, model

    if bf16_linears:

        def build_mixed() -> Tuple[Any, Any]:
            import torch

            tokenizer, model = build()
            for module in model.modules():
                if isinstance(module, torch.nn.Linear):
                    module.to(torch.bfloat16)
            return tokenizer, model

        return cached((target, kind, str(device), str(dtype), revision, "bf16-linears"), build_mixed)
    return cached((target, kind, str(device), str(dtype), revision), build)
