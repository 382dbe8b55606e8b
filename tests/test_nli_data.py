"""The data builders of the third NLI training stage (scripts/nli/make_unrelated_pairs.py, make_antonym_pairs.py)."""
import importlib.util
import json
from pathlib import Path

import typer
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]


def load_script(name="make_unrelated_pairs"):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / "nli" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf8")


def test_unrelated_pairs_share_no_content_word_and_keep_splits_apart(tmp_path):
    mod = load_script()
    topics = ["river boats harbour", "violin concert orchestra", "tax reform budget",
              "football stadium fans", "volcano eruption lava", "bakery bread flour"]
    train, held = [], []
    for i, topic in enumerate(topics):
        for k in range(4):
            src = ["snli", "sick", "taxinli", "docnli_fever"][k]
            train.append({"premise": f"The {topic} story number {i} begins here.",
                          "hypothesis": f"Another {topic} remark appears {k} times.",
                          "label": "neutral", "source": src})
    # A held-out sentence that also appears in train must not be used for training pairs.
    shared = train[0]["premise"]
    held.append({"premise": shared, "hypothesis": "Penguins waddle across Antarctic ice sheets.",
                 "label": "neutral", "source": "taxinli"})
    held.append({"premise": "Glaciers carve deep valleys over centuries.",
                 "hypothesis": "Satellites orbit high above equatorial regions.",
                 "label": "neutral", "source": "docnli_fever"})
    write_jsonl(tmp_path / "train.jsonl", train)
    write_jsonl(tmp_path / "heldout.jsonl", held)
    app = typer.Typer()
    app.command()(mod.main)
    result = CliRunner().invoke(app, ["--train", str(tmp_path / "train.jsonl"),
                                      "--heldout", str(tmp_path / "heldout.jsonl"),
                                      "--output-dir", str(tmp_path / "out"), "--n-train", "40", "--n-heldout", "2"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(x) for x in (tmp_path / "out" / "unrelated_train.jsonl").read_text().splitlines()]
    assert len(rows) == 40
    held_texts = {held[0]["premise"].lower(), held[0]["hypothesis"].lower(),
                  held[1]["premise"].lower(), held[1]["hypothesis"].lower()}
    seen = set()
    for r in rows:
        assert r["label"] == "neutral" and r["source"] == "unrelated"
        a, b = r["premise"], r["hypothesis"]
        assert not (mod.content_words(a) & mod.content_words(b)), (a, b)
        assert not set(r["sources"]) <= mod.CAPTION_SOURCES, r
        assert a.lower() not in held_texts and b.lower() not in held_texts
        assert frozenset((a, b)) not in seen
        seen.add(frozenset((a, b)))
    held_rows = [json.loads(x) for x in (tmp_path / "out" / "unrelated_heldout.jsonl").read_text().splitlines()]
    assert len(held_rows) == 2
    assert all({r["premise"].lower(), r["hypothesis"].lower()} <= held_texts for r in held_rows)


def test_content_words_ignore_function_words():
    mod = load_script()
    assert mod.content_words("The man is at the harbour, and it rains.") == {"harbour", "rains"}


def test_antonym_swap_changes_exactly_one_listed_word():
    mod = load_script("make_antonym_pairs")
    table = mod.swap_table(mod.TRAIN)
    assert mod.antonym_swap("Taxes will rise next year.", table) == ("Taxes will fall next year.", "rise")
    # capitalisation kept, and the table works both ways
    assert mod.antonym_swap("Fell prices surprised nobody at all.", table) == (
        "Rose prices surprised nobody at all.", "fell")
    # negation, hedges, disjunctions and questions make a swap unsafe
    for text in ("Taxes did not rise last year.", "Taxes didn't rise last year.",
                 "Taxes may rise next year.", "Taxes rise or stay flat.", "Will taxes rise?"):
        assert mod.antonym_swap(text, table) is None, text
    # two listed words: ambiguous, skipped; none: nothing to swap
    assert mod.antonym_swap("Prices rise and wages fall.", table) is None
    assert mod.antonym_swap("The committee met on Monday.", table) is None
    # one-directional synonym table: the right-hand word is never swapped back
    syn = mod.swap_table(mod.SYNONYMS, symmetric=False)
    assert mod.antonym_swap("Sales began in spring.", syn) == ("Sales started in spring.", "began")
    assert mod.antonym_swap("Sales started in spring.", syn) is None


def test_held_out_word_lists_are_disjoint_from_training_lists():
    mod = load_script("make_antonym_pairs")
    train_words = {w for pair in mod.TRAIN + mod.SYNONYMS for w in pair}
    held_words = {w for pair in mod.HELDOUT + mod.SYNONYMS_HELDOUT for w in pair}
    assert not train_words & held_words, train_words & held_words
