"""Probe: does a matched-pair ranking objective teach the second stage what tells a contradiction
from its near miss?

The shipped adapters are trained with cross-entropy on rows; the figure the issue judges by is
the matched AUC (a record's gold pair above its control's pair). `train` goes on from the shipped
adapters as `lora_mpnet.py finetune` does, but each step reads `--per-step` written near-miss
records (gold pair and the control's near-miss pair, both orders) with cross-entropy
(contradiction / not) plus `--weight` x softplus(margin - (z_gold - z_control)) per record and
order, z the log-odds of P(contradiction), beside one batch of replayed rows of the mix.
With `--background` (the rows `mine_hard_negatives.py` writes for the same records) each record's
gold pair is also ranked, with `--background-weight`, above the `--background-per-record`
consistent pairs of its two documents that the detector scored highest, in both orders, and those
pairs are trained as not-contradiction: a document's score is its highest pair, so a record is
lost when such a pair outscores the gold pair (`matched_losses`' `other_pairs`), which the
near-miss term alone does not teach.
`records-auc` measures the matched AUC of a merged model on the training records themselves
(does the model fit what it was taught?).

    python scripts/nli/probe_matched_rank.py train --output training/mpnet-rank1
    python scripts/nli/lora_mpnet.py merge --adapter training/mpnet-rank1 --output training/mpnet-rank1-merged
    python scripts/nli/lora_mpnet.py evaluate --model training/mpnet-rank1-merged --heldout-per-source 50
    python scripts/nli/probe_matched_rank.py records-auc --model training/mpnet-rank1-merged
    python scripts/nli/mine_hard_negatives.py --input data/near_miss --min-score 0.02 --output training/docrank/hardneg.jsonl
    python scripts/nli/probe_matched_rank.py train --output training/mpnet-docrank --epochs 2 --lr 0.0002 \
        --background training/docrank/hardneg.jsonl --background-per-record 3
"""
import json
import sys
import time
from pathlib import Path
from typing import List, Optional

import numpy as np
import typer

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
import lora_mpnet as lm  # noqa: E402

from spacy_inconsistency.corpora.behaviour import suite_files  # noqa: E402

REPLAY = ["train", "edit_train", "cad_train", "curriculum_train", "docpairs_train", "unrelated_train",
          "antonym_train", "containment_train", "hard_negatives_train"]
app = typer.Typer(add_completion=False, no_args_is_help=True)


# The ranking objective lives with the training script (`lora_mpnet.py train --rank-weight` uses it too).
record_quads = lm.record_quads
matched_rank_loss = lm.matched_rank_loss
background_pairs = lm.background_pairs


def read_records(paths: List[Path]) -> List[dict]:
    return [r for p in paths for r in lm._rows(p)]


@app.command()
def train(
    output: Path = typer.Option(...),
    records_dir: Path = typer.Option(ROOT / "data" / "near_miss", help="Folder of the written near-miss records."),
    pattern: str = typer.Option("train_part*.jsonl", help="Their files: globs in RECORDS_DIR, comma-separated "
                                                          "(pin them to reproduce a run: later parts match too)."),
    nli_dir: Path = typer.Option(ROOT / "assets" / "nli", help="The mix's files (REPLAY) for the replay sample."),
    replay_rows: int = typer.Option(4000),
    adapter: Path = typer.Option(ROOT / "spacy_inconsistency" / "models" / "nli-mpnet-lora"),
    base: Path = typer.Option(ROOT / "assets" / "mpnet" / "all-mpnet-base-v2"),
    weight: float = typer.Option(1.0, help="Weight of the ranking term (0: cross-entropy alone)."),
    margin: float = typer.Option(2.0, help="Log-odds margin of the ranking term."),
    epochs: float = typer.Option(1.0, help="Passes over the records."),
    lr: float = typer.Option(1e-4),
    per_step: int = typer.Option(8, help="Records per step."),
    batch_tokens: int = typer.Option(2048, help="Padded tokens of each step's replay batch."),
    threads: int = typer.Option(2),
    seed: int = typer.Option(0),
    background: Optional[Path] = typer.Option(None, help="Mined consistent pairs of the records' documents "
                                                        "(mine_hard_negatives.py rows, `doc` = record id)."),
    background_per_record: int = typer.Option(2, help="A record's highest-scored background pairs ranked."),
    background_weight: float = typer.Option(1.0, help="Weight of the background ranking term."),
) -> None:
    import torch
    from safetensors.torch import save_file
    from transformers import AutoTokenizer

    from train_nli import add_reverse_contradictions, make_targets, nli_loss  # noqa: E402

    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    info = json.loads((adapter / "adapter_config.json").read_text())
    rank, alpha = int(info["rank"]), float(info["alpha"])
    records = suite_files(records_dir, pattern)
    recs = read_records(records)
    quads = record_quads(recs)
    bg_pairs, bg_owner = background_pairs(recs, background, background_per_record) if background else ([], [])
    replay = lm.replay_sample([nli_dir / f"{name}.jsonl" for name in REPLAY], replay_rows, seed)
    replay, _ = add_reverse_contradictions(replay)
    binary = {r["source"] for r in replay if r["label"] == "not_entailment"}
    lm.log(f"{len(quads)} records, {len(replay)} replay rows")
    model, lora = lm.trainable_from_adapters(adapter, base, rank, alpha)
    tok = AutoTokenizer.from_pretrained(str(base))
    q_ids, q_len = lm._flat(lm._encode(tok, [p for q in quads for p in q], 128))
    q_off = np.concatenate([[0], np.cumsum(q_len)[:-1]])
    r_ids, r_len = lm._flat(lm._encode(tok, [(r["premise"], r["hypothesis"]) for r in replay], 128))
    r_off = np.concatenate([[0], np.cumsum(r_len)[:-1]])
    r_y = torch.tensor(np.array(make_targets(replay, binary), dtype=np.int64).T)
    bg = None
    if bg_pairs:
        bg = lm.BackgroundRows(*lm._flat(lm._encode(tok, bg_pairs, 128)), bg_owner)
        lm.log(f"{len(bg_pairs)} background rows (both orders) of {len(bg.by_record)} records")

    steps = max(1, int(round(len(quads) / per_step * epochs)))
    q_plan: List[int] = []
    while len(q_plan) < steps * per_step:
        q_plan += list(rng.permutation(len(quads)))
    r_plan = []
    while len(r_plan) < steps:
        r_plan += lm._batches(r_len, batch_tokens, rng)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    bf16 = lm._bf16_autocast("cpu")
    model.train()
    start, logs = time.time(), []
    q_y = torch.tensor(lm.QUAD_TARGETS * per_step, dtype=torch.long)
    for step in range(steps):
        for g in opt.param_groups:  # linear decay after a short warm-up, as finetune
            g["lr"] = lr * min(1.0, (step + 1) / max(1, steps // 20)) * (1 - step / steps)
        chosen = q_plan[step * per_step:(step + 1) * per_step]
        idx = np.array([4 * i + k for i in chosen for k in range(4)])
        a, m = lm._tensors(idx, q_ids, q_off, q_len, "cpu")
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = model(input_ids=a, attention_mask=m).logits
        rank_loss, win = matched_rank_loss(logits, margin)
        ce_records = nli_loss(logits, q_y[:, 0], q_y[:, 1], q_y[:, 2])
        ridx = r_plan[step]
        ra, rm = lm._tensors(ridx, r_ids, r_off, r_len, "cpu")
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            r_logits = model(input_ids=ra, attention_mask=rm).logits
        yr = r_y[ridx]
        ce_replay = nli_loss(r_logits, yr[:, 0], yr[:, 1], yr[:, 2])
        loss = ce_records + ce_replay + weight * rank_loss
        bg_loss = bg_win = torch.full((), float("nan"))
        terms = bg.step_terms(model, logits, chosen, margin, "cpu", bf16) if bg else None
        if terms is not None:
            bg_loss, bg_win, bg_ce = terms
            loss = loss + background_weight * bg_loss + bg_ce
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        logs.append([float(ce_records.detach()), float(ce_replay.detach()), float(rank_loss.detach()), win,
                     float(bg_loss.detach()), float(bg_win)])
        if (step + 1) % 25 == 0:
            mean = np.nanmean(logs[-25:], 0)
            lm.log(f"step {step + 1}/{steps} ce records {mean[0]:.3f} replay {mean[1]:.3f} "
                   f"rank {mean[2]:.3f} gold above control {mean[3]:.3f} background rank {mean[4]:.3f} "
                   f"gold above background {mean[5]:.3f} {time.time() - start:.0f}s")
    output.mkdir(parents=True, exist_ok=True)
    save_file(lm.adapter_tensors(model, lora), str(output / "adapter.safetensors"))
    info = {**info, "matched_rank_probe": {
        "from": str(adapter), "records": [str(p) for p in records], "replayed": len(replay), "weight": weight,
        "margin": margin, "background": str(background) if background else None,
        "background_per_record": background_per_record, "background_weight": background_weight, "epochs": epochs,
        "lr": lr, "steps": steps, "train_s": round(time.time() - start, 1),
        "last_25": [round(float(x), 4) for x in np.nanmean(logs[-25:], 0)]}}
    (output / "adapter_config.json").write_text(json.dumps(info, indent=1))
    lm.log(f"saved {output}")


@app.command("records-auc")
def records_auc(
    model: str = typer.Option(..., help="A merged model folder, or 'mpnet-lora' (the shipped one)."),
    records_dir: Path = typer.Option(ROOT / "data" / "near_miss"),
    pattern: str = typer.Option("train_part*.jsonl", help="Globs in RECORDS_DIR, comma-separated."),
) -> None:
    """Matched AUC of MODEL on the training records (P(contradiction) of both orders averaged)."""
    from probe_stacking import matched_auc, nli_probs

    records = suite_files(records_dir, pattern)
    recs = read_records(records)
    pairs = [p for q in record_quads(recs) for p in q]
    p = nli_probs(model, pairs)[:, 2].reshape(-1, 2, 2).mean(2)
    print(f"{len(recs)} records: matched AUC {matched_auc(p):.4f}, mean P(c) gold {p[:, 0].mean():.3f}, "
          f"control {p[:, 1].mean():.3f}")
    by_file = np.repeat([str(path.name) for path in records], [len(lm._rows(path)) for path in records])
    for lo in range(0, len(records), 8):
        names = {path.name for path in records[lo:lo + 8]}
        mask = np.isin(by_file, list(names))
        print(f"  {min(names)}..{max(names)}: {mask.sum()} records, matched AUC {matched_auc(p[mask]):.4f}")


if __name__ == "__main__":
    app()
