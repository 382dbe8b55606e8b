"""Measurement scripts of docs/detection.md, docs/speed.md and docs/scale.md on small inputs."""
import importlib.util

import pytest

from conftest import ROOT
from spacy_inconsistency.alignment import load_parser


def _load(name, path):
    import sys

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
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


true_eval = _load("evaluate_true", ROOT / "scripts" / "scale" / "evaluate_true.py")


def test_evaluate_true_defaults_to_the_scorers_model_name():
    # The factory's default is a backend config; the script needs the model name in it.
    from spacy_inconsistency.chunk import DEFAULT_ENTAILMENT_MODEL

    assert true_eval.DEFAULT_MODEL == DEFAULT_ENTAILMENT_MODEL["model"] == "mpnet-lora"


def test_evaluate_true_scores_every_row(tmp_path, tiny_nli):
    import csv
    import json

    from typer.testing import CliRunner

    rows = [("The museum opened in 1990. It is closed on Mondays.", "The museum opened in 1990.", 1),
            ("The museum opened in 1990. It is closed on Mondays.", "The museum is open on Mondays.", 0),
            ("Entry is free for children.", "Children pay ten euros.", 0)]
    with (tmp_path / "mini.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["grounding", "generated_text", "label"])
        writer.writerows(rows)
    out = tmp_path / "out"
    result = CliRunner().invoke(true_eval.app, [
        "--data", str(tmp_path), "--datasets", "mini", "--model", tiny_nli, "--output", str(out / "m.json"),
        "--plot", str(out / "m.png"), "--scores-out", str(out / "s.jsonl")])
    assert result.exit_code == 0, result.output
    scores = [json.loads(line) for line in (out / "s.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [s["label"] for s in scores] == [1, 0, 0]
    assert all(0.0 <= s["score"] <= 1.0 for s in scores)
    assert json.loads((out / "m.json").read_text(encoding="utf-8"))["datasets"]["mini"]["n"] == 3


suite_units = _load("suite_units", ROOT / "scripts" / "nli" / "suite_units.py")


def test_probe_documents_are_both_sides_of_every_record_cut_into_units():
    units = suite_units.unit_segmenter()
    assert units("The No. 20 Squadron flew. It landed at 4 p.m. in Leeds.") == [
        "The No. 20 Squadron flew.", "It landed at 4 p.m. in Leeds."]
    docs = suite_units.suite_documents("dev", units)
    assert [side for _, side, _ in docs[:4]] == ["contradiction", "control"] * 2
    assert len(docs) == 2 * len({record["id"] for record, _, _ in docs})
    # Most gold sentences are whole units (some are cut or merged by the segmenter).
    whole = sum(all(p in us for p in record[side]["pair"]) for record, side, us in docs)
    assert whole >= 0.9 * len(docs)


fit_cal = _load("fit_calibration", ROOT / "scripts" / "scale" / "fit_calibration.py")


def test_fit_calibration_holds_each_dataset_out(tmp_path):
    import json

    import numpy
    from typer.testing import CliRunner

    from spacy_inconsistency.calibration import ScoreCalibration

    rng = numpy.random.default_rng(0)
    lines = []
    for name, rate in (("a", 0.3), ("b", 0.5), ("c", 0.7)):
        for _ in range(300):
            label = int(rng.random() < rate)
            score = 1 / (1 + numpy.exp(-(rng.normal(6.0 + 2.0 * label, 2.0))))  # crowded below 1
            lines.append(json.dumps({"dataset": name, "row": 0, "label": label, "score": float(score)}))
    (tmp_path / "s.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = CliRunner().invoke(_typer_app(fit_cal.main), [
        str(tmp_path / "s.jsonl"), "--model", "m", "--output", str(tmp_path / "map.json")])
    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines() if line.startswith("| a |") or line.startswith("| c |")]
    assert len(rows) == 2
    cal = ScoreCalibration.from_disk(tmp_path / "map.json")
    assert cal.meta["model"] == "m" and set(cal.meta["held_out"]) == {"a", "b", "c"}
    # The raw scores sit near 1 whatever the label; held out, the map brings ECE down on the middle set.
    row_b = next(line for line in result.output.splitlines() if line.startswith("| b |"))
    ece_model, ece_held = (float(x) for x in row_b.split("|")[5].split("/")[:2])
    assert ece_held < ece_model / 2


def _typer_app(function):
    import typer

    app = typer.Typer()
    app.command()(function)
    return app


learned_pairs = _load("learned_pairs", ROOT / "scripts" / "pairwise" / "learned_pairs.py")


def test_benchmark_pairs_get_the_score_find_contradictions_reports():
    import numpy
    import spacy

    from spacy_inconsistency.backends.nli import NLIBackend
    from spacy_inconsistency.compare import find_contradictions
    from spacy_inconsistency.pair_score import stack_probabilities

    a = ["Zully Broussard donated her kidney to a stranger in 2015.", "The mayor toured the plant on Monday."]
    b = ["Zully Broussard never donated a kidney.", "The governor has never visited the plant."]
    # float32 on both sides: in bf16 (auto, on CPUs with native bf16) a score moves with the batch it is read in.
    backend = NLIBackend("default", device="cpu", dtype="float32")
    probs = stack_probabilities(backend.predict([p for x, y in zip(a, b) for p in ((x, y), (y, x))]), 4)
    got = learned_pairs.learned_scores(backend, "default", a, b, probs[0::2], probs[1::2])
    swapped = learned_pairs.learned_scores(backend, "default", b, a, probs[1::2], probs[0::2])
    numpy.testing.assert_allclose(got["learned"], swapped["learned"], atol=1e-6)  # symmetric
    nlp = spacy.blank("en")
    nlp.add_pipe("contradiction_detector", config={"rescorer": None, "model": {"dtype": "float32"}})
    for i in range(2):
        # Each statement its own Doc, every pair reported (threshold 0).
        (finding,) = find_contradictions(nlp, [a[i], b[i]], within_docs=False, threshold=0.0)
        assert abs(finding["score"] - float(got["learned"][i])) < 1e-4
    assert got["learned"][0] > got["learned"][1]  # "the governor" is not "the mayor"
    assert got["threshold"] == nlp.get_pipe("contradiction_detector").pair_settings().threshold


role_pairs = _load("make_role_pairs", ROOT / "scripts" / "nli" / "make_role_pairs.py")


def test_role_pairs_come_from_definite_anchored_roles_only():
    import random

    parser = load_parser()
    mayor = next(parser("Betsy Hodges is the mayor of Minneapolis.").sents)
    ((holder, noun, be),) = role_pairs.role_mentions(mayor)
    assert (holder.text, noun.text, be) == ("Betsy Hodges", "mayor", "is")
    rows = role_pairs.rows_for(mayor, holder, noun, be, "Jacob Frey", "d0", random.Random(0))
    by_label = {}
    for r in rows:
        by_label.setdefault(r["label"], []).append(r)
    # The other holder contradicts, in both directions; the same holder is entailed.
    assert len(by_label["contradiction"]) == 2
    assert all("Jacob Frey" in r["hypothesis"] or "Jacob Frey" in r["premise"] for r in by_label["contradiction"])
    assert any(r["premise"] == mayor.text and "Jacob Frey" in r["hypothesis"] for r in by_label["contradiction"])
    assert any(r["premise"] != mayor.text and r["hypothesis"] == mayor.text for r in by_label["contradiction"])
    (same,) = by_label["entailment"]
    assert "Betsy Hodges" in same["hypothesis"] and "mayor of Minneapolis" in same["hypothesis"]
    # Controls make the same swap without excluding the holder.
    assert len(by_label["neutral"]) == 2
    assert all("Jacob Frey" in r["hypothesis"] for r in by_label["neutral"])
    assert all(any(w in r["hypothesis"] for w in (" a mayor", "deputy", "assistant", "acting", "former", "Before"))
               for r in by_label["neutral"])
    # Not one holder: an indefinite role, a relational noun, a thing that is not a role.
    for text in ("Maria Lopez is a mayor of a small town.", "Maria Lopez is the daughter of the mayor.",
                 "Valencia is the third largest area of Spain."):
        assert role_pairs.role_mentions(next(parser(text).sents)) == []


def test_every_command_line_script_runs_its_commands():
    # lora_mpnet.py lost its `app()` once and every `spacy project run` step on it did nothing, rc 0.
    import subprocess
    import sys

    scripts = [p for p in (ROOT / "scripts").rglob("*.py") if "typer" in p.read_text(encoding="utf8")]
    assert len(scripts) > 20
    missing = [str(p.relative_to(ROOT)) for p in scripts if 'if __name__ == "__main__":' not in p.read_text(encoding="utf8")]
    assert missing == []
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "nli" / "lora_mpnet.py"), "--help"],
                         capture_output=True, text=True, check=True).stdout
    assert all(command in out for command in ("pack", "train", "bench-train", "merge"))


score_rules = _load("document_score_rules", ROOT / "scripts" / "document_score_rules.py")


def test_document_score_rules_over_pair_scores():
    import numpy

    from spacy_inconsistency.pair_score import DocumentThreshold

    rules = score_rules.rules(DocumentThreshold(numpy.linspace(0.0, 1.0, 101), alpha=0.05, floor=0.0))  # F(s) = s
    assert rules["max"]([0.9, 0.1]) == 0.9
    assert abs(rules["noisy_or"]([0.5, 0.5]) - 0.75) < 1e-9
    # Only the three highest: a fourth pair, however high the others, adds nothing.
    assert abs(rules["noisy_or_top3"]([0.1, 0.5, 0.5, 0.5]) - 0.875) < 1e-9
    assert rules["noisy_or_top3"]([0.5, 0.5, 0.5, 0.5]) == rules["noisy_or_top3"]([0.5, 0.5, 0.5])
    # F(max) ** k: the same highest score says less in a document of more pairs.
    assert abs(rules["length_aware"]([0.9, 0.1]) - 0.81) < 1e-9
    assert rules["length_aware"]([0.9, 0.1, 0.1]) < rules["length_aware"]([0.9, 0.1])
    assert all(rule([]) == 0.0 for rule in rules.values())


exclusive = _load("make_exclusive_roles", ROOT / "scripts" / "nli" / "make_exclusive_roles.py")


def test_exclusive_role_rows_swap_the_holder_and_control_the_same_swap():
    import random

    names = {"PERSON": ["Ada Byron", "Karl Weiss", "Mira Sol", "Tom Reyes"], "ORG": ["Acme Ltd", "Borg Inc", "Cole AG"],
             "GPE": ["Lyon", "Oslo"], "WORK_OF_ART": ["Dune"]}
    role = next(r for r in exclusive.ROLES if r.name == "design")
    rows = exclusive.make_rows(role, names, 20, random.Random(0), ["active", "passive", "agent_noun"])
    contradictions = [r for r in rows if r["label"] == "contradiction"]
    assert len(contradictions) == 40  # every group, both orders
    both_ways = {(r["premise"], r["hypothesis"]) for r in contradictions}
    for r in contradictions:
        # Two different people hold the one role of the same thing.
        holders = [n for n in names["PERSON"] if n in r["premise"]], [n for n in names["PERSON"] if n in r["hypothesis"]]
        assert len(holders[0]) == len(holders[1]) == 1 and holders[0] != holders[1]
        assert (r["hypothesis"], r["premise"]) in both_ways
    for r in (r for r in rows if r["label"] == "entailment"):
        assert [n for n in names["PERSON"] if n in r["premise"]] == [n for n in names["PERSON"] if n in r["hypothesis"]]
    assert {r["source"] for r in rows if r["label"] == "neutral"} <= {
        f"exclusive_control_{k}" for k in ("thing", "predicate", "time", "hedge", "shared")}
    # The held-out frame never reaches rows made with the training frames.
    assert "credited" in exclusive.frames(role) and "credited" in exclusive.HELDOUT_FRAMES
    training_frames = [f for f in exclusive.frames(role) if f not in exclusive.HELDOUT_FRAMES]
    rows = exclusive.make_rows(role, names, 40, random.Random(1), training_frames)
    assert not any("credited as" in r["premise"] + r["hypothesis"] for r in rows)


near_miss = _load("make_near_miss_pairs", ROOT / "scripts" / "nli" / "make_near_miss_pairs.py")


def test_near_miss_rows_label_the_gold_pair_and_only_it_a_contradiction():
    import random

    a, b = "The ferry left Aldby at noon.", "The ferry never left Aldby that day."
    b_ctrl = "The ferry never left Aldby the next day."
    other = ["Forty cars were aboard.", "The crossing takes an hour."]
    record = {"id": "r1", "capability": "negation",
              "contradiction": {"text": "", "pair": [a, b]}, "control": {"text": "", "pair": [a, b_ctrl], "kind": "change over time"}}
    rows = near_miss.record_rows(record, [a, *other, b], [a, *other, b_ctrl], 10, random.Random(0))
    contradictions = [(r["premise"], r["hypothesis"]) for r in rows if r["label"] == "contradiction"]
    assert contradictions == [(a, b)]
    controls = {(r["premise"], r["hypothesis"]) for r in rows if r["source"] == "near_miss_control"}
    assert controls == {(a, b_ctrl), (b_ctrl, a)}
    others = [{r["premise"], r["hypothesis"]} for r in rows if r["source"] == "near_miss_other"]
    # Every other pair of both documents (5 each, 10 asked), none of them a gold or near-miss pair.
    assert len(others) == 10 and {a, b} not in others and {a, b_ctrl} not in others
    # Another speaker saying the same words: the sentences alone contradict, so no control row.
    record["control"] = {"text": "", "pair": [a, b], "kind": "different speakers"}
    rows = near_miss.record_rows(record, [a, b], [a, b], 2, random.Random(0))
    assert [r["label"] for r in rows] == ["contradiction"]


def test_simplify_keeps_the_main_statement():
    import numpy

    probe = _load("simplify_probe", ROOT / "scripts" / "nli" / "simplify_probe.py")
    parser = load_parser()
    cases = {
        "Officials said no one was injured in the blaze.": "No one was injured in the blaze.",
        "The Saint Ilse, a ferry built in 1990, left Harwick at noon, a deputy harbourmaster said.":
            "The Saint Ilse left Harwick at noon.",
        "According to the club, Maria Lenz (the captain) scored the only goal, which came late.":
            "Maria Lenz scored the only goal.",
        "The museum, which opened in 1921, has never closed.": "The museum has never closed.",
        "It rained.": "It rained.",  # too short to cut
    }
    for text, expected in cases.items():
        assert probe.simplify(parser(text)) == expected
    assert probe.win_rate(numpy.array([0.9, 0.2, 0.5]), numpy.array([0.1, 0.3, 0.5])) == 0.5  # win, loss, tie


def test_calibrate_cascade_fit_keeps_both_caps_and_writes_the_rule(tmp_path):
    import json

    import numpy

    from conftest import write_min_pair_scorer
    from spacy_inconsistency.pair_score import PairScoreModel

    calibrate = _load("calibrate_cascade", ROOT / "scripts" / "nli" / "calibrate_cascade.py")
    rng = numpy.random.default_rng(0)
    cascade = {"rescore_top_k": 8, "rescore_top_share": 0.0, "rescore_similar_k": 4}  # the collect step's CASCADE_KEYS
    rows = [{"set": "news", "id": f"n{i}", "side": "consistent", "pairs": 100, "cascade": cascade,
             "read_scores": sorted(rng.uniform(0, 0.6, 12).round(6).tolist(), reverse=True), "gold_pair_score": None}
            for i in range(100)]
    for i in range(50):
        gold = float(rng.uniform(0.5, 1.0))
        control = float(rng.uniform(0.0, 0.5))
        # out of fold (the pair score did not see the record) 4 of the 50 controls score over
        # anything the news allows: always flagged
        rows.append({"set": "dev", "id": f"d{i}", "side": "contradiction", "pairs": 10, "cascade": cascade,
                     "read_scores": [round(gold, 6), 0.1], "gold_pair_score": gold,
                     "read_scores_oof": [round(gold, 6), 0.1], "gold_pair_score_oof": gold})
        rows.append({"set": "dev", "id": f"d{i}", "side": "control", "pairs": 10, "cascade": cascade,
                     "read_scores": [round(control, 6), 0.05], "gold_pair_score": 0.01,
                     "read_scores_oof": [round(0.7 if i < 4 else control, 6), 0.05], "gold_pair_score_oof": 0.01})
    details = tmp_path / "details.jsonl"
    details.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf8")
    news = [r for r in rows if r["set"] == "news"]
    controls = [r for r in rows if r["side"] == "control"]
    for in_fold, key in ((False, "read_scores_oof"), (True, "read_scores")):
        path = write_min_pair_scorer(tmp_path / f"pair_scorer_{key}.json")
        calibrate.fit(details=details, pair_scorer=path, max_news_alarms=0.03, max_dev_false_alarms=0.10, floor=0.3,
                      caps=[8, 64], dry_run=False, in_fold=in_fold)
        scorer = PairScoreModel.from_disk(path)
        chosen = scorer.info["cascade_threshold"]["chosen"]
        assert scorer.info["cascade_threshold"]["dev_scores"] == ("in fold" if in_fold else "out of fold")
        assert scorer.cascade_settings == cascade
        rule = scorer.document_thresholds["cascade"]
        news_flagged = numpy.mean([max(r["read_scores"]) >= rule(r["pairs"]) for r in news])
        dev_fa = numpy.mean([max(r[key]) >= rule(r["pairs"]) for r in controls])
        assert news_flagged <= 0.03 and dev_fa <= 0.10
        assert chosen["news_flagged"] == pytest.approx(news_flagged) and chosen["dev_false_alarms"] == pytest.approx(dev_fa)
    assert [PairScoreModel.from_disk(tmp_path / f"pair_scorer_{key}.json").info["cascade_threshold"]["chosen"]
            ["dev_false_alarms"] for key in ("read_scores_oof", "read_scores")] == [0.08, 0.0]
    # the rule applies only to the cascade it was fitted for
    assert scorer.document_threshold(10, cascade=cascade) == rule(10)
    assert scorer.document_threshold(10, cascade={**cascade, "rescore_similar_k": 0}) == scorer.document_threshold(10)
    # no rule can keep the caps: an error, nothing written
    import typer

    before = path.read_text(encoding="utf8")
    with pytest.raises(typer.Exit):
        calibrate.fit(details=details, pair_scorer=path, max_news_alarms=0.0, max_dev_false_alarms=-1.0, floor=0.3,
                      caps=[8], dry_run=False, in_fold=False)
    # details without out-of-fold scores: an error unless asked for in-fold
    for r in rows:
        r.pop("read_scores_oof", None)
    details.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf8")
    with pytest.raises(typer.BadParameter, match="read_scores_oof"):
        calibrate.fit(details=details, pair_scorer=path, max_news_alarms=0.03, max_dev_false_alarms=0.10, floor=0.3,
                      caps=[8], dry_run=False, in_fold=False)
    assert path.read_text(encoding="utf8") == before


def test_calibrate_cascade_scores_each_docs_read_pairs_with_its_fold_model(tiny_nli, tmp_path):
    """`collect` keeps the cascade's last pair-score call per Doc and scores those inputs again:
    with a fold model of weight 1 on logit(max P(contradiction)) each read pair scores the larger
    of its two directions' P(contradiction), Doc by Doc in a batch."""
    import numpy
    import spacy

    from conftest import PARAGRAPH, build_tiny_nli, write_min_pair_scorer
    from spacy_inconsistency.pair_score import LogisticModel, feature_names

    calibrate = _load("calibrate_cascade", ROOT / "scripts" / "nli" / "calibrate_cascade.py")
    rescorer = build_tiny_nli(tmp_path / "rescorer", {0: "entailment", 1: "neutral", 2: "contradiction"}, seed=1)
    write_min_pair_scorer(rescorer / "pair_scorer.json")
    nlp = spacy.blank("en")
    backend = "spacy-inconsistency.NLIBackend.v1"
    pipe = nlp.add_pipe("inconsistency_detector", config={
        "model": {"@misc": backend, "model": tiny_nli, "dtype": "float32"}, "alignment": False,
        "rescorer": {"@misc": backend, "model": str(rescorer), "dtype": "float32"},
        "rescore_top_k": 4, "rescore_reverse_top_k": 1, "rescore_similar_k": 0})
    recorder = calibrate._Recorder(pipe.pairwise.rescorer_pair_scorer)
    pipe.pairwise._rescorer_pair_scorer = recorder
    texts = [PARAGRAPH, "The bridge opened in 1990. Traffic grew every year. The bridge has never opened. It is red."]
    docs = [nlp.make_doc(t) for t in texts]
    pipe.segment(docs)
    predicted = pipe.predict(docs)
    assert len(recorder.calls) > len(docs)  # the reverse reading's picks call it too
    names = feature_names(False)
    c_max = LogisticModel(names, [0.0] * len(names), [1.0] * len(names), [float(n == "c_max") for n in names], 0.0)
    differ = []
    for s, call in zip(predicted, recorder.calls[-len(docs):]):
        assert len(s.rescored) == 4
        oof = calibrate.out_of_fold_scores(s, call, (c_max, c_max))
        want = numpy.zeros_like(s.score)
        want[s.rescored] = numpy.maximum(s.forward, s.backward)[s.rescored]
        assert numpy.allclose(oof, want, atol=1e-5)
        differ.append(float(numpy.abs(oof - s.score).max()))
    assert max(differ) > 1e-3  # the shipped pair score is the min of the two directions
    with pytest.raises(RuntimeError, match="not this Doc's"):
        calibrate.out_of_fold_scores(predicted[0], recorder.calls[-1], (c_max, c_max))


def test_fit_logistic_keeps_each_folds_model_and_what_it_did_not_see():
    """The fold models give the out-of-fold scores again (calibrate_cascade.py uses them)."""
    import numpy

    fit = _load("fit_pair_scorer", ROOT / "scripts" / "nli" / "fit_pair_scorer.py")
    rng = numpy.random.default_rng(0)
    X = rng.normal(size=(400, 3))
    y = (X[:, 0] + 0.5 * rng.normal(size=400) > 0).astype(int)
    groups = numpy.arange(400) // 4
    fitted, oof = fit.fit_logistic(X, y, numpy.ones(400), groups, C_grid=(0.1, 1.0))
    held = numpy.concatenate([f["held_out"] for f in fitted["folds"]])
    assert len(fitted["folds"]) == 5 and sorted(held.tolist()) == list(range(400))
    Z = (X - fitted["mean"]) / fitted["scale"]
    for f in fitted["folds"]:
        assert len(set(groups[f["held_out"]]) & set(numpy.delete(groups, f["held_out"]))) == 0
        p = 1 / (1 + numpy.exp(-(Z[f["held_out"]] @ f["coef"] + f["intercept"])))
        assert numpy.allclose(p, oof[f["held_out"]])
        assert not numpy.allclose(f["coef"], fitted["coef"])


def test_document_rule_falls_back_to_the_fewest_news_alarms_not_the_strictest():
    fit = _load("fit_pair_scorer", ROOT / "scripts" / "nli" / "fit_pair_scorer.py")

    def row(alpha, dev_fa, news):
        return {"alpha": alpha, "dev_recall": alpha, "dev_false_alarms": dev_fa, "news_flagged": news}

    caps = {"max_dev_false_alarms": 0.10, "max_news_alarms": 0.03}
    table = [row(0.01, 0.01, 0.02), row(0.02, 0.05, 0.02), row(0.03, 0.09, 0.05), row(0.04, 0.12, 0.02)]
    assert fit.choose_alpha(table, **caps) == (table[1], "within_caps")
    # every rule flags 2 of 60 articles (over 3%): the largest within the dev cap, not alpha 0.01
    over = [row(0.01, 0.01, 2 / 60), row(0.02, 0.04, 2 / 60), row(0.03, 0.08, 2 / 60),
            row(0.04, 0.105, 2 / 60), row(0.05, 0.09, 3 / 60)]
    assert fit.choose_alpha(over, **caps) == (over[2], "lowest_news")
    # the fewest news alarms come first, even at a smaller alpha
    mixed = [row(0.01, 0.01, 2 / 60), row(0.02, 0.04, 3 / 60)]
    assert fit.choose_alpha(mixed, **caps) == (mixed[0], "lowest_news")
    none = [row(0.02, 0.2, 0.0), row(0.01, 0.15, 0.0)]
    assert fit.choose_alpha(none, **caps) == (none[1], "strictest")
    # Two dev splits: the cap holds in each, not only in their mix (0.09 overall, 0.14 in one split).
    split = [dict(row(0.02, 0.05, 0.0), dev_false_alarms_by_files={"dev_*": 0.08, "dev2_*": 0.02}),
             dict(row(0.03, 0.09, 0.0), dev_false_alarms_by_files={"dev_*": 0.14, "dev2_*": 0.04})]
    assert fit.choose_alpha(split, **caps) == (split[0], "within_caps")
    assert fit.choose_alpha([{k: v for k, v in r.items() if k != "dev_false_alarms_by_files"} for r in split],
                            **caps)[0]["alpha"] == 0.03
    with pytest.raises(ValueError):
        fit.choose_alpha([], **caps)


def test_matched_auc_counts_ties_half_overall_and_per_dev_file():
    import numpy

    fit = _load("fit_pair_scorer", ROOT / "scripts" / "nli" / "fit_pair_scorer.py")
    # Records 0-2 (documents 0-5): a win, a tie, a loss; record 1 and 2 are the second file's.
    scores = numpy.array([0.9, 0.1, 0.5, 0.5, 0.2, 0.7])
    overall, by_files = fit.matched_auc_by_files(scores, numpy.arange(6), {"dev_*": [0], "dev2_*": [1, 2], "none_*": []})
    assert overall == pytest.approx(0.5)
    assert by_files == {"dev_*": 1.0, "dev2_*": pytest.approx(0.25)}


def test_rechoosing_a_fitted_document_rule_keeps_the_pair_score(tmp_path):
    import json

    fit = _load("fit_pair_scorer", ROOT / "scripts" / "nli" / "fit_pair_scorer.py")
    from spacy_inconsistency.pair_score import PairScoreModel

    shipped = json.loads((ROOT / "spacy_inconsistency" / "models" / "nli-minilm-l6" / "pair_scorer.json").read_text())
    table = shipped["info"]["document_threshold"]["by_alpha"]
    # as a fit that fell back to the strictest rule wrote it
    for rule in shipped["document_thresholds"].values():
        rule["alpha"] = table[0]["alpha"]
    shipped["info"]["document_threshold"]["chosen"] = table[0]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(shipped))
    caps = {"max_dev_false_alarms": 0.10, "max_news_alarms": 0.03}
    fit.rechoose(old, tmp_path / "new.json", **caps)
    expected, why = fit.choose_alpha(table, **caps)
    before, after = PairScoreModel.from_disk(old), PairScoreModel.from_disk(tmp_path / "new.json")
    assert after.info["document_threshold"]["chosen"] == expected
    assert after.info["document_threshold"]["chosen_because"] == why
    assert after.full.to_dict() == before.full.to_dict() and after.threshold == before.threshold
    for key in ("full", "nli_only"):
        assert after.document_thresholds[key].alpha == expected["alpha"]
        assert list(after.document_thresholds[key].cdf) == list(before.document_thresholds[key].cdf)
    if expected["alpha"] > table[0]["alpha"]:  # a larger alpha: a lower threshold at every length
        assert after.document_threshold(30) < before.document_threshold(30)


ld_candidates = _load("long_distance_candidates", ROOT / "scripts" / "pairwise" / "long_distance_candidates.py")


def test_long_distance_probe_reads_the_top_pairs_and_then_the_most_alike():
    import numpy

    first = numpy.arange(12, 0, -1, dtype=float)  # pairs 0..7 are the first model's 8 highest
    other = numpy.zeros(12)
    other[[0, 9, 11]] = [5.0, 0.3, 0.7]  # pair 0 is already read; 10 shares nothing
    assert ld_candidates.chosen(first, other, 0) == set(range(8))
    assert ld_candidates.chosen(first, other, 4) == set(range(8)) | {9, 11}
    assert ld_candidates.chosen(first, other, 1) == set(range(8)) | {11}


hard_negatives = _load("mine_hard_negatives", ROOT / "scripts" / "nli" / "mine_hard_negatives.py")


def test_hard_negatives_are_read_pairs_over_the_floor_that_touch_no_gold_sentence():
    from types import SimpleNamespace

    import numpy

    # Four units of 10 characters; the gold pair is units 0 and 3.
    units = [SimpleNamespace(start_char=10 * i, end_char=10 * i + 9) for i in range(4)]
    pairs = numpy.array([[0, 1], [1, 2], [2, 3], [0, 3], [1, 3], [0, 2]])
    score = numpy.array([0.9, 0.5, 0.3, 0.95, 0.05, 0.0])  # 0.0: a pair the second stage did not read
    scores = SimpleNamespace(units=units, pairs=pairs, score=score)
    gold = ((0, 9), (30, 39))
    assert hard_negatives.consistent_pairs(scores, gold, "contradiction", 0.2) == [(1, 2, 0.5)]
    # The control is consistent throughout: every read pair over the floor, its near miss included.
    kept = hard_negatives.consistent_pairs(scores, gold, "control", 0.2)
    assert [(i, j) for i, j, _ in kept] == [(0, 1), (1, 2), (2, 3), (0, 3)]
    assert hard_negatives.consistent_pairs(scores, gold, "control", 0.92) == [(0, 3, 0.95)]


def test_adapters_at_writes_a_revisions_adapter_files_and_names_a_missing_one(tmp_path):
    # finetune-mpnet-lora starts from the adapters of an earlier commit (vars.mpnet_step1_rev).
    import subprocess
    import sys

    import srsly

    from spacy_inconsistency.backends.mpnet_lora import ADAPTER_FILES

    script = str(ROOT / "scripts" / "nli" / "lora_mpnet.py")
    rev = srsly.read_yaml(ROOT / "project.yml")["vars"]["mpnet_step1_rev"]
    if subprocess.run(["git", "cat-file", "-e", f"{rev}^{{commit}}"], cwd=ROOT, capture_output=True).returncode != 0:
        pytest.skip(f"{rev} is not in this checkout (not a git clone, or a shallow one)")
    subprocess.run([sys.executable, script, "adapters-at", "--rev", rev, "--output", str(tmp_path / "a")],
                   check=True, capture_output=True)
    for name in ADAPTER_FILES:
        shown = subprocess.run(["git", "show", f"{rev}:spacy_inconsistency/models/nli-mpnet-lora/{name}"],
                               cwd=ROOT, capture_output=True, check=True).stdout
        assert (tmp_path / "a" / name).read_bytes() == shown and len(shown) > 100
    # The shipped adapters were continued from these, so they differ.
    shipped = ROOT / "spacy_inconsistency" / "models" / "nli-mpnet-lora" / "adapter.safetensors"
    assert (tmp_path / "a" / "adapter.safetensors").read_bytes() != shipped.read_bytes()
    bad = subprocess.run([sys.executable, script, "adapters-at", "--rev", "no-such-revision", "--output", str(tmp_path / "b")],
                         capture_output=True, text=True)
    assert bad.returncode != 0 and "no-such-revision" in bad.stderr


def test_stacking_probe_features_are_order_free_and_the_matched_auc_counts_ties_half():
    import numpy as np

    probe = _load("probe_stacking", ROOT / "scripts" / "nli" / "probe_stacking.py")
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(3), size=8).astype(np.float32)  # 2 records x 4 pairs
    swapped = probs.reshape(2, 2, 2, 3)[:, :, ::-1].reshape(8, 3)  # each pair's two orders exchanged
    assert np.allclose(probe.order_free_features(probs), probe.order_free_features(swapped))
    feats = probe.order_free_features(probs)
    assert feats.shape == (2, 2, 6) and (feats[..., :3] >= feats[..., 3:]).all()
    assert probe.matched_auc(np.array([[0.9, 0.1], [0.2, 0.2], [0.1, 0.3], [0.5, 0.4]])) == (1 + 0.5 + 0 + 1) / 4
    records = [("dev", ["a", "b"], ["c", "d"])]
    assert probe.record_pairs(records) == [("a", "b"), ("b", "a"), ("c", "d"), ("d", "c")]


def test_reported_clause_probe_runs_a_script_with_the_reported_reading(tmp_path):
    import subprocess
    import sys

    script = tmp_path / "show.py"
    script.write_text(
        "import spacy\n"
        "from spacy_inconsistency.alignment import facts_of_texts\n"
        "from spacy_inconsistency.pair_scoring import unit_alignment\n"
        "text = 'Officials said no one was injured in the storm.'\n"
        "direct = facts_of_texts([text])[0]\n"
        "doc = spacy.blank('en')(text)\n"
        "in_doc = unit_alignment([doc[:]])[0]\n"
        "print(sorted(direct.subject), direct.negated, sorted(in_doc.subject), in_doc.negated)\n",
        encoding="utf8",
    )
    probe = ROOT / "scripts" / "nli" / "reported_clause_probe.py"
    plain = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True).stdout
    patched = subprocess.run([sys.executable, str(probe), str(script)], capture_output=True, text=True, check=True).stdout
    assert plain.strip() == "['official'] False ['official'] False"
    assert patched.strip() == "[] True [] True"


def test_list_pairs_names_every_pair_a_fit_scores_without_a_model(tmp_path):
    """`fit_pair_scorer.py --list-pairs` (what `lora_mpnet.py pack --score-pairs` has a GPU score):
    both orders of every pair the detector compares in the dev documents and the news, and of
    every held-out row, each once; no model is loaded."""
    import csv
    import json

    import typer
    from typer.testing import CliRunner

    fit = _load("fit_pair_scorer", ROOT / "scripts" / "nli" / "fit_pair_scorer.py")
    suite, nli, true = tmp_path / "suite", tmp_path / "nli", tmp_path / "true"
    for d in (suite, nli, true):
        d.mkdir()
    doc = "The bridge opened in June. It cost four million euros. The bridge never opened."
    control = "The bridge opened in June. It cost four million euros. The tunnel never opened."
    record = {"id": "x-d01", "capability": "negation",
              "contradiction": {"text": doc, "pair": ["The bridge opened in June.", "The bridge never opened."]},
              "control": {"text": control, "pair": ["The bridge opened in June.", "The tunnel never opened."],
                          "type": "different_entity"}}
    (suite / "dev_part1.jsonl").write_text(json.dumps(record) + "\n")
    (suite / "test_part1.jsonl").write_text(json.dumps(dict(record, id="never-read")) + "\n")
    rows = [{"premise": "A dog runs.", "hypothesis": "A cat sleeps.", "label": "contradiction", "source": "snli"},
            {"premise": "A man sings.", "hypothesis": "Someone sings.", "label": "entailment", "source": "mnli"}]
    (nli / "heldout.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    news = ["Rain fell in Oslo on Monday. The river rose by a metre.", "Prices rose in May. Shops stayed open late."]
    for name, texts in (("frank.csv", news[:1]), ("summeval.csv", news[1:])):
        with (true / name).open("w", newline="", encoding="utf8") as f:
            writer = csv.DictWriter(f, fieldnames=["grounding", "generated_text", "label"])
            writer.writeheader()
            writer.writerows({"grounding": t, "generated_text": "x", "label": 1} for t in texts)
    app = typer.Typer()
    app.command()(fit.main)
    out = tmp_path / "pairs.json"
    result = CliRunner().invoke(app, ["--list-pairs", str(out), "--suite", str(suite), "--nli-dir", str(nli),
                                      "--true-dir", str(true), "--news-negatives", "1", "--calibration-news", "1"])
    assert result.exit_code == 0, result.output
    listed = [tuple(p) for p in json.loads(out.read_text())]

    def both_orders(sentences):
        return {(a, b) for a in sentences for b in sentences if a != b}

    expected = both_orders(["The bridge opened in June.", "It cost four million euros.", "The bridge never opened."])
    expected |= both_orders(["The bridge opened in June.", "It cost four million euros.", "The tunnel never opened."])
    expected |= {("A dog runs.", "A cat sleeps."), ("A cat sleeps.", "A dog runs.")}  # mnli is not a held-out source
    expected |= both_orders(["Rain fell in Oslo on Monday.", "The river rose by a metre."])  # calibration news
    expected |= both_orders(["Prices rose in May.", "Shops stayed open late."])  # news negatives
    assert len(listed) == len(set(listed)) and set(listed) == expected
    no_model = CliRunner().invoke(app, ["--output", str(tmp_path / "p.json"), "--suite", str(suite)])
    assert no_model.exit_code != 0 and "--model is required" in no_model.output
    bogus = CliRunner().invoke(app, ["--model", "unread", "--output", str(tmp_path / "p.json"), "--suite", str(suite),
                                     "--drop-feature", "subject_same", "--drop-feature", "made_up"])
    assert bogus.exit_code != 0 and "no alignment feature ['made_up']" in bogus.output


def test_fit_cache_scores_listed_pairs_resumes_and_feeds_the_fit(tmp_path, monkeypatch):
    """`fit_cache.py score` keeps each chunk as it goes, goes on where it stopped, refuses another
    list, and `to-json` writes what `fit_pair_scorer.py --cache` reads."""
    import json

    import numpy
    import typer

    from spacy_inconsistency.backends import nli

    cache = _load("fit_cache", ROOT / "scripts" / "nli" / "fit_cache.py")
    fit = _load("fit_pair_scorer", ROOT / "scripts" / "nli" / "fit_pair_scorer.py")
    pairs = [[f"premise {i}", "h" * (i + 1)] for i in range(5)]
    listed = tmp_path / "pairs.json"
    listed.write_text(json.dumps(pairs))
    asked = []

    class Fake:
        fail_after = None

        def __init__(self, model, device, dtype):
            assert dtype in ("float32", "bfloat16")

        def predict(self, batch):
            if Fake.fail_after is not None and len(asked) >= Fake.fail_after:
                raise MemoryError("stopped")
            asked.extend(tuple(p) for p in batch)
            c = numpy.array([len(h) / 10 for _, h in batch], dtype=numpy.float32)
            return {"entailment": 1 - c, "neutral": numpy.zeros_like(c), "contradiction": c}

    monkeypatch.setattr(nli, "NLIBackend", Fake)
    out = tmp_path / "probs.npz"
    args = dict(model="some/model", pairs=listed, output=out, chunk=2, threads=1, dtype="float32")
    Fake.fail_after = 2
    with pytest.raises(MemoryError):
        cache.score(**args)
    assert int(numpy.load(out)["done"]) == 2
    with pytest.raises(typer.BadParameter, match="2 of 5"):
        cache.to_json(probs=out, pairs=listed, output=tmp_path / "cache.json")
    Fake.fail_after = None
    with pytest.raises(typer.BadParameter, match="of model, not of other"):
        cache.score(**{**args, "model": "some/other"})  # another model's probabilities are not resumed
    with pytest.raises(typer.BadParameter, match="float32 probabilities, not bfloat16"):
        cache.score(**{**args, "dtype": "bfloat16"})  # nor another dtype's
    cache.score(**args)
    assert asked == [tuple(p) for p in pairs]  # each pair scored once, the first two before the stop
    cache.to_json(probs=out, pairs=listed, output=tmp_path / "cache.json")
    memory = fit.CachedNLI(type("B", (), {"label_index": {}})(), tmp_path / "cache.json").memory
    assert memory == {tuple(p): pytest.approx([1 - len(p[1]) / 10, 0.0, len(p[1]) / 10]) for p in pairs}
    other = tmp_path / "other.json"
    other.write_text(json.dumps(pairs[::-1]))
    with pytest.raises(typer.BadParameter, match="other pairs"):
        cache.score(**{**args, "pairs": other})


def test_alignment_rates_split_gold_and_control_pairs_by_kind():
    rates_mod = _load("alignment_rates", ROOT / "scripts" / "nli" / "alignment_rates.py")

    def record(gold, control, kind):
        return {"contradiction": {"pair": list(gold)}, "control": {"pair": list(control), "kind": kind}}

    records = [
        record(("The mayor visited the plant.", "The mayor never visited the plant."),
               ("The mayor visited the plant.", "The mayor may have visited the plant."), "hedged"),
        record(("Anna won the race in 2019.", "Anna lost the race in 2019."),
               ("Anna won the race in 2019.", "Anna won another race in 2021."), "different entity"),
    ]
    rates = rates_mod.feature_rates(records)
    assert rates["n"] == {"gold": 2, "control": 2, "control: different entity": 1, "control: hedged": 1}
    assert rates["negation_mismatch"]["gold"] == 0.5 and rates["negation_mismatch"]["control"] == 0.0
    assert rates["modal_any"]["control: hedged"] == 1.0 and rates["modal_any"]["gold"] == 0.0
    assert rates["year_conflict"]["control: different entity"] == 1.0 and rates["year_conflict"]["gold"] == 0.0
    assert rates["other_entity_any"]["control"] == 0.5 and rates["other_entity_any"]["control: hedged"] == 0.0


def test_set_options_write_json_values_into_the_detector_config():
    import typer

    evaluate = _load("evaluate_behaviour", ROOT / "scripts" / "evaluate_behaviour.py")
    settings = evaluate.parse_settings(["alignment=false", "model.dtype=bfloat16", "rescore_top_k=16",
                                        'rescorer={"model": "training/x"}', "aggregation=max"])
    assert settings == {"alignment": False, "model.dtype": "bfloat16", "rescore_top_k": 16,
                        "rescorer": {"model": "training/x"}, "aggregation": "max"}
    config = evaluate.apply_settings({"model": {"model": "default", "dtype": "auto"}, "rescore_top_k": 8}, settings)
    assert config["model"] == {"model": "default", "dtype": "bfloat16"}
    assert config["rescore_top_k"] == 16 and config["alignment"] is False
    with pytest.raises(typer.BadParameter):
        evaluate.parse_settings(["alignment"])


def test_control_kind_table_says_which_near_misses_the_contradictions_lose_to():
    from spacy_inconsistency.metrics.behaviour import DocOutcome, MatchedOutcome, behaviour_metrics

    evaluate = _load("evaluate_behaviour", ROOT / "scripts" / "evaluate_behaviour.py")
    gold = ((0, 10), (20, 30))

    def record(kind, c_score, k_score, gold_pair, near_miss):
        return MatchedOutcome("dates", gold, DocOutcome(c_score, False, None, gold_pair),
                              DocOutcome(k_score, k_score >= 0.5, None, near_miss), control_kind=kind)

    metrics = behaviour_metrics([
        record("compatible", 0.2, 0.6, 0.2, 0.6),  # lost by the pair judgement, the control flagged
        record("compatible", 0.9, 0.1, 0.9, 0.1),  # won
        record("", 0.3, 0.4, 0.3, 0.1),  # lost to another pair of the control; no kind recorded
    ])
    lines = evaluate.control_kind_table(metrics).splitlines()
    assert lines[2:] == ["| (none) | 1 | 0.00 | 0.000 | 0.000 | 1.000 |",
                         "| compatible | 2 | 0.50 | 0.500 | 0.500 | 0.000 |"]


def test_compare_behaviour_pairs_two_runs_on_the_same_records(tmp_path):
    import json

    import typer
    from typer.testing import CliRunner

    compare = _load("compare_behaviour", ROOT / "scripts" / "compare_behaviour.py")
    from spacy_inconsistency.corpora.behaviour import read_behaviour_suite

    records = read_behaviour_suite(ROOT / "tests" / "behaviour", "dev_*.jsonl")

    def write(path, won):
        with path.open("w", encoding="utf8") as f:
            for n, r in enumerate(records):
                c, k = (0.9, 0.1) if won(n, r) else (0.1, 0.9)
                f.write(json.dumps({"id": r["id"], "side": "contradiction", "score": c}) + "\n")
                f.write(json.dumps({"id": r["id"], "side": "control", "score": k}) + "\n")

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write(a, lambda n, r: r["capability"] != "negation")  # A loses every negation record
    write(b, lambda n, r: True)
    out = tmp_path / "rows.json"
    result = CliRunner().invoke(_typer_app(compare.main), [str(a), str(b), "--split", "dev", "--output", str(out)])
    assert result.exit_code == 0, result.output
    rows = json.loads(out.read_text())
    n_neg = sum(r["capability"] == "negation" for r in records)
    assert rows["all"]["n"] == len(records) and rows["all"]["b"] == 1.0
    assert rows["all"]["difference"] == pytest.approx(n_neg / len(records))
    assert rows["capability: negation"]["difference"] == 1.0 and rows["capability: numbers"]["difference"] == 0.0
    assert rows["all"]["low"] > 0 and rows["all"]["no_gain"] == 0.0
    assert "| capability: negation | 20 | 0.000 | 1.000 | +1.000 |" in result.output

    # records missing from a run, or a run of another split, are refused
    lines = a.read_text().splitlines()
    a.write_text("\n".join(lines[:-2]) + "\n")
    result = CliRunner().invoke(_typer_app(compare.main), [str(a), str(b), "--split", "dev"], env={"COLUMNS": "400"})
    assert result.exit_code != 0 and "does not hold the records of dev: 1 missing" in result.output
    a.write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(typer.BadParameter, match="without both documents"):
        compare.read_details(a)
