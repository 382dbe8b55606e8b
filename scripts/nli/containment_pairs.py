#!/usr/bin/env python
"""NLI pairs whose premise CONTAINS the hypothesis word for word, and their controls.

The embedded model gives "The museum opened in 1990. It is closed on Mondays." ->
"The museum opened in 1990." P(contradiction) 0.71 (``scripts/nli/containment_probe.py``,
docs/detection.md "Known model weakness"): its training premises were single sentences or
truncated at 128 tokens, so it never learned that extra sentences in a premise change nothing.
This builder makes the rows that teach it, from training-side passages only (ConTRoL training
passages; optionally the multi-sentence premises of the prepared NLI training rows; never a
premise of the NLI held-out rows):

``containment``          premise = k consecutive sentences of a passage, hypothesis = one of
                         them verbatim (any position)                       -> entailment
``containment_control``  premise = k consecutive sentences, hypothesis = another sentence of
                         the same passage outside the window, sharing at most
                         ``--max-overlap`` of its content words with it     -> neutral

Passages are split into train / held-out by passage (seeded), so no held-out passage gives a
training row. Rows: ``{"premise", "hypothesis", "label", "source", "doc", "k", "position"}``
(``position``: index of the hypothesis in the window, -1 for a control).

Premises of k sentences are long: train with ``--max-length`` large enough for them (the
stats give the longest premise in words; ~1.3 model tokens a word), or the truncated premise
may lose the hypothesis and the label becomes wrong.

    python scripts/nli/containment_pairs.py --control-zip assets/nli/control.zip \\
        --heldout-rows assets/nli/heldout.jsonl --output-dir assets/nli --seed 0
"""
from __future__ import annotations

import json
import random
import re
import sys
import zipfile
from collections import Counter
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

import typer

SOURCE = "containment"
SOURCE_CONTROL = "containment_control"
DEFAULT_KS = (1, 2, 3, 4, 5, 8)
_WORD = re.compile(r"[a-z0-9]+")
STOPWORDS = set(
    """the a an and or but if then than that this these those there their they them his her
    its our your you we he she it is are was were be been being have has had do does did not
    no nor of in on at to for from by with about as into over under after before between out
    up down off so too very can will just also would could may might must shall what which who
    whom whose while""".split()
)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def content_words(text: str) -> Set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) >= 3 and w not in STOPWORDS}


def usable(text: str, min_words: int = 5, max_words: int = 60) -> bool:
    n = len(text.split())
    return min_words <= n <= max_words and any(c.isalpha() for c in text)


def passage_rows(
    doc_id: str, sentences: Sequence[str], rng: random.Random, *, ks: Sequence[int] = DEFAULT_KS,
    max_premise_words: int = 220, max_overlap: float = 0.5, min_words: int = 5, max_words: int = 60,
) -> List[dict]:
    """One contained row and one control row per window size k of one passage."""
    sents = [" ".join(s.split()) for s in sentences if s.strip()]
    ok = [i for i, s in enumerate(sents) if usable(s, min_words, max_words)]
    rows: List[dict] = []
    seen: Set[Tuple[str, str]] = set()
    for k in ks:
        if len(sents) < k:
            continue
        starts = list(range(len(sents) - k + 1))
        rng.shuffle(starts)
        done_contained = done_control = False
        for start in starts[:10]:
            window = range(start, start + k)
            premise = " ".join(sents[i] for i in window)
            if len(premise.split()) > max_premise_words:
                continue
            inside = [i for i in ok if i in window]
            if not done_contained and inside:
                h = rng.choice(inside)
                if (premise, sents[h]) not in seen:
                    seen.add((premise, sents[h]))
                    rows.append({"premise": premise, "hypothesis": sents[h], "label": "entailment",
                                 "source": SOURCE, "doc": doc_id, "k": k, "position": h - start})
                    done_contained = True
            if not done_control:
                premise_words = content_words(premise)
                outside = []
                for i in ok:
                    if i in window or sents[i] in premise:
                        continue
                    words = content_words(sents[i])
                    if words and len(words & premise_words) / len(words) <= max_overlap:
                        outside.append(i)
                if outside:
                    h = rng.choice(outside)
                    rows.append({"premise": premise, "hypothesis": sents[h], "label": "neutral",
                                 "source": SOURCE_CONTROL, "doc": doc_id, "k": k, "position": -1})
                    done_control = True
            if done_contained and done_control:
                break
    return rows


def split_passages(doc_ids: Iterable[str], heldout_share: float, seed: int) -> Set[str]:
    """The held-out passage ids (a seeded share of them)."""
    ids = sorted(set(doc_ids))
    random.Random(seed).shuffle(ids)
    return set(ids[: int(round(len(ids) * heldout_share))])


def build(
    passages: Sequence[Tuple[str, Sequence[str]]], *, seed: int = 0, heldout_share: float = 0.1,
    **settings,
) -> Tuple[List[dict], List[dict]]:
    """(train rows, held-out rows) from (passage id, sentences) pairs, split by passage."""
    rng = random.Random(seed)
    held_ids = split_passages([d for d, _ in passages], heldout_share, seed)
    train: List[dict] = []
    held: List[dict] = []
    for doc_id, sentences in passages:
        rows = passage_rows(doc_id, sentences, rng, **settings)
        (held if doc_id in held_ids else train).extend(rows)
    rng.shuffle(train)
    return train, held


def read_passages(control_zip: Optional[Path], train_rows: Optional[Path], heldout_rows: Optional[Path],
                  min_sentences_hint: int = 2) -> List[Tuple[str, str]]:
    """(passage id, text): ConTRoL training passages, then multi-sentence premises of the
    prepared NLI training rows; premises of the held-out rows are left out."""
    held: Set[str] = set()
    if heldout_rows and heldout_rows.exists():
        with heldout_rows.open(encoding="utf8") as f:
            held = {json.loads(line)["premise"].strip() for line in f if line.strip()}
    docs: Dict[str, str] = {}
    if control_zip:
        with zipfile.ZipFile(control_zip) as zf:
            for line in zf.open("control/train.jsonl"):
                premise = json.loads(line)["premise"].strip()
                if premise and premise not in held:
                    docs.setdefault(premise, f"control-{len(docs)}")
    if train_rows and train_rows.exists():
        n = 0
        with train_rows.open(encoding="utf8") as f:
            for line in f:
                r = json.loads(line)
                premise = r["premise"].strip()
                if premise.count(". ") >= min_sentences_hint and premise not in held and premise not in docs:
                    docs[premise] = f"{r.get('source', 'train')}-{n}"
                    n += 1
    return [(doc_id, text) for text, doc_id in docs.items()]


def segment(texts: Sequence[str]) -> List[List[str]]:
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("inconsistency_segmenter")
    return [[s.text.strip() for s in doc.spans["inconsistency_units"] if s.text.strip()]
            for doc in nlp.pipe(texts, batch_size=64)]


def main(
    control_zip: Optional[Path] = typer.Option(None, help="ConTRoL zip (control/train.jsonl passages)."),
    train_rows: Optional[Path] = typer.Option(None, help="Prepared NLI training rows: their multi-sentence premises are passages too."),
    heldout_rows: Optional[Path] = typer.Option(None, help="NLI held-out rows: their premises are never used."),
    output_dir: Path = typer.Option(Path("assets/nli"), help="Where containment_train/heldout.jsonl and containment_stats.json go."),
    ks: str = typer.Option(",".join(map(str, DEFAULT_KS)), help="Window sizes in sentences."),
    max_premise_words: int = typer.Option(220, help="Longest premise, in words."),
    max_overlap: float = typer.Option(0.5, help="Largest share of a control hypothesis's content words found in the premise."),
    heldout_share: float = typer.Option(0.1, help="Share of passages held out."),
    seed: int = typer.Option(0),
) -> None:
    if not control_zip and not train_rows:
        raise typer.BadParameter("give --control-zip and/or --train-rows")
    docs = read_passages(control_zip, train_rows, heldout_rows)
    log(f"{len(docs)} passages")
    sentences = segment([text for _, text in docs])
    passages = [(doc_id, sents) for (doc_id, _), sents in zip(docs, sentences) if len(sents) >= 2]
    train, held = build(passages, seed=seed, heldout_share=heldout_share,
                        ks=[int(k) for k in ks.split(",")], max_premise_words=max_premise_words,
                        max_overlap=max_overlap)
    output_dir.mkdir(parents=True, exist_ok=True)
    for name, part in (("containment_train.jsonl", train), ("containment_heldout.jsonl", held)):
        with (output_dir / name).open("w", encoding="utf8") as f:
            for r in part:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
    words = [len(r["premise"].split()) for r in train]
    stats = {
        "seed": seed, "passages": len(passages),
        "train_passages": len({r["doc"] for r in train}), "heldout_passages": len({r["doc"] for r in held}),
        "train": dict(sorted(Counter(f"{r['source']}:{r['label']}:k{r['k']}" for r in train).items())),
        "heldout": dict(sorted(Counter(f"{r['source']}:{r['label']}:k{r['k']}" for r in held).items())),
        "train_rows": len(train), "heldout_rows": len(held),
        "premise_words_mean": round(sum(words) / max(1, len(words)), 1),
        "premise_words_max": max(words, default=0),
        "share_premise_over_90_words": round(sum(w > 90 for w in words) / max(1, len(words)), 3),
    }
    (output_dir / "containment_stats.json").write_text(json.dumps(stats, indent=1) + "\n", encoding="utf8")
    print(json.dumps(stats, indent=1))


if __name__ == "__main__":
    typer.run(main)
