#!/usr/bin/env python
"""Capacity route of issue 13: all-mpnet-base-v2 (110M) as an NLI cross-encoder, trained as
LoRA adapters on a GPU machine that can receive only ~64 MiB, merged back here.

Steps (`spacy project run pack-mpnet-lora` / `build-mpnet-lora` wrap the first and the last):

    python scripts/nli/lora_mpnet.py pack --output .device/mpnet [--score-pairs FITCACHE]   # here
    python3 scripts/nli/lora_mpnet.py train --pack .device/mpnet --output OUT                # on the GPU
    python scripts/nli/lora_mpnet.py scores-to-cache --scores OUT/scores.npy                 # here
    python scripts/nli/lora_mpnet.py merge --adapter OUT --output training/nli-mpnet-lora    # here
    python scripts/nli/fit_pair_scorer.py --model training/nli-mpnet-lora \
        --cache training/nli-mpnet-lora-fitcache.json ...                                      # here

``pack`` tokenizes the training mix of the shipped model (train.jsonl + the skills files +
containment rows, every contradiction both ways), held-out rows and the behavioural suite's
pairs with the mpnet tokenizer, keeps only the vocabulary rows those tokens use, and stores the
encoder's weights as 4-bit groups of 64 (symmetric absmax, per row, so a row's values do not
depend on which other rows are kept). ``train`` needs only torch, numpy and transformers: it
rebuilds the encoder from the dequantized weights, freezes it and trains rank-r LoRA adapters
on every attention and feed-forward projection plus the classification head (QLoRA, Dettmers
et al. 2023, with plain int4 instead of NF4), then evaluates held-out accuracy per source and
the behavioural pairs (contradiction pair vs. its matched control pair); with ``pack
--rank-records`` and ``train --rank-weight`` each step also ranks written records' gold pairs
above their controls' (the objective of ``probe_matched_rank.py``), and with ``pack --background``
and ``train --background-weight`` above the consistent pairs of their own documents that the
detector scored highest (``probe_matched_rank.py train --background``). ``merge`` rebuilds
the same dequantized weights from the full model here, adds the adapters (W + B A alpha/r) and
saves an ordinary Hugging Face model directory the detector loads with
``config={"model": {"model": PATH}}``.

``average`` makes one model of several merged ones (their weights' mean).

``finetune`` goes on training the shipped adapters here, on this CPU, on a few thousand new rows
plus a replay sample of the mix (the adapter folder it writes is what ``merge`` reads).

``train`` imports nothing from this project (the GPU machine has no spaCy); ``pack``,
``finetune`` and ``merge`` run in the project's environment. ``train`` also runs on a CPU, under bf16 autocast
where the CPU computes bf16 natively; ``bench-train`` times its steps here (about 28 rows/s on 2
cores with AMX: a few thousand rows train within minutes, the whole mix does not).
"""
from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np
import typer

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
LORA_TARGETS = ("attention.attn.q", "attention.attn.k", "attention.attn.v", "attention.attn.o",
                "intermediate.dense", "output.dense")
LABELS = ["entailment", "neutral", "contradiction"]
SKILL_FILES = ["docpairs_train", "unrelated_train", "antonym_train", "curriculum_train", "cad_train",
               "edit_train"]

app = typer.Typer(add_completion=False, no_args_is_help=True)


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --- 4-bit groups: the package's own (loaded by path: the GPU machine has no spaCy) ------------

def _load_int4():
    import importlib.util

    spec = importlib.util.spec_from_file_location("_int4", ROOT / "spacy_inconsistency" / "backends" / "int4.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_int4 = _load_int4()
GROUP, quantize, dequantize, is_quantized = _int4.GROUP, _int4.quantize, _int4.dequantize, _int4.is_quantized


# --- pack (here) ----------------------------------------------------------------------------

def _rows(path: Path) -> List[dict]:
    with path.open(encoding="utf8") as f:
        return [json.loads(l) for l in f if l.strip()]


def _cap(rows: List[dict], caps: Dict[str, int], seed: int) -> List[dict]:
    rng = np.random.default_rng(seed)
    by: Dict[str, List[dict]] = {}
    for r in rows:
        by.setdefault(r["source"], []).append(r)
    out = []
    for src, rs in sorted(by.items()):
        cap = caps.get(src, caps.get("*", 0))
        if cap and len(rs) > cap:
            rs = [rs[i] for i in sorted(rng.choice(len(rs), cap, replace=False))]
        out.extend(rs)
    return out


def _encode(tokenizer, pairs, max_length):
    enc = tokenizer([p for p, _ in pairs], [h for _, h in pairs], truncation="longest_first",
                    max_length=max_length)
    return enc["input_ids"]


def _flat(ids: List[List[int]]):
    lengths = np.array([len(x) for x in ids], dtype=np.int32)
    return np.concatenate([np.array(x, dtype=np.int32) for x in ids]), lengths


def extra_rows(rows: List[dict], repeat: int) -> List[dict]:
    """ROWS `repeat` times, each time with every contradiction in both orders (so that the
    mix-wide reversal, which skips pairs already there, cannot leave one order at weight 1)."""
    sys.path.insert(0, str(HERE))
    from train_nli import add_reverse_contradictions  # noqa: E402

    if repeat < 1:
        raise typer.BadParameter(f"--extra-repeat must be at least 1, not {repeat}")
    rows, _ = add_reverse_contradictions(rows)
    return rows * repeat


def expand_paths(paths: List[Path]) -> List[Path]:
    """Files, with glob patterns expanded (sorted): `spacy project run` passes a pattern unexpanded. A
    pattern's file name may hold several globs separated by commas, as `read_behaviour_suite` reads them
    ("data/near_miss/train_part0?.jsonl,train_part1[0-6].jsonl")."""
    from spacy_inconsistency.corpora.behaviour import suite_files

    out = []
    for path in paths:
        if any(c in str(path) for c in "*?["):
            try:
                out += suite_files(Path(path).parent, Path(path).name)
            except ValueError as err:
                raise typer.BadParameter(f"no file matches {path}") from err
        else:
            out.append(path)
    return out


def record_quads(records: List[dict]) -> List[List[Tuple[str, str]]]:
    """Per written record: gold (a, b), (b, a), control (c, d), (d, c)."""
    quads = []
    for r in records:
        a, b = r["contradiction"]["pair"]
        c, d = r["control"]["pair"]
        quads.append([(a, b), (b, a), (c, d), (d, c)])
    return quads


# Targets of a record's four rows (make_targets' columns: 3-way, binary, contradiction or not):
# the gold pair is a contradiction, the control's near-miss pair is not.
QUAD_TARGETS = [[-1, -1, 1], [-1, -1, 1], [-1, -1, 0], [-1, -1, 0]]


def contradiction_log_odds(logits):
    """(n, 3) logits -> (n,) log P(contradiction) - log P(not contradiction), in float32."""
    import torch
    import torch.nn.functional as F

    lp = F.log_softmax(logits.float(), -1)
    return lp[:, 2] - torch.logsumexp(lp[:, :2], -1)


def _rank_terms(logits, margin: float):
    """The ranking loss and the share of gold pairs above their controls, both as tensors (no GPU sync)."""
    import torch.nn.functional as F

    z = contradiction_log_odds(logits).view(-1, 4)
    gap = z[:, :2] - z[:, 2:]
    return F.softplus(margin - gap).mean(), (gap > 0).float().mean()


def matched_rank_loss(logits, margin: float):
    """(4 * records, 3) logits in record_quads order -> mean softplus(margin - (z_gold - z_control))
    over records and orders, z = log P(contradiction) - log P(not contradiction); and the share of
    (record, order) whose gold pair is above its control's."""
    loss, win = _rank_terms(logits, margin)
    return loss, float(win)


def background_pairs(records: List[dict], mined: Path, per_record: int) -> Tuple[List[Tuple[str, str]], List[int]]:
    """Each record's `per_record` highest-scored mined pairs (`mine_hard_negatives.py` rows, `doc` the
    record's id), both orders: (pairs, index of their record in RECORDS)."""
    position = {r.get("id"): i for i, r in enumerate(records)}
    rows: Dict[str, List[dict]] = {}
    for row in _rows(mined):
        if row.get("doc") in position:
            rows.setdefault(row["doc"], []).append(row)
    if not rows:
        raise typer.BadParameter(f"no row of {mined} belongs to the records", param_hint="--background")
    pairs, owner = [], []
    for doc, found in rows.items():
        seen = set()
        for row in sorted(found, key=lambda r: -r["score"]):
            key = frozenset((row["premise"], row["hypothesis"]))
            if key in seen:
                continue
            seen.add(key)
            if len(seen) > per_record:
                break
            pairs += [(row["premise"], row["hypothesis"]), (row["hypothesis"], row["premise"])]
            owner += [position[doc]] * 2
    return pairs, owner


def background_rank_loss(logits, b_logits, owner, margin: float):
    """Mean softplus(margin - (z_gold - z_background)) over each background row and both orders of
    its record's gold pair (`logits` in record_quads order, `owner` the row's record in the batch),
    and the share of those comparisons the gold pair wins, both as tensors: a document's score is its
    highest pair, so a record is lost when another pair of its documents outscores the gold pair."""
    import torch.nn.functional as F

    gold = contradiction_log_odds(logits).view(-1, 4)[:, :2][owner]  # (rows, 2)
    gap = gold - contradiction_log_odds(b_logits)[:, None]
    return F.softplus(margin - gap).mean(), (gap > 0).float().mean()


class BackgroundRows:
    """Tokenized background pairs (`background_pairs`, in the layout `_flat` writes) and the rows of each
    record, read by a training step beside the records it ranks."""

    def __init__(self, ids: np.ndarray, lengths: np.ndarray, owner):
        self.ids, self.lengths = ids, lengths
        self.offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        self.by_record: Dict[int, List[int]] = {}
        for k, record in enumerate(owner):
            self.by_record.setdefault(int(record), []).append(k)

    def rows_of(self, chosen) -> Tuple[List[int], List[int]]:
        """The background rows of the records CHOSEN for a step, and each row's position in CHOSEN."""
        pairs = [(k, j) for j, i in enumerate(chosen) for k in self.by_record.get(int(i), [])]
        return [k for k, _ in pairs], [j for _, j in pairs]

    def step_terms(self, model, logits, chosen, margin: float, device: str, bf16: bool):
        """None when no chosen record has background rows; else, as tensors, the ranking loss of the
        records' gold pairs (`logits`, record_quads order) above their rows, the share of comparisons
        won, and the rows' cross-entropy as not-contradiction."""
        import torch

        if str(HERE) not in sys.path:
            sys.path.insert(0, str(HERE))
        from train_nli import nli_loss  # noqa: E402

        rows, owner = self.rows_of(chosen)
        if not rows:
            return None
        a, m = _tensors(np.array(rows), self.ids, self.offsets, self.lengths, device)
        with torch.autocast(device, dtype=torch.bfloat16, enabled=bf16):
            b_logits = model(input_ids=a, attention_mask=m).logits
        loss, win = background_rank_loss(logits, b_logits, torch.tensor(owner, device=device), margin)
        no = torch.zeros(len(rows), dtype=torch.long, device=device)
        return loss, win, nli_loss(b_logits, no - 1, no - 1, no)


@app.command()
def pack(
    output: Path = typer.Option(ROOT / ".device" / "mpnet"),
    base: Path = typer.Option(ROOT / "assets" / "mpnet" / "all-mpnet-base-v2"),
    nli_dir: Path = typer.Option(ROOT / "assets" / "nli"),
    behaviour_dir: Path = typer.Option(ROOT / "tests" / "behaviour"),
    max_length: int = typer.Option(128),
    containment_max_length: int = typer.Option(256),
    containment_rows: int = typer.Option(3500, help="Containment rows kept (long premises cost most bytes)."),
    big_source_cap: int = typer.Option(5000, help="Cap for snli and taxinli."),
    heldout_per_source: int = typer.Option(100),
    seed: int = typer.Option(0),
    score_pairs: Optional[Path] = typer.Option(None, help="JSON list of [premise, hypothesis] (or a fit_pair_scorer "
                                                         "cache) the trained model should also score."),
    score_max_length: int = typer.Option(512),
    extra_train: List[Path] = typer.Option([], help="Further training rows (JSONL) beyond the shipped mix, e.g. "
                                                    "assets/nli/near_miss_train.jsonl (`spacy project run near-miss-pairs`)."),
    extra_repeat: int = typer.Option(1, help="Times the --extra-train rows (their contradictions in both orders) "
                                             "go into the mix: a few hundred written documents weigh little among "
                                             "~130k rows otherwise."),
    rank_records: List[Path] = typer.Option([], help="Written near-miss records (the suite's format; files or glob "
                                                     "patterns, e.g. 'data/near_miss/train_*.jsonl') whose gold pair "
                                                     "`train --rank-weight` ranks above their control's near-miss pair."),
    background: Optional[Path] = typer.Option(None, help="Consistent pairs of the --rank-records' own documents "
                                                         "(mine_hard_negatives.py rows, `doc` = record id) that "
                                                         "`train --background-weight` ranks below the record's gold pair."),
    background_per_record: int = typer.Option(3, help="A record's highest-scored --background pairs packed."),
) -> None:
    """Tokenize data and 4-bit the encoder into OUTPUT (what travels to the GPU machine)."""
    sys.path.insert(0, str(HERE))
    from train_nli import add_reverse_contradictions, make_targets  # noqa: E402
    from safetensors.numpy import load_file
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(base))
    output.mkdir(parents=True, exist_ok=True)
    train = _rows(nli_dir / "train.jsonl")
    for name in SKILL_FILES:
        train += _rows(nli_dir / f"{name}.jsonl")
    train += extra_rows([r for path in extra_train for r in _rows(path)], extra_repeat)
    train = _cap(train, {"snli": big_source_cap, "taxinli": big_source_cap}, seed)
    train, n_rev = add_reverse_contradictions(train)
    cont = _cap(_rows(nli_dir / "containment_train.jsonl"), {"*": containment_rows // 2}, seed)
    log(f"{len(train)} rows ({n_rev} reversed contradictions) + {len(cont)} containment rows")
    heldout = []
    for name in ["heldout", "curriculum_heldout", "edit_heldout", "containment_heldout"]:
        heldout += _cap(_rows(nli_dir / f"{name}.jsonl"), {"*": heldout_per_source}, seed)
    binary = sorted({r["source"] for r in train + cont + heldout if r["label"] == "not_entailment"})

    arrays = {}
    all_ids = []
    for split, rows in [("train", train + cont), ("heldout", heldout)]:
        # Containment rows have multi-sentence premises: the longer limit keeps the hypothesis in.
        ids = [_encode(tokenizer, [(r["premise"], r["hypothesis"])],
                       containment_max_length if r["source"].startswith("containment") else max_length)[0]
               for r in rows]
        y3, yb, yc = make_targets(rows, set(binary))
        flat, lengths = _flat(ids)
        all_ids.append(flat)
        sources = sorted({r["source"] for r in rows})
        arrays.update({f"{split}_ids": flat, f"{split}_len": lengths,
                       f"{split}_y": np.array([y3, yb, yc], dtype=np.int8).T,
                       f"{split}_src": np.array([sources.index(r["source"]) for r in rows], dtype=np.int16)})
        arrays[f"{split}_sources"] = np.array(sources)
    items, pairs = [], []
    for path in sorted(behaviour_dir.glob("*.jsonl")):
        split = path.name.split("_")[0]
        for rec in _rows(path):
            a, b = rec["contradiction"]["pair"]
            c, d = rec["control"]["pair"]
            items.append({"id": rec["id"], "capability": rec["capability"], "split": split})
            pairs += [(a, b), (b, a), (c, d), (d, c)]
    flat, lengths = _flat(_encode(tokenizer, pairs, max_length))
    all_ids.append(flat)
    arrays.update({"behaviour_ids": flat, "behaviour_len": lengths})

    n_rank = n_background = 0
    if background is not None and not rank_records:
        raise typer.BadParameter("--background ranks pairs below the gold pairs of --rank-records; give those too")
    if rank_records:
        records = [r for path in expand_paths(rank_records) for r in _rows(path)]
        quads = record_quads(records)
        flat, lengths = _flat(_encode(tokenizer, [p for q in quads for p in q], max_length))
        all_ids.append(flat)
        arrays.update({"rank_ids": flat, "rank_len": lengths})
        n_rank = len(quads)
        log(f"{n_rank} records to rank")
        if background is not None:
            b_pairs, b_owner = background_pairs(records, background, background_per_record)
            flat, lengths = _flat(_encode(tokenizer, b_pairs, max_length))
            all_ids.append(flat)
            arrays.update({"bg_ids": flat, "bg_len": lengths, "bg_owner": np.array(b_owner, dtype=np.int32)})
            n_background = len(b_pairs)
            log(f"{n_background} background rows (both orders) of {len(set(b_owner))} records")
    if score_pairs is not None:
        raw = json.loads(score_pairs.read_text(encoding="utf8"))
        todo = [tuple(x[0]) if isinstance(x[0], list) else tuple(x) for x in raw]
        flat, lengths = _flat(_encode(tokenizer, todo, score_max_length))
        all_ids.append(flat)
        arrays.update({"score_ids": flat, "score_len": lengths})
        (output.parent / f"{output.name}-score-pairs.json").write_text(json.dumps(todo))
        log(f"{len(todo)} pairs to score")
    vocab = np.unique(np.concatenate(all_ids + [np.arange(4, dtype=np.int32)]))
    remap = np.full(tokenizer.vocab_size + 1000, -1, dtype=np.int32)
    remap[vocab] = np.arange(len(vocab), dtype=np.int32)
    assert remap[tokenizer.pad_token_id] == tokenizer.pad_token_id  # MPNet positions key on pad id 1
    for key in [k for k in arrays if k.endswith("_ids")]:
        arrays[key] = remap[arrays[key]].astype(np.uint16)
    np.savez_compressed(output / "data.npz", **arrays)

    weights = load_file(str(base / "model.safetensors"))
    packed = {}
    for name, w in weights.items():
        if name.startswith("pooler.") or name.endswith("position_ids"):
            continue
        if name.endswith("word_embeddings.weight"):
            w = w[vocab]
        if is_quantized(name, w.shape):
            packed[f"{name}::q"], packed[f"{name}::s"] = quantize(w)
        else:
            packed[name] = w.astype(np.float16)
    np.savez(output / "weights.npz", **packed)
    config = json.loads((base / "config.json").read_text())
    config.update({"vocab_size": int(len(vocab)), "num_labels": 3, "architectures": ["MPNetForSequenceClassification"],
                   "id2label": dict(enumerate(LABELS)), "label2id": {l: i for i, l in enumerate(LABELS)}})
    (output / "config.json").write_text(json.dumps(config, indent=1))
    (output / "meta.json").write_text(json.dumps({"items": items, "binary_sources": binary, "group": GROUP,
                                                  "vocab_rows": int(len(vocab)), "max_length": max_length,
                                                  "rank_records": n_rank, "background_rows": n_background}))
    sizes = {p.name: round(p.stat().st_size / 2**20, 2) for p in output.iterdir()}
    log(f"vocab rows kept {len(vocab)}; files (MiB) {sizes}")


# --- train (GPU machine) --------------------------------------------------------------------

def _build(pack_dir: Path, rank: int, alpha: float):
    import torch
    from transformers import MPNetConfig, MPNetForSequenceClassification

    config = MPNetConfig(**json.loads((pack_dir / "config.json").read_text()))
    model = MPNetForSequenceClassification(config)
    z = np.load(pack_dir / "weights.npz")
    state = {}
    for key in z.files:
        if key.endswith("::s"):
            continue
        if key.endswith("::q"):
            name = key[:-3]
            state["mpnet." + name] = torch.from_numpy(dequantize(z[key], z[name + "::s"]))
        else:
            state["mpnet." + key] = torch.from_numpy(z[key].astype(np.float32))
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected, unexpected
    assert all(m.startswith("classifier.") for m in missing), missing
    for p in model.parameters():
        p.requires_grad_(False)
    lora = add_lora(model, rank, alpha)
    for p in model.classifier.parameters():
        p.requires_grad_(True)
    return model, lora


def add_lora(model, rank: int, alpha: float):
    """Wrap every targeted nn.Linear in the encoder with a LoRA branch; returns name -> module."""
    import torch
    from torch import nn

    class LoRALinear(nn.Module):
        def __init__(self, base: nn.Linear):
            super().__init__()
            self.base = base
            self.A = nn.Parameter(torch.randn(rank, base.in_features) / math.sqrt(base.in_features))
            self.B = nn.Parameter(torch.zeros(base.out_features, rank))
            self.scale = alpha / rank

        def forward(self, x):
            return self.base(x) + (x @ self.A.t() @ self.B.t()) * self.scale

    wrapped = {}
    for name, module in list(model.named_modules()):
        if any(name.endswith(t) for t in LORA_TARGETS) and isinstance(module, nn.Linear):
            parent_name, _, attr = name.rpartition(".")
            lora = LoRALinear(module)
            setattr(model.get_submodule(parent_name), attr, lora)
            wrapped[name] = lora
    return wrapped


def _batches(lengths: np.ndarray, batch_tokens: int, rng, mega: int = 64):
    """Length-bucketed batches of about batch_tokens padded tokens each."""
    order = rng.permutation(len(lengths))
    out = []
    chunk = 64 * mega
    for s in range(0, len(order), chunk):
        part = order[s:s + chunk]
        part = part[np.argsort(lengths[part], kind="stable")]
        i = 0
        while i < len(part):
            j = i + 1
            while j < len(part) and (j - i + 1) * lengths[part[j]] <= batch_tokens:
                j += 1
            out.append(part[i:j])
            i = j
    rng.shuffle(out)
    return out


def _bf16_autocast(device: str) -> bool:
    """bf16 autocast on CUDA, and on CPUs that compute bf16 natively (AMX, AVX512-BF16); on other
    CPUs torch emulates bf16 and float32 is faster."""
    if device == "cuda":
        return True
    try:
        from spacy_inconsistency.backends.loading import cpu_has_native_bf16
    except ImportError:  # the GPU machine has no spaCy; its device is CUDA anyway
        return False
    return cpu_has_native_bf16()


def _tensors(idx, ids, offsets, lengths, device):
    import torch

    L = int(lengths[idx].max())
    a = np.ones((len(idx), L), dtype=np.int64)  # pad id 1
    m = np.zeros((len(idx), L), dtype=np.int64)
    for j, i in enumerate(idx):
        k = lengths[i]
        a[j, :k] = ids[offsets[i]:offsets[i] + k]
        m[j, :k] = 1
    return torch.from_numpy(a).to(device, non_blocking=True), torch.from_numpy(m).to(device, non_blocking=True)


def _probs(model, ids, lengths, device, batch_tokens=32768, bf16=True):
    import torch

    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    out = np.zeros((len(lengths), 3), dtype=np.float32)
    order = np.argsort(lengths)
    model.eval()
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16 and device == "cuda"):
        i = 0
        while i < len(order):
            n = max(1, min(512, batch_tokens // int(lengths[order[min(i + 511, len(order) - 1)]])))
            idx = order[i:i + n]
            a, m = _tensors(idx, ids, offsets, lengths, device)
            out[idx] = torch.softmax(model(input_ids=a, attention_mask=m).logits.float(), -1).cpu().numpy()
            i += n
    model.train()
    return out


def _auc(pos, neg) -> float:
    pos, neg = np.asarray(pos), np.asarray(neg)
    wins = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(wins / (len(pos) * len(neg)))


def _head(ids, lengths, n):
    """The first n sequences of a flat id array (for smoke runs)."""
    return ids[:int(lengths[:n].sum())], lengths[:n]


def heldout_accuracy(pred: np.ndarray, y: np.ndarray, sources: List[str]) -> Dict[str, float]:
    """Accuracy per source; y holds `train_nli.make_targets`'s three targets per row (3-way label,
    entailment-or-not, contradiction-or-not; -1 where a row has none)."""
    ok = np.where(y[:, 0] >= 0, pred == y[:, 0],
                  np.where(y[:, 2] >= 0, (pred == 2) == (y[:, 2] == 1), (pred == 0) == (y[:, 1] == 1)))
    src = np.array(sources)
    return {name: round(float(ok[src == name].mean()), 4) for name in sorted(set(sources))}


def evaluate(model, data, meta, device, limit: int = 0) -> dict:
    res = {}
    n = limit or len(data["heldout_len"])
    p = _probs(model, *_head(data["heldout_ids"], data["heldout_len"], n), device)
    names = list(data["heldout_sources"])
    res["heldout_accuracy"] = heldout_accuracy(p.argmax(-1), data["heldout_y"][:n],
                                               [names[k] for k in data["heldout_src"][:n]])
    items = meta["items"][:limit] if limit else meta["items"]
    ids, lengths = _head(data["behaviour_ids"], data["behaviour_len"], 4 * len(items))
    res["behaviour"] = behaviour_figures(_probs(model, ids, lengths, device)[:, 2], items)
    return res


def behaviour_figures(p_contra: np.ndarray, items: List[dict]) -> dict:
    """Pair-level figures on the suite: score = mean of both directions' P(contradiction)."""
    p = p_contra.reshape(-1, 4)
    contra, control = (p[:, 0] + p[:, 1]) / 2, (p[:, 2] + p[:, 3]) / 2
    asym = np.abs(p[:, 0] - p[:, 1])
    out = {}
    for split in sorted({it["split"] for it in items}):
        m = np.array([it["split"] == split for it in items])
        out[split] = {"n": int(m.sum()), "pair_auc": round(_auc(contra[m], control[m]), 4),
                      "matched_win": round(float(((contra[m] > control[m]) + 0.5 * (contra[m] == control[m])).mean()), 4),
                      "recall@0.5": round(float((contra[m] >= 0.5).mean()), 4),
                      "control_fa@0.5": round(float((control[m] >= 0.5).mean()), 4),
                      "median_asym": round(float(np.median(asym[m])), 4)}
        caps = {}
        for cap in sorted({it["capability"] for it in items}):
            mc = m & np.array([it["capability"] == cap for it in items])
            caps[cap] = round(float(((contra[mc] > control[mc]) + 0.5 * (contra[mc] == control[mc])).mean()), 3)
        out[split]["matched_win_by_capability"] = caps
    out["scores"] = [[round(float(x), 4) for x in row] for row in p]
    return out


def bench(model, data, device, n_pairs: int = 20000) -> dict:
    """Inference pairs/s on the suite's sentence pairs (repeated): this mpnet and the MiniLM-L6
    architecture of the shipped model (random weights: speed does not depend on them)."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    lengths = np.resize(data["behaviour_len"], n_pairs)
    offsets = np.concatenate([[0], np.cumsum(data["behaviour_len"])[:-1]])
    reps = np.resize(np.arange(len(data["behaviour_len"])), n_pairs)
    ids = np.concatenate([data["behaviour_ids"][offsets[i]:offsets[i] + data["behaviour_len"][i]] for i in reps])
    minilm = BertForSequenceClassification(BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6,
                                                      num_attention_heads=12, intermediate_size=1536,
                                                      num_labels=3)).to(device)
    out = {"pairs": n_pairs, "mean_tokens": round(float(lengths.mean()), 1)}
    for name, m in [("mpnet", model), ("minilm_l6", minilm)]:
        for bf16 in (True, False):
            _probs(m, ids, lengths, device, bf16=bf16)  # warm-up
            if device == "cuda":
                torch.cuda.synchronize()
            t = time.time()
            _probs(m, ids, lengths, device, bf16=bf16)
            if device == "cuda":
                torch.cuda.synchronize()
            out[f"{name}_{'bf16' if bf16 else 'fp32'}_pairs_per_s"] = round(n_pairs / (time.time() - t))
    return out


def adapter_tensors(model, lora) -> dict:
    """What `merge` needs: each LoRA pair named as in the base model's own weights, and the head."""
    tensors = {}
    for name, mod in lora.items():
        name = name[len("mpnet."):]
        tensors[f"{name}.lora_A"] = mod.A.detach().float().cpu().contiguous()
        tensors[f"{name}.lora_B"] = mod.B.detach().float().cpu().contiguous()
    for name, p in model.classifier.named_parameters():
        tensors[f"classifier.{name}"] = p.detach().float().cpu().contiguous()
    return tensors


@app.command()
def train(
    pack_dir: Path = typer.Option(Path(".device/mpnet"), "--pack"),
    output: Path = typer.Option(Path("out")),
    rank: int = typer.Option(16),
    alpha: float = typer.Option(32.0),
    lr: float = typer.Option(3e-4),
    batch_tokens: int = typer.Option(4096, help="Padded tokens per batch."),
    max_minutes: float = typer.Option(5.0, help="Training wall clock; the lr decays linearly over it."),
    max_steps: int = typer.Option(0, help="Train this many steps, the lr decaying over them, instead of "
                                  "--max-minutes of wall clock (0: by the clock), so that a run does not depend on "
                                  "the machine's speed."),
    warmup: float = typer.Option(0.03),
    seed: int = typer.Option(0),
    eval_limit: int = typer.Option(0, help="Evaluate only the first N rows/items (smoke runs); 0 = all."),
    bench_pairs: int = typer.Option(0, help="Also time inference on this many pairs (0 = no)."),
    threads: int = typer.Option(0, help="Torch threads on CPU (0: torch's default)."),
    rank_weight: float = typer.Option(0.0, help="Weight of the matched-pair ranking term over the packed "
                                                "--rank-records (0: cross-entropy on the mix alone)."),
    rank_margin: float = typer.Option(2.0, help="Log-odds margin of the ranking term."),
    rank_per_step: int = typer.Option(8, help="Records each step ranks (and reads with cross-entropy), beside "
                                              "its batch of the mix."),
    background_weight: float = typer.Option(0.0, help="Weight of the term that ranks each record's gold pair above "
                                                      "the packed --background pairs of its own documents (also "
                                                      "trained as not-contradiction); 0: not read."),
) -> None:
    """Train LoRA adapters + head on the packed data (GPU, or CPU with bf16 autocast where the CPU
    has native bf16: `bench-train` says how long that takes), evaluate, save to OUTPUT.

    With `--rank-weight` each step also reads `--rank-per-step` packed written records (gold pair and
    control pair, both orders): cross-entropy (contradiction / not) plus the weight times
    softplus(margin - (z_gold - z_control)) per record and order, z the log-odds of P(contradiction),
    the objective of `probe_matched_rank.py` inside the mix's training. With `--background-weight`
    the step also reads the packed background pairs of those records (consistent pairs of their own
    documents that the detector scored highest) as not-contradiction and ranks the gold pair above
    each, as `probe_matched_rank.py train --background` does."""
    import torch
    from safetensors.torch import save_file

    sys.path.insert(0, str(HERE))
    from train_nli import nli_loss  # noqa: E402  (the loss of the embedded model's training)

    device = "cuda" if torch.cuda.is_available() else "cpu"
    if threads:
        torch.set_num_threads(threads)
    bf16 = _bf16_autocast(device)
    torch.manual_seed(seed)
    t0 = time.time()
    data = dict(np.load(pack_dir / "data.npz"))
    meta = json.loads((pack_dir / "meta.json").read_text())
    records_read = bool(rank_weight or background_weight)
    if rank_weight and "rank_ids" not in data:
        raise typer.BadParameter(f"--rank-weight needs records packed with `pack --rank-records`; {pack_dir} has none")
    if background_weight and "bg_ids" not in data:
        raise typer.BadParameter(f"--background-weight needs rows packed with `pack --background`; {pack_dir} has none")
    if records_read and rank_per_step < 1:
        raise typer.BadParameter(f"--rank-per-step must be at least 1, not {rank_per_step}")
    model, lora = _build(pack_dir, rank, alpha)
    model.to(device)
    log(f"built in {time.time() - t0:.0f}s on {device}; {len(lora)} LoRA modules")
    before = evaluate(model, data, meta, device, eval_limit)  # base + untrained head: the floor
    params = [p for p in model.parameters() if p.requires_grad]
    log(f"trainable {sum(p.numel() for p in params) / 1e6:.2f}M")
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    ids, lengths, y = data["train_ids"], data["train_len"], torch.from_numpy(data["train_y"].astype(np.int64))
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    rng = np.random.default_rng(seed)
    if records_read:
        q_ids, q_len = data["rank_ids"], data["rank_len"]
        q_off = np.concatenate([[0], np.cumsum(q_len)[:-1]])
        n_records = len(q_len) // 4
        q_plan: List[int] = []
        q_y = torch.tensor(QUAD_TARGETS * min(rank_per_step, n_records), dtype=torch.long)
        rank_logs: List[List[float]] = []
        background = BackgroundRows(data["bg_ids"], data["bg_len"], data["bg_owner"]) if background_weight else None
    step, seen, epoch, losses = 0, 0, 0, []
    start = time.time()
    budget = max_minutes * 60
    done = False
    while not done:
        for idx in _batches(lengths, batch_tokens, rng):
            frac = step / max_steps if max_steps else (time.time() - start) / budget
            if frac >= 1:
                done = True
                break
            for g in opt.param_groups:
                g["lr"] = lr * min(1.0, frac / warmup) * max(0.0, 1 - frac) if warmup else lr * (1 - frac)
            a, m = _tensors(idx, ids, offsets, lengths, device)
            with torch.autocast(device, dtype=torch.bfloat16, enabled=bf16):
                logits = model(input_ids=a, attention_mask=m).logits
            target = y[idx].to(device)
            loss = nli_loss(logits, target[:, 0], target[:, 1], target[:, 2])
            if records_read:
                if len(q_plan) < rank_per_step:
                    q_plan += list(rng.permutation(n_records))
                chosen, q_plan = q_plan[:rank_per_step], q_plan[rank_per_step:]
                qa, qm = _tensors(np.array([4 * i + k for i in chosen for k in range(4)]), q_ids, q_off, q_len, device)
                with torch.autocast(device, dtype=torch.bfloat16, enabled=bf16):
                    q_logits = model(input_ids=qa, attention_mask=qm).logits
                qt = q_y[:4 * len(chosen)].to(device)
                ce_records = nli_loss(q_logits, qt[:, 0], qt[:, 1], qt[:, 2])
                rank_loss, win = _rank_terms(q_logits, rank_margin)
                loss = loss + ce_records + rank_weight * rank_loss
                b_loss = b_win = torch.full((), float("nan"), device=device)
                terms = background.step_terms(model, q_logits, chosen, rank_margin, device, bf16) if background else None
                if terms is not None:
                    b_loss, b_win, b_ce = terms
                    loss = loss + background_weight * b_loss + b_ce
                rank_logs.append(torch.stack([ce_records.detach(), rank_loss.detach(), win.detach(),
                                              b_loss.detach(), b_win.detach()]))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            seen += len(idx)
            losses.append(loss.detach())
            if step % 200 == 0:
                log(f"epoch {epoch} step {step} seen {seen} loss {float(torch.stack(losses[-200:]).mean()):.4f} "
                    f"{seen / (time.time() - start):.0f} rows/s")
        epoch += 1
    train_s = time.time() - start
    losses = [float(x) for x in losses]
    after = evaluate(model, data, meta, device, eval_limit)
    output.mkdir(parents=True, exist_ok=True)
    save_file(adapter_tensors(model, lora), str(output / "adapter.safetensors"))
    info = {"rank": rank, "alpha": alpha, "lr": lr, "batch_tokens": batch_tokens, "max_minutes": max_minutes,
            "max_steps": max_steps, "steps": step, "rows_seen": seen, "epochs": round(seen / len(lengths), 2), "train_rows": int(len(lengths)),
            "train_s": round(train_s, 1), "rows_per_s": round(seen / train_s, 1),
            "device": torch.cuda.get_device_name() if device == "cuda" else "cpu", "bf16_autocast": bf16,
            "loss_first_200": round(float(np.mean(losses[:200])), 4), "loss_last_200": round(float(np.mean(losses[-200:])), 4),
            "targets": list(LORA_TARGETS), "group": meta["group"]}
    if records_read:
        last = torch.stack(rank_logs[-200:]).nanmean(0).tolist()
        info["matched_rank"] = {"records": n_records, "weight": rank_weight, "margin": rank_margin,
                                "per_step": rank_per_step, "steps": len(rank_logs),
                                "last_200": {"ce_records": round(float(last[0]), 4), "rank": round(float(last[1]), 4),
                                             "gold_above_control": round(float(last[2]), 4)}}
        if background_weight:  # nan: no record of the last 200 steps had background rows
            info["matched_rank"]["background"] = {
                "rows": int(len(background.lengths)), "weight": background_weight,
                "last_200": {"rank": None if math.isnan(last[3]) else round(last[3], 4),
                             "gold_above_background": None if math.isnan(last[4]) else round(last[4], 4)}}
    if "score_ids" in data:
        scores = _probs(model, data["score_ids"], data["score_len"], device)
        np.save(output / "scores.npy", scores.astype(np.float16))
        log(f"scored {len(scores)} pairs")
    if bench_pairs:
        info["inference"] = bench(model, data, device, bench_pairs)
    (output / "adapter_config.json").write_text(json.dumps(info, indent=1))
    (output / "eval.json").write_text(json.dumps({"before": before, "after": after}))
    log(json.dumps({**info, "heldout": after["heldout_accuracy"],
                    "behaviour": {k: v for k, v in after["behaviour"].items() if k != "scores"}}))


@app.command("evaluate")
def evaluate_model(
    model: str = typer.Option("default", help="A model directory, or 'default' for the shipped model."),
    nli_dir: Path = typer.Option(ROOT / "assets" / "nli"),
    behaviour_dir: Path = typer.Option(ROOT / "tests" / "behaviour"),
    max_length: int = typer.Option(128),
    containment_max_length: int = typer.Option(256),
    heldout_per_source: int = typer.Option(300),
    seed: int = typer.Option(0),
    output: Optional[Path] = typer.Option(None, help="Write the figures as JSON here."),
    threads: int = typer.Option(2),
) -> None:
    """The figures `train` prints (held-out accuracy per source, behavioural pairs), for any model,
    on the same rows, here on CPU: the shipped MiniLM and the merged mpnet side by side."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.set_num_threads(threads)
    if model == "default":
        model = str(ROOT / "spacy_inconsistency" / "models" / "nli-minilm-l6")
    tokenizer = AutoTokenizer.from_pretrained(model)
    net = AutoModelForSequenceClassification.from_pretrained(model).eval()
    order = [net.config.label2id.get(l, net.config.label2id.get(l.upper())) for l in LABELS]
    heldout = []
    for name in ["heldout", "curriculum_heldout", "edit_heldout", "containment_heldout"]:
        if name == "containment_heldout" and not (nli_dir / f"{name}.jsonl").exists():
            log(f"no {name}.jsonl in {nli_dir} (scripts/nli/containment_pairs.py makes it): containment not measured")
            continue
        heldout += _cap(_rows(nli_dir / f"{name}.jsonl"), {"*": heldout_per_source}, seed)
    pairs = [(r["premise"], r["hypothesis"]) for r in heldout]
    items = []
    for path in sorted(behaviour_dir.glob("*.jsonl")):
        for rec in _rows(path):
            a, b = rec["contradiction"]["pair"]
            c, d = rec["control"]["pair"]
            items.append({"id": rec["id"], "capability": rec["capability"], "split": path.name.split("_")[0]})
            pairs += [(a, b), (b, a), (c, d), (d, c)]
    limits = [containment_max_length if r["source"].startswith("containment") else max_length for r in heldout]
    limits += [max_length] * (len(pairs) - len(heldout))
    probs = np.zeros((len(pairs), 3), dtype=np.float32)
    idx = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]) + len(pairs[i][1]))
    t0 = time.time()
    with torch.no_grad():
        for s in range(0, len(idx), 32):
            batch = idx[s:s + 32]
            enc = tokenizer([pairs[i][0] for i in batch], [pairs[i][1] for i in batch], padding=True,
                            truncation="longest_first", max_length=max(limits[i] for i in batch), return_tensors="pt")
            probs[batch] = torch.softmax(net(**enc).logits.float(), -1)[:, order].numpy()
    log(f"{len(pairs)} pairs in {time.time() - t0:.0f}s")
    sys.path.insert(0, str(HERE))
    from train_nli import make_targets  # noqa: E402

    binary = {r["source"] for r in heldout if r["label"] == "not_entailment"}
    y = np.array(make_targets(heldout, binary)).T
    accuracy = heldout_accuracy(probs[:len(heldout)].argmax(-1), y, [r["source"] for r in heldout])
    figures = {"model": model, "heldout_accuracy": accuracy,
               "behaviour": behaviour_figures(probs[len(heldout):, 2], items)}
    if output:
        output.write_text(json.dumps(figures))
    print(json.dumps({**figures, "behaviour": {k: v for k, v in figures["behaviour"].items() if k != "scores"}}, indent=1))


@app.command("bench-train")
def bench_train(
    model: str = typer.Option("mpnet-lora", help="A model directory, or 'mpnet-lora' (the merged shipped model)."),
    rank: int = typer.Option(16),
    rows: int = typer.Option(32, help="Rows per batch."),
    length: int = typer.Option(64, help="Padded tokens per row (the training mix's median pair is about 40)."),
    steps: int = typer.Option(8, help="Timed steps (after 2 untimed ones)."),
    threads: int = typer.Option(2),
    bf16: Optional[bool] = typer.Option(None, "--bf16/--fp32", help="Default: bf16 where the CPU has it."),
    seed: int = typer.Option(0),
) -> None:
    """Time LoRA training steps of an mpnet cross-encoder here (forward, backward, AdamW), as `train`
    runs them: is a training run feasible on this machine's CPU? Random token ids of the given shape
    (the time depends on the shape, not on the words)."""
    import torch
    from transformers import AutoModelForSequenceClassification

    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    if model == "mpnet-lora":
        from spacy_inconsistency.backends.nli import NLIBackend

        model = str(NLIBackend("mpnet-lora", device="cpu").local_dir)
    net = AutoModelForSequenceClassification.from_pretrained(model)
    for p in net.parameters():
        p.requires_grad_(False)
    add_lora(net, rank, 2.0 * rank)
    for p in net.classifier.parameters():
        p.requires_grad_(True)
    params = [p for p in net.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-4)
    use_bf16 = _bf16_autocast("cpu") if bf16 is None else bf16
    ids = torch.randint(1000, net.config.vocab_size - 1, (rows, length))
    mask = torch.ones_like(ids)
    y = torch.randint(0, 3, (rows,))
    times = []
    for step in range(steps + 2):
        t = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=use_bf16):
            logits = net(input_ids=ids, attention_mask=mask).logits
        loss = torch.nn.functional.cross_entropy(logits.float(), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step >= 2:
            times.append(time.perf_counter() - t)
    per_step = float(np.median(times))
    rows_per_s = rows / per_step
    print(json.dumps({
        "model": model, "threads": threads, "bf16_autocast": use_bf16, "rows": rows, "length": length,
        "trainable_m": round(sum(p.numel() for p in params) / 1e6, 2), "s_per_step": round(per_step, 3),
        "rows_per_s": round(rows_per_s, 1), "minutes_per_30k_rows": round(30_000 / rows_per_s / 60, 1),
        "minutes_per_epoch_of_the_shipped_mix": round(131_952 / rows_per_s / 60, 1),
    }, indent=1))


@app.command("scores-to-cache")
def scores_to_cache(
    scores: Path = typer.Option(..., help="scores.npy that `train` wrote (rows of P(entailment, neutral, contradiction))."),
    pairs: Path = typer.Option(ROOT / ".device" / "mpnet-score-pairs.json", help="The pairs `pack --score-pairs` kept."),
    output: Path = typer.Option(ROOT / "training" / "nli-mpnet-lora-fitcache.json"),
) -> None:
    """Turn the GPU machine's scores into the NLI cache of `fit_pair_scorer.py --cache`, so the pair
    score of the merged model is fitted here without scoring ~100k pairs with mpnet on CPU."""
    todo = json.loads(pairs.read_text(encoding="utf8"))
    probs = np.load(scores).astype(np.float32)
    if len(todo) != len(probs):
        raise SystemExit(f"{len(todo)} pairs but {len(probs)} score rows: not the same pack")
    output.write_text(json.dumps([[list(p), [float(x) for x in row]] for p, row in zip(todo, probs)]), encoding="utf8")
    log(f"{len(todo)} pairs -> {output}")


# --- finetune (here, CPU) -------------------------------------------------------------------

def replay_sample(replay_files: List[Path], replay_rows: int, seed: int) -> List[dict]:
    """About `replay_rows` rows of REPLAY_FILES, evenly over their sources (seeded); none for 0."""
    replay = [r for path in replay_files for r in _rows(path)]
    if not replay or not replay_rows:
        return []
    per = max(1, replay_rows // len({r["source"] for r in replay}))
    return _cap(replay, {"*": per}, seed)


def trainable_from_adapters(adapter: Path, base: Path, rank: int, alpha: float):
    """The int4-dequantized BASE with ADAPTER's head and its LoRA adapters as trainable modules
    (the encoder frozen): (model, lora modules), what `finetune` goes on training."""
    import torch
    from safetensors.torch import load_file as load_torch

    from spacy_inconsistency.backends.mpnet_lora import merged_model

    tensors = load_torch(str(adapter / "adapter.safetensors"))
    # The bare base with the head; the adapters go on as trainable LoRA modules below.
    model = merged_model(base, {k: v for k, v in tensors.items() if k.startswith("classifier.")}, alpha / rank)
    for p in model.parameters():
        p.requires_grad_(False)
    lora = add_lora(model, rank, alpha)
    with torch.no_grad():
        for name, mod in lora.items():
            mod.A.copy_(tensors[f"{name[len('mpnet.'):]}.lora_A"])
            mod.B.copy_(tensors[f"{name[len('mpnet.'):]}.lora_B"])
    for p in model.classifier.parameters():
        p.requires_grad_(True)
    return model, lora


@app.command()
def finetune(
    train_files: List[Path] = typer.Option(..., "--train", help="JSONL rows (premise, hypothesis, label, source) to teach."),
    replay_files: List[Path] = typer.Option([], "--replay", help="JSONL rows of the shipped mix, sampled alongside so that nothing is forgotten."),
    replay_rows: int = typer.Option(4000, help="Rows sampled from --replay (evenly over its sources)."),
    adapter: Path = typer.Option(ROOT / "spacy_inconsistency" / "models" / "nli-mpnet-lora", help="Adapters to start from."),
    base: Path = typer.Option(ROOT / "assets" / "mpnet" / "all-mpnet-base-v2"),
    output: Path = typer.Option(ROOT / "training" / "nli-mpnet-lora-finetuned"),
    lr: float = typer.Option(1e-4),
    epochs: float = typer.Option(1.0),
    batch_tokens: int = typer.Option(2048, help="Padded tokens per batch."),
    max_length: int = typer.Option(128),
    threads: int = typer.Option(2),
    seed: int = typer.Option(0),
) -> None:
    """Go on training the shipped adapters on new rows plus a replay sample, on this CPU.

    The encoder is the same int4-dequantized base the adapters were trained on (`merge` rebuilds
    it), the adapters and head start from ADAPTER, and OUTPUT gets an adapter folder in the same
    format (adapter.safetensors, adapter_config.json) for `merge` and `fit_pair_scorer.py`."""
    import torch
    from safetensors.torch import save_file
    from transformers import AutoTokenizer

    sys.path.insert(0, str(HERE))
    from train_nli import add_reverse_contradictions, make_targets, nli_loss  # noqa: E402

    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    info = json.loads((adapter / "adapter_config.json").read_text())
    rank, alpha = int(info["rank"]), float(info["alpha"])
    rows = [r for path in train_files for r in _rows(path)]
    replay = replay_sample(replay_files, replay_rows, seed)
    rows += replay
    rows, n_rev = add_reverse_contradictions(rows)
    binary = {r["source"] for r in rows if r["label"] == "not_entailment"}
    log(f"{len(rows)} rows ({len(replay)} replayed, {n_rev} reversed contradictions added)")

    model, lora = trainable_from_adapters(adapter, base, rank, alpha)

    tokenizer = AutoTokenizer.from_pretrained(str(base))
    ids, lengths = _flat(_encode(tokenizer, [(r["premise"], r["hypothesis"]) for r in rows], max_length))
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    y = torch.tensor(np.array(make_targets(rows, binary), dtype=np.int64).T)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    bf16 = _bf16_autocast("cpu")
    total = max(1, int(round(len(_batches(lengths, batch_tokens, rng)) * epochs)))
    plan = []
    while len(plan) < total:
        plan += _batches(lengths, batch_tokens, rng)
    plan = plan[:total]
    model.train()
    start, seen, losses = time.time(), 0, []
    for step, idx in enumerate(plan):
        for g in opt.param_groups:  # linear decay after a short warm-up
            g["lr"] = lr * min(1.0, (step + 1) / max(1, total // 20)) * (1 - step / total)
        a, m = _tensors(idx, ids, offsets, lengths, "cpu")
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = model(input_ids=a, attention_mask=m).logits
        target = y[idx]
        loss = nli_loss(logits, target[:, 0], target[:, 1], target[:, 2])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        seen += len(idx)
        losses.append(float(loss.detach()))
        if (step + 1) % 50 == 0:
            log(f"step {step + 1}/{total} seen {seen} loss {np.mean(losses[-50:]):.4f} {seen / (time.time() - start):.1f} rows/s")
    output.mkdir(parents=True, exist_ok=True)
    save_file(adapter_tensors(model, lora), str(output / "adapter.safetensors"))
    # A run that goes on from an earlier fine-tune keeps that one's record: the card tells every step.
    earlier = info.get("earlier_finetunes", []) + ([info["finetune"]] if "finetune" in info else [])
    info = {**info, "earlier_finetunes": earlier, "finetune": {
        "from": str(adapter), "train": [str(p) for p in train_files], "replay": [str(p) for p in replay_files],
        "rows": len(rows), "replayed": len(replay), "epochs": epochs, "steps": total, "rows_seen": seen, "lr": lr,
        "batch_tokens": batch_tokens, "train_s": round(time.time() - start, 1), "bf16_autocast": bf16,
        "loss_first_50": round(float(np.mean(losses[:50])), 4), "loss_last_50": round(float(np.mean(losses[-50:])), 4)}}
    (output / "adapter_config.json").write_text(json.dumps(info, indent=1))
    log(json.dumps(info["finetune"]))


# --- merge (here) ---------------------------------------------------------------------------

@app.command()
def merge(
    adapter: Path = typer.Option(ROOT / "spacy_inconsistency" / "models" / "nli-mpnet-lora",
                                 help="Folder with adapter.safetensors + adapter_config.json (+ pair_scorer.json)."),
    output: Path = typer.Option(ROOT / "training" / "nli-mpnet-lora"),
    base: Path = typer.Option(ROOT / "assets" / "mpnet" / "all-mpnet-base-v2"),
) -> None:
    """Dequantized base + LoRA deltas + head -> a Hugging Face model directory (what
    `python -m spacy_inconsistency download` builds into the cache for the shipped adapter)."""
    from spacy_inconsistency.backends.mpnet_lora import build_merged_model

    build_merged_model(adapter, base, output)
    log(f"merged {adapter} into {output}")


@app.command("adapters-at")
def adapters_at(
    rev: str = typer.Option(..., help="A git revision of this repository."),
    output: Path = typer.Option(..., help="Folder for that revision's adapter files."),
) -> None:
    """The shipped adapter files (ADAPTER_FILES) as they were at a git revision, for `merge`,
    `finetune --adapter` or a rescorer (the steps of the shipped adapters start from earlier ones)."""
    import subprocess

    from spacy_inconsistency.backends.mpnet_lora import ADAPTER_FILES

    output.mkdir(parents=True, exist_ok=True)
    for name in ADAPTER_FILES:
        spec = f"{rev}:spacy_inconsistency/models/nli-mpnet-lora/{name}"
        done = subprocess.run(["git", "show", spec], cwd=ROOT, capture_output=True)
        if done.returncode != 0:
            raise SystemExit(f"git show {spec} failed (a clone with its history is needed): "
                             f"{done.stderr.decode(errors='replace').strip()}")
        (output / name).write_bytes(done.stdout)
    log(f"wrote {', '.join(ADAPTER_FILES)} of {rev} to {output}")


@app.command()
def average(
    models: List[Path] = typer.Argument(..., help="Merged model folders of the same architecture."),
    output: Path = typer.Option(..., help="Folder for the averaged model (the first model's config and tokenizer)."),
) -> None:
    """The mean of several merged models' weights (a "model soup", Wortsman et al. 2022): one model
    of the same size and cost. LoRA adapters themselves cannot be averaged (their deltas are products)."""
    import shutil

    from safetensors.torch import load_file, save_file

    if len(models) < 2:
        raise typer.BadParameter("give at least two models")
    weights = [load_file(str(m / "model.safetensors")) for m in models]
    keys = set(weights[0])
    for m, w in zip(models[1:], weights[1:]):
        if set(w) != keys or any(w[k].shape != weights[0][k].shape for k in keys):
            raise typer.BadParameter(f"{m} does not have the tensors of {models[0]}")
    out = {}
    for k, first in weights[0].items():
        out[k] = (sum(w[k].double() for w in weights) / len(weights)).to(first.dtype) if first.is_floating_point() else first
    shutil.copytree(models[0], output, dirs_exist_ok=True)
    save_file(out, str(output / "model.safetensors"))
    log(f"averaged {len(models)} models into {output}")


if __name__ == "__main__":
    app()
