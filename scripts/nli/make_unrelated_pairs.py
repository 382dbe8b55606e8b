"""Pairs of unrelated sentences, labelled neutral, for the third NLI training stage.

The stage-2 model still gives a high P(contradiction), in both directions, to some pairs of
statements about different things ("we have got empty properties in Paignton" / "Freedom of
speech is an absolute right." 0.97). Scored over all pairs of a corpus those false alarms
outnumber the real contradictions, and they are not topical, so no candidate pre-filter can
(or should) keep them. Two sentences about different things neither entail nor contradict
each other: this script pairs sentences of *different* NLI items that share no content word
and labels them ``neutral``.

Sentences come from the premises and hypotheses of the prepared NLI mix (``prepare_nli.py``):
training pairs from its train.jsonl, held-out pairs from its heldout.jsonl only, and no
sentence is in both. Two caption sources (SNLI, SICK) are never paired with each other:
their own convention reads two captions as one scene, so an unrelated caption is a
contradiction there and we leave that convention alone inside its domain.
"""
from __future__ import annotations

import json
import random
import re
import sys
from collections import Counter
from pathlib import Path

import typer

REPO_ROOT = Path(__file__).resolve().parents[2]
CAPTION_SOURCES = {"snli", "sick"}
SOURCE = "unrelated"
# Words that two unrelated sentences may share without making them about the same thing.
STOPWORDS = set(
    """the a an and or but if then than that this these those there their they them his her
    its our your you we he she it is are was were be been being have has had do does did not
    no nor of in on at to for from by with about as into over under after before between out
    up down off again further once here when where why how all any both each few more most
    other some such only own same so too very can will just don should now one two also would
    could may might must shall what which who whom whose while because until during through
    against above below very yes man woman people person men women""".split()
)
_WORD = re.compile(r"[a-z0-9]+")


def content_words(text: str) -> set:
    return {w for w in _WORD.findall(text.lower()) if len(w) >= 3 and w not in STOPWORDS}


def read_jsonl(path):
    with open(path, encoding="utf8") as f:
        return [json.loads(line) for line in f if line.strip()]


def sentence_pool(rows, *, min_words: int, max_words: int):
    """(text, group, source) for every short enough premise/hypothesis, deduplicated."""
    seen, pool = set(), []
    for r in rows:
        group = r["premise"].strip().lower()
        for text in (r["premise"], r["hypothesis"]):
            text = " ".join(text.split())
            n = len(text.split())
            key = text.lower()
            if not (min_words <= n <= max_words) or key in seen:
                continue
            seen.add(key)
            pool.append((text, group, r["source"]))
    return pool


def make_pairs(pool, n: int, rng: random.Random, *, max_tries: int = 200):
    words = [content_words(t) for t, _, _ in pool]
    pairs, used = [], set()
    for _ in range(n):
        for _ in range(max_tries):
            i, j = rng.randrange(len(pool)), rng.randrange(len(pool))
            (ta, ga, sa), (tb, gb, sb) = pool[i], pool[j]
            if ga == gb or (i, j) in used or (j, i) in used:
                continue
            if sa in CAPTION_SOURCES and sb in CAPTION_SOURCES:
                continue
            if not words[i] or not words[j] or words[i] & words[j]:
                continue
            used.add((i, j))
            pairs.append({"premise": ta, "hypothesis": tb, "label": "neutral", "source": SOURCE,
                          "sources": [sa, sb]})
            break
        else:
            raise RuntimeError(f"no unrelated pair found in {max_tries} tries; pool too small?")
    return pairs


def main(
    train: str = typer.Option(str(REPO_ROOT / "assets/nli/train.jsonl")),
    heldout: str = typer.Option(str(REPO_ROOT / "assets/nli/heldout.jsonl")),
    output_dir: str = typer.Option(str(REPO_ROOT / "assets/nli")),
    n_train: int = typer.Option(6000),
    n_heldout: int = typer.Option(1000),
    min_words: int = typer.Option(4),
    max_words: int = typer.Option(50),
    seed: int = typer.Option(0),
):
    """Pairs of unrelated sentences, labelled neutral, for the third NLI training stage."""
    held_pool = sentence_pool(read_jsonl(heldout), min_words=min_words,
                              max_words=max_words)
    held_texts = {t.lower() for t, _, _ in held_pool}
    train_pool = [p for p in sentence_pool(read_jsonl(train), min_words=min_words,
                                           max_words=max_words)
                  if p[0].lower() not in held_texts]
    rng = random.Random(seed)
    train = make_pairs(train_pool, n_train, rng)
    held = make_pairs(held_pool, n_heldout, rng)
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    stats = {"seed": seed, "train_pool": len(train_pool), "heldout_pool": len(held_pool)}
    for name, rows in (("unrelated_train.jsonl", train), ("unrelated_heldout.jsonl", held)):
        with open(out / name, "w", encoding="utf8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        mix = Counter("+".join(sorted(r["sources"])) for r in rows)
        stats[name] = {"pairs": len(rows), "source_mix_top": dict(mix.most_common(12))}
    (out / "unrelated_stats.json").write_text(json.dumps(stats, indent=2) + "\n", encoding="utf8")
    print(json.dumps(stats, indent=1), file=sys.stderr)


if __name__ == "__main__":
    typer.run(main)
