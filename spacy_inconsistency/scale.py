"""SCALE as plain functions, for people coming from the `scale-score` package.

Switching is one line::

    # from scale_score import score
    from spacy_inconsistency.scale import score
    scores = score(premises, claims, model="path/to/flan-t5-large", chunk_size=1000, window_size=0.25)

`score` cuts the same token windows as `scale-score` 0.1.0 and returns the
scores in its order (premise by premise, claim by claim); `retrieve` walks the
same search tree. What differs is speed: every (window, claim) input of all
premises is scored in length-sorted, padded batches with one decoder step,
instead of one `generate` call per input.
"""
import math
import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from .backends.entailment import EntailmentBackend, Template
from .errors import Errors, Warnings

DEFAULT_CHUNK_SIZE = 1000
DEFAULT_WINDOW_SIZE = 0.25
DEFAULT_BRANCHES = 2
# A premise of fewer than chunk_size + this many tokens (tokenized alone)
# may fit whole: its whole prompt is tokenized in one go to decide exactly,
# as the reference does. A longer one needs windows for sure.
_JOINT_MARGIN = 2


def _backend(model: Union[str, EntailmentBackend], device: str, kind: str, **kwargs: Any) -> EntailmentBackend:
    if isinstance(model, EntailmentBackend):
        return model
    return EntailmentBackend(model, kind=kind, device=device, **kwargs)


def window_bounds(n_tokens: int, *, room: int, window_size: float) -> List[Tuple[int, int]]:
    """Token windows over a premise, exactly as `scale-score` 0.1.0 cuts them.

    n_tokens (int): Premise tokens (no special tokens).
    room (int): Tokens left for the premise once the prompt is counted.
    window_size (float): Overlap between windows, as a fraction of `room`.
    RETURNS (List[Tuple[int, int]]): (begin, end) of each window.
    """
    step = int(room * (1 - window_size))
    n_windows = math.ceil(n_tokens / (room * (1 - window_size)))
    return [(step * i, min(step * i + room, n_tokens)) for i in range(n_windows)]


def check_room(backend: EntailmentBackend, claim: str, template: Template, chunk_size: int,
               window_size: float) -> int:
    """Tokens left for the premise in a chunk; raise E100 when too few."""
    room = chunk_size - template.overhead
    if room < 1 or int(room * (1 - window_size)) < 1:
        minimum = max(1, math.ceil(1 / max(1e-9, 1 - window_size)))
        raise ValueError(
            Errors.E100.format(
                claim=claim[:80], overhead=template.overhead, name=backend.name,
                left=max(room, 0), chunk_size=chunk_size, minimum=minimum,
            )
        )
    return room


def check_chunk_settings(chunk_size: int, overlap: float, *, overlap_name: str = "overlap") -> None:
    """E006 unless `chunk_size` >= 2 and `overlap` in [0, 1)."""
    if chunk_size < 2:
        raise ValueError(Errors.E006.format(name="chunk_size", expected="at least 2", value=chunk_size))
    if not 0.0 <= overlap < 1.0:
        raise ValueError(Errors.E006.format(name=overlap_name, expected="in [0, 1)", value=overlap))


def clamp_chunk_size(backend: EntailmentBackend, chunk_size: int) -> int:
    """`chunk_size`, or the model's input limit when that is smaller (with W101)."""
    if backend.max_length is not None and chunk_size > backend.max_length:
        warnings.warn(Warnings.W101.format(chunk_size=chunk_size, name=backend.name, limit=backend.max_length))
        return int(backend.max_length)
    return chunk_size


def _check_inputs(premises: Sequence[Any], claims: Sequence[Sequence[str]]) -> None:
    if len(premises) != len(claims):
        raise ValueError(Errors.E104.format(n_premises=len(premises), n_claims=len(claims)))
    for i, (premise, group) in enumerate(zip(premises, claims)):
        text = " ".join(premise) if isinstance(premise, (list, tuple)) else premise
        if not isinstance(text, str) or not text.strip():
            raise ValueError(Errors.E106.format(index=i))
        for j, claim in enumerate(group):
            if not isinstance(claim, str) or not claim.strip():
                raise ValueError(Errors.E105.format(index=j, premise=i))


def score_chunks(
    premises: Sequence[str],
    claims: Sequence[Sequence[str]],
    *,
    backend: EntailmentBackend,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    window_size: float = DEFAULT_WINDOW_SIZE,
) -> List[List[List[float]]]:
    """P(entailment) of every claim against every window of its premise.

    Windows as in `scale-score` 0.1.0: a premise whose whole prompt has fewer
    than `chunk_size` tokens is one input, tokenized in one go; a longer one
    is cut into windows of `chunk_size` minus the prompt's tokens, the next
    starting `1 - window_size` of a window later.

    premises (Sequence[str]): Source texts.
    claims (Sequence[Sequence[str]]): The claims of each premise.
    backend (EntailmentBackend): The scoring model.
    chunk_size (int): Tokens per input, prompt included.
    window_size (float): Overlap of consecutive windows, a fraction in [0, 1).
    RETURNS (List[List[List[float]]]): Premise -> claim -> window scores.
    """
    check_chunk_settings(chunk_size, window_size, overlap_name="window_size")
    _check_inputs(premises, claims)
    chunk_size = clamp_chunk_size(backend, chunk_size)
    # (premise, template, begin, end) for windows; (ids, n_second) for joint inputs.
    specs: List[Tuple[Any, ...]] = []
    lengths: List[int] = []
    owners: List[Tuple[int, int]] = []
    premise_ids: List[List[int]] = []
    unknown = 0
    n_source = 0
    for p, (premise, group) in enumerate(zip(premises, claims)):
        ids = backend.premise_ids(premise)
        premise_ids.append(ids)
        if group:
            unknown += int(round(backend.unknown_fraction(ids) * len(ids)))
            n_source += len(ids)
        for c, claim in enumerate(group):
            if len(ids) < chunk_size + _JOINT_MARGIN:
                joint = backend.joint_input(premise, claim)
                if len(joint[0]) < chunk_size:
                    specs.append(("joint", joint))
                    lengths.append(len(joint[0]))
                    owners.append((p, c))
                    continue
            template = backend.template(claim)
            room = check_room(backend, claim, template, chunk_size, window_size)
            for begin, end in window_bounds(len(ids), room=room, window_size=window_size):
                specs.append(("window", p, template, begin, end))
                lengths.append(template.overhead + end - begin)
                owners.append((p, c))
    if n_source and unknown / n_source > 0.2:
        warnings.warn(Warnings.W102.format(frac=unknown / n_source, name=backend.name))

    def build(i: int) -> Tuple[List[int], int]:
        spec = specs[i]
        if spec[0] == "joint":
            return spec[1]
        _, p, template, begin, end = spec
        return template.build(premise_ids[p][begin:end])

    scores = backend.score_inputs(lengths, build)
    out: List[List[List[float]]] = [[[] for _ in group] for group in claims]
    for (p, c), value in zip(owners, scores.tolist()):
        out[p][c].append(float(value))
    return out


def score(
    premises: Sequence[str],
    claims: Sequence[Sequence[str]],
    *,
    model: Union[str, EntailmentBackend],
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    window_size: float = DEFAULT_WINDOW_SIZE,
    device: str = "auto",
    kind: str = "auto",
    **backend_settings: Any,
) -> List[float]:
    """SCALE scores: for each claim, the highest P(entailment) over the windows of its premise.

    premises (Sequence[str]): Source texts.
    claims (Sequence[Sequence[str]]): The claims (e.g. summary sentences) of each premise.
    model (Union[str, EntailmentBackend]): A model name or local path
        ("default" is the embedded NLI model; a T5 / Flan-T5 gives the
        paper's SCALE), or a backend already built.
    chunk_size (int): Tokens per model input, prompt included (reference default 1000).
    window_size (float): Overlap between windows, a fraction (reference default 0.25).
    device (str): "auto", "cpu", "cuda" or "cuda:N".
    kind (str): "auto", "seq2seq", "nli" or "causal".
    **backend_settings: More `EntailmentBackend` settings (prompt, max_batch_tokens, ...).
    RETURNS (List[float]): One score per claim, premise by premise, as `scale_score.score`.
    """
    backend = _backend(model, device, kind, **backend_settings)
    per_window = score_chunks(premises, claims, backend=backend, chunk_size=chunk_size, window_size=window_size)
    return [max(windows) for group in per_window for windows in group]


def tree_groups(indices: Sequence[int], branches: int) -> List[List[int]]:
    """Split a run of units into the groups of one search-tree level, as `scale-score` does.

    indices (Sequence[int]): The units still in the search.
    branches (int): Wanted number of groups; the last group takes the rest,
        so there can be one more when the units do not divide evenly.
    RETURNS (List[List[int]]): The groups.
    """
    n = len(indices)
    if n == 1:
        return [list(indices)]
    step = max(1, n // branches)
    return [list(indices[i : i + step]) for i in range(0, n, step)]


def tree_search(
    units: Sequence[Sequence[str]],
    candidates: Sequence[Sequence[int]],
    claims: Sequence[str],
    *,
    backend: EntailmentBackend,
    branches: int = DEFAULT_BRANCHES,
) -> List[Tuple[int, float, int]]:
    """The most relevant unit for each claim by SCALE's search tree, all claims at once.

    Each level splits a claim's remaining units into `branches` groups,
    scores every group (its units joined by spaces) against the claim and
    keeps the best, until one unit is left. The groups of one level are
    scored together for all claims, in one backend call.

    units (Sequence[Sequence[str]]): Per claim, the unit texts of its source.
    candidates (Sequence[Sequence[int]]): Per claim, indices into its units
        where the search starts (non-empty).
    claims (Sequence[str]): The claims.
    backend (EntailmentBackend): The scoring model.
    branches (int): Groups per level (2 = the paper's binary tree).
    RETURNS (List[Tuple[int, float, int]]): Per claim: the unit index, the
        score of its last level, and the number of model inputs it took.
    """
    if branches < 2:
        raise ValueError(Errors.E006.format(name="branches", expected="at least 2", value=branches))
    current = [list(c) for c in candidates]
    result: List[Optional[Tuple[int, float, int]]] = [None] * len(claims)
    calls = [0] * len(claims)
    active = [k for k in range(len(claims)) if current[k]]
    for k in range(len(claims)):
        if not current[k]:
            result[k] = (-1, float("nan"), 0)
    while active:
        inputs: List[Tuple[List[int], int]] = []
        owners: List[Tuple[int, List[int]]] = []
        for k in active:
            for group in tree_groups(current[k], branches):
                text = " ".join(units[k][i] for i in group)
                inputs.append(backend.joint_input(text, claims[k]))
                owners.append((k, group))
        scores = backend.score_inputs([len(ids) for ids, _ in inputs], inputs.__getitem__)
        best: Dict[int, Tuple[float, List[int]]] = {}
        for (k, group), value in zip(owners, scores.tolist()):
            calls[k] += 1
            # Strictly greater: ties keep the first group, as numpy.argmax does.
            if k not in best or value > best[k][0]:
                best[k] = (float(value), group)
        still = []
        for k in active:
            value, group = best[k]
            current[k] = group
            if len(group) == 1:
                result[k] = (group[0], value, calls[k])
            else:
                still.append(k)
        active = still
    return [r for r in result]  # type: ignore[misc]


def retrieve(
    premises: Sequence[Sequence[str]],
    claims: Sequence[Sequence[str]],
    *,
    model: Union[str, EntailmentBackend],
    branches: int = DEFAULT_BRANCHES,
    device: str = "auto",
    kind: str = "auto",
    **backend_settings: Any,
) -> List[Tuple[str, float]]:
    """The most relevant unit of each premise for each claim, as `scale_score.retrieve`.

    premises (Sequence[Sequence[str]]): Each source split into units (sentences, utterances).
    claims (Sequence[Sequence[str]]): The claims of each source.
    model (Union[str, EntailmentBackend]): A model name or local path, or a backend.
    branches (int): Groups per tree level.
    device (str): "auto", "cpu", "cuda" or "cuda:N".
    kind (str): "auto", "seq2seq", "nli" or "causal".
    RETURNS (List[Tuple[str, float]]): Per claim, in order: the unit and its score.
    """
    _check_inputs(premises, claims)
    backend = _backend(model, device, kind, **backend_settings)
    units: List[Sequence[str]] = []
    flat_claims: List[str] = []
    for premise, group in zip(premises, claims):
        for claim in group:
            units.append(premise)
            flat_claims.append(claim)
    found = tree_search(
        units, [list(range(len(u))) for u in units], flat_claims, backend=backend, branches=branches
    )
    return [(units[k][i], value) for k, (i, value, _) in enumerate(found)]
