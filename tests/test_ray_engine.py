"""The Ray engine loses nothing: every record once, in order, as `detect` writes it; a run
resumes from its shards; a killed actor is restarted and its batch retried."""
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from conftest import PARAGRAPH  # noqa: E402
from spacy_inconsistency import cli  # noqa: E402
from spacy_inconsistency.io import read_inputs  # noqa: E402
from spacy_inconsistency.ray_engine import (  # noqa: E402
    MANIFEST, SHARD_DIR, TMP_SUFFIX, detect_dataset, detect_files, import_ray, shard_path,
)

# The fault-injecting pipeline below is defined here, and Ray's workers cannot import
# this test module by name, so its functions travel by value.
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

N_RECORDS = 200
SHARD_SIZE = 40
KILL_TEXT = "Nobody is playing music loudly."


@pytest.fixture(scope="module")
def ray_session():
    import ray.data

    ray.init(num_cpus=2, include_dashboard=False, ignore_reinit_error=True, log_to_driver=False)
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def settings(tiny_nli):
    # float32, so that Ray and plain runs compare to float rounding (3e-8 measured): "auto" runs
    # bf16 on CPUs with AMX, where one CI run once found them 5.7e-5 apart (about one bf16 step at
    # P = 0.01; cause not found, not reproduced in six reruns, nor by rebatching in one process).
    # The bf16 path through Ray is still run by the CLI test below (auto dtype).
    return {"model": tiny_nli, "device": "cpu", "threshold": 0.0, "dtype": "float32"}


def _write_corpus(folder: Path) -> list:
    """199 JSONL lines (some malformed) and one text file: 200 records."""
    sentences = [s.strip() + "." for s in PARAGRAPH.split(".") if s.strip()]
    bad = {
        7: b"{not json\n",
        23: b"[1, 2, 3]\n",
        58: b'{"id": "no-text", "body": "x"}\n',
        101: b'{"id": "bytes", "text": "The sky is \xff\xfe blue. Nobody is playing music."}\n',
        150: b'{"text": 42}\n',
    }
    path = folder / "corpus.jsonl"
    with path.open("wb") as f:
        for i in range(N_RECORDS - 1):
            if i in bad:
                f.write(bad[i])
                continue
            k = i % len(sentences)
            text = " ".join(sentences[k:k + 1 + i % 4] + sentences[: i % 3])
            record = {"text": text, "n": i} if i % 5 else {"id": f"doc-{i}", "text": text}
            f.write(json.dumps(record).encode() + b"\n")
            if i == 90:
                f.write(b"\n")  # blank lines are no records
    text_file = folder / "whole.txt"
    text_file.write_text(PARAGRAPH, encoding="utf-8")
    return [path, text_file]


def _read_output(output_dir: Path) -> list:
    lines = []
    for path in sorted((output_dir / SHARD_DIR).glob("part-*.jsonl")):
        lines.extend(json.loads(line) for line in path.read_text(encoding="utf-8").splitlines())
    return lines


def _shape(value):
    """`value` with each float replaced by "<float>": what must be identical."""
    if isinstance(value, float):
        return "<float>"
    if isinstance(value, list):
        return [_shape(v) for v in value]
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    return value


def _by_units(records):
    """Findings in unit order: near-equal scores may swap places when the model sees
    the pairs in other batches (the tiny random model at threshold 0 ties often)."""
    out = []
    for record in records:
        record = dict(record)
        if record.get("inconsistencies"):
            record["inconsistencies"] = sorted(
                record["inconsistencies"], key=lambda f: [u["start_char"] for u in f["units"]])
        out.append(record)
    return out


def _floats(value):
    if isinstance(value, float):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _floats(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _floats(v)


def _max_score_gap(a, b) -> float:
    pairs = list(zip(_floats(a), _floats(b)))
    assert len(pairs) == len(list(_floats(a))) == len(list(_floats(b)))
    return max((abs(x - y) for x, y in pairs), default=0.0)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ray-corpus")
    inputs = _write_corpus(folder)
    assert len(list(read_inputs(inputs))) == N_RECORDS
    return inputs


@pytest.fixture(scope="module")
def full_run(ray_session, corpus, settings, tmp_path_factory):
    output_dir = tmp_path_factory.mktemp("ray-full")
    manifest = detect_files(
        corpus, output_dir, make_pipeline=cli.build_pipeline, pipeline_settings=settings,
        shard_size=SHARD_SIZE, num_actors=2, batch_size=8,
    )
    return output_dir, manifest


def test_every_record_once_in_order_as_detect_writes_it(full_run, corpus, settings, tmp_path):
    output_dir, manifest = full_run
    records = _read_output(output_dir)
    input_ids = [r.id for r in read_inputs(corpus)]
    assert [r["id"] for r in records] == input_ids
    assert len(set(input_ids)) == N_RECORDS
    # Plain nlp.pipe over the same texts, through the `detect` command's function.
    plain = tmp_path / "plain.jsonl"
    cli.detect(corpus, output=plain, progress=False, **settings)
    expected = [json.loads(line) for line in plain.read_text(encoding="utf-8").splitlines()]
    # The same findings; scores agree to float rounding (the NLI model sees the pairs in
    # other batches, and padding changes the last bits).
    records, expected = _by_units(records), _by_units(expected)
    assert _shape(records) == _shape(expected)
    assert _max_score_gap(records, expected) < 1e-5
    n_errors = sum("error" in r for r in expected)
    assert n_errors == 4 and any(r.get("warnings") for r in expected)
    assert sum(bool(r.get("inconsistencies")) for r in expected) > 0
    assert manifest["records_in"] == manifest["records_out"] == N_RECORDS
    assert manifest["errors"] == n_errors
    assert manifest["flagged"] == sum(bool(r.get("has_inconsistency")) for r in expected)
    assert manifest["shards"] == N_RECORDS // SHARD_SIZE and manifest["complete"]
    assert manifest["config"]["pipeline_settings"] == settings
    assert json.loads((output_dir / MANIFEST).read_text()) == manifest


def test_killed_run_resumes_to_the_same_result(full_run, corpus, settings, tmp_path):
    full_dir, full_manifest = full_run
    output_dir = tmp_path / "out"
    shutil.copytree(full_dir, output_dir)
    (output_dir / MANIFEST).unlink()
    # What a run killed during shard 3 leaves: shards 0-2 done, shard 3 half written
    # under its temporary name, nothing after it. A shard cut short under its final
    # name (not something this writer leaves) is written again too.
    shard_path(output_dir, 4).unlink()
    last = shard_path(output_dir, 3)
    half = last.read_text(encoding="utf-8").splitlines()[:SHARD_SIZE // 2]
    last.with_name(last.name + TMP_SUFFIX).write_text("\n".join(half) + '\n{"id": "cut', encoding="utf-8")
    last.unlink()
    first = shard_path(output_dir, 0)
    first.write_text("\n".join(first.read_text(encoding="utf-8").splitlines()[:5]) + "\n", encoding="utf-8")
    written = []
    manifest = detect_files(
        corpus, output_dir, make_pipeline=cli.build_pipeline, pipeline_settings=settings,
        shard_size=SHARD_SIZE, num_actors=1, batch_size=8, on_shard_written=written.append,
    )
    assert written == [0, 3, 4]
    assert manifest["shards_skipped"] == 2
    assert manifest["digest"] == full_manifest["digest"]
    assert _read_output(output_dir) == _read_output(full_dir)
    assert not list((output_dir / SHARD_DIR).glob("*" + TMP_SUFFIX))
    # Nothing left to do: a third run writes nothing and says the same.
    again = detect_files(corpus, output_dir, make_pipeline=cli.build_pipeline, pipeline_settings=settings,
                         shard_size=SHARD_SIZE)
    assert again["shards_written"] == 0 and again["digest"] == full_manifest["digest"]


def test_resume_refuses_other_settings(full_run, corpus, settings):
    output_dir, _ = full_run
    with pytest.raises(ValueError, match="E241"):
        detect_files(corpus, output_dir, make_pipeline=cli.build_pipeline,
                     pipeline_settings={**settings, "threshold": 0.9}, shard_size=SHARD_SIZE)


def kill_once_pipeline(*, marker: str, **settings):
    """The detector behind a component that ends its process the first time it sees
    KILL_TEXT (the marker file says it has happened)."""
    from spacy.language import Language

    name = "test_kill_once"
    if name not in Language.factories:
        def kill_once(doc):
            if KILL_TEXT in doc.text and not os.path.exists(marker):
                Path(marker).write_text(str(os.getpid()))
                os._exit(1)
            return doc

        Language.component(name, func=kill_once)
    nlp = cli.build_pipeline(**settings)
    nlp.add_pipe(name, first=True)
    return nlp


def test_a_killed_actor_loses_no_record(ray_session, settings, tmp_path):
    import ray.data

    marker = tmp_path / "killed"
    items = [{"id": f"r{i}", "text": KILL_TEXT if i == 17 else f"The sky is blue. Record {i} is here."}
             for i in range(30)]
    ds = detect_dataset(
        ray.data.from_items(items, override_num_blocks=6),
        make_pipeline=kill_once_pipeline, pipeline_settings={**settings, "marker": str(marker)},
        num_actors=1, batch_size=5, max_restarts=2, max_task_retries=2,
    )
    rows = ds.take_all()
    assert marker.exists(), "the actor was never killed"
    assert sorted(r["id"] for r in rows) == sorted(item["id"] for item in items)
    assert all(r["error"] is None for r in rows)
    nlp = cli.build_pipeline(**settings)
    doc = nlp(KILL_TEXT)
    killed = next(r for r in rows if r["id"] == "r17")
    assert json.loads(killed["inconsistencies"]) == doc._.inconsistencies


def test_missing_ray_names_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)
    monkeypatch.setitem(sys.modules, "ray.data", None)
    with pytest.raises(ImportError, match=r'pip install -e "\.\[ray\]"'):
        import_ray()
    with pytest.raises(ImportError, match="E240"):
        detect_files([tmp_path / "x.jsonl"], tmp_path / "out", make_pipeline=cli.build_pipeline,
                     pipeline_settings={})


def test_cli_engine_ray_writes_shards_and_checks_its_options(ray_session, settings, tmp_path):
    from typer.testing import CliRunner

    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"id": f"r{i}", "text": "The vote passed. The vote failed."}) + "\n"
                            for i in range(7)) + "{broken\n", encoding="utf-8")
    common = ["detect", str(data), "--model", settings["model"], "--device", "cpu", "--threshold", "0",
              "--no-progress", "--engine", "ray"]
    runner = CliRunner()
    missing = runner.invoke(cli.app, common)
    assert missing.exit_code == 2 and "needs --output-dir" in missing.output
    both = runner.invoke(cli.app, common + ["--output-dir", str(tmp_path / "o"), "-o", str(tmp_path / "x.jsonl")])
    assert both.exit_code == 2 and "not --output" in both.output
    out = tmp_path / "out"
    result = runner.invoke(cli.app, common + ["--output-dir", str(out), "--shard-size", "3", "--num-actors", "1"])
    assert result.exit_code == 0, result.output
    rows = _read_output(out)
    assert [r["id"] for r in rows] == [f"r{i}" for i in range(7)] + [f"{data}:8"]
    assert "malformed JSON" in rows[-1]["error"] and all(r["has_inconsistency"] for r in rows[:7])
    assert "8 of 8 records in 3 shards (0 already done), 7 with inconsistencies, 1 errors" in result.output
    again = runner.invoke(cli.app, common + ["--output-dir", str(out), "--shard-size", "3"])
    assert again.exit_code == 0 and "(3 already done)" in again.output
