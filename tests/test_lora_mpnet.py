"""scripts/nli/lora_mpnet.py: the 4-bit groups the GPU machine trains on, and the merge that turns
its LoRA adapters back into an ordinary model here. Tiny random MPNet, no download."""
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


def test_quantize_roundtrip_error_is_within_half_a_step():
    rng = numpy.random.default_rng(0)
    w = rng.normal(size=(8, 4 * lm.GROUP)).astype(numpy.float32)
    packed, scale = lm.quantize(w)
    assert packed.shape == (8, 2 * lm.GROUP) and packed.dtype == numpy.uint8
    back = lm.dequantize(packed, scale)
    step = numpy.repeat(scale.astype(numpy.float32), lm.GROUP, axis=1)
    assert numpy.all(numpy.abs(back - w) <= step / 2 + 1e-6)
    # each group's largest value is exact up to the fp16 scale
    g = numpy.abs(w).reshape(8, 4, lm.GROUP).argmax(-1)
    for r in range(8):
        for k in range(4):
            i = k * lm.GROUP + g[r, k]
            assert abs(back[r, i] - w[r, i]) <= abs(w[r, i]) * 1e-3


def test_quantize_is_per_row_so_trimmed_vocabularies_match():
    rng = numpy.random.default_rng(1)
    w = rng.normal(size=(30, lm.GROUP)).astype(numpy.float32)
    keep = numpy.array([0, 3, 4, 17, 29])
    full = lm.dequantize(*lm.quantize(w))
    trimmed = lm.dequantize(*lm.quantize(w[keep]))
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
    adapted.load_state_dict(lm.merged_state(base, {}, 1.0), strict=False)
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
    missing, unexpected = merged.load_state_dict(lm.merged_state(base, lm.adapter_tensors(adapted, lora), 2.0),
                                                 strict=False)
    assert not unexpected and all("position_ids" in m for m in missing)
    with torch.no_grad():
        got = merged(input_ids=ids, attention_mask=mask).logits
    assert torch.allclose(got, want, atol=1e-5)
    # and the adapters matter: without them the logits differ
    plain = transformers.MPNetForSequenceClassification(config).eval()
    plain.load_state_dict({**lm.merged_state(base, {}, 1.0),
                           **{f"classifier.{k}": v for k, v in adapted.classifier.state_dict().items()}}, strict=False)
    with torch.no_grad():
        assert not torch.allclose(plain(input_ids=ids, attention_mask=mask).logits, want, atol=1e-3)


def test_merge_refuses_an_adapter_for_another_model():
    _, model = _tiny()
    base = {k[len("mpnet."):]: v.numpy() for k, v in model.state_dict().items() if k.startswith("mpnet.")}
    stray = {"encoder.layer.7.attention.attn.q.lora_A": torch.zeros(4, 64),
             "encoder.layer.7.attention.attn.q.lora_B": torch.zeros(64, 4)}
    with pytest.raises(ValueError, match="1 LoRA pairs"):
        lm.merged_state(base, stray, 1.0)


def test_shipped_adapter_fits_all_mpnet_base_v2():
    """models/nli-mpnet-lora: one LoRA pair per targeted projection of the 12-layer, 768-wide
    encoder, the 3-way head, and a pair score the detector can load."""
    import json

    from safetensors.torch import load_file

    from spacy_inconsistency.pair_score import find_pair_scorer

    folder = ROOT / "models" / "nli-mpnet-lora"
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
