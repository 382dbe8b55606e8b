"""The two measurement scripts of docs/detection.md and docs/speed.md on small texts."""
import importlib.util

from conftest import ROOT
from spacy_inconsistency.alignment import load_parser


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


rewrite = _load("rewrite_pronouns", ROOT / "scripts" / "rewrite_pronouns.py")
shared = _load("shared_content", ROOT / "scripts" / "pairwise" / "shared_content.py")


def test_pronouns_take_the_antecedent_of_their_kind():
    text = ("The Skarra Point lighthouse stands on a granite headland. Its light was first lit in 1868. "
            "Miriam Hartwell took over the farm in 2011. She has since planted pears.")
    edits = rewrite.pronoun_edits(load_parser()(text))
    out = rewrite.apply_edits(text, edits)
    assert "The Skarra Point lighthouse's light was first lit in 1868." in out
    assert "Miriam Hartwell has since planted pears." in out
    # A gold sentence found later in the document gets the same edit.
    sentence = "Its light was first lit in 1868."
    assert rewrite.apply_edits(sentence, edits, text.index(sentence)) == "The Skarra Point lighthouse's light was first lit in 1868."


def test_a_pronoun_without_an_antecedent_of_its_kind_stays():
    text = "The council met on Monday. She voted against the plan."
    assert rewrite.pronoun_edits(load_parser()(text)) == []


def test_rules_keep_pairs_by_shared_lemma_pronoun_or_entity_type():
    parser = load_parser()
    a, b, c, d = (shared.unit_info(doc) for doc in parser.pipe([
        "The museum opens on Sundays.", "The museum is closed at weekends.",
        "Nobody was injured.", "Two firefighters were taken to hospital in Leeds.",
    ]))
    assert shared.RULES["lemma"](a, b) and not shared.RULES["lemma"](c, d)
    assert not shared.RULES["lemma|pronoun"](c, d)
    e = shared.unit_info(parser("It was taken to hospital."))
    assert not shared.RULES["lemma"](e, a) and shared.RULES["lemma|pronoun"](e, a)
