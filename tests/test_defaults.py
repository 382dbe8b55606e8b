"""The detector's defaults live in `spacy_inconsistency.defaults`: the components, the
candidate strategies and the command line all start from the same values."""
import inspect

import spacy

from spacy_inconsistency import cli, defaults
from spacy_inconsistency.candidates import (
    make_budget_strategy, make_embedding_strategy, make_hub_strategy, make_lexical_strategy, make_window_strategy,
)


def _defaults(fn):
    return {name: p.default for name, p in inspect.signature(fn).parameters.items()}


def _option_default(value):
    # typer.Option(...) objects keep their default in `.default`.
    return getattr(value, "default", value)


def test_components_cli_and_strategies_share_the_defaults():
    expected = {"window": defaults.WINDOW, "max_all_pairs": defaults.MAX_ALL_PAIRS,
                "aggregation": defaults.AGGREGATION, "rescore_top_k": defaults.RESCORE_TOP_K}
    for fn in (cli.build_pipeline, cli.detect_cli):
        got = {k: _option_default(v) for k, v in _defaults(fn).items() if k in expected}
        assert got == expected, fn.__name__
    for factory in ("contradiction_detector", "inconsistency_detector"):
        meta = spacy.blank("en").get_factory_meta(factory)
        assert {k: meta.default_config[k] for k in expected} == expected, factory
        assert meta.default_config["speakers"] == defaults.SPEAKERS
        assert meta.default_config["alignment"] is defaults.ALIGNMENT
    assert _defaults(make_budget_strategy) == {
        "max_pairs": defaults.MAX_ALL_PAIRS, "window": defaults.WINDOW, "k": defaults.LEXICAL_PARTNERS}
    assert _defaults(make_window_strategy) == {"window": defaults.WINDOW}
    assert _defaults(make_lexical_strategy) == {
        "k": defaults.LEXICAL_PARTNERS, "min_shared": defaults.LEXICAL_MIN_SHARED, "max_df": defaults.LEXICAL_MAX_DF}
    assert _defaults(make_embedding_strategy)["ann_min_size"] == defaults.ANN_MIN_SIZE
    assert _defaults(make_hub_strategy)["seed"] == defaults.HUB_SEED
