"""The paper reproductions in reproductions/ (outside the installed package): their printed
tables are the papers' own, and the package's methods reproduce them."""
import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
POLITICAL_DIR = ROOT / "reproductions" / "political"
SHARED = ROOT.parent / "shared"
POLITICAL = SHARED / "data" / "political" / "df_gold.csv"
POLITICAL_SEED = SHARED / "seeds" / "political-inconsistency-benchmark.txt"


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def political():
    return _load(POLITICAL_DIR / "reproduce.py", "reproduce_political")


@pytest.mark.skipif(not POLITICAL_SEED.exists(), reason="seed paper not at ../shared/seeds")
def test_paper_json_is_the_papers_tables():
    paper = json.loads((POLITICAL_DIR / "paper.json").read_text(encoding="utf-8"))
    text = POLITICAL_SEED.read_text(encoding="utf-8")
    for key, caption in (("table_3", "Table 3:"), ("table_4", "Table 4:")):
        block = text[: text.index(caption)].rstrip().split("\n\n")[-1].splitlines()
        header, rows = block[0], block[1:]
        printed = {}
        for line in rows:
            name, *cells = line.split("\t")
            printed[name] = [float(re.sub(r"</?b>", "", c)) for c in cells]
        assert len(header.split("\t")) == 4
        assert {row: list(cells.values()) for row, cells in paper[key].items()} == printed
    alphas = re.search(r"alpha is \*\*([0-9.]+)\*\* for the 5-class .* and \*\*([0-9.]+)\*\* for the 3-class", text)
    assert paper["alpha"] == {"5": float(alphas.group(1)), "3": float(alphas.group(2))}


@pytest.fixture(scope="module")
def reproduced(political):
    if not POLITICAL.is_file():
        pytest.skip(f"political benchmark data not found at {POLITICAL} (../shared/data is not mounted)")
    from spacy_inconsistency.political import protocol_tables, read_political

    result = protocol_tables(read_political(POLITICAL), seeds=list(range(10)), models=["ChatGPT-4 turbo", "LLaMA 70B"])
    return political.compare_with_paper(result, json.loads(political.PAPER.read_text(encoding="utf-8")))


@pytest.mark.parametrize("table", ["table_3", "table_4"])
def test_reproduces_paper_tables(reproduced, table):
    result = reproduced[table]
    assert set(result["paper"]) == {"ChatGPT-4 turbo", "LLaMA 70B", "Humans", "Bootstrap humans"}
    for row, cells in result["paper"].items():
        for cls, value in cells.items():
            got = result["over_seeds"][row][cls]["mean"]
            assert abs(got - value) <= 0.02, (table, row, cls, got, value)
            assert result["mean_minus_paper"][row][cls] == pytest.approx(got - value)
    assert result["max_abs_diff"] == max(abs(v) for c in result["mean_minus_paper"].values() for v in c.values())


def test_reproduces_paper_alpha(reproduced):
    alpha = reproduced["alpha"]["first_seed"]
    assert alpha["5"] == pytest.approx(0.528, abs=0.005)
    assert alpha["3"] == pytest.approx(0.507, abs=0.005)
    assert reproduced["alpha"]["paper"] == {"5": 0.528, "3": 0.507}
    json.dumps(reproduced)  # plain JSON


def test_reproduce_script(political, tmp_path):
    if not POLITICAL.is_file():
        pytest.skip(f"political benchmark data not found at {POLITICAL}")
    import typer
    from typer.testing import CliRunner

    app = typer.Typer()
    app.command()(political.main)
    out = tmp_path / "political.json"
    res = CliRunner().invoke(app, ["--data", str(POLITICAL.parent), "--output", str(out), "--seeds", "1", "--no-progress"])
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert data["n_samples"] == 698 and data["n_pairs"] == 3525
    assert abs(data["table_3"]["first_seed"]["LLaMA 70B"]["Consistent"] - 0.707) < 0.02
    assert "largest |mean - paper|" in res.output and "(paper 0.528)" in res.output
