"""The contradiction detector's defaults, in one place.

Read by the components (`contradiction_detector`, `inconsistency_detector`),
the candidate strategies and the command line, so that a default changed here
changes everywhere. No imports: every layer may read this module.
"""
# Units compared with each unit beyond the pair budget (the ones after it in the text).
WINDOW = 4
# Pair budget per Doc: all unit pairs up to this many, beyond it window and shared-word partners.
MAX_ALL_PAIRS = 2000
# Partners by shared rare words per unit beyond the pair budget.
LEXICAL_PARTNERS = 10
# How the two directions combine: the learned pair score (see `pair_score.py`).
AGGREGATION = "learned"
# In a transcript, compare one speaker's units only ("same") or all ("all").
SPEAKERS = "same"
# The learned score reads alignment evidence.
ALIGNMENT = True
# Pairs per Doc the second stage (the cascade's rescorer) reads again.
RESCORE_TOP_K = 8
# In a long Doc the second stage can read more: its top max(RESCORE_TOP_K, ceil(share x compared pairs))
# pairs, at most RESCORE_MAX_K (so Docs of up to 64 pairs keep 8). Opt-in: with 0.125 the suite's
# long-distance matched AUC rises 0.806 -> 0.846 over its 1,750 records (the gold pair of 18% of those
# documents went unread), but consistent real documents' highest pairs rise too: ContraDoc ROC-AUC
# 0.832 -> 0.782, 1 of 40 news articles flagged instead of 0, 0.81x the speed (docs/detection.md). With
# the three-highest document score (DOC_SCORE_TOP_K) it gains +0.002 over the 1,750 records, and ContraDoc
# falls 0.843 -> 0.806.
RESCORE_TOP_SHARE = 0.0
RESCORE_MAX_K = 32
# A Doc's `inconsistency_score`: 1 - prod(1 - s) over its DOC_SCORE_TOP_K highest pair scores (the
# chance that one of them is a contradiction, were they independent); 1 gives the highest pair score.
# When a Doc and an edited copy share their highest pair, the highest alone ties them whatever the
# edit did; the next pairs tell them apart: the suite's matched AUC over its 950 test records 0.885 ->
# 0.898 (paired +0.005 to +0.022), ContraDoc 0.832 -> 0.843, pooled AUC 0.783 -> 0.781 (docs/detection.md).
DOC_SCORE_TOP_K = 3
# Further pairs per Doc the second stage reads: those about the same thing (the highest tf-idf
# cosine of their content words) among the ones the first model did not rank into its top pairs.
# With 4: ContraDoc ROC-AUC 0.729 -> 0.791, the suite's second test split matched AUC 0.759 ->
# 0.778, the first 0.842 -> 0.840; recall and false alarms unchanged (docs/detection.md).
RESCORE_SIMILAR_K = 4
# The second stage's document threshold: False, the rule fitted as if it read every compared pair;
# True, the rule fitted on what this cascade reads (`calibrate_cascade.py`, dev false alarms
# capped out of fold): test split recall 0.37 -> 0.43 for false alarms 0.10 -> 0.13, second test
# split 0.16 -> 0.17 for 0.03 -> 0.04 (docs/detection.md).
CASCADE_THRESHOLD = False
# Directions the first model scores each pair in when a second stage follows. 1 (text order
# only) is 1.4x faster but ranks fewer of ContraDoc's contradictions into the second stage's
# pairs (ROC-AUC 0.643 against 0.698; docs/speed.md).
FIRST_STAGE_DIRECTIONS = 2
# With a second stage and both directions, the first model reads the reverse order only of each
# Doc's pairs its text-order reading ranks this high (never fewer than RESCORE_TOP_K); None: of
# every pair. The reverse order rarely lifts a pair from further down into the second stage's top 8
# (docs/speed.md).
REVERSE_TOP_K = 32
# The second stage likewise reads its pairs in text order and the reverse order of the ones that
# reading ranks this high (and of any it would flag); None: both orders of all of them.
RESCORE_REVERSE_TOP_K = 4
# Threshold of the fixed rules (min / mean / max) when none is given.
RULE_THRESHOLD = 0.5
# Lexical overlap: fewest shared content words for a pair, and the largest share of
# units a word may occur in (more common words pair everything).
LEXICAL_MIN_SHARED = 1
LEXICAL_MAX_DF = 0.05
# Embedding neighbours: exact search below this many units, a faiss HNSW index from there on.
ANN_MIN_SIZE = 20_000
# Seed of the random probe partners of `contradiction_hubs`.
HUB_SEED = 0
