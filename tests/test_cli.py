import json
import subprocess
import sys

import pytest
import spacy
from typer.testing import CliRunner

from spacy_inconsistency.backends.nli import NLIBackend
from spacy_inconsistency.candidates import make_hub_strategy, run_strategy
from spacy_inconsistency.cli import app, detect
from spacy_inconsistency.components.pairwise import ProbeScores

from conftest import ROOT

runner = CliRunner()


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_detect_jsonl_reports_bad_lines_and_goes_on(tiny_nli, tmp_path):
    data = tmp_path / "in.jsonl"
    data.write_bytes(
        b'{"id": "a", "text": "The vote passed. The vote failed."}\n'
        b'{"text": "broken json\n'
        b'\n'
        b'["not", "an", "object"]\n'
        b'{"body": "no text field"}\n'
        b'{"text": "", "source_url": "x"}\n'
        b'{"text": "Caf\xe9 au lait. It is cold."}\n'
    )
    out = tmp_path / "out.jsonl"
    result = runner.invoke(app, ["detect", str(data), "-o", str(out), "--model", tiny_nli,
                                 "--device", "cpu", "--threshold", "0", "--no-progress"])
    assert result.exit_code == 0, result.output
    rows = read_jsonl(out)
    assert [r.get("line") for r in rows] == [1, 2, 4, 5, 6, 7]
    assert rows[0]["id"] == "a" and rows[0]["n_units"] == 2 and len(rows[0]["inconsistencies"]) == 1
    assert "malformed JSON" in rows[1]["error"]
    assert "JSON object" in rows[2]["error"]
    assert "'text'" in rows[3]["error"]
    assert rows[4]["n_units"] == 0 and rows[4]["has_inconsistency"] is False
    assert rows[4]["inconsistency_score"] == 0.0 and rows[4]["meta"] == {"source_url": "x"}
    assert rows[5]["warnings"] == ["1 invalid UTF-8 byte sequence(s) replaced with U+FFFD"]
    assert "\ufffd" in rows[5]["inconsistencies"][0]["units"][0]["text"]
    assert f"{data}:2: malformed JSON" in result.output
    assert "2 documents" not in result.output and "3 unreadable" in result.output


def test_detect_text_files_with_bad_bytes(tiny_nli, tmp_path):
    good = tmp_path / "a.txt"
    good.write_text("ALICE: I was home.\nALICE: I was out.\n", encoding="utf-8")
    bad = tmp_path / "b.txt"
    bad.write_bytes(b"The price is 5\xff\xfe euros. The price is ten euros.")
    counts = detect([good, bad], output=tmp_path / "o.jsonl", progress=False,
                    model=tiny_nli, device="cpu", threshold=0.0)
    assert counts == {"documents": 2, "errors": 0, "inconsistent": 2, "written": 2}
    rows = read_jsonl(tmp_path / "o.jsonl")
    assert rows[0]["inconsistencies"][0]["units"][0]["speaker"] == "ALICE"
    assert rows[1]["warnings"][0].startswith("2 invalid UTF-8")


def test_large_document_is_processed_whole(tiny_nli, tmp_path):
    sentence = "The council met on Monday and discussed the new budget for the harbour. "
    big = tmp_path / "big.txt"
    big.write_text(sentence * (1_048_576 // len(sentence) + 1), encoding="utf-8")
    assert big.stat().st_size > 1_048_576
    counts = detect([big], output=tmp_path / "o.jsonl", progress=False, model=tiny_nli,
                    device="cpu", threshold=0.99, window=1)
    rows = read_jsonl(tmp_path / "o.jsonl")
    assert counts["documents"] == 1
    assert rows[0]["n_units"] == big.read_text().count(". ")
    too_small = detect([big], output=tmp_path / "o2.jsonl", progress=False, model=tiny_nli,
                       device="cpu", max_chars=1000)
    assert too_small["errors"] == 1
    assert "longer than the limit" in read_jsonl(tmp_path / "o2.jsonl")[0]["error"]


def test_missing_input_file(tmp_path):
    result = runner.invoke(app, ["detect", str(tmp_path / "nope.txt")])
    assert result.exit_code != 0


def test_module_entry_point_help():
    proc = subprocess.run([sys.executable, "-m", "spacy_inconsistency", "detect", "--help"],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0 and "--threshold" in proc.stdout


def test_across_pools_statements_keeps_sources_and_writes_html(tiny_nli, tmp_path):
    data = tmp_path / "statements.jsonl"
    rows = [{"id": f"s{i}", "party": party, "text": text} for i, (party, text) in enumerate([
        ("A", "Taxes will fall next year."), ("A", "We will build the tunnel."),
        ("B", "Taxes will rise next year."), ("B", "The tunnel is cancelled."), ("C", "Our city is great."),
    ])]
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n{broken\n", encoding="utf-8")
    out, page = tmp_path / "found.jsonl", tmp_path / "found.html"
    common = ["--model", tiny_nli, "--device", "cpu", "--threshold", "0"]
    args = ["across", str(data), "-o", str(out), "--html", str(page), "--source-field", "party"] + common
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    found = read_jsonl(out)
    assert len(found) == 10  # all pairs of the 5 one-sentence statements
    by_text = {r["text"]: r for r in rows}
    for f in found:
        for unit in f["units"]:
            assert unit["source"] == by_text[unit["text"]]["party"] and unit["id"] == by_text[unit["text"]]["id"]
    assert [f["score"] for f in found] == sorted((f["score"] for f in found), reverse=True)
    assert "5 records, 10 contradictions, 1 unreadable" in result.output and ":6: malformed JSON" in result.output
    html = page.read_text(encoding="utf-8")
    assert html.count('class="finding"') == 10
    assert '<span class="source">B</span>' in html and "Taxes will rise next year." in html
    # A candidate strategy: hubs over 5 statements with 1 probe each scores fewer pairs.
    hubs = runner.invoke(app, ["across", str(data), "-o", str(tmp_path / "h.jsonl"), "--hubs", "0.2", "--probes", "1"]
                         + common)
    assert hubs.exit_code == 0, hubs.output
    texts = [r["text"] for r in rows]
    nlp = spacy.blank("en")
    expected = run_strategy(make_hub_strategy(probes=1, hub_share=0.2), [nlp.make_doc(t)[:] for t in texts],
                            scorer=ProbeScores(NLIBackend(tiny_nli, device="cpu"), texts))
    assert 4 <= len(expected) < 10  # one hub's row and the probes, not all pairs
    got = {tuple(sorted(texts.index(u["text"]) for u in f["units"])) for f in read_jsonl(tmp_path / "h.jsonl")}
    assert got == set(map(tuple, expected.tolist()))
    # Without the source field in a record: a clear error, nothing written.
    bad = runner.invoke(app, ["across", str(data), "-o", str(tmp_path / "bad.jsonl"), "--source-field", "year"] + common,
                        env={"COLUMNS": "300"})
    assert bad.exit_code == 2 and "5 record(s) have no 'year' field" in bad.output
    assert not (tmp_path / "bad.jsonl").exists()


def test_candidate_config_builds_the_union():
    from spacy_inconsistency.cli import candidate_config
    from spacy.util import registry
    from thinc.api import Config

    assert candidate_config() is None
    single = candidate_config(lexical=5)
    assert single == {"@misc": "spacy-inconsistency.candidates.lexical_overlap.v1", "k": 5}
    union = candidate_config(neighbours=20, hubs=0.01)
    assert set(union["*"]) == {"neighbours", "hubs"}
    resolved = registry.resolve(Config({"c": union}))["c"]
    assert [type(s).__name__ for s in resolved.strategies] == ["EmbeddingNeighbours", "ContradictionHubs"]


def test_detect_dtype_option_reaches_the_backend(tiny_nli, tmp_path):
    data = tmp_path / "in.txt"
    data.write_text("The vote passed. The vote failed.", encoding="utf-8")
    scores = {}
    for dtype in ("float32", "bfloat16"):
        out = tmp_path / f"{dtype}.jsonl"
        result = runner.invoke(app, ["detect", str(data), "-o", str(out), "--model", tiny_nli, "--device", "cpu",
                                     "--threshold", "0", "--no-progress", "--dtype", dtype])
        assert result.exit_code == 0, result.output
        scores[dtype] = read_jsonl(out)[0]["inconsistency_score"]
    assert abs(scores["float32"] - scores["bfloat16"]) < 0.03
    from spacy_inconsistency.cli import build_pipeline

    nlp = build_pipeline(model=tiny_nli, device="cpu", dtype="bfloat16")
    assert nlp.get_pipe("inconsistency_detector").pairwise.model.dtype_name == "bfloat16"
