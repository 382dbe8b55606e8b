"""Length-sorted batches under a token budget, and CUDA out-of-memory retries."""
import warnings
from typing import Any, Callable, Dict, List, Sequence

import numpy

from ..errors import Errors, Warnings


def plan_batches(
    lengths: Sequence[int], *, max_batch_size: int, max_batch_tokens: int
) -> List[List[int]]:
    """Group input indices into batches of similar length.

    Inputs are taken longest first, so that a batch too large for the device
    fails on the first try rather than at the end. A batch never holds more
    than `max_batch_size` inputs, nor more than `max_batch_tokens` tokens
    once padded to its longest input (a single longer input still gets a
    batch of its own).

    lengths (Sequence[int]): Token count of each input.
    max_batch_size (int): Most inputs in a batch.
    max_batch_tokens (int): Most padded tokens in a batch.
    RETURNS (List[List[int]]): Indices into `lengths`, batch by batch.
    """
    order = numpy.argsort(-numpy.asarray(lengths, dtype=numpy.int64), kind="stable")
    batches: List[List[int]] = []
    current: List[int] = []
    longest = 0
    for i in order.tolist():
        length = int(lengths[i])
        width = max(longest, length)
        if current and (
            len(current) + 1 > max_batch_size or width * (len(current) + 1) > max_batch_tokens
        ):
            batches.append(current)
            current = []
            width = length
        current.append(i)
        longest = width
    if current:
        batches.append(current)
    return batches


def run_halving_on_oom(
    forward: Callable[[List[int]], numpy.ndarray],
    batch: List[int],
    *,
    is_oom: Callable[[BaseException], bool],
    on_oom: Callable[[int], None],
    on_single: Callable[[int, BaseException], BaseException],
) -> numpy.ndarray:
    """Run `forward` on a batch; when it runs out of memory, run each half.

    forward (Callable): Takes a list of input indices, returns one row per input.
    batch (List[int]): The input indices.
    is_oom (Callable): Tells an out-of-memory error from others.
    on_oom (Callable): Called with the failed batch size (free caches, warn).
    on_single (Callable): Builds the error to raise when one input alone fails.
    RETURNS (numpy.ndarray): The rows, in the order of `batch`.
    """
    try:
        return forward(batch)
    except Exception as err:  # noqa: BLE001 -- re-raised unless it is an OOM
        if not is_oom(err):
            raise
        if len(batch) == 1:
            raise on_single(batch[0], err) from err
        on_oom(len(batch))
    half = len(batch) // 2
    first = run_halving_on_oom(
        forward, batch[:half], is_oom=is_oom, on_oom=on_oom, on_single=on_single
    )
    second = run_halving_on_oom(
        forward, batch[half:], is_oom=is_oom, on_oom=on_oom, on_single=on_single
    )
    return numpy.concatenate([first, second], axis=0)


def is_cuda_oom(err: BaseException) -> bool:
    """Whether an exception is torch's CUDA out-of-memory error."""
    import torch

    return isinstance(err, torch.cuda.OutOfMemoryError)


class BudgetedBatches:
    """Mixin of the model backends: run inputs in length-sorted batches under
    `max_batch_size` / `max_batch_tokens`, halving a batch and the token budget
    when CUDA runs out of memory. The backend sets those two attributes and
    `n_oom_retries`.
    """

    max_batch_size: int
    max_batch_tokens: int
    n_oom_retries: int

    def run_batches(
        self,
        lengths: Sequence[int],
        forward: Callable[[List[int]], numpy.ndarray],
        out: numpy.ndarray,
    ) -> numpy.ndarray:
        """Fill `out` with `forward(batch)` rows, batch by batch.

        lengths (Sequence[int]): Token count of each input.
        forward (Callable[[List[int]], numpy.ndarray]): Input indices -> one
            row (or value) per input.
        out (numpy.ndarray): Output, one row per input; returned.
        RETURNS (numpy.ndarray): `out`.
        """
        for batch in plan_batches(
            lengths, max_batch_size=self.max_batch_size, max_batch_tokens=self.max_batch_tokens
        ):
            out[batch] = run_halving_on_oom(
                forward,
                batch,
                is_oom=is_cuda_oom,
                on_oom=self._on_oom,
                on_single=lambda i, err: RuntimeError(Errors.E005.format(length=lengths[i])),
            )
        return out

    def _on_oom(self, size: int) -> None:
        import torch

        self.n_oom_retries += 1
        # Later batches start from the budget that is known to fit.
        self.max_batch_tokens = max(1, self.max_batch_tokens // 2)
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        if self.n_oom_retries == 1:
            warnings.warn(Warnings.W002.format(size=size))


def pad_features(tokenizer: Any, features: List[Dict[str, List[int]]], *, side: str) -> Dict[str, Any]:
    """One batch of encoded inputs as padded tensors, with the tokenizer's own `pad`.

    A tokenizer without a padding token (some decoder-only models) pads with
    its end-of-sequence token: the attention mask hides the padding either way.

    tokenizer (Any): A Hugging Face tokenizer.
    features (List[Dict[str, List[int]]]): `input_ids` and optionally
        `token_type_ids` / `attention_mask` per input.
    side (str): "right" or "left" (decoder-only models read the last position).
    RETURNS (Dict[str, Any]): int64 tensors of shape (batch, longest), with an
        `attention_mask`.
    """
    if tokenizer.pad_token_id is None:
        if tokenizer.eos_token is None:
            raise ValueError(Errors.E006.format(name="tokenizer", expected="a padding or end-of-sequence token",
                                                value=type(tokenizer).__name__))
        tokenizer.pad_token = tokenizer.eos_token
    # transformers' own wrapper: `pad` on a fast tokenizer otherwise advises `__call__`, but
    # these inputs are already encoded (and truncated where needed).
    from transformers.data.data_collator import pad_without_fast_tokenizer_warning

    return dict(pad_without_fast_tokenizer_warning(
        tokenizer, features, padding=True, padding_side=side, return_attention_mask=True, return_tensors="pt"))
