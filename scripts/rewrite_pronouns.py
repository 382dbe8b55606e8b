"""An experiment, not shipped: the behavioural suite with pronouns replaced by their antecedent.

A sentence whose main-clause subject is he/she/it/they, or whose subject has
his/her/its/their, gets the subject phrase of the nearest of the 3 sentences
before it of the right kind (a person for he/she/his/her, not a person for
it/its, a plural for they/their) in place of the pronoun ("Its light was
first lit" -> "The Skarra Point lighthouse's light was first lit"). Documents
are parsed whole with `alignment.load_parser()`; the gold pairs are rewritten
with the same edits. Then compare the unchanged detector on both copies:

    python scripts/rewrite_pronouns.py --output-dir /tmp/rewritten
    python scripts/evaluate_behaviour.py --split dev --suite /tmp/rewritten
    python scripts/evaluate_behaviour.py --split dev

docs/detection.md reports the result (it lowered the dev matched AUC).
"""
import json
from pathlib import Path
from typing import List, Optional, Tuple

import typer

ROOT = Path(__file__).resolve().parent.parent
SUBJECT_PRONOUNS = {"he": "person", "she": "person", "it": "thing", "they": "plural"}
POSSESSIVES = {"his": "person", "her": "person", "its": "thing", "their": "plural"}
# Parts of an antecedent's phrase left out: clauses, appositions, lists.
DROP = {"relcl", "acl", "appos", "advcl", "punct", "cc", "conj"}
Edit = Tuple[int, int, str]


def _subject(sent):
    return next((c for c in sent.root.children if c.dep_ in ("nsubj", "nsubjpass")), None)


def _phrase(head) -> str:
    if head.ent_type_ == "PERSON":
        for ent in head.doc.ents:
            if ent.start <= head.i < ent.end:
                return ent.text
    skip = set()
    for c in head.children:
        if c.dep_ in DROP or (c.dep_ == "prep" and c.i > head.i and c.lower_ not in ("of", "at", "in", "on")):
            skip.update(t.i for t in c.subtree)
    tokens = [t for t in head.subtree if t.i not in skip]
    return head.doc[tokens[0].i : tokens[-1].i + 1].text.strip(" ,")


def _kind(head) -> str:
    from spacy_inconsistency.alignment import PERSON_NOUNS

    if head.ent_type_ == "PERSON" or head.lemma_.lower() in PERSON_NOUNS:
        return "person"
    return "plural" if head.tag_ in ("NNS", "NNPS") else "thing"


def pronoun_edits(doc) -> List[Edit]:
    """(start char, end char, replacement) for each pronoun that takes an antecedent."""
    edits: List[Edit] = []
    history: List[Tuple[str, str]] = []  # (kind, phrase) of the sentences' subjects
    for sent in doc.sents:
        subject = _subject(sent)
        target, kind, possessive = None, "", False
        if subject is not None and subject.lower_ in SUBJECT_PRONOUNS:
            target, kind = subject, SUBJECT_PRONOUNS[subject.lower_]
        elif subject is not None:
            owner = next((c for c in subject.children if c.dep_ == "poss" and c.lower_ in POSSESSIVES), None)
            if owner is not None:
                target, kind, possessive = owner, POSSESSIVES[owner.lower_], True
        resolved: Optional[str] = None
        if target is not None:
            resolved = next((p for k, p in reversed(history[-3:]) if k == kind), None)
            if resolved is not None:
                new = resolved
                if target.i == sent.start:
                    new = new[0].upper() + new[1:]
                elif new.split()[0] in ("The", "A", "An"):
                    new = new[0].lower() + new[1:]
                if possessive:
                    new += "'" if new.endswith("s") else "'s"
                edits.append((target.idx, target.idx + len(target.text), new))
        if subject is not None and subject.pos_ != "PRON" and subject.lower_ not in SUBJECT_PRONOUNS:
            history.append((_kind(subject), _phrase(subject)))
        elif resolved is not None and not possessive:
            history.append((kind, resolved))
    return edits


def apply_edits(text: str, edits: List[Edit], offset: int = 0) -> str:
    """`text` (found at `offset` of the document) with the edits inside it applied."""
    out, pos = [], 0
    for start, end, new in edits:
        start, end = start - offset, end - offset
        if start < 0 or end > len(text):
            continue
        out += [text[pos:start], new]
        pos = end
    return "".join(out) + text[pos:]


def main(
    suite: Path = typer.Option(ROOT / "tests" / "behaviour", help="Folder of the suite files."),
    output_dir: Path = typer.Option(..., help="Folder for the rewritten files (same names)."),
) -> None:
    from spacy_inconsistency.alignment import load_parser

    parser = load_parser()
    output_dir.mkdir(parents=True, exist_ok=True)
    for path in sorted(suite.glob("*.jsonl")):
        n_edits = 0
        with (output_dir / path.name).open("w", encoding="utf8") as out:
            for line in path.open(encoding="utf8"):
                record = json.loads(line)
                for side in ("contradiction", "control"):
                    text = record[side]["text"]
                    edits = pronoun_edits(parser(text))
                    n_edits += len(edits)
                    record[side]["pair"] = [apply_edits(p, edits, text.index(p)) for p in record[side]["pair"]]
                    record[side]["text"] = apply_edits(text, edits)
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
        typer.echo(f"{path.name}: {n_edits} pronouns replaced")


if __name__ == "__main__":
    typer.run(main)
