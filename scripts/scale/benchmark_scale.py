"""Speed of `spacy_inconsistency.scale.score` against `scale-score` 0.1.0 on the same model and inputs.

Random weights (speed does not need trained ones), a sentencepiece vocabulary
trained on a paragraph, and a synthetic ScreenEval-shaped workload measured in
that tokenizer's tokens.

CPU, small model (what the README reports):
    python scripts/scale/benchmark_scale.py --arch t5-small --docs 4 --doc-tokens 3000 --claims 4 --device cpu
GPU (flan-t5-large architecture, ScreenEval shape: 52 docs x ~6,000 tokens, 12 claims, chunk 1,000, overlap 0.25):
    python scripts/scale/benchmark_scale.py --arch flan-t5-large --docs 52 --doc-tokens 6000 --claims 12 --device cuda

Prints throughput (claims/s, model inputs/s, tokens/s) of both, their ratio,
the largest |score difference|, and on CUDA the fraction of the GPU's bf16
peak that our run reached (FLOPs counted from the architecture and the real
input lengths).
"""
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import typer

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

ARCHS: Dict[str, Dict[str, Any]] = {
    # the tiny T5 of the tests
    "tiny": dict(d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=1, num_heads=4),
    # t5-small
    "t5-small": dict(d_model=512, d_kv=64, d_ff=2048, num_layers=6, num_decoder_layers=6, num_heads=8),
    # google/flan-t5-large (config.json on the hub)
    "flan-t5-large": dict(d_model=1024, d_kv=64, d_ff=2816, num_layers=24, num_decoder_layers=24, num_heads=16,
                          feed_forward_proj="gated-gelu", tie_word_embeddings=False),
}

app = typer.Typer(add_completion=False)


def build_model(path: Path, arch: str, seed: int = 0) -> Path:
    import torch
    from transformers import T5Config, T5ForConditionalGeneration

    from scale_fixtures import build_tiny_t5

    build_tiny_t5(path, seed=seed)
    if arch == "tiny":
        return path
    config = T5Config(vocab_size=32128, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1,
                      dropout_rate=0.0, **ARCHS[arch])
    torch.manual_seed(seed)
    model = T5ForConditionalGeneration(config)
    model.save_pretrained(path)
    return path


def workload(tokenizer: Any, *, docs: int, doc_tokens: int, claims: int, seed: int) -> Tuple[List[str], List[List[str]]]:
    from scale_fixtures import PARAGRAPH

    sentences = [s.strip() + "." for s in PARAGRAPH.split(".") if s.strip() and "?" not in s]
    speakers = ["Alice", "Bob", "Carol", "Dan"]
    rng = random.Random(seed)
    per_line = len(tokenizer("Alice: " + sentences[0]).input_ids)
    premises, claim_lists = [], []
    for _ in range(docs):
        lines = [f"{rng.choice(speakers)}: {rng.choice(sentences)}" for _ in range(max(1, doc_tokens // per_line))]
        premises.append("\n".join(lines))
        claim_lists.append([" ".join(rng.sample(sentences, 2)) for _ in range(claims)])
    return premises, claim_lists


def t5_flops(config: Any, n_tokens: int) -> float:
    """Forward FLOPs of one encoder pass over n_tokens and one decoder step."""
    d, f, h, dk = config.d_model, config.d_ff, config.num_heads, config.d_kv
    inner = h * dk
    ff = 3 if "gated" in config.feed_forward_proj else 2
    enc_layer = 2 * n_tokens * (4 * d * inner + ff * d * f) + 2 * 2 * n_tokens * n_tokens * inner
    dec_layer = 2 * (4 * d * inner + ff * d * f) + 2 * 2 * d * inner * n_tokens + 2 * 2 * n_tokens * inner
    head = 2 * d * config.vocab_size
    return config.num_layers * enc_layer + config.num_decoder_layers * dec_layer + head


@app.command()
def main(
    arch: str = typer.Option("t5-small", help="tiny, t5-small or flan-t5-large (random weights)."),
    docs: int = typer.Option(4, help="Documents."),
    doc_tokens: int = typer.Option(3000, help="About this many tokens per document."),
    claims: int = typer.Option(4, help="Claims per document."),
    chunk_size: int = typer.Option(1000, help="SCALE chunk size."),
    window_size: float = typer.Option(0.25, help="SCALE overlap."),
    device: str = typer.Option("cpu", help="cpu or cuda."),
    dtype: str = typer.Option("auto", help="Ours: auto (bf16 on CUDA), float32 or bfloat16."),
    max_batch_tokens: int = typer.Option(16384, help="Ours: padded tokens per batch."),
    max_batch_size: int = typer.Option(64, help="Ours: inputs per batch."),
    reference: bool = typer.Option(True, help="Also run scale-score."),
    reference_docs: Optional[int] = typer.Option(None, help="Run the reference on the first N documents only (its time is scaled per claim)."),
    peak_tflops: float = typer.Option(989.0, help="The GPU's dense bf16 peak (H100 SXM: 989)."),
    threads: int = typer.Option(1, help="torch CPU threads."),
    output: Optional[Path] = typer.Option(None, help="Write the figures as JSON."),
    seed: int = typer.Option(0),
) -> None:
    import torch
    from transformers import T5ForConditionalGeneration, T5Tokenizer

    from spacy_inconsistency.backends.entailment import EntailmentBackend
    from spacy_inconsistency.scale import score_chunks

    torch.set_num_threads(threads)
    tmp = Path(tempfile.mkdtemp(prefix="scale-bench-"))
    path = build_model(tmp / arch, arch, seed)
    tokenizer = T5Tokenizer.from_pretrained(path)
    premises, claim_lists = workload(tokenizer, docs=docs, doc_tokens=doc_tokens, claims=claims, seed=seed)
    n_claims = sum(len(c) for c in claim_lists)
    doc_lengths = [len(tokenizer(p).input_ids) for p in premises]
    report: Dict[str, Any] = {
        "arch": arch, "device": device, "docs": docs, "claims_per_doc": claims, "chunk_size": chunk_size,
        "window_size": window_size, "mean_doc_tokens": sum(doc_lengths) / len(doc_lengths), "torch_threads": threads,
    }
    if device.startswith("cuda"):
        report["gpu"] = torch.cuda.get_device_name(0)

    backend = EntailmentBackend(str(path), kind="seq2seq", device=device, dtype=dtype,
                                max_batch_tokens=max_batch_tokens, max_batch_size=max_batch_size)
    backend.model  # load before timing
    # Warm-up on one document (kernels, allocator).
    score_chunks(premises[:1], [claim_lists[0][:1]], backend=backend, chunk_size=chunk_size, window_size=window_size)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    lengths: List[int] = []
    original = backend.score_inputs

    def counting(lens, build):
        lengths.extend(int(n) for n in lens)
        return original(lens, build)

    backend.score_inputs = counting  # type: ignore[method-assign]
    start = time.perf_counter()
    per_window = score_chunks(premises, claim_lists, backend=backend, chunk_size=chunk_size, window_size=window_size)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    ours_s = time.perf_counter() - start
    ours = [max(w) for group in per_window for w in group]
    flops = sum(t5_flops(backend.model.config, n) for n in lengths)
    report["ours"] = {
        "seconds": ours_s, "claims_per_s": n_claims / ours_s, "inputs": len(lengths),
        "inputs_per_s": len(lengths) / ours_s, "tokens_per_s": sum(lengths) / ours_s,
        "dtype": str(backend.dtype), "tflops_per_s": flops / ours_s / 1e12,
    }
    if device.startswith("cuda"):
        report["ours"]["fraction_of_bf16_peak"] = flops / ours_s / 1e12 / peak_tflops
    print(f"ours: {ours_s:.2f} s, {n_claims / ours_s:.2f} claims/s, {len(lengths) / ours_s:.1f} inputs/s, "
          f"{sum(lengths) / ours_s:,.0f} tokens/s ({backend.dtype})", file=sys.stderr)

    if reference:
        from scale_score.score import score as reference_score

        n_ref = reference_docs or docs
        model = T5ForConditionalGeneration.from_pretrained(path).to(device).eval()
        ref_claims = sum(len(c) for c in claim_lists[:n_ref])
        start = time.perf_counter()
        expected = reference_score(premises[:n_ref], claim_lists[:n_ref], chunk_size=chunk_size,
                                   window_size=window_size, model=model, tokenizer=tokenizer, device=device)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        ref_s = time.perf_counter() - start
        diff = max(abs(a - b) for a, b in zip(ours[: len(expected)], expected))
        report["reference"] = {"seconds": ref_s, "docs": n_ref, "claims_per_s": ref_claims / ref_s, "dtype": "float32"}
        report["speedup"] = (n_claims / ours_s) / (ref_claims / ref_s)
        report["max_abs_difference"] = diff
        print(f"reference (scale-score 0.1.0): {ref_s:.2f} s for {n_ref} docs, {ref_claims / ref_s:.2f} claims/s",
              file=sys.stderr)
        print(f"speed-up (claims/s): {report['speedup']:.2f}x; largest |score difference|: {diff:.2e}", file=sys.stderr)
    print(json.dumps(report, indent=2))
    if output:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(report, indent=2), encoding="utf-8")


if __name__ == "__main__":
    app()
