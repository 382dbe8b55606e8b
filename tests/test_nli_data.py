"""The data builders of the third NLI training stage (scripts/nli/make_unrelated_pairs.py, make_antonym_pairs.py)."""
import importlib.util
import json
from pathlib import Path

import pytest
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


def test_extra_train_takes_a_seeded_sample_with_path_colon_n(tmp_path):
    train_nli = load_script("train_nli")
    rows = [{"premise": f"p{i}", "hypothesis": f"h{i}", "label": "neutral", "source": "s"} for i in range(50)]
    path = tmp_path / "rows.jsonl"
    write_jsonl(path, rows)
    assert train_nli.read_extra(str(path), 0) == rows
    sample = train_nli.read_extra(f"{path}:7", 0)
    assert len(sample) == 7 and len({r["premise"] for r in sample}) == 7
    assert all(r in rows for r in sample)
    assert sample == train_nli.read_extra(f"{path}:7", 0)  # the seed decides, not the call
    assert sample != train_nli.read_extra(f"{path}:7", 1)
    with pytest.raises(typer.BadParameter, match="asks for 51 rows, the file has 50"):
        train_nli.read_extra(f"{path}:51", 0)


def _stage(base, rows, argv):
    return {"base": base, "train_rows": rows, "reversed_contradictions_added": 10, "epochs_done": 1.0, "weight_decay": 0.01,
            "warmup_fraction": 0.06, "lr": 3e-5, "batch_size": 32, "max_length": 128, "seed": 0, "bf16": False,
            "steps": 5, "train_wall_s": 120.0, "threads": 2, "examples_per_s": 40.0, "torch": "2", "argv": argv}


def test_package_finds_earlier_stages_through_each_base_and_writes_them_to_the_card(tmp_path):
    package = load_script("package_model")
    packaged = tmp_path / "packaged"  # a model packaged before: its metrics.json holds its own stages
    packaged.mkdir()
    first = _stage("assets/encoder", 155639, ["train_nli.py", "--output", "one"])
    (packaged / "metrics.json").write_text(json.dumps({"training": first, "earlier_stages": []}))
    second = tmp_path / "second"  # a trained checkpoint that started from it
    second.mkdir()
    middle = _stage(str(packaged), 18554, ["train_nli.py", "--base", "packaged"])
    (second / "training_info.json").write_text(json.dumps(middle))
    assert package.earlier_stages(str(second)) == [first, middle]
    assert package.earlier_stages(str(packaged)) == [first]
    assert package.earlier_stages(str(tmp_path / "no such model")) == []
    last = _stage(str(second), 1000, ["train_nli.py", "--base", "second"])
    card = package.model_card(last, {"fp32": {}}, {}, [], None, None, [], "fp16", 46.0, "0" * 64,
                              package.earlier_stages(str(second)))
    assert "Trained in 3 stages. Stage 1, from the base encoder: 155,639 rows" in card
    assert "Stage 2, from stage 1: 18,554 rows" in card and "Stage 3, from stage 2: 1,000 rows" in card
    assert "18,554 rows" in card and "1,000 rows" in card
    assert "Stage 3: AdamW" in card
    how = card.split("one per\nstage")[1]
    assert how.index("--output one") < how.index("--base packaged") < how.index("--base second")
    single = package.model_card(first, {"fp32": {}}, {}, [], None, None, [], "fp16", 46.0, "0" * 64)
    assert "One stage from the base encoder, 155,639 rows" in single and "Stage 2" not in single


def test_heldout_table_sets_the_model_before_the_last_stage_beside_on_the_same_rows():
    package = load_script("package_model")
    ev = {"fp32": {"snli": {"task": "3-way", "n": 100, "accuracy": 80.0},
                   "taxinli": {"task": "3-way", "n": 10, "accuracy": 50.0}}}
    before = {"fp32": {"snli": {"task": "3-way", "n": 100, "accuracy": 75.5},
                       "taxinli": {"task": "3-way", "n": 9, "accuracy": 90.0}}}
    table = package.heldout_table(ev, before).splitlines()
    assert table[0].endswith("| before the last stage (fp32) |") and table[1].count("---") == 6
    assert table[2] == "| snli | 3-way | 100 | 80.00 | - | 75.50 |"
    assert table[3].endswith("| 50.00 | - | - |")  # other rows than this model's: not set beside
    assert "before" not in package.heldout_table(ev)


def test_card_says_why_its_document_threshold_was_chosen():
    package = load_script("package_model")

    def card(news_flagged, because=None):
        doc_t = {"chosen": {"alpha": 0.04, "news_flagged": news_flagged}}
        if because:
            doc_t["chosen_because"] = because
        scorer = {"threshold": 0.9, "info": {
            "calibration_news": {"articles": 60, "max_share": 0.03, "flagged_at_dev_threshold": 0.6},
            "document_threshold": doc_t}}
        return package.model_card(_stage("base", 10, []), {"fp32": {}}, {}, [], scorer, None, [], "fp16", 1.0, "0" * 64)

    assert "the largest that flags at most 10% of the dev controls and 3% of 60" in card(0.0167)
    within_cap = card(0.0167)
    over_cap = card(2 / 60)  # a fit that did not record why: it fell back to the strictest
    assert "the strictest rule tried" in over_cap and "the strictest rule tried" not in within_cap
    fewest = card(2 / 60, "lowest_news")
    assert "among the rules that flag the fewest of 60 further news articles: none" in fewest
    assert "the strictest" not in fewest and "none flags 10% or fewer of the dev controls" in card(0.0, "strictest")


def test_card_only_rewrites_the_shipped_card_from_its_metrics(tmp_path):
    """The shipped card is what the generator writes from metrics.json; a new pair score or
    behaviour run changes only what they describe, and other weights are refused."""
    package = load_script("package_model")
    shipped = Path(__file__).resolve().parents[1] / "spacy_inconsistency" / "models" / "nli-minilm-l6"
    out = tmp_path / "model"
    out.mkdir()
    for p in shipped.iterdir():
        (out / p.name).symlink_to(p) if p.name == "model.safetensors" else (out / p.name).write_bytes(p.read_bytes())
    package.recard(out, None, None)
    assert (out / "README.md").read_text() == (shipped / "README.md").read_text()
    beh = json.loads((shipped / "metrics.json").read_text())["behaviour_test"]
    beh["all"]["recall"] = 0.987
    (tmp_path / "beh.json").write_text(json.dumps(beh))
    package.recard(out, None, str(tmp_path / "beh.json"))
    card = (out / "README.md").read_text()
    assert "| **all** | 250 | 0.99 |" in card and "| **all** | 250 | 0.99 |" not in (shipped / "README.md").read_text()
    assert json.loads((out / "metrics.json").read_text())["behaviour_test"]["all"]["recall"] == 0.987
    (out / "model.safetensors").unlink()
    (out / "model.safetensors").write_bytes(b"other weights")
    with pytest.raises(SystemExit, match="not the model its metrics.json describes"):
        package.recard(out, None, None)
