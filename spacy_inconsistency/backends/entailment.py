"""P(premise entails hypothesis) behind one interface, three backends.

- `seq2seq`: T5 / Flan-T5 with the SCALE prompt; one encoder pass and one
  decoder step (no `generate`), P = softmax over the "Yes"/"No" logits.
- `nli`: an NLI cross-encoder (the embedded default); P(entailment), read
  through `NLIBackend` (labels found by name).
- `causal`: a causal LM; P = softmax over the "Yes"/"No" next-token logits.

Every backend works on token ids: an input is ``prefix + premise + suffix``,
where `template(hypothesis)` gives the prefix and suffix (prompt and special
tokens) and `premise_ids(text)` the premise's own tokens. This lets the SCALE
chunker measure chunks in the model's tokens, prompt included, and cut token
windows exactly as the reference implementation does. All inputs of a call
are sorted by length, padded per batch to a token budget, and a CUDA
out-of-memory halves the batch (`backends/batching.py`). On CUDA, weights are
bf16 (never fp16: T5 overflows in fp16).
"""
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy
from spacy.util import registry

from ..errors import Errors
from .batching import BudgetedBatches, pad_features
from .loading import DEFAULT_MODEL, _missing_model_error, cached, logger, resolve_device, resolve_model

SEQ2SEQ = "seq2seq"
NLI = "nli"
CAUSAL = "causal"
KINDS = (SEQ2SEQ, NLI, CAUSAL)
PREMISE = "{premise}"
HYPOTHESIS = "{hypothesis}"
# The prompt of the reference code (`scale-score` 0.1.0, `scale_score/utils.py`).
SCALE_PROMPT = '{premise} Question: Does this imply that "{hypothesis}"? Yes or No?'
# The prompt as printed in the paper (section 3.1).
PAPER_PROMPT = '{premise} Question: does this imply "{hypothesis}"? Yes or no?'
CAUSAL_PROMPT = '{premise}\nQuestion: Does this imply that "{hypothesis}"? Yes or No?\nAnswer:'
DEFAULT_PROMPTS = {SEQ2SEQ: SCALE_PROMPT, CAUSAL: CAUSAL_PROMPT, NLI: PREMISE + HYPOTHESIS}
DEFAULT_YES_NO = {SEQ2SEQ: ("Yes", "No"), CAUSAL: (" Yes", " No")}
# Tokenize this many texts per tokenizer call, so memory stays bounded.
TOKENIZE_BATCH = 256


@dataclass
class Template:
    """Everything of a model input except the premise.

    prefix (List[int]): Token ids before the premise.
    suffix (List[int]): Token ids after the premise (hypothesis included).
    n_second (int): How many of the last tokens belong to the second segment
        (token type 1); 0 for models without token types.
    """

    prefix: List[int]
    suffix: List[int]
    n_second: int = 0

    @property
    def overhead(self) -> int:
        return len(self.prefix) + len(self.suffix)

    def build(self, premise: Sequence[int]) -> Tuple[List[int], int]:
        return self.prefix + list(premise) + self.suffix, self.n_second


Input = Tuple[List[int], int]
_PROBE = "premise"


def _find(ids: List[int], part: List[int]) -> int:
    for i in range(len(ids) - len(part) + 1):
        if ids[i : i + len(part)] == part:
            return i
    raise ValueError(Errors.E006.format(name="the pair encoding", expected="to hold the premise tokens", value=ids))


def split_prompt(prompt: str) -> Tuple[str, str]:
    """The text before and after the premise of a prompt.

    prompt (str): Holds "{premise}" and "{hypothesis}" once each, premise first.
    RETURNS (Tuple[str, str]): Before the premise, and after it (with "{hypothesis}").
    """
    if (
        prompt.count(PREMISE) != 1
        or prompt.count(HYPOTHESIS) != 1
        or prompt.index(PREMISE) > prompt.index(HYPOTHESIS)
    ):
        raise ValueError(Errors.E103.format(prompt=prompt))
    before, after = prompt.split(PREMISE)
    return before, after


def infer_kind(model: str, *, revision: Optional[str] = None, local_files_only: bool = False) -> str:
    """Which backend fits a model: from its config, without loading weights.

    model (str): "default", a local directory or a hub id.
    RETURNS (str): "seq2seq", "nli" or "causal".
    """
    if model == DEFAULT_MODEL:
        return NLI
    from transformers import AutoConfig

    target, is_local = resolve_model(model)
    try:
        config = AutoConfig.from_pretrained(
            target, revision=revision, local_files_only=local_files_only or is_local
        )
    except (OSError, ValueError) as err:
        raise _missing_model_error(model, revision, err) from err
    architectures = list(getattr(config, "architectures", None) or [])
    if getattr(config, "is_encoder_decoder", False):
        return SEQ2SEQ
    if any(a.endswith("ForSequenceClassification") for a in architectures):
        return NLI
    if any(a.endswith("ForCausalLM") for a in architectures):
        return CAUSAL
    raise ValueError(Errors.E109.format(name=model, architectures=architectures))


def _load_tokenizer(target: str, kwargs: Dict[str, Any]) -> Any:
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(target, **kwargs)
    except (ImportError, ValueError) as err:
        # A sentencepiece-only model without tokenizer.json needs protobuf
        # to build a fast tokenizer; the slow one gives the same ids.
        logger.info("No fast tokenizer for %s (%s); using the slow one", target, err)
        return AutoTokenizer.from_pretrained(target, use_fast=False, **kwargs)


class EntailmentBackend(BudgetedBatches):
    """P(entailment) of (premise, hypothesis) inputs with one of three model kinds.

    model (str): "default" (the embedded NLI model), a local directory or a
        Hugging Face hub id.
    kind (str): "auto" (from the model's config), "seq2seq", "nli" or "causal".
    device (str): "auto", "cpu", "cuda" or "cuda:N".
    prompt (Optional[str]): Prompt with "{premise}" and "{hypothesis}" for
        the seq2seq and causal kinds; None takes the kind's default
        (`SCALE_PROMPT`, the reference code's; `PAPER_PROMPT` is the paper's).
    yes_token (Optional[str]): The "Yes" answer; must be one token.
    no_token (Optional[str]): The "No" answer; must be one token.
    max_batch_size (int): Most inputs in one forward pass.
    max_batch_tokens (int): Most tokens in one forward pass, padding included.
    revision (Optional[str]): Hub revision to pin.
    local_files_only (bool): Never contact the hub.
    dtype (str): "auto", "float32" or "bfloat16". "auto" is bf16 on CUDA; on
        the CPU, fp32 for the seq2seq and causal kinds and, for the NLI kind,
        `NLIBackend`'s rule (bf16 where the CPU has native bf16).
    fused_attention (bool): Run a T5 encoder's self-attention through
        `scaled_dot_product_attention` (the relative position bias as its
        mask) instead of transformers' eager attention: same result, the
        scores matrix is never written out by hand.
    """

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        kind: str = "auto",
        device: str = "auto",
        prompt: Optional[str] = None,
        yes_token: Optional[str] = None,
        no_token: Optional[str] = None,
        max_batch_size: int = 32,
        max_batch_tokens: int = 16384,
        revision: Optional[str] = None,
        local_files_only: bool = False,
        dtype: str = "auto",
        fused_attention: bool = True,
    ) -> None:
        import torch

        if kind != "auto" and kind not in KINDS:
            raise ValueError(Errors.E102.format(kind=kind))
        for name, value in (("max_batch_size", max_batch_size), ("max_batch_tokens", max_batch_tokens)):
            if value < 1:
                raise ValueError(Errors.E006.format(name=name, expected="at least 1", value=value))
        if dtype not in ("auto", "float32", "bfloat16"):
            raise ValueError(Errors.E006.format(name="dtype", expected="'auto', 'float32' or 'bfloat16'", value=dtype))
        self._settings = dict(
            kind=kind, device=device, prompt=prompt, yes_token=yes_token, no_token=no_token,
            max_batch_size=max_batch_size, max_batch_tokens=max_batch_tokens, revision=revision,
            local_files_only=local_files_only, dtype=dtype, model=model, fused_attention=fused_attention,
        )
        self.fused_attention = fused_attention
        self.name = model
        self.kind = infer_kind(model, revision=revision, local_files_only=local_files_only) if kind == "auto" else kind
        self.device = resolve_device(device)
        if dtype == "auto":
            # bf16 keeps fp32's range: T5 activations overflow in fp16.
            self.dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32
        else:
            self.dtype = getattr(torch, dtype)
        self.max_batch_size = max_batch_size
        self.max_batch_tokens = max_batch_tokens
        self.n_oom_retries = 0
        self.n_forward = 0
        self._model: Any = None
        self._nli: Any = None
        self.prompt = prompt if prompt is not None else DEFAULT_PROMPTS[self.kind]
        self.before, self.after = split_prompt(self.prompt)
        if self.kind == NLI:
            from .nli import ENTAILMENT, NLIBackend

            self._nli = NLIBackend(
                model, device=device, max_batch_size=max_batch_size,
                max_batch_tokens=max_batch_tokens, revision=revision,
                local_files_only=local_files_only, dtype=dtype,
            )
            # NLIBackend's own rule decides "auto" (bf16 also on CPUs with native bf16).
            self.dtype = self._nli.dtype
            if ENTAILMENT not in self._nli.label_index:
                raise ValueError(Errors.E111.format(name=model, labels=list(self._nli.labels)))
            self.tokenizer = self._nli.tokenizer
            self._model = self._nli.model
            self.entailment_column = self._nli.label_index[ENTAILMENT]
            self.max_length: Optional[int] = self._nli.max_length
            self._check_pair_template()
        else:
            target, is_local = resolve_model(model)
            self._target = target
            self._load_kwargs: Dict[str, Any] = {"revision": revision}
            if local_files_only or is_local:
                self._load_kwargs["local_files_only"] = True
            try:
                self.tokenizer = _load_tokenizer(target, self._load_kwargs)
            except OSError as err:
                raise _missing_model_error(model, revision, err) from err
            default_yes, default_no = DEFAULT_YES_NO[self.kind]
            self.yes_id = self._single_token(yes_token if yes_token is not None else default_yes)
            self.no_id = self._single_token(no_token if no_token is not None else default_no)
            # T5's relative positions have no hard limit; causal LMs have one.
            self.max_length = None
            if self.kind == CAUSAL:
                limit = getattr(self.tokenizer, "model_max_length", 0) or 0
                self.max_length = int(limit) if 0 < limit < 10**7 else None

    def __getstate__(self) -> Dict[str, Any]:
        return dict(self._settings)

    def __setstate__(self, state: Dict[str, Any]) -> None:
        state = dict(state)
        model = state.pop("model")
        self.__init__(model, **state)  # type: ignore[misc]

    # -- tokens ---------------------------------------------------------------

    def _single_token(self, text: str) -> int:
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        if len(ids) != 1:
            raise ValueError(
                Errors.E101.format(
                    name=self.name, token=text, n=len(ids), kind=self.kind,
                    pieces=self.tokenizer.convert_ids_to_tokens(ids),
                )
            )
        return int(ids[0])

    def _check_pair_template(self) -> None:
        # The NLI template is built from `build_inputs_with_special_tokens`;
        # make sure it agrees with how the tokenizer encodes a real pair.
        a, b = "the cat sat", "a dog ran"
        expected = self.tokenizer(a, b)["input_ids"]
        template = self.template(b)
        built, _ = template.build(self.premise_ids(a))
        if list(built) != list(expected):
            raise ValueError(
                Errors.E006.format(
                    name=f"the tokenizer of {self.name}",
                    expected="one that builds pairs as prefix + premise + suffix",
                    value=type(self.tokenizer).__name__,
                )
            )

    def premise_ids(self, text: str) -> List[int]:
        """The premise's own token ids (no special tokens)."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def count_tokens(self, texts: Sequence[str]) -> List[int]:
        """How many tokens each text has on its own (no special tokens).

        texts (Sequence[str]): The texts.
        RETURNS (List[int]): One count per text.
        """
        counts: List[int] = []
        for start in range(0, len(texts), TOKENIZE_BATCH):
            batch = list(texts[start : start + TOKENIZE_BATCH])
            encoded = self.tokenizer(batch, add_special_tokens=False)["input_ids"]
            counts.extend(len(ids) for ids in encoded)
        return counts

    def unknown_fraction(self, ids: Sequence[int]) -> float:
        """Share of `ids` that are the tokenizer's unknown token."""
        unk = getattr(self.tokenizer, "unk_token_id", None)
        if unk is None or not len(ids):
            return 0.0
        return float(numpy.count_nonzero(numpy.asarray(ids) == unk)) / len(ids)

    def template(self, hypothesis: str) -> Template:
        """Prompt and special tokens around the premise for one hypothesis.

        Built as the reference code does: the text before the premise without
        its end-of-sequence token, the text after it (hypothesis filled in)
        with all special tokens.

        hypothesis (str): The claim.
        RETURNS (Template): Prefix, suffix and token-type split.
        """
        if self.kind == NLI:
            # Encode a probe premise with the claim the way the tokenizer
            # encodes pairs, and cut the probe out: what is left is the template.
            probe = self.premise_ids(_PROBE)
            encoded = self.tokenizer(_PROBE, hypothesis)
            ids = list(encoded["input_ids"])
            at = _find(ids, probe)
            types = encoded.get("token_type_ids") or [0] * len(ids)
            n_second = sum(1 for t in types[at + len(probe) :] if t == 1)
            return Template(ids[:at], ids[at + len(probe) :], n_second)
        after = self.after.replace(HYPOTHESIS, hypothesis)
        if self.kind == SEQ2SEQ:
            # T5 appends </s> to every text; the reference drops it from the part before the premise.
            prefix = self.tokenizer(self.before)["input_ids"] if self.before else []
            if prefix and prefix[-1] == self.tokenizer.eos_token_id:
                prefix = prefix[:-1]
            suffix = self.tokenizer(after)["input_ids"]
        else:
            prefix = self._bos() + (
                self.tokenizer(self.before, add_special_tokens=False)["input_ids"] if self.before else []
            )
            suffix = self.tokenizer(after, add_special_tokens=False)["input_ids"]
        return Template(list(prefix), list(suffix), 0)

    def joint_input(self, premise: str, hypothesis: str) -> Input:
        """The whole input tokenized in one go (the reference's single-chunk path).

        premise (str): The premise text.
        hypothesis (str): The claim.
        RETURNS (Tuple[List[int], int]): Token ids and the second-segment length.
        """
        if self.kind == NLI:
            return self.template(hypothesis).build(self.premise_ids(premise))
        text = self.prompt.replace(HYPOTHESIS, hypothesis).replace(PREMISE, premise)
        if self.kind == SEQ2SEQ:
            return list(self.tokenizer(text)["input_ids"]), 0
        return self._bos() + list(self.tokenizer(text, add_special_tokens=False)["input_ids"]), 0

    def _bos(self) -> List[int]:
        # Causal LMs whose tokenizer starts every text with BOS get it once, in front.
        bos = getattr(self.tokenizer, "bos_token_id", None)
        if bos is not None and bos in self.tokenizer("", add_special_tokens=True)["input_ids"]:
            return [int(bos)]
        return []

    # -- scoring --------------------------------------------------------------

    @property
    def model(self) -> Any:
        """The model, loaded on first use (the chunker needs only the tokenizer)."""
        if self._model is None:
            self._model = self._load_model()
        return self._model

    def _load_model(self) -> Any:
        from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM

        def build() -> Any:
            cls = AutoModelForSeq2SeqLM if self.kind == SEQ2SEQ else AutoModelForCausalLM
            try:
                model = cls.from_pretrained(self._target, torch_dtype=self.dtype, **self._load_kwargs)
            except (OSError, ValueError) as err:
                raise _missing_model_error(self.name, self._settings["revision"], err) from err
            model.to(self.device)
            model.eval()
            logger.info("Loaded %s (%s) on %s (%s)", self._target, self.kind, self.device, self.dtype)
            return model

        # One process-wide cache (and fork hook) with the NLI backend's models.
        key = (self._target, self.kind, str(self.device), str(self.dtype), self._settings["revision"])
        return cached(key, build)

    def score_pairs(self, pairs: Sequence[Tuple[str, str]]) -> numpy.ndarray:
        """P(entailment) of (premise, hypothesis) text pairs, each tokenized whole.

        pairs (Sequence[Tuple[str, str]]): The pairs.
        RETURNS (numpy.ndarray): float32, one probability per pair.
        """
        inputs = [self.joint_input(p, h) for p, h in pairs]
        return self.score_inputs([len(ids) for ids, _ in inputs], inputs.__getitem__)

    def score_inputs(self, lengths: Sequence[int], build: Callable[[int], Input]) -> numpy.ndarray:
        """P(entailment) of many inputs, built only when their batch runs.

        lengths (Sequence[int]): Token count of each input.
        build (Callable[[int], Tuple[List[int], int]]): Input i -> its token ids
            and second-segment length (see `Template.build`).
        RETURNS (numpy.ndarray): float32, one probability per input.
        """
        out = numpy.zeros(len(lengths), dtype=numpy.float32)
        if not len(lengths):
            return out
        longest = int(max(lengths))
        if self.max_length is not None and longest > self.max_length:
            raise ValueError(Errors.E108.format(length=longest, name=self.name, limit=self.max_length))
        return self.run_batches(lengths, lambda idx: self._forward([build(i) for i in idx]), out)

    def _pad(self, inputs: List[Input], *, left: bool) -> Tuple[Any, Any]:
        batch = pad_features(self.tokenizer, [{"input_ids": ids} for ids, _ in inputs], side="left" if left else "right")
        return batch["input_ids"].to(self.device), batch["attention_mask"].to(self.device)

    def _forward(self, inputs: List[Input]) -> numpy.ndarray:
        import torch

        self.n_forward += 1
        if self.kind == NLI:
            features = []
            for ids, n_second in inputs:
                types = [0] * (len(ids) - n_second) + [1] * n_second
                features.append({"input_ids": ids, "token_type_ids": types, "attention_mask": [1] * len(ids)})
            if "token_type_ids" not in self.tokenizer.model_input_names:
                for f in features:
                    del f["token_type_ids"]
            probs = self._nli._forward(features)
            return probs[:, self.entailment_column].astype(numpy.float32)
        model = self.model
        with torch.inference_mode():
            if self.kind == SEQ2SEQ:
                input_ids, mask = self._pad(inputs, left=False)
                start = model.config.decoder_start_token_id
                decoder_ids = torch.full((len(inputs), 1), start, dtype=torch.long, device=self.device)
                kwargs: Dict[str, Any] = dict(attention_mask=mask, decoder_input_ids=decoder_ids, use_cache=False)
                if self.fused_attention and _is_t5(model):
                    kwargs["encoder_outputs"] = (t5_encode(model, input_ids, mask),)
                else:
                    kwargs["input_ids"] = input_ids
                logits = model(**kwargs).logits[:, -1, :]
            else:
                input_ids, mask = self._pad(inputs, left=True)
                positions = (mask.cumsum(-1) - 1).clamp(min=0)
                kwargs = dict(input_ids=input_ids, attention_mask=mask, position_ids=positions, use_cache=False)
                try:
                    logits = model(**kwargs, logits_to_keep=1).logits[:, -1, :]
                except TypeError:
                    logits = model(**kwargs).logits[:, -1, :]
            pair = logits[:, [self.yes_id, self.no_id]].float()
            probs = torch.softmax(pair, dim=-1)[:, 0]
        return probs.cpu().numpy().astype(numpy.float32)


def _is_t5(model: Any) -> bool:
    encoder = getattr(model, "encoder", None)
    return (
        getattr(model.config, "model_type", "") in ("t5", "mt5")
        and encoder is not None
        and hasattr(encoder, "block")
        and hasattr(encoder.block[0].layer[0], "SelfAttention")
    )


def t5_encode(model: Any, input_ids: Any, mask: Any) -> Any:
    """A T5 encoder pass with fused attention, from the model's own modules.

    Follows transformers' `T5Stack` (RMS layer norms, relative position bias
    computed once by the first layer and shared, unscaled dot products)
    but hands each self-attention to `scaled_dot_product_attention`, with
    the position bias plus the padding mask as the additive mask.

    model (T5ForConditionalGeneration): The model (eval mode).
    input_ids (torch.Tensor): (batch, length) token ids.
    mask (torch.Tensor): (batch, length) 1 for tokens, 0 for padding.
    RETURNS (torch.Tensor): The encoder's last hidden states.
    """
    import torch
    from torch.nn.functional import scaled_dot_product_attention

    encoder = model.encoder
    hidden = encoder.embed_tokens(input_ids)
    batch, length = input_ids.shape
    first = encoder.block[0].layer[0].SelfAttention
    bias = first.compute_bias(length, length, device=hidden.device).to(hidden.dtype)
    if bool(mask.all()):
        # No padding (windows of one length): one (1, heads, T, T) bias for the whole batch.
        attn_mask = bias
    else:
        padding = (1.0 - mask[:, None, None, :].to(hidden.dtype)) * torch.finfo(hidden.dtype).min
        attn_mask = bias + padding
    for block in encoder.block:
        layer = block.layer[0]
        attention = layer.SelfAttention
        normed = layer.layer_norm(hidden)
        heads, dim = attention.n_heads, attention.key_value_proj_dim

        def split(x: Any) -> Any:
            return x.view(batch, length, heads, dim).transpose(1, 2)

        out = scaled_dot_product_attention(
            split(attention.q(normed)), split(attention.k(normed)), split(attention.v(normed)),
            attn_mask=attn_mask, scale=1.0,
        )
        hidden = hidden + attention.o(out.transpose(1, 2).reshape(batch, length, heads * dim))
        for extra in block.layer[1:]:
            hidden = extra(hidden)
    return encoder.dropout(encoder.final_layer_norm(hidden))


@registry.misc("spacy-inconsistency.EntailmentBackend.v1")
def make_entailment_backend(
    model: str = DEFAULT_MODEL,
    kind: str = "auto",
    device: str = "auto",
    prompt: Optional[str] = None,
    yes_token: Optional[str] = None,
    no_token: Optional[str] = None,
    max_batch_size: int = 32,
    max_batch_tokens: int = 16384,
    revision: Optional[str] = None,
    local_files_only: bool = False,
    dtype: str = "auto",
    fused_attention: bool = True,
) -> EntailmentBackend:
    """Create an entailment backend (see `EntailmentBackend` for the settings)."""
    return EntailmentBackend(
        model, kind=kind, device=device, prompt=prompt, yes_token=yes_token, no_token=no_token,
        max_batch_size=max_batch_size, max_batch_tokens=max_batch_tokens, revision=revision,
        local_files_only=local_files_only, dtype=dtype, fused_attention=fused_attention,
    )
