"""ContraDoc reader and the ContraDocPaired builder (paper, Appendix D)."""
import json

import pytest

from spacy_inconsistency.corpora import build_contradoc_paired, read_contradoc

from conftest import SHARED_DATA

CONTRADOC = SHARED_DATA / "contradiction" / "contradoc_50.json"


def record(i, text, label, evidence=""):
    return {"id": str(i), "text": text, "label": "contradictory" if label else "non_contradictory",
            "evidence": evidence, "scope": "local", "doc_type": "story"}


@pytest.mark.skipif(not CONTRADOC.exists(), reason="shared data not here")
def test_read_shared_contradoc_leaves_out_cut_evidence():
    with pytest.warns(UserWarning, match=r"W110.*12 of 25"):
        records = read_contradoc(CONTRADOC)
    assert len(records) == 38 and sum(r["label"] for r in records) == 13
    for r in records:
        if r["label"]:
            assert len(r["evidence"]) == 1
            assert " ".join(r["evidence"][0].split()) in " ".join(r["text"].split())
        else:
            assert r["evidence"] == []
    everything = read_contradoc(CONTRADOC, keep_missing_evidence=True)
    assert len(everything) == 50 and sum(not r["evidence_in_text"] for r in everything) == 12


def test_paired_builder_pairs_longest_with_shortest(tmp_path):
    raw = [record(i, "x" * n + f" Claim {i}.", True, f"Claim {i}.") for i, n in enumerate([50, 10, 30, 40, 20])]
    raw.append(record(9, "A consistent document.", False))
    path = tmp_path / "cd.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    records = read_contradoc(path)
    paired = build_contradoc_paired(records)
    # Lengths 10 (id 1), 20 (id 4), 30 (id 2), 40 (id 3), 50 (id 0): 50+10, 40+20; 30 is left out.
    assert [p["source_ids"] for p in paired[:2]] == [["0", "1"], ["3", "4"]]
    assert paired[0]["text"] == raw[0]["text"] + "\n\n" + raw[1]["text"]
    assert paired[0]["evidence"] == ["Claim 0.", "Claim 1."] and paired[0]["label"] is True
    assert [p["id"] for p in paired[2:]] == ["9"] and paired[2]["label"] is False
    assert len(paired) == 3


def test_bad_contradoc_files(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"id": 1}), encoding="utf-8")
    with pytest.raises(ValueError, match="E130"):
        read_contradoc(path)
    path.write_text(json.dumps([record(1, "Text.", True, "")]), encoding="utf-8")
    with pytest.raises(ValueError, match="E130.*no evidence"):
        read_contradoc(path)
    path.write_text(json.dumps([{"id": 1, "text": "T", "label": "maybe"}]), encoding="utf-8")
    with pytest.raises(ValueError, match="E130"):
        read_contradoc(path)
