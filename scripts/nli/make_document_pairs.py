"""Sentence pairs from coherent passages, labelled `not_contradiction`.

SNLI teaches that two captions of one photo contradict when they place it in
different scenes ("... near the shopping centre" / "... found in Scott
Street"). In a real document such sentences are compatible, and a model
trained on SNLI alone flags nearly every news article. Pairs of sentences
taken from one passage of ConTRoL (coherent exam-style texts) are known not
to contradict each other; training on them, with a loss on P(contradiction)
only, removes that artefact without inventing an entailment or neutral label.

Train pairs come from ConTRoL's train passages, held-out pairs from its
validation passages (passages that occur in both splits are left out of
the training side). Sentences come from the package's own segmenter.

    python scripts/nli/make_document_pairs.py --control-zip ../shared/data/nli/control.zip --output-dir assets/nli
"""
import json
import random
import zipfile
from pathlib import Path

import typer

REPO_ROOT = Path(__file__).resolve().parents[2]
LABEL = "not_contradiction"
SOURCE = "control_docpairs"


def passages(zf, member):
    seen = []
    known = set()
    for line in zf.open(member):
        text = json.loads(line)["premise"]
        if text not in known:
            known.add(text)
            seen.append(text)
    return seen


def sentence_units(nlp, text, min_words):
    doc = nlp(text)
    return [u.text.strip() for u in doc.spans["inconsistency_units"] if len(u.text.split()) >= min_words]


def pairs_of(units, rng, per_passage, window):
    near = [(i, j) for i in range(len(units)) for j in range(i + 1, min(i + 1 + window, len(units)))]
    far = [(i, j) for i in range(len(units)) for j in range(i + 1 + window, len(units))]
    chosen = rng.sample(near, min(len(near), per_passage // 2 + per_passage % 2))
    chosen += rng.sample(far, min(len(far), per_passage // 2))
    out = []
    for i, j in chosen:
        a, b = (units[i], units[j]) if rng.random() < 0.5 else (units[j], units[i])
        out.append({"premise": a, "hypothesis": b, "label": LABEL, "source": SOURCE})
    return out


def main(
    control_zip: str = typer.Option(str(REPO_ROOT.parent / "shared/data/nli/control.zip")),
    output_dir: str = typer.Option(str(REPO_ROOT / "assets/nli")),
    seed: int = typer.Option(0),
    per_passage: int = typer.Option(6),
    window: int = typer.Option(4, help="'near' pairs are at most this many sentences apart"),
    min_words: int = typer.Option(4),
    max_train: int = typer.Option(6000),
    max_heldout: int = typer.Option(1000),
):
    """Sentence pairs from coherent passages, labelled `not_contradiction`."""
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("inconsistency_segmenter")
    rng = random.Random(seed)
    with zipfile.ZipFile(control_zip) as zf:
        val = passages(zf, "control/val.jsonl")
        train = [p for p in passages(zf, "control/train.jsonl") if p not in set(val)]
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    stats = {}
    for name, texts, cap in (("train", train, max_train), ("heldout", val, max_heldout)):
        rows = []
        for text in texts:
            rows.extend(pairs_of(sentence_units(nlp, text, min_words), rng, per_passage, window))
        rng.shuffle(rows)
        rows = rows[:cap]
        with (out / f"docpairs_{name}.jsonl").open("w", encoding="utf8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        stats[name] = {"passages": len(texts), "pairs": len(rows)}
    (out / "docpairs_stats.json").write_text(json.dumps(stats, indent=2) + "\n")
    print(json.dumps(stats))


if __name__ == "__main__":
    typer.run(main)
