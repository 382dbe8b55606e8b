#!/usr/bin/env python
"""Prepare the NLI training / held-out data for the nli-minilm-l6 cross-encoder.

Reads the open NLI files in ``--data-dir`` (see ../shared/data/README.md) and writes

* ``train.jsonl``   rows ``{"premise", "hypothesis", "label", "source"}``
* ``heldout.jsonl`` same format, one seeded held-out split per source
* ``stats.json``    counts per source, split and label, plus the settings used

Labels are ``entailment`` / ``neutral`` / ``contradiction`` for 3-way sources and
``entailment`` / ``not_entailment`` for binary sources.

Held-out splits are made *by premise group* (every pair whose normalised premise is the
same goes to the same side), so that e.g. the three SNLI hypotheses written for one
caption never straddle train and held-out. Training pairs whose (premise, hypothesis)
also occur in any held-out split (e.g. DocNLI's MNLI pairs vs. TaxiNLI) are dropped.

Mapping decisions (documented in the model card too):

* SNLI (e-SNLI dev files): tokenized text, lightly detokenized; labels as is.
* TaxiNLI: the ``label`` column (the original MNLI gold label), not ``annotated_label``.
* SICK: ``entailment_judgment`` lower-cased.
* ConTRoL: ``gold_label``; train is sub-sampled; val.jsonl is the held-out split.
* DocNLI binary FEVER / MNLI dev: ``entailment`` / ``not_entailment`` (binary).
* Breaking NLI: ``gold_label`` (3-way); 88% contradiction, so train is sub-sampled.
* CANNOT (antonym substitution + negation): label 1 ("the sentences do not mean the
  same thing") -> ``not_entailment``; label 0 (paraphrase with a negated antonym, e.g.
  "Door is not shut." / "Door is open.") -> ``entailment``. Both binary: a label-1 pair
  such as "You're not fat." / "You're not thin." is not a contradiction, so no 3-way
  label is invented. Some label-0 pairs are loose paraphrases ("That's not natural." /
  "That's supernatural."), so the source is capped.
"""
from __future__ import annotations

import csv
import io
import json
import random
import re
import sys
import zipfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import List, Optional

import typer

REPO_ROOT = Path(__file__).resolve().parents[2]
THREE_WAY = ("entailment", "neutral", "contradiction")
BINARY = ("entailment", "not_entailment")

# Per-source training cap (after the held-out split; None = keep all) and repeat factor
# (up-weighting by repetition). Chosen so that one epoch is ~52k pairs and the targets
# (SNLI, MNLI/TaxiNLI) get the most weight.
DEFAULT_CAPS = {
    "snli": None,
    "taxinli": None,
    "sick": 5000,
    "control": 1500,
    "docnli_fever": 2500,
    "docnli_mnli": None,
    "breaking_nli": 1500,
    "cannot": 2500,
}
DEFAULT_REPEATS = {"snli": 2, "taxinli": 2}
# Held-out size per source (ConTRoL uses its own val.jsonl, capped to this size too).
csv.field_size_limit(sys.maxsize)


def detok(text: str) -> str:
    """Light detokenization of the e-SNLI (PTB-style tokenized) sentences."""
    t = " " + text.strip() + " "
    for a, b in (
        (" n't ", "n't "), (" 's ", "'s "), (" 're ", "'re "), (" 've ", "'ve "),
        (" 'm ", "'m "), (" 'll ", "'ll "), (" 'd ", "'d "),
        (" .", "."), (" ,", ","), (" ?", "?"), (" !", "!"), (" ;", ";"), (" :", ":"),
        ("( ", "("), (" )", ")"), ("`` ", '"'), (" ''", '"'),
    ):
        t = t.replace(a, b)
    t = re.sub(r"\s+", " ", t).strip()
    return t


def norm(text: str) -> str:
    return re.sub(r"\W+", " ", text.lower()).strip()


def row(p, h, label, source):
    p, h = str(p).strip(), str(h).strip()
    if not p or not h:
        return None
    return {"premise": p, "hypothesis": h, "label": label, "source": source}


def read_snli(d: Path):
    s1 = (d / "snli_dev" / "s1.txt").read_text(encoding="utf8").splitlines()
    s2 = (d / "snli_dev" / "s2.txt").read_text(encoding="utf8").splitlines()
    lab = (d / "snli_dev" / "labels.txt").read_text(encoding="utf8").splitlines()
    assert len(s1) == len(s2) == len(lab), (len(s1), len(s2), len(lab))
    for a, b, l in zip(s1, s2, lab):
        l = l.strip()
        if l in THREE_WAY:
            yield row(detok(a), detok(b), l, "snli")


def read_tsv_dicts(path: Path):
    with open(path, encoding="utf8", newline="") as f:
        yield from csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)


def read_taxinli(d: Path):
    for r in read_tsv_dicts(d / "taxinli10k.tsv"):
        l = (r.get("label") or "").strip()
        if l in THREE_WAY:
            yield row(r["prem"], r["hyp"], l, "taxinli")


def read_sick(d: Path):
    for r in read_tsv_dicts(d / "SICK.txt"):
        l = (r.get("entailment_judgment") or "").strip().lower()
        if l in THREE_WAY:
            yield row(r["sentence_A"], r["sentence_B"], l, "sick")


def read_zip_jsonl(path: Path, member: str):
    with zipfile.ZipFile(path) as z, z.open(member) as f:
        for line in io.TextIOWrapper(f, encoding="utf8"):
            line = line.strip()
            if line:
                yield json.loads(line)


def read_control(d: Path, member: str):
    for r in read_zip_jsonl(d / "control.zip", member):
        l = (r.get("gold_label") or "").strip()
        if l in THREE_WAY:
            yield row(r["premise"], r["hypothesis"], l, "control")


def read_docnli(d: Path, name: str, source: str):
    with open(d / name, encoding="utf8") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 3 or parts[0] not in BINARY:
                continue
            yield row(parts[1], parts[2], parts[0], source)


def read_breaking(d: Path):
    for r in read_zip_jsonl(d / "breaking_nli_dataset.zip", "data/dataset.jsonl"):
        l = (r.get("gold_label") or "").strip()
        if l in THREE_WAY:
            yield row(r["sentence1"], r["sentence2"], l, "breaking_nli")


def read_cannot(d: Path):
    for r in read_tsv_dicts(d / "cannot_sem_anto_neg.tsv"):
        l = (r.get("label") or "").strip()
        if l in ("0", "1"):
            yield row(r["premise"], r["hypothesis"],
                      "not_entailment" if l == "1" else "entailment", "cannot")


def group_split(rows, n_heldout, rng):
    """Seeded split by normalised premise; returns (train, heldout)."""
    groups = defaultdict(list)
    for r in rows:
        groups[norm(r["premise"])].append(r)
    keys = sorted(groups)
    rng.shuffle(keys)
    held, train = [], []
    for k in keys:
        (held if len(held) < n_heldout else train).extend(groups[k])
    return train, held


def parse_kv(items, cast):
    out = {}
    for it in items or []:
        k, v = it.split("=", 1)
        out[k] = cast(v)
    return out


def main(
    data_dir: str = typer.Option(str(REPO_ROOT.parent / "shared" / "data" / "nli")),
    output_dir: str = typer.Option(str(REPO_ROOT / "assets" / "nli")),
    seed: int = typer.Option(0),
    heldout: int = typer.Option(1000, help="held-out pairs per source"),
    cap: Optional[List[str]] = typer.Option(None, help="override training caps, e.g. sick=3000 (0 = drop source); "
                                            "repeat the flag for several"),
    repeat: Optional[List[str]] = typer.Option(None, help="override repeat factors, e.g. snli=3 (repeatable)"),
):
    """Prepare the NLI training / held-out data for the nli-minilm-l6 cross-encoder."""
    d = Path(data_dir)
    if not d.is_absolute() and not d.exists():
        d = REPO_ROOT / d
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    caps = dict(DEFAULT_CAPS)
    caps.update({k: (None if v < 0 else v) for k, v in parse_kv(cap, int).items()})
    repeats = dict(DEFAULT_REPEATS)
    repeats.update(parse_kv(repeat, int))

    readers = {
        "snli": lambda: read_snli(d),
        "taxinli": lambda: read_taxinli(d),
        "sick": lambda: read_sick(d),
        "control": None,  # special: own val split
        "docnli_fever": lambda: read_docnli(d, "docnli_binary_fever_dev.txt", "docnli_fever"),
        "docnli_mnli": lambda: read_docnli(d, "docnli_binary_mnli_dev.txt", "docnli_mnli"),
        "breaking_nli": lambda: read_breaking(d),
        "cannot": lambda: read_cannot(d),
    }
    stats = {"seed": seed, "heldout_per_source": heldout, "caps": caps,
             "repeats": repeats, "data_dir": str(d), "sources": {}}
    train_by_src, held_by_src = {}, {}
    for i, (src, reader) in enumerate(readers.items()):
        rng = random.Random(f"{seed}-{src}")
        if src == "control":
            tr = [r for r in read_control(d, "control/train.jsonl") if r]
            ho = [r for r in read_control(d, "control/val.jsonl") if r]
            total = len(tr) + len(ho)
            rng.shuffle(ho)
            ho = ho[:heldout]
        else:
            rows = [r for r in reader() if r]
            total = len(rows)
            tr, ho = group_split(rows, heldout, rng)
        train_by_src[src], held_by_src[src] = tr, ho
        stats["sources"][src] = {"read": total}

    held_keys = {(norm(r["premise"]), norm(r["hypothesis"]))
                 for rows in held_by_src.values() for r in rows}
    held_prem = {norm(r["premise"]) for rows in held_by_src.values() for r in rows}
    train_all, held_all = [], []
    for src in readers:
        rng = random.Random(f"{seed}-{src}-sample")
        tr = train_by_src[src]
        n0 = len(tr)
        # drop leakage: same pair, or same premise as any held-out pair (other sources)
        tr = [r for r in tr if (norm(r["premise"]), norm(r["hypothesis"])) not in held_keys
              and norm(r["premise"]) not in held_prem]
        dropped = n0 - len(tr)
        rng.shuffle(tr)
        cap = caps.get(src)
        if cap is not None:
            tr = tr[:cap]
        rep = max(1, repeats.get(src, 1)) if cap != 0 else 0
        ho = held_by_src[src]
        s = stats["sources"][src]
        s.update({
            "train_unique": len(tr), "repeat": rep, "train_rows": len(tr) * rep,
            "train_dropped_overlap": dropped, "heldout": len(ho),
            "train_labels": dict(Counter(r["label"] for r in tr)),
            "heldout_labels": dict(Counter(r["label"] for r in ho)),
            "task": "binary" if src in ("docnli_fever", "docnli_mnli", "cannot") else "3-way",
        })
        train_all.extend(tr * rep)
        held_all.extend(ho)
    random.Random(seed).shuffle(train_all)
    stats["train_rows"] = len(train_all)
    stats["heldout_rows"] = len(held_all)
    for name, rows in (("train.jsonl", train_all), ("heldout.jsonl", held_all)):
        with open(out / name, "w", encoding="utf8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
    (out / "stats.json").write_text(json.dumps(stats, indent=2) + "\n", encoding="utf8")
    print(json.dumps({k: {kk: v[kk] for kk in ("read", "train_rows", "heldout", "train_dropped_overlap")}
                      for k, v in stats["sources"].items()}, indent=1), file=sys.stderr)
    print(f"train rows {len(train_all)}, heldout rows {len(held_all)} -> {out}", file=sys.stderr)


if __name__ == "__main__":
    typer.run(main)
