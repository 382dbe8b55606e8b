"""Antonym-swap contradictions, synonym-swap entailments and Breaking NLI rows for NLI stage 3.

The stage-2 model reads "Taxes will fall next year." / "Taxes will rise next year." as
entailment (0.81): almost every word is shared, and its contradictions come from negation
and caption scenes, not from opposite predicates. Opposite stances on one topic are exactly
what a corpus of political statements contains, so stage 3 adds:

- sentences of the prepared NLI mix (non-caption sources: MNLI/TaxiNLI, DocNLI, ConTRoL,
  CANNOT) in which exactly one word of a curated antonym list occurs, paired with the same
  sentence with that word swapped for its antonym, labelled ``contradiction``. Sentences
  with a negation, a question, a hedge or a disjunction are skipped (swapping inside "may
  rise or fall" or "did not rise" does not give a contradiction);
- the same sentences with one word of a curated synonym list swapped, labelled
  ``entailment`` (a first run without them learned that any changed verb means
  contradiction: "will increase prices" / "will raise prices" 0.65);
- Breaking NLI's ``antonyms``/``antonyms_wordnet`` (contradiction) and ``synonyms``
  (entailment) rows whose premise is not held out.

Both lists are split: the ``HELDOUT`` and ``SYNONYMS_HELDOUT`` pairs never appear in training
rows and are used only for the held-out file (built from held-out sentences), which measures
whether the model generalises to opposite (or equivalent) predicates it was not shown.
"""
from __future__ import annotations

import json
import random
import re
import sys
import zipfile
from collections import Counter, defaultdict
from pathlib import Path

import typer

REPO_ROOT = Path(__file__).resolve().parents[2]
CAPTION_SOURCES = {"snli", "sick", "breaking_nli"}

# Each entry: word forms that swap one for one (base, 3rd person, past, participle, -ing ...).
TRAIN = [
    ("increase", "decrease"), ("increases", "decreases"), ("increased", "decreased"),
    ("increasing", "decreasing"), ("raise", "lower"), ("raises", "lowers"), ("raised", "lowered"),
    ("raising", "lowering"), ("rise", "fall"), ("rises", "falls"), ("rose", "fell"),
    ("risen", "fallen"), ("rising", "falling"), ("grow", "shrink"), ("grows", "shrinks"),
    ("grew", "shrank"), ("growing", "shrinking"), ("expand", "reduce"), ("expands", "reduces"),
    ("expanded", "reduced"), ("expanding", "reducing"), ("support", "oppose"),
    ("supports", "opposes"), ("supported", "opposed"), ("supporting", "opposing"),
    ("accept", "reject"), ("accepts", "rejects"), ("accepted", "rejected"),
    ("accepting", "rejecting"), ("allow", "ban"), ("allows", "bans"), ("allowed", "banned"),
    ("strengthen", "weaken"), ("strengthens", "weakens"), ("strengthened", "weakened"),
    ("win", "lose"), ("wins", "loses"), ("winning", "losing"),
    ("succeed", "fail"), ("succeeds", "fails"), ("succeeded", "failed"),
    ("opened", "closed"), ("agree", "disagree"), ("agrees", "disagrees"),
    ("agreed", "disagreed"), ("include", "exclude"), ("includes", "excludes"),
    ("included", "excluded"), ("improve", "worsen"), ("improves", "worsens"),
    ("improved", "worsened"), ("higher", "lower"),
    ("good", "bad"), ("easy", "difficult"), ("cheap", "expensive"), ("safe", "dangerous"),
    ("possible", "impossible"), ("true", "false"), ("happy", "unhappy"), ("public", "private"),
    ("positive", "negative"), ("success", "failure"), ("guilty", "innocent"),
    ("alive", "dead"), ("full", "empty"), ("always", "never"), ("early", "late"),
    ("earlier", "later"), ("majority", "minority"), ("inside", "outside"),
    ("larger", "smaller"), ("large", "small"), ("fast", "slow"), ("hot", "cold"),
]
HELDOUT = [
    ("create", "destroy"), ("created", "destroyed"), ("permit", "prohibit"),
    ("permitted", "prohibited"), ("remember", "forget"), ("remembered", "forgot"),
    ("love", "hate"), ("loves", "hates"), ("loved", "hated"), ("wide", "narrow"),
    ("heavy", "light"), ("victory", "defeat"), ("maximum", "minimum"), ("rich", "poor"),
    ("strong", "weak"), ("stronger", "weaker"), ("legal", "illegal"),
    ("cheaper", "dearer"), ("simple", "complex"), ("same", "different"), ("before", "after"),
]
# One-directional (left -> right): the left word is chosen to be read one way in context
# (no "the show" -> "the demonstrate", no "an increase" -> "an raise").
SYNONYMS = [
    ("increased", "raised"), ("increasing", "raising"), ("rose", "went up"), ("rises", "goes up"),
    ("big", "large"), ("reduce", "cut"), ("reduces", "cuts"), ("reduced", "cut"),
    ("reducing", "cutting"), ("helped", "assisted"), ("begin", "start"), ("began", "started"),
    ("begins", "starts"), ("buy", "purchase"), ("bought", "purchased"), ("choose", "select"),
    ("chose", "selected"), ("finished", "completed"), ("fast", "quick"), ("difficult", "hard"),
    ("dangerous", "risky"), ("happy", "glad"), ("expensive", "costly"), ("cheap", "inexpensive"),
    ("banned", "forbidden"), ("rejected", "turned down"), ("strengthen", "reinforce"),
    ("strengthened", "reinforced"), ("improved", "enhanced"), ("includes", "contains"),
    ("often", "frequently"), ("usually", "typically"), ("car", "automobile"),
    ("doctor", "physician"), ("movie", "film"), ("children", "kids"), ("said", "stated"),
    ("many", "numerous"),
]
SYNONYMS_HELDOUT = [
    ("replied", "answered"), ("enormous", "huge"), ("attempted", "tried"), ("obtain", "get"),
    ("obtained", "got"), ("sufficient", "enough"), ("rapid", "swift"), ("ill", "sick"),
    ("vanished", "disappeared"), ("intelligent", "clever"), ("wealthy", "affluent"),
]
SKIP = re.compile(r"\b(not|no|never|nor|neither|or|if|whether|may|might|could|unless|"
                  r"either|than)\b|n't\b|\?", re.I)
_WORD = re.compile(r"[A-Za-z]+")


def swap_table(pairs, symmetric: bool = True):
    table = {}
    for a, b in pairs:
        table[a] = b
        if symmetric:
            table[b] = a
    return table


def antonym_swap(sentence: str, table: dict):
    """The sentence with its one listed word swapped, or None (none, several, or a skip cue).

    ``always``/``never`` is in the table but ``never`` is also a negation cue: a sentence
    with ``never`` is skipped, so that pair only ever swaps ``always`` -> ``never``.
    """
    if SKIP.search(sentence):
        return None
    hits = [m for m in _WORD.finditer(sentence) if m.group(0).lower() in table]
    if len(hits) != 1:
        return None
    m = hits[0]
    word = m.group(0)
    new = table[word.lower()]
    if word[0].isupper():
        new = new[0].upper() + new[1:]
    return sentence[: m.start()] + new + sentence[m.end():], word.lower()


def read_jsonl(path):
    with open(path, encoding="utf8") as f:
        return [json.loads(line) for line in f if line.strip()]


def sentences(rows, max_words=40):
    seen, out = set(), []
    for r in rows:
        if r["source"] in CAPTION_SOURCES:
            continue
        for text in (r["premise"], r["hypothesis"]):
            text = " ".join(text.split())
            if 5 <= len(text.split()) <= max_words and text.lower() not in seen:
                seen.add(text.lower())
                out.append(text)
    return out


def swap_pairs(texts, table, rng, *, per_word: int, source: str, label: str = "contradiction"):
    by_word = defaultdict(list)
    for text in texts:
        swapped = antonym_swap(text, table)
        if swapped:
            by_word[swapped[1]].append((text, swapped[0]))
    rows = []
    for word in sorted(by_word):
        items = by_word[word]
        rng.shuffle(items)
        for a, b in items[:per_word]:
            if rng.random() < 0.5:
                a, b = b, a
            rows.append({"premise": a, "hypothesis": b, "label": label, "source": source, "word": word})
    return rows


def breaking_rows(zip_path, held_premises):
    with zipfile.ZipFile(zip_path) as z:
        name = next(n for n in z.namelist() if n.endswith("dataset.jsonl"))
        raw = [json.loads(line) for line in z.open(name)]
    out = []
    for r in raw:
        if r["category"] not in ("antonyms", "antonyms_wordnet", "synonyms"):
            continue
        if r["gold_label"] not in ("entailment", "contradiction", "neutral"):
            continue
        if " ".join(r["sentence1"].split()).lower() in held_premises:
            continue
        out.append({"premise": r["sentence1"], "hypothesis": r["sentence2"], "label": r["gold_label"],
                    "source": "breaking_nli"})
    return out


def main(
    train: str = typer.Option(str(REPO_ROOT / "assets/nli/train.jsonl")),
    heldout: str = typer.Option(str(REPO_ROOT / "assets/nli/heldout.jsonl")),
    breaking_zip: str = typer.Option(str(REPO_ROOT.parent / "shared/data/nli/breaking_nli_dataset.zip")),
    output_dir: str = typer.Option(str(REPO_ROOT / "assets/nli")),
    per_word: int = typer.Option(60, help="cap of training pairs per swapped antonym"),
    per_word_synonyms: int = typer.Option(150, help="cap of training pairs per swapped synonym (fewer sentences "
                                          "hit the list)"),
    seed: int = typer.Option(0),
):
    """Antonym-swap contradictions, synonym-swap entailments and Breaking NLI rows for NLI stage 3."""
    rng = random.Random(seed)
    train_rows, held_rows = read_jsonl(train), read_jsonl(heldout)
    held_texts = set()
    for r in held_rows:
        held_texts.add(" ".join(r["premise"].split()).lower())
        held_texts.add(" ".join(r["hypothesis"].split()).lower())
    train_texts = [t for t in sentences(train_rows) if t.lower() not in held_texts]
    held_only = sentences(held_rows)
    train = swap_pairs(train_texts, swap_table(TRAIN), rng, per_word=per_word, source="antonym_swap")
    synonyms = swap_pairs(train_texts, swap_table(SYNONYMS, symmetric=False), rng, per_word=per_word_synonyms,
                          source="synonym_swap", label="entailment")
    breaking = breaking_rows(breaking_zip, held_texts)
    # Held-out: held-out sentences, words never swapped in training, then seen words.
    held_new = swap_pairs(held_only, swap_table(HELDOUT), rng, per_word=1000, source="antonym_unseen_words")
    held_seen = swap_pairs(held_only, swap_table(TRAIN), rng, per_word=1000, source="antonym_seen_words")
    held_syn_new = swap_pairs(held_only, swap_table(SYNONYMS_HELDOUT, symmetric=False), rng, per_word=1000,
                              source="synonym_unseen_words", label="entailment")
    held_syn_seen = swap_pairs(held_only, swap_table(SYNONYMS, symmetric=False), rng, per_word=1000,
                               source="synonym_seen_words", label="entailment")
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = {"antonym_train.jsonl": train + synonyms + breaking,
             "antonym_heldout.jsonl": held_new + held_seen + held_syn_new + held_syn_seen}
    stats = {"seed": seed, "per_word": per_word, "per_word_synonyms": per_word_synonyms}
    for name, rows in files.items():
        with open(out / name, "w", encoding="utf8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        stats[name] = {"rows": len(rows), "by_source_label": dict(Counter(f"{r['source']}:{r['label']}" for r in rows)),
                       "words": len({r.get("word") for r in rows} - {None})}
    (out / "antonym_stats.json").write_text(json.dumps(stats, indent=2) + "\n", encoding="utf8")
    print(json.dumps(stats, indent=1), file=sys.stderr)


if __name__ == "__main__":
    typer.run(main)
