"""Run a measurement script with the alignment features read in the clause under a reporting verb.

`unit_facts(reported_clause=True)` reads "Officials said no one was injured" as the injuries
(negated, no subject, no count) rather than as the officials saying something. This runs another
script of the project in this process with that reading everywhere the detector and the pair-score
fit take it, so both pair scores can be refitted and the detector measured with it
(docs/detection-log.md):

    python scripts/nli/reported_clause_probe.py scripts/nli/fit_pair_scorer.py --model ... --output ...
    python scripts/nli/reported_clause_probe.py scripts/evaluate_behaviour.py --split test2 ...
"""
import functools
import runpy
import sys
from pathlib import Path


def patch() -> None:
    """Make every reader of unit facts in this process read the reported clause."""
    from spacy_inconsistency import alignment, pair_scoring

    if getattr(alignment.unit_facts, "func", None) is not None:
        return  # already patched
    reading = functools.partial(alignment.unit_facts, reported_clause=True)
    alignment.unit_facts = reading  # facts_of_texts looks it up here
    pair_scoring.unit_facts = reading  # imported by name


def main(argv) -> None:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return
    script = Path(argv[0])
    if not script.is_file():
        sys.exit(f"no such script: {script}")
    patch()
    sys.argv = [str(script)] + list(argv[1:])
    sys.path.insert(0, str(script.resolve().parent))
    runpy.run_path(str(script), run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
