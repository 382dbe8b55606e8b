"""Bad input never crashes a run, loses a record or hides what was repaired (issue 14)."""
import json
import os
import warnings
from pathlib import Path

import pytest
import spacy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from spacy_inconsistency.cli import app, detect
from spacy_inconsistency.io import iter_lines, non_text_share, read_inputs, read_jsonl_file, repair_text

runner = CliRunner()


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def run_detect(tiny_nli, *args):
    return runner.invoke(app, ["detect", *map(str, args), "--model", tiny_nli, "--device", "cpu",
                               "--threshold", "0", "--no-progress"])


def test_surrogate_bom_and_valid_records_all_come_out_in_order(tiny_nli, tmp_path):
    data = tmp_path / "in.jsonl"
    lines = [json.dumps({"id": "bom", "text": "The vote passed. The vote failed."})]
    lines.append('{"id": "sur", "text": "The vote passed \\ud800 today. It failed."}')
    lines += [json.dumps({"id": f"v{i}", "text": f"Record {i} is here. It is fine."}) for i in range(10)]
    data.write_bytes(b"\xef\xbb\xbf" + "\n".join(lines).encode("utf-8") + b"\n")
    out = tmp_path / "out.jsonl"
    result = run_detect(tiny_nli, data, "-o", out)
    assert result.exit_code == 0, result.output
    rows = read_jsonl(out)
    assert [r["id"] for r in rows] == ["bom", "sur"] + [f"v{i}" for i in range(10)]
    assert all("error" not in r for r in rows)
    assert rows[0]["warnings"] == ["UTF-8 byte-order mark removed"] and rows[0]["n_units"] == 2
    assert rows[1]["warnings"] == ["1 unpaired surrogate(s) replaced with U+FFFD"]
    assert "\ufffd" in rows[1]["inconsistencies"][0]["units"][0]["text"]
    assert "12 documents" in result.output and "0 unreadable" in result.output


def test_surrogates_in_other_fields_are_repaired_too(tmp_path):
    data = tmp_path / "in.jsonl"
    data.write_text('{"id": "a\\udc80", "text": "ok", "tags": ["x\\ud800"]}\n', encoding="utf-8")
    (record,) = read_jsonl_file(data)
    assert record.id == "a\ufffd" and record.meta == {"tags": ["x\ufffd"]}
    assert record.warnings == ["2 unpaired surrogate(s) replaced with U+FFFD"]
    # A surrogate pair written as two escapes is one character, not repaired.
    assert repair_text(json.loads('"\\ud83d\\ude00"')) == ("\U0001F600", 0)


def test_bom_is_removed_from_a_text_file(tiny_nli, tmp_path):
    doc = tmp_path / "a.txt"
    doc.write_bytes(b"\xef\xbb\xbfThe vote passed. The vote failed.")
    counts = detect([doc], output=tmp_path / "o.jsonl", progress=False, model=tiny_nli, device="cpu",
                    threshold=0.0)
    (row,) = read_jsonl(tmp_path / "o.jsonl")
    assert counts["documents"] == 1 and row["warnings"] == ["UTF-8 byte-order mark removed"]
    assert row["inconsistencies"][0]["units"][0]["text"] == "The vote passed."


@pytest.mark.parametrize("end", [b"\r", b"\r\n", b"\n"])
def test_each_line_end_separates_records(tmp_path, end):
    data = tmp_path / "in.jsonl"
    data.write_bytes(end.join(json.dumps({"text": t}).encode() for t in ["one", "two", "three"]) + end)
    records = list(read_inputs([data]))
    assert [(r.line, r.text, r.error) for r in records] == [(1, "one", None), (2, "two", None), (3, "three", None)]


def test_line_ends_split_across_read_chunks(monkeypatch):
    import io as _io

    import spacy_inconsistency.io as reader

    monkeypatch.setattr(reader, "READ_CHUNK", 3)
    data = b"ab\r\ncd\ref\n\ngh\r"
    assert list(iter_lines(_io.BytesIO(data))) == [b"ab", b"cd", b"ef", b"", b"gh"]
    assert list(iter_lines(_io.BytesIO(b"a\r\r\nb"))) == [b"a", b"", b"b"]


def test_error_records_keep_their_id_and_say_what_is_wrong(tmp_path):
    data = tmp_path / "in.jsonl"
    data.write_text('{"id": "k1", "body": "no text"}\n{"id": 7, "text": 5}\n{"text": "abc\n', encoding="utf-8")
    records = list(read_inputs([data]))
    assert [r.id for r in records] == ["k1", "7", f"{data}:3"]
    assert records[0].error == "missing or non-string field 'text'"
    assert records[2].error.startswith("malformed JSON: Unterminated string")


def test_parquet_rows_are_records_and_bad_rows_or_files_say_why(tmp_path):
    import datetime

    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    table = pa.table({
        "id": ["a", None, "c", "d"],
        "text": ["The vote passed. The vote failed.", "It is fine.", None, "\x01\x02\x03" * 10],
        "day": [datetime.date(2024, 5, 1)] * 4,
        "blob": [b"raw", None, b"x", b"y"],
    })
    good = tmp_path / "in.parquet"
    pq.write_table(table, good, row_group_size=2)  # rows read across row groups
    records = list(read_inputs([good]))
    assert [r.id for r in records] == ["a", f"{good}:2", "c", "d"]
    assert [r.line for r in records] == [1, 2, 3, 4]
    assert records[0].text == "The vote passed. The vote failed." and records[0].error is None
    assert records[0].meta == {"day": "2024-05-01", "blob": "raw"}  # JSON-safe
    assert records[1].text == "It is fine." and records[1].meta == {"day": "2024-05-01", "blob": None}
    assert records[2].error == "missing or non-string field 'text'" and records[2].text == ""
    assert records[3].error.startswith("not text: ")
    # Another text column, a file without it, a file that is not Parquet: one error record each.
    no_text = tmp_path / "other.parquet"
    pq.write_table(pa.table({"body": ["x"]}), no_text)
    fake = tmp_path / "fake.parquet"
    fake.write_text("not parquet at all", encoding="utf-8")
    bad = list(read_inputs([no_text, fake]))
    assert [(r.id, r.line) for r in bad] == [(str(no_text), None), (str(fake), None)]
    assert bad[0].error == "no column 'text' (columns: body)"
    assert bad[1].error.startswith("not a readable Parquet file: ")
    assert [r.text for r in read_inputs([no_text], text_field="body")] == ["x"]


def test_parquet_input_through_detect(tiny_nli, tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    data = tmp_path / "in.parquet"
    pq.write_table(pa.table({"id": ["p1", "p2"], "text": ["The vote passed. The vote failed.", None],
                             "outlet": ["A", "B"]}), data)
    out = tmp_path / "out.jsonl"
    result = run_detect(tiny_nli, data, "-o", out)
    assert result.exit_code == 0, result.output
    rows = read_jsonl(out)
    assert [r["id"] for r in rows] == ["p1", "p2"]
    assert rows[0]["n_units"] == 2 and rows[0]["meta"] == {"outlet": "A"} and rows[0]["line"] == 1
    assert rows[1]["error"] == "missing or non-string field 'text'"


def test_random_bytes_are_refused_not_scored(tiny_nli, tmp_path):
    noise = tmp_path / "noise.txt"
    noise.write_bytes(os.urandom(20_000))
    controls = tmp_path / "c.jsonl"
    controls.write_text(json.dumps({"id": "ctl", "text": "\x01\x02\x03\x04\x05 text \x06\x07\x08\x0e\x0f\x10\x11" * 2})
                        + "\n" + json.dumps({"id": "ok", "text": "Caf\ufffd au lait is hot. It is cold today."}) + "\n",
                        encoding="utf-8")
    out = tmp_path / "out.jsonl"
    result = run_detect(tiny_nli, noise, controls, "-o", out)
    assert result.exit_code == 0, result.output
    rows = read_jsonl(out)
    assert [r["id"] for r in rows] == [str(noise), "ctl", "ok"]
    assert rows[0]["error"].startswith("not text: ") and "inconsistencies" not in rows[0]
    assert rows[1]["error"].startswith("not text: ")
    assert "error" not in rows[2] and rows[2]["n_units"] == 2
    assert "1 documents" in result.output and "2 unreadable" in result.output


def test_non_text_share():
    assert non_text_share("") == 0.0
    assert non_text_share("a\tb\nc") == 0.0
    assert non_text_share("ab\x00\ufffd") == 0.5


@pytest.mark.parametrize("case", ["missing_folder", "folder", "html_missing_folder"])
def test_bad_output_paths_fail_before_the_model_loads(tmp_path, case):
    data = tmp_path / "in.txt"
    data.write_text("A text.", encoding="utf-8")
    # A model that does not exist: had the pipeline been built first, the
    # error would be about the model.
    args = ["detect", str(data), "--model", str(tmp_path / "no-model"), "--no-progress"]
    if case == "missing_folder":
        args += ["-o", str(tmp_path / "nope" / "out.jsonl")]
        expected = "does not exist"
    elif case == "folder":
        args += ["-o", str(tmp_path)]
        expected = "is a folder"
    else:
        args += ["-o", str(tmp_path / "o.jsonl"), "--html", str(tmp_path / "nope" / "p.html")]
        expected = "does not exist"
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert expected in result.output and "Traceback" not in result.output
    assert "no-model" not in result.output
    assert not (tmp_path / "o.jsonl").exists()


def test_across_checks_output_paths_too(tmp_path):
    data = tmp_path / "in.txt"
    data.write_text("A text.", encoding="utf-8")
    result = runner.invoke(app, ["across", str(data), "--model", str(tmp_path / "no-model"),
                                 "-o", str(tmp_path / "nope" / "out.jsonl")])
    assert result.exit_code == 2 and "does not exist" in result.output


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_full_disk_is_one_line_error(tiny_nli, tmp_path):
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"text": "The vote passed. It failed."}) + "\n" for _ in range(4)),
                    encoding="utf-8")
    result = run_detect(tiny_nli, data, "-o", "/dev/full")
    assert result.exit_code == 1
    assert "writing /dev/full failed: the disk is full (0 records were written before)" in result.output
    assert "Traceback" not in result.output


def test_model_given_as_a_string_gets_a_hint():
    nlp = spacy.blank("en")
    with pytest.raises(ValueError, match=r'E220.*\{"model": \{"model": "does/not-exist"\}\}'):
        nlp.add_pipe("inconsistency_detector", config={"model": "does/not-exist"})
    with pytest.raises(ValueError, match="E220"):
        nlp.add_pipe("contradiction_detector", config={"model": "x"})


# Property-based tests: arbitrary Unicode (surrogates, controls, RTL, emoji,
# huge tokens) never crashes the readers or the detector and never loses a record.

any_text = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=200)
line_text = st.one_of(
    any_text,
    st.sampled_from(["\u202e\u05e9\u05dc\u05d5\u05dd. \u0645\u0631\u062d\u0628\u0627.", "\U0001F600" * 50, "x" * 5000,
                     "A.\x00B.", "Nr. 5 ging. Es kam.", "\ufeffBOM inside"]),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(line_text, min_size=1, max_size=8), eol=st.sampled_from(["\n", "\r\n", "\r"]))
def test_jsonl_reader_yields_one_record_per_line_whatever_the_text(tmp_path, texts, eol):
    data = tmp_path / "p.jsonl"
    data.write_bytes(eol.join(json.dumps({"id": i, "text": t}) for i, t in enumerate(texts)).encode("ascii"))
    records = list(read_jsonl_file(data))
    assert [r.id for r in records] == [str(i) for i in range(len(texts))]
    for record, text in zip(records, texts):
        if record.error is None:
            assert record.text == repair_text(text)[0]
        else:
            assert record.error.startswith("not text")
        record.text.encode("utf-8")


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=400))
def test_text_reader_never_raises_on_bytes(tmp_path, data):
    path = tmp_path / "b.txt"
    path.write_bytes(data)
    (record,) = read_inputs([path])
    assert record.error is None or (record.error.startswith("not text") and record.text == "")
    record.text.encode("utf-8")


@pytest.fixture(scope="module")
def tiny_detector(tiny_nli):
    nlp = spacy.blank("xx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nlp.add_pipe("inconsistency_detector", config={"model": {"model": tiny_nli, "device": "cpu"},
                                                       "threshold": 0.0, "alignment": False})
    return nlp


@settings(max_examples=40, deadline=None)
@given(texts=st.lists(st.one_of(any_text, line_text), min_size=1, max_size=4))
def test_detector_never_raises_and_units_cover_the_text_in_order(tiny_detector, texts):
    texts = [repair_text(t)[0] for t in texts]
    docs = list(tiny_detector.pipe(texts))
    assert [d.text for d in docs] == texts
    for doc in docs:
        units = list(doc.spans["inconsistency_units"])
        assert all(a.end_char <= b.start_char for a, b in zip(units, units[1:]))
        covered = {i for u in units for i in range(u.start_char, u.end_char)}
        # Every letter or digit is inside a unit: nothing the reader could see is dropped.
        missing = [i for i, ch in enumerate(doc.text) if ch.isalnum() and i not in covered]
        assert not missing, (doc.text, [u.text for u in units])
        for finding in doc._.inconsistencies:
            assert 0.0 <= finding["score"] <= 1.0


def _w143(caught):
    return [str(w.message) for w in caught if "[W143]" in str(w.message)]


def test_the_english_models_warn_once_on_another_language(tiny_nli):
    from spacy_inconsistency.compare import find_contradictions

    german = spacy.blank("de")
    german.add_pipe("inconsistency_detector", config={"rescorer": None})
    texts = ["Die Stadt baut eine Schule. Die Schule wird nicht gebaut.", "Der Bau beginnt im Mai. Die Kosten trägt das Land."]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        docs = list(german.pipe(texts))
    (message,) = _w143(caught)  # once for the component, not once per Doc
    assert "'de'" in message and "'default'" in message
    assert all(doc._.inconsistency_score is not None for doc in docs)  # a warning, not a refusal
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        find_contradictions(german, ["Wir bauen die Schule.", "Die Schule wird nicht gebaut."])
    assert len(_w143(caught)) == 1
    english = spacy.blank("en")
    english.add_pipe("inconsistency_detector", config={"rescorer": None})
    own = spacy.blank("de")  # a model of the user's own may read German: no warning
    own.add_pipe("inconsistency_detector", config={"model": {"model": tiny_nli, "device": "cpu"}, "alignment": False,
                                                   "threshold": 0.5})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        english("The school was built. The school was never built.")
        own(texts[0])
    assert _w143(caught) == []


GERMAN_NEWS = ("Die Stadt baut eine neue Schule am Rande des Parks. Die Kosten trägt das Land, sagt der "
               "Bürgermeister. Die Schule wird aber nicht gebaut, weil das Geld für den Bau noch fehlt.")


def test_english_share_tells_english_prose_from_other_languages():
    from spacy_inconsistency.backends.loading import MIN_ENGLISH_SHARE, english_share

    nlp = spacy.blank("en")
    english = ("The city is building a new school at the edge of the park. The state pays for it, "
               "the mayor says. But the school will not be built, because the money is still missing.")
    assert english_share(nlp(english)) > 0.3
    assert english_share(nlp(GERMAN_NEWS)) < MIN_ENGLISH_SHARE
    assert english_share(nlp("Музей открыт по воскресеньям. Музей закрыт по воскресеньям.")) == 0.0
    assert english_share(nlp("博物馆周日开放。博物馆周日关闭。这是一个很长的中文句子用于测试。")) == 0.0
    # Too few words to tell (a headline, a short German sentence): no verdict, so no warning.
    assert english_share(nlp("Der Zug fährt um 9 Uhr ab. Der Zug fährt nie ab.")) is None
    assert english_share(nlp("")) is None


def _w144(caught):
    return [str(w.message) for w in caught if "[W144]" in str(w.message)]


def test_an_english_pipeline_warns_once_on_text_that_is_not_english():
    english = spacy.blank("en")
    english.add_pipe("inconsistency_detector", config={"rescorer": None})
    texts = ["The school opened in May. The school never opened, officials said on Friday after a long meeting of the council.",
             GERMAN_NEWS, GERMAN_NEWS]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        docs = list(english.pipe(texts, batch_size=1))
        english(GERMAN_NEWS)
    (message,) = _w144(caught)  # once for the component, at the first Doc that is not English
    assert "'inconsistency_detector.pairwise'" in message and "'default'" in message and "'Die Stadt" in message
    assert _w143(caught) == []
    assert all(doc._.inconsistency_score is not None for doc in docs)  # a warning, not a refusal
    fresh = spacy.blank("en")
    fresh.add_pipe("inconsistency_detector", config={"rescorer": None})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fresh(texts[0])
    assert _w144(caught) == []


def test_scale_scorer_warns_on_another_language_with_a_shipped_model():
    from spacy_inconsistency.components.scale import make_claims_doc

    nlp = spacy.blank("de")
    nlp.add_pipe("inconsistency_segmenter")
    nlp.add_pipe("scale_scorer", config={"model": {"model": "default", "device": "cpu"}})
    docs = [make_claims_doc(nlp, "Das Museum wurde 1990 eröffnet.", ["Das Museum ist neu."]) for _ in range(2)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = [doc._.inconsistency_scale for doc in nlp.pipe(docs)]
    (message,) = _w143(caught)
    assert "'scale_scorer'" in message and "'de'" in message
    assert all(r["claims"][0]["score"] is not None for r in results)


def test_evidence_extractor_warns_when_its_nli_judge_reads_another_language():
    judge = {"@misc": "spacy-inconsistency.NLIJudge.v1", "model": "default", "device": "cpu"}
    texts = ["Die Brücke wurde 1990 eröffnet. Die Brücke wurde nie eröffnet.", "Der Bau begann im Mai. Er endete im Juni."]
    german = spacy.blank("de")
    german.add_pipe("evidence_extractor", config={"strategy": "direct", "client": judge})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        docs = list(german.pipe(texts))
    (message,) = _w143(caught)  # once for the component, not once per Doc
    assert "'evidence_extractor'" in message and "'de'" in message and "'default'" in message
    assert all(isinstance(doc._.has_inconsistency, bool) for doc in docs)  # a warning, not a refusal
    english = spacy.blank("en")
    english.add_pipe("evidence_extractor", config={"strategy": "direct", "client": judge})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        english("The bridge opened in 1990. The bridge has never been opened.")
    assert _w143(caught) == []
