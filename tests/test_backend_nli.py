import os
import pickle
import warnings

import numpy
import pytest
import torch

from spacy_inconsistency.backends.batching import plan_batches, run_halving_on_oom
from spacy_inconsistency.backends.loading import resolve_device
from spacy_inconsistency.backends.nli import NLIBackend, canonical_label, read_label_index

PAIRS = [
    ("The committee approved the budget on Monday.", "The budget was rejected by the committee."),
    ("A man is playing a guitar on the street.", "Nobody is playing music."),
    ("The sky is blue.", "It is raining heavily in the city tonight, the minister said."),
    ("Dogs live in the garden.", "Dogs, cats and birds live in the garden."),
    ("Taxes will rise.", "Taxes will fall next year."),
]


def reference_probs(path, pairs):
    """One pair at a time, straight through transformers: no batching, no padding."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSequenceClassification.from_pretrained(path).eval()
    rows = []
    with torch.no_grad():
        for p, h in pairs:
            logits = model(**tok(p, h, return_tensors="pt")).logits
            rows.append(torch.softmax(logits, -1)[0].numpy())
    return numpy.stack(rows)


@pytest.mark.parametrize("name,expected", [
    ("ENTAILMENT", "entailment"), ("Entailment", "entailment"), ("entailed", "entailment"),
    ("NEUTRAL", "neutral"), ("Contradiction", "contradiction"), ("not_entailment", "not_entailment"),
    ("Non-Entailment", "not_entailment"), ("LABEL_0", None),
])
def test_canonical_label(name, expected):
    assert canonical_label(name) == expected


def test_label_index_by_name_not_position():
    assert read_label_index({0: "CONTRADICTION", 1: "Entailment", 2: "neutral"}, model_name="m") == {
        "contradiction": 0, "entailment": 1, "neutral": 2,
    }
    assert read_label_index({"0": "LABEL_0", "1": "LABEL_1"}, model_name="m",
                            label_map={"LABEL_0": "entailment", "LABEL_1": "not_entailment"}) == {
        "entailment": 0, "not_entailment": 1,
    }
    with pytest.raises(ValueError, match=r"\[E002\].*LABEL_0"):
        read_label_index({0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"}, model_name="m")
    with pytest.raises(ValueError, match=r"\[E002\]"):
        read_label_index({0: "entailment", 1: "ENTAILMENT"}, model_name="m")


def test_scores_match_unbatched_transformers(tiny_nli):
    backend = NLIBackend(tiny_nli, device="cpu", max_batch_size=3, dtype="float32")
    expected = reference_probs(tiny_nli, PAIRS)  # float32 transformers
    got = backend.predict_proba(PAIRS)
    numpy.testing.assert_allclose(got, expected, atol=1e-5)
    by_label = backend.predict(PAIRS)
    # Column 0 of this model is CONTRADICTION, column 1 Entailment.
    numpy.testing.assert_allclose(by_label["contradiction"], expected[:, 0], atol=1e-5)
    numpy.testing.assert_allclose(by_label["entailment"], expected[:, 1], atol=1e-5)
    numpy.testing.assert_allclose(got.sum(axis=1), 1.0, atol=1e-5)


def test_batching_does_not_change_scores(tiny_nli):
    one = NLIBackend(tiny_nli, device="cpu", max_batch_size=1).predict_proba(PAIRS)
    many = NLIBackend(tiny_nli, device="cpu", max_batch_size=64, max_batch_tokens=40).predict_proba(PAIRS)
    numpy.testing.assert_allclose(one, many, atol=1e-5)
    assert NLIBackend(tiny_nli, device="cpu").predict_proba([]).shape == (0, 3)


def test_two_label_model(tiny_binary_nli):
    backend = NLIBackend(tiny_binary_nli, device="cpu")
    assert backend.labels == ("not_entailment", "entailment")
    scores = backend.predict(PAIRS[:2])
    assert set(scores) == {"entailment", "not_entailment"}
    numpy.testing.assert_allclose(scores["entailment"] + scores["not_entailment"], 1.0, atol=1e-5)


def test_plan_batches_respects_budget():
    lengths = [5, 50, 7, 49, 12, 3, 30, 30]
    batches = plan_batches(lengths, max_batch_size=3, max_batch_tokens=100)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for batch in batches:
        assert len(batch) <= 3
        assert max(lengths[i] for i in batch) * len(batch) <= 100
    # Longest first, and neighbours in length share a batch.
    assert batches[0] == [1, 3]
    assert plan_batches([500], max_batch_size=8, max_batch_tokens=100) == [[0]]


def test_oom_halves_and_retries():
    calls = []

    def forward(batch):
        calls.append(len(batch))
        if len(batch) > 2:
            raise MemoryError("fake")
        return numpy.asarray(batch, dtype=float)[:, None]

    rows = run_halving_on_oom(
        forward, list(range(7)), is_oom=lambda e: isinstance(e, MemoryError),
        on_oom=lambda n: None, on_single=lambda i, e: RuntimeError(i),
    )
    assert rows[:, 0].tolist() == list(range(7))
    assert calls == [7, 3, 1, 2, 4, 2, 2]

    def always(batch):
        raise MemoryError("fake")

    with pytest.raises(RuntimeError, match="single"):
        run_halving_on_oom(always, [0, 1], is_oom=lambda e: isinstance(e, MemoryError),
                           on_oom=lambda n: None, on_single=lambda i, e: RuntimeError("single"))
    with pytest.raises(KeyError):
        run_halving_on_oom(lambda b: {}[0], [0, 1], is_oom=lambda e: False,
                           on_oom=lambda n: None, on_single=lambda i, e: RuntimeError())


def test_cuda_oom_in_backend_is_retried(tiny_nli, monkeypatch):
    backend = NLIBackend(tiny_nli, device="cpu", max_batch_size=8, max_batch_tokens=10_000)
    expected = backend.predict_proba(PAIRS)
    real_forward = backend._forward

    def flaky(features):
        if len(features) > 2:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (simulated)")
        return real_forward(features)

    monkeypatch.setattr(backend, "_forward", flaky)
    with pytest.warns(UserWarning, match="W002"):
        got = backend.predict_proba(PAIRS)
    numpy.testing.assert_allclose(got, expected, atol=1e-5)
    assert backend.n_oom_retries >= 1 and backend.max_batch_tokens < 10_000


def test_long_pairs_are_truncated_with_warning_or_refused(tiny_nli):
    long_pair = ("word " * 200, "the sky is blue")
    backend = NLIBackend(tiny_nli, device="cpu")
    assert backend.max_length == 64
    with pytest.warns(UserWarning, match=r"W001.*1 of 2"):
        probs = backend.predict_proba([long_pair, PAIRS[0]])
    assert probs.shape == (2, 3) and backend.n_truncated == 1
    strict = NLIBackend(tiny_nli, device="cpu", truncation="error")
    with pytest.raises(ValueError, match=r"E010"):
        strict.predict_proba([long_pair])


def direct_features(tokenizer, pairs, **kwargs):
    encoded = tokenizer([p for p, _ in pairs], [h for _, h in pairs], **kwargs)
    return [{key: encoded[key][i] for key in encoded.keys()} for i in range(len(pairs))]


@pytest.mark.parametrize("model", ["default", "tiny"])
def test_pairs_assembled_from_each_texts_tokens_are_the_encoded_pairs(tiny_nli, model):
    """Each distinct text is tokenized once and its pairs assembled by the tokenizer's
    post-processor: the same features as encoding every pair whole. The tiny model's
    tokenizer has no post-processor (transformers sets its token types itself), so
    assembled pairs differ there, and its pairs are encoded whole."""
    backend = NLIBackend(tiny_nli if model == "tiny" else "default", device="cpu")
    texts = [p for pair in PAIRS for p in pair] + ["Zürich’s mayor—née Müller—won 52.3% (2024).", "  spaced  out  "]
    pairs = [(a, b) for a in texts for b in texts if a != b]
    features = backend._encode(pairs)
    assert backend._assemble_pairs is (model == "default")
    want = direct_features(backend.tokenizer, pairs, truncation=False)
    assert features == want and set(want[0]) >= {"input_ids", "attention_mask"}
    assert backend._encode(pairs[::-1]) == want[::-1]
    # A pair over the limit is truncated as the tokenizer truncates it, and that call's
    # setting does not stay on the shared tokenizer for the pairs after it.
    long_pair = ("word " * 600, "the sky is blue")
    with pytest.warns(UserWarning, match="W001"):
        got = backend._encode([long_pair, pairs[0]])
    assert got[0] == direct_features(backend.tokenizer, [long_pair], truncation="longest_first",
                                     max_length=backend.max_length)[0]
    assert len(got[0]["input_ids"]) == backend.max_length
    assert backend._encode(pairs) == want
    with pytest.warns(UserWarning, match="W001"):  # not truncated silently by the setting left behind
        backend._encode([long_pair[::-1]])
    assert backend.n_truncated == 2


def test_missing_model_error_names_model_and_fix(tmp_path):
    missing = tmp_path / "no-model-here"
    with pytest.raises(OSError) as info:
        NLIBackend(str(missing), device="cpu")
    message = str(info.value)
    assert "[E001]" in message and str(missing) in message and "--local-dir" in message
    with pytest.raises(OSError) as info:
        NLIBackend("some-org/no-such-nli-model", device="cpu", local_files_only=True)
    message = str(info.value)
    assert "some-org/no-such-nli-model" in message and "cache" in message


def test_device_settings():
    assert resolve_device("cpu").type == "cpu"
    with pytest.raises(ValueError, match="E004"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="E009"):
            resolve_device("cuda")
        assert resolve_device("auto").type == "cpu"


def test_pickle_round_trip(tiny_nli):
    backend = NLIBackend(tiny_nli, device="cpu", max_batch_size=5)
    clone = pickle.loads(pickle.dumps(backend))
    assert clone.max_batch_size == 5
    numpy.testing.assert_allclose(clone.predict_proba(PAIRS), backend.predict_proba(PAIRS), atol=1e-6)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_bf16_close_to_cpu(tiny_nli):
    cpu = NLIBackend(tiny_nli, device="cpu").predict_proba(PAIRS)
    gpu_backend = NLIBackend(tiny_nli, device="cuda")
    assert gpu_backend.dtype == torch.bfloat16
    numpy.testing.assert_allclose(gpu_backend.predict_proba(PAIRS), cpu, atol=2e-2)


PAIRS = [("The museum is open on Sundays.", "The museum is closed on Sundays."),
         ("A man plays a guitar on stage.", "Nobody is playing music."),
         ("It rained all day.", "The ground was wet in the evening.")] * 3


@pytest.mark.parametrize("dtype,tolerance", [("bfloat16", 0.03), ("mixed", 0.03), ("int8", 0.05)])
def test_cheaper_dtypes_stay_close_to_float32(tiny_nli, dtype, tolerance):
    reference = NLIBackend(tiny_nli, device="cpu", dtype="float32").predict_proba(PAIRS)
    backend = NLIBackend(tiny_nli, device="cpu", dtype=dtype)
    probs = backend.predict_proba(PAIRS)
    assert probs.dtype == numpy.float32 and probs.shape == reference.shape
    assert numpy.allclose(probs.sum(axis=1), 1.0, atol=1e-5)
    assert numpy.abs(probs - reference).max() < tolerance
    if dtype == "int8":
        layer = backend.model.bert.encoder.layer[0].attention.self.query
        assert type(layer).__module__.startswith("torch.ao.nn.quantized.dynamic")
    elif dtype == "mixed":
        # Only the products run in bf16: the linear layers' weights are stored as autocast
        # casts them, the rest stays float32, in a model of its own.
        model = backend.model
        assert model is not NLIBackend(tiny_nli, device="cpu", dtype="float32").model
        linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
        assert linears and all(p.dtype == torch.bfloat16 for m in linears for p in m.parameters())
        assert model.bert.embeddings.word_embeddings.weight.dtype == torch.float32
        assert model.bert.encoder.layer[0].output.LayerNorm.weight.dtype == torch.float32
        assert numpy.abs(probs - reference).max() > 0
        # The same numbers as autocast casting float32 weights in every forward pass.
        autocast = NLIBackend(tiny_nli, device="cpu", dtype="float32")
        autocast.dtype_name = "mixed"
        assert numpy.array_equal(probs, autocast.predict_proba(PAIRS))
    else:
        assert backend.model.dtype == torch.bfloat16
    # The float model that others share is left as it was.
    assert NLIBackend(tiny_nli, device="cpu", dtype="float32").model.dtype == torch.float32
    assert pickle.loads(pickle.dumps(backend)).dtype_name == dtype


CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
flags\t\t: fpu vme sse sse2 avx2 avx512f avx512bw{extra}
bogomips\t: 4200.00
"""


@pytest.mark.parametrize("extra,native", [("", False), (" avx512_bf16", True), (" amx_tile amx_bf16", True)])
def test_native_bf16_is_read_from_the_cpu_flags(extra, native):
    from spacy_inconsistency.backends.loading import cpu_has_native_bf16

    assert cpu_has_native_bf16(CPUINFO.format(extra=extra)) is native
    assert cpu_has_native_bf16("Features\t: fp asimd bf16") is False  # ARM's flag is not measured here
    assert cpu_has_native_bf16("") is False


@pytest.mark.parametrize("native", [False, True])
def test_auto_dtype_is_bf16_only_on_cpus_that_have_it(tiny_nli, monkeypatch, native):
    import spacy_inconsistency.backends.nli as nli

    monkeypatch.setattr(nli, "cpu_has_native_bf16", lambda: native)
    backend = NLIBackend(tiny_nli, device="cpu")
    assert backend.dtype_name == ("bfloat16" if native else "float32")
    assert backend.model.dtype == (torch.bfloat16 if native else torch.float32)


def test_bad_dtype_is_refused(tiny_nli):
    with pytest.raises(ValueError, match="E006.*dtype"):
        NLIBackend(tiny_nli, device="cpu", dtype="fp8")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_workers_get_one_torch_thread(monkeypatch):
    # Workers of nlp.pipe(n_process=2) are forked; with torch's pool inherited they hang.
    import multiprocessing

    from spacy_inconsistency.backends.loading import guard_forks

    guard_forks()
    registered = []
    monkeypatch.setattr(os, "register_at_fork", lambda **hooks: registered.append(hooks))
    guard_forks()
    assert registered == []  # once per process, however often it is called
    monkeypatch.undo()
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with multiprocessing.get_context("fork").Pool(1) as pool:
            assert pool.apply(torch.get_num_threads) == 1
        assert torch.get_num_threads() == 2  # the parent keeps its threads
    finally:
        torch.set_num_threads(before)


def test_pad_features_pads_each_side_and_falls_back_to_eos(tiny_nli):
    from transformers import AutoTokenizer

    from spacy_inconsistency.backends.batching import pad_features

    tok = AutoTokenizer.from_pretrained(tiny_nli)
    features = [{"input_ids": [5, 6, 7], "token_type_ids": [0, 1, 1]}, {"input_ids": [8], "token_type_ids": [0]}]
    right = pad_features(tok, features, side="right")
    pad = tok.pad_token_id
    assert right["input_ids"].tolist() == [[5, 6, 7], [8, pad, pad]]
    assert right["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]
    assert right["token_type_ids"].tolist() == [[0, 1, 1], [0, 0, 0]]
    left = pad_features(tok, [{"input_ids": f["input_ids"]} for f in features], side="left")
    assert left["input_ids"].tolist() == [[5, 6, 7], [pad, pad, 8]]
    assert left["attention_mask"].tolist() == [[1, 1, 1], [0, 0, 1]]
    # A tokenizer without a padding token pads with its end-of-sequence token ...
    tok.pad_token = None
    tok.eos_token = "[SEP]"
    assert pad_features(tok, features, side="right")["input_ids"].tolist()[1] == [8, tok.sep_token_id, tok.sep_token_id]
    # ... and one with neither says so.
    tok.pad_token = None
    tok.eos_token = None
    with pytest.raises(ValueError, match="E006"):
        pad_features(tok, features, side="right")
