"""Tiny models built offline for the SCALE tests: a T5 with a sentencepiece
vocabulary trained on one paragraph, and a tiny causal LM.

Random weights: these models exercise code paths and parity with the
reference implementation, not judgement.
"""
from pathlib import Path

PARAGRAPH = (
    "The committee approved the budget on Monday. The budget was rejected by the "
    "committee. A man is playing a guitar on the street. Nobody is playing music. "
    "The sky is blue and the sun is shining over the old harbour. It is raining "
    "heavily in the city tonight. The minister said taxes will fall next year. "
    "Taxes will rise next year, the minister said. Alice: I was at home all evening. "
    "Bob: You were seen at the station. Dogs, cats and birds live in the garden. "
    "Question: Does this imply that the claim holds? Yes or No? yes no"
)


def build_tiny_t5(path: Path, *, seed: int = 0, vocab_size: int = 100, n_layers: int = 2,
                  d_model: int = 32, lm_head_scale: float = 0.3) -> Path:
    """A random T5ForConditionalGeneration and a sentencepiece T5 tokenizer in
    which "Yes" and "No" are single pieces; saved to `path`."""
    import sentencepiece as spm
    import torch
    from transformers import T5Config, T5ForConditionalGeneration, T5Tokenizer

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    corpus = path / "corpus.txt"
    corpus.write_text("\n".join([PARAGRAPH] * 4), encoding="utf-8")
    spm.SentencePieceTrainer.train(
        input=str(corpus), model_prefix=str(path / "spiece"), vocab_size=vocab_size,
        model_type="unigram", hard_vocab_limit=False, pad_id=0, eos_id=1, unk_id=2, bos_id=-1,
        user_defined_symbols=["\u2581Yes", "\u2581No"], character_coverage=1.0,
        minloglevel=2,
    )
    corpus.unlink()
    tokenizer = T5Tokenizer(vocab_file=str(path / "spiece.model"), extra_ids=0, legacy=True)
    torch.manual_seed(seed)
    config = T5Config(
        vocab_size=len(tokenizer), d_model=d_model, d_kv=8, d_ff=64, num_layers=n_layers,
        num_decoder_layers=1, num_heads=4, relative_attention_num_buckets=8,
        relative_attention_max_distance=32, decoder_start_token_id=0, pad_token_id=0,
        eos_token_id=1, dropout_rate=0.0, tie_word_embeddings=False,
    )
    model = T5ForConditionalGeneration(config)
    # Random logits sit near zero and every P(Yes) near 0.5; larger output
    # weights spread the scores so that the tests can tell inputs apart.
    with torch.no_grad():
        model.lm_head.weight.mul_(lm_head_scale)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def build_tiny_causal(path: Path, *, seed: int = 0) -> Path:
    """A random LlamaForCausalLM with a word-level tokenizer trained on the paragraph."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.WordLevelTrainer(special_tokens=["[PAD]", "[UNK]", "[BOS]", "[EOS]"])
    tok.train_from_iterator([PARAGRAPH], trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", bos_token="[BOS]",
        eos_token="[EOS]", model_max_length=512,
    )
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
        pad_token_id=0, bos_token_id=2, eos_token_id=3, tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        model.lm_head.weight.mul_(20.0)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
