"""4-bit groups: the weights the larger NLI model (nli-mpnet-lora) was trained on.

The LoRA adapters of `nli-mpnet-lora` were trained on a GPU machine that received the encoder as
int4 groups (symmetric absmax per group of `GROUP` values along each row, fp16 scales), so the
merged model must start from exactly these dequantized weights. numpy only and no package
imports: `scripts/nli/lora_mpnet.py` loads this file by path on a machine without spaCy.
"""
from typing import Tuple

import numpy as np

GROUP = 64


def quantize(w: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """int4 symmetric absmax per group of GROUP values along each row; two values per byte.

    w (np.ndarray): A 2-d weight whose columns divide into groups of GROUP.
    RETURNS (Tuple[np.ndarray, np.ndarray]): The packed uint8 values (rows, cols / 2) and the
        fp16 scales (rows, cols / GROUP).
    """
    rows, cols = w.shape
    if cols % GROUP:
        raise ValueError(f"{cols} columns do not divide into groups of {GROUP}")
    g = w.astype(np.float32).reshape(rows, cols // GROUP, GROUP)
    scale = (np.abs(g).max(axis=-1, keepdims=True) / 7.0).astype(np.float16)
    safe = np.where(scale == 0, np.float16(1), scale).astype(np.float32)
    q = np.clip(np.rint(g / safe), -8, 7).astype(np.int8) + 8  # 0..15
    q = q.reshape(rows, cols)
    packed = (q[:, 0::2] | (q[:, 1::2] << 4)).astype(np.uint8)
    return packed, scale.reshape(rows, cols // GROUP)


def dequantize(packed: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """The float32 weight of `quantize`'s output."""
    rows, half = packed.shape
    q = np.empty((rows, half * 2), dtype=np.int8)
    q[:, 0::2] = (packed & 0x0F).astype(np.int8) - 8
    q[:, 1::2] = (packed >> 4).astype(np.int8) - 8
    g = q.reshape(rows, -1, GROUP).astype(np.float32) * scale.astype(np.float32)[..., None]
    return g.reshape(rows, half * 2)


def is_quantized(name: str, shape) -> bool:
    """Whether an MPNet weight was sent as int4 groups (the word embeddings and the encoder's
    attention and feed-forward projections; norms, biases and positions were sent as fp16)."""
    return len(shape) == 2 and shape[1] % GROUP == 0 and (
        name.endswith("word_embeddings.weight") or (".layer." in name and name.endswith("dense.weight"))
        or any(name.endswith(f"attn.{p}.weight") for p in "qkvo"))
