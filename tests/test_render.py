import shutil
import subprocess
from html.parser import HTMLParser

import pytest
import spacy

from spacy_inconsistency.render import render_docs, render_findings, render_groups

TEXT = "The bridge opens in June. Costs doubled. The bridge will not open before December."
FINDING = {
    "units": [
        {"start_char": 0, "end_char": 25, "text": "The bridge opens in June.", "speaker": "MAYOR"},
        {"start_char": 41, "end_char": 83, "text": "The bridge will not open before December.", "speaker": ""},
    ],
    "score": 0.8731,
    "label": "contradiction",
}


class Findings(HTMLParser):
    """Collects each finding's highlighted texts, source labels, links and score."""

    def __init__(self):
        super().__init__()
        self.findings, self.stack, self.ids = [], [], set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        if attrs.get("class") == "finding":
            self.findings.append({"score": attrs["data-score"], "marks": [], "sources": [], "links": [], "label": ""})
        if tag == "a" and self.findings:
            self.findings[-1]["links"].append(attrs["href"])
        self.stack.append((tag, attrs.get("class")))

    def handle_endtag(self, tag):
        self.stack.pop()

    def handle_data(self, data):
        if not self.stack or not self.findings:
            return
        tag, cls = self.stack[-1]
        if tag == "mark":
            self.findings[-1]["marks"].append(data)
        elif cls == "source":
            self.findings[-1]["sources"].append(data)
        elif cls == "score":
            self.findings[-1]["label"] = data
        elif cls == "why":
            self.findings[-1].setdefault("why", []).append(data)


def parse(page):
    parser = Findings()
    parser.feed(page)
    return parser


def test_page_shows_both_units_score_and_links():
    page = render_groups([("council.txt", TEXT, [FINDING])], title="Test & <page>")
    parsed = parse(page)
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page and "http" not in page
    assert "<title>Test &amp; &lt;page&gt;</title>" in page
    (f,) = parsed.findings
    assert f["marks"] == ["The bridge opens in June.", "The bridge will not open before December."]
    assert f["sources"] == ["MAYOR"]
    assert f["label"] == "0.87" and f["score"] == "0.8731"
    assert f["links"] == ["#finding-0-b", "#finding-0-a"]
    assert {"finding-0-a", "finding-0-b"} <= parsed.ids
    assert "Costs doubled." in page  # context around the units


def test_a_finding_with_evidence_says_why():
    evidence = {"nli": {"contradiction": [0.912, 0.3]},
                "alignment": {"negation_mismatch": 1.26, "subject_same": 0.41, "object_same": -0.22, "overlap": 0.1},
                "without_alignment": 0.5}
    (f,) = parse(render_findings([dict(FINDING, evidence=evidence)], texts=TEXT)).findings
    # Both directions, then the three features that moved the score most, signed.
    assert f["why"] == ["NLI 0.91 / 0.30", "negation mismatch +1.3, subject same +0.4, object same -0.2"]
    (plain,) = parse(render_findings([FINDING], texts=TEXT)).findings
    assert "why" not in plain


def test_text_is_escaped_and_offsets_checked():
    bad = {"units": [{"start_char": 0, "end_char": 5, "text": "<b>x</b>"},
                     {"start_char": 0, "end_char": 3, "text": "y & z"}], "score": 0.5}
    page = render_findings([bad])
    assert "<b>x</b>" not in page and "&lt;b&gt;x&lt;/b&gt;" in page
    assert parse(page).findings[0]["marks"] == ["<b>x</b>", "y & z"]
    with pytest.raises(TypeError, match="E185"):
        render_findings({"units": []})


def test_cross_source_findings_use_each_units_own_text():
    finding = {"units": [dict(FINDING["units"][0], source="manifesto", doc=0),
                         {"start_char": 4, "end_char": 18, "text": "It opens later", "source": "posts", "doc": 1}],
               "score": 0.6}
    page = render_findings([finding], texts={0: TEXT, 1: "Now It opens later, sorry."})
    f = parse(page).findings[0]
    assert f["sources"] == ["manifesto", "posts"]
    assert f["marks"] == ["The bridge opens in June.", "It opens later"]
    assert ", sorry." in page and "Costs doubled." in page


def test_render_docs_from_the_pipeline(tiny_nli):
    nlp = spacy.blank("en")
    nlp.add_pipe("inconsistency_detector", config={"model": {"model": tiny_nli, "device": "cpu"}, "threshold": 0.0})
    docs = list(nlp.pipe([TEXT, "Short."]))
    page = render_docs(docs)
    parsed = parse(page)
    assert len(parsed.findings) == len(docs[0]._.contradictions) == 3
    assert 'data-findings="3"' in page and "No contradictions found." in page
    stored = {(c["units"][0]["text"], c["units"][1]["text"]) for c in docs[0]._.contradictions}
    assert {tuple(f["marks"]) for f in parsed.findings} == stored


def test_cli_writes_html(tiny_nli, tmp_path):
    from spacy_inconsistency.cli import detect

    path = tmp_path / "doc.txt"
    path.write_text(TEXT, encoding="utf-8")
    counts = detect([path], output=tmp_path / "out.jsonl", html=tmp_path / "out.html", progress=False,
                    model=tiny_nli, device="cpu", threshold=0.0)
    assert counts["inconsistent"] == 1
    parsed = parse((tmp_path / "out.html").read_text(encoding="utf-8"))
    assert len(parsed.findings) == 3
    assert all(len(f["marks"]) == 2 for f in parsed.findings)


def _chromium():
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.skipif(_chromium() is None, reason="no chromium on PATH (Debian: apt-get install chromium)")
def test_chromium_renders_the_findings(tmp_path):
    page = tmp_path / "page.html"
    page.write_text(render_groups([("council.txt", TEXT, [FINDING, dict(FINDING, score=0.55)])]), encoding="utf-8")
    base = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run(base + ["--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120).stdout
    parsed = parse(dom)
    assert [f["label"] for f in parsed.findings] == ["0.87", "0.55"]
    assert all(f["marks"] == ["The bridge opens in June.", "The bridge will not open before December."]
               for f in parsed.findings)
    png = tmp_path / "page.png"
    subprocess.run(base + [f"--screenshot={png}", "--window-size=1000,700", page.as_uri()],
                   capture_output=True, timeout=120)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    # The highlight colours of the two units are painted.
    Image = pytest.importorskip("PIL.Image")
    pixels = {colour for _, colour in Image.open(png).convert("RGB").getcolors(maxcolors=1 << 24)}
    assert (255, 213, 204) in pixels and (204, 229, 255) in pixels
