"""Qual-O-Mat (German Wahl-O-Mat data since 2002): parties' justifications as statements.

Each election directory (`<year>/<region>/`) holds `overview.json`,
`party.json`, `statement.json`, `opinion.json` (party x statement ->
answer and comment) and `comment.json`. A party's comments across elections
are "one actor's statements" for cross-source contradiction search.
"""
import json
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Union

from ..errors import Errors

ANSWERS = {0: "agree", 1: "disagree", 2: "neutral"}


def _read(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def iter_qualomat_comments(
    root: Union[str, Path], *, party: Optional[str] = None
) -> Iterator[Dict[str, Any]]:
    """A record per party comment, election by election (sorted by date, then slug).

    root (Union[str, Path]): The `qualomat/` directory.
    party (Optional[str]): Short party name as in `party.json` (e.g. "SPD");
        None yields every party.
    YIELDS (Dict[str, Any]): `text` (quotes stripped), `party`, `election`
        (slug), `date`, `thesis` (the Wahl-O-Mat statement), `answer`
        ("agree", "disagree", "neutral").
    """
    root = Path(root)
    overviews = sorted(root.glob("*/*/overview.json"))
    if not overviews:
        raise FileNotFoundError(Errors.E006.format(name="root", expected="a Qual-O-Mat directory with */*/overview.json", value=str(root)))
    elections = []
    for overview_path in overviews:
        overview = _read(overview_path)
        elections.append((overview.get("date", ""), overview.get("slug", overview_path.parent.name), overview_path.parent))
    for date, slug, folder in sorted(elections):
        if not (folder / "comment.json").exists():
            continue
        parties = {p["id"]: p["name"] for p in _read(folder / "party.json")}
        theses = {s["id"]: s["text"] for s in _read(folder / "statement.json")}
        comments = {c["id"]: c["text"] for c in _read(folder / "comment.json")}
        for opinion in _read(folder / "opinion.json"):
            name = parties.get(opinion["party"])
            if party is not None and name != party:
                continue
            text = comments.get(opinion.get("comment"))
            if not text:
                continue
            text = text.strip().strip('"').strip()
            if not text:
                continue
            yield {
                "text": text,
                "party": name,
                "election": slug,
                "date": date,
                "thesis": theses.get(opinion["statement"], ""),
                "answer": ANSWERS.get(opinion.get("answer"), str(opinion.get("answer"))),
            }


def load_qualomat_comments(root: Union[str, Path], *, party: Optional[str] = None) -> List[Dict[str, Any]]:
    """All records of `iter_qualomat_comments` as a list."""
    return list(iter_qualomat_comments(root, party=party))
