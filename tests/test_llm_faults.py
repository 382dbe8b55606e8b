"""Fault injection: `OpenAIChatClient` and `evidence_extractor` against a local stub server that
answers 429, 500, timeouts, truncated and non-JSON 200 bodies. Every Doc gets a result or an
error record, in order; messages that quote the server never carry the API key."""
import json
import logging
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import spacy

from spacy_inconsistency.backends.llm import OpenAIChatClient, redact_secrets
from spacy_inconsistency.backends.llm_parse import MARK_DOCUMENT, MARK_SENTENCES
from spacy_inconsistency.extensions import EVIDENCE, EVIDENCE_ERROR, EVIDENCE_TRACE

KEY_ENV = "SPACY_INCONSISTENCY_FAULT_TEST_KEY"
# Not shaped like an OpenAI key, so only the client's own key redaction can find it.
KEY = "k3y-Fault-Test-0123456789"
TIMEOUT = 0.25
FAULTS = (429, 500, "timeout", "truncated", "nonjson", "short")
MESSAGES = [{"role": "user", "content": f"{MARK_DOCUMENT}\nThe sky is blue."}]


def negation_pair(sentences):
    for i, s in enumerate(sentences):
        for t in sentences[i + 1:]:
            if t.replace(" not ", " ") == s:
                return [s, t]
    return None


def judge(prompt: str) -> str:
    """A deterministic judge of the paper's prompts: a sentence contradicts itself with "not"."""
    if MARK_SENTENCES + "\n" in prompt:
        listed = json.loads(prompt.split(MARK_SENTENCES + "\n", 1)[1])
        return json.dumps({"evidence": negation_pair(listed) or []})
    document = prompt.split(MARK_DOCUMENT + "\n", 1)[1]
    pair = negation_pair(re.split(r"(?<=\.)\s+", document.strip()))
    return json.dumps({"judgement": "yes" if pair else "no", "evidence": pair or []})


class FaultServer:
    """A chat-completions server; `policy(n, prompt)` picks each answer: "ok" or one of `FAULTS`.

    n is the 1-based number of the request. Error bodies echo the request's
    headers and query, as some servers and proxies do.
    """

    def __init__(self, policy):
        self.policy = policy
        self.requests = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def send(self, status, payload, length=None, content_type="application/json"):
                self.send_response(status)
                if status == 429:
                    self.send_header("Retry-After", "0")
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload) if length is None else length))
                self.end_headers()
                self.wfile.write(payload)

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                prompt = body["messages"][-1]["content"]
                with server.lock:
                    server.requests.append(prompt)
                    fault = server.policy(len(server.requests), prompt)
                answer = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant",
                                                                          "content": judge(prompt)}}]}).encode()
                echo = json.dumps({"error": {"message": f"fault {fault}", "authorization": self.headers["Authorization"],
                                             "path": self.path, "headers": dict(self.headers)}}).encode()
                try:
                    if fault == "ok":
                        self.send(200, answer)
                    elif fault == "timeout":
                        time.sleep(TIMEOUT * 2.5)
                        self.send(200, answer)
                    elif fault == "truncated":
                        self.send(200, answer[: len(answer) // 2])
                    elif fault == "nonjson":
                        self.send(200, b"<html><body>502 Bad Gateway</body></html>", content_type="text/html")
                    elif fault == "short":
                        # Content-Length promises more than is sent; the connection then closes.
                        self.send(200, answer[:20], length=len(answer))
                    else:
                        self.send(int(fault), echo)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def fault_server(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    servers = []

    def start(policy):
        servers.append(FaultServer(policy))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def client_settings(s, **kwargs):
    settings = dict(base_url=s.url, api_key_env=KEY_ENV, timeout=TIMEOUT, max_retries=2, backoff=0.01,
                    max_backoff=0.02, max_concurrency=1)
    settings.update(kwargs)
    return settings


def script(steps):
    """A policy that answers the requests in turn with `steps`, then "ok"."""
    return lambda n, prompt: steps[n - 1] if n <= len(steps) else "ok"


def assert_no_key(text):
    assert KEY not in text and "Bearer" not in text


@pytest.mark.parametrize("fault", FAULTS)
def test_each_fault_is_retried_then_answered(fault_server, fault):
    s = fault_server(script([fault]))
    client = OpenAIChatClient("m", **client_settings(s))
    assert client.chat(MESSAGES) == [judge(MESSAGES[0]["content"])]
    assert client.n_retries == 1 and len(s.requests) == 2


@pytest.mark.parametrize("fault", ["truncated", "nonjson", 500])
def test_permanent_fault_gives_up_with_redacted_e120(fault_server, fault, caplog):
    s = fault_server(lambda n, prompt: fault)
    client = OpenAIChatClient("m", **client_settings(s))
    with caplog.at_level(logging.INFO, logger="spacy_inconsistency.llm"):
        with pytest.raises(RuntimeError, match=r"\[E120\].*3 time") as info:
            client.chat(MESSAGES)
    assert len(s.requests) == 3
    assert_no_key(str(info.value))
    assert caplog.records and all(KEY not in r.getMessage() for r in caplog.records)
    if fault != 500:
        assert "E122" in str(info.value)


def test_e121_redacts_the_echoed_key(fault_server):
    s = fault_server(lambda n, prompt: 401)
    client = OpenAIChatClient("m", **client_settings(s, base_url=s.url + "?api_key=" + KEY))
    with pytest.raises(RuntimeError, match=r"\[E121\].*HTTP 401") as info:
        client.chat(MESSAGES)
    message = str(info.value)
    assert_no_key(message)
    assert "[REDACTED]" in message and "Authorization" in message
    assert len(s.requests) == 1


@pytest.mark.parametrize(
    "text,secrets",
    [
        ('{"headers": {"Authorization": "Bearer abc.def-123"}}', ()),
        ("{'authorization': 'Basic dXNlcjpwYXNz'}", ()),
        ("Authorization: Bearer abc.def-123\r\nHost: x", ()),
        ("GET /v1/chat?api_key=abc.def-123&x=1", ()),
        ('{"x-api-key": "abc.def-123"}', ()),
        ("token was sk-proj-abcdefABCDEF0123456789", ()),
        ("invalid key abc.def-123 given", ("abc.def-123",)),
    ],
)
def test_redact_secrets(text, secrets):
    out = redact_secrets(text, secrets)
    assert "abc.def-123" not in out and "dXNlcjpwYXNz" not in out and "sk-proj" not in out
    assert "[REDACTED]" in out


def test_redact_secrets_keeps_ordinary_text():
    text = 'HTTP 500: {"error": "overloaded", "max_tokens": 512}'
    assert redact_secrets(text, ["", None, "ab"]) == text


def pipeline(s, strategy="rnr_cf", **client_kwargs):
    nlp = spacy.blank("en")
    nlp.add_pipe("evidence_extractor", config={
        "strategy": strategy,
        "client": {"@misc": "spacy-inconsistency.OpenAIChatClient.v1", "model": "m",
                   **client_settings(s, **client_kwargs)},
    })
    return nlp


def texts(n):
    """Doc k contradicts itself when k is even."""
    return [f"Doc {k} begins here. The door {k} is open. The road is wet."
            + (f" The door {k} is not open." if k % 2 == 0 else "") for k in range(n)]


def assert_result_or_error(doc):
    error = getattr(doc._, EVIDENCE_ERROR)
    trace = doc.user_data[EVIDENCE_TRACE]
    if error is None:
        assert isinstance(doc._.has_inconsistency, bool) and isinstance(getattr(doc._, EVIDENCE), list)
        assert trace["error"] is None
    else:
        assert doc._.has_inconsistency is None and getattr(doc._, EVIDENCE) is None
        assert trace["error"] == error and trace["stop_reason"] == "error"
        assert error["component"] == "evidence_extractor" and error["code"] == "E120"
        assert error["step"] in ("judge", "direct") and error["type"] == "RuntimeError"
        assert_no_key(error["message"])
    return error


def test_pipe_one_in_three_failing_permanently_keeps_all_docs_in_order(fault_server):
    """The issue's acceptance case: 10 Docs, one in three fails on every request."""
    failing = {2: 500, 5: "truncated", 8: "nonjson"}

    def policy(n, prompt):
        k = int(re.search(r"Doc (\d+) begins", prompt).group(1)) if "Doc " in prompt else -1
        return failing.get(k, "ok")

    s = fault_server(policy)
    nlp = pipeline(s, max_concurrency=4)
    inputs = texts(10)
    with pytest.warns(UserWarning, match=r"W200.*3 of 10"):
        docs = list(nlp.pipe(inputs))
    assert [d.text for d in docs] == inputs
    for k, doc in enumerate(docs):
        error = assert_result_or_error(doc)
        if k in failing:
            assert error is not None and error["n_calls"] == 0
        else:
            assert error is None
            assert doc._.has_inconsistency is (k % 2 == 0)
            expected = [f"The door {k} is open.", f"The door {k} is not open."] if k % 2 == 0 else []
            assert [e["quote"] for e in getattr(doc._, EVIDENCE)] == expected


def test_pipe_faults_in_turns_every_doc_has_result_or_error(fault_server):
    """429/500/timeout/truncated/non-JSON/short answers in turns; 3 attempts per call."""
    turns = ["ok", 429, "ok", 500, "timeout", "ok", "truncated", "nonjson", "short", "ok", "timeout", 500, 429]
    s = fault_server(lambda n, prompt: turns[(n - 1) % len(turns)])
    nlp = pipeline(s, strategy="direct")
    inputs = texts(10)
    t0 = time.perf_counter()
    with pytest.warns(UserWarning, match="W200"):
        docs = list(nlp.pipe(inputs, batch_size=4))
    assert time.perf_counter() - t0 < 10
    assert [d.text for d in docs] == inputs
    errors = [assert_result_or_error(d) is not None for d in docs]
    # Requests 1-13 serve Docs 0-5 (1, 2, 3, 3, 1, 3 requests); the turns repeat from Doc 6.
    assert errors == [False, False, False, True, False, True, False, False, False, True]
    assert len(s.requests) == 13 + 9


def test_call_on_one_failing_doc_records_the_error(fault_server):
    s = fault_server(lambda n, prompt: 500)
    nlp = pipeline(s, max_retries=0)
    with pytest.warns(UserWarning, match="W200"):
        doc = nlp("The door is open. The door is not open.")
    error = getattr(doc._, EVIDENCE_ERROR)
    assert error["code"] == "E120" and error["client"] == "m"
    assert_no_key(json.dumps(doc.user_data[EVIDENCE_TRACE]))
