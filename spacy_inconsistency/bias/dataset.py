"""The partisan-inference argument dataset (seed `partisan-inference-bias.txt`).

Everything comes from the data files in `data/`: the paper's pattern tables
13-20 (female protagonists, transcribed verbatim by
`scripts/bias/transcribe_tables.py`), the male substitutions of its Appendix G,
the German verb-last premises (not printed in the paper; filled by us), the
errata and the way each variation writes an argument out (Table 3). The code
here only combines them:

    48 table rows (2 kinds x 2 validities x 12 rows)
    x 2 protagonists (female as printed, male by substitution) = 96
    x 4 variations (default, conlast, perm, rand)               = 384 patterns

per language, the 384 "argument patterns" of the paper's Section 3. One row
of the dataset is one pattern: the paper then combines each with 9
instructions to get its 3,216 prompts per language; an NLI judge takes the
pattern as it is.
"""
import csv
import json
import re
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from ..errors import Errors

DATA_DIR = Path(__file__).resolve().parent / "data"
LANGUAGES = ("en", "de")
KINDS = ("formal", "material")
VARIATIONS = ("default", "conlast", "perm", "rand")
LEANINGS = ("left", "right")
GENDERS = ("female", "male")
PATTERNS_PER_LANGUAGE = 384
REQUIRED_FIELDS = (
    "premises", "conclusion", "kind", "valid", "leaning", "language", "variation", "pattern_id",
)


@dataclass
class Argument:
    """One argument of the dataset (one of the paper's 384 patterns per language).

    premises (List[str]): The premises as separate sentences, in the order of
        the variation (`perm` reorders them, `rand` adds the random premise).
    conclusion (str): The conclusion.
    kind (str): "formal" or "material".
    valid (bool): The gold label.
    leaning (str): "left" or "right": the side the conclusion favours.
    language (str): "en" or "de".
    variation (str): "default", "conlast", "perm" or "rand".
    pattern_id (str): Unique id of this pattern, e.g.
        "en-formal-valid-2-inf-left-female-perm".
    paper_pattern_id (str): The paper's Pattern-ID ("2-inf", "1-neg-cn-pp"...).
    table (int): The paper table the row comes from (13-20).
    table_row (int): The row in that table (1-12, as printed).
    gender (str): "female" (as printed) or "male" (Appendix G substitution).
    text (str): The argument written out as the paper's prompts show it.
    errata (List[str]): Ids of the corrections applied to this row.
    """

    premises: List[str]
    conclusion: str
    kind: str
    valid: bool
    leaning: str
    language: str
    variation: str
    pattern_id: str
    paper_pattern_id: str = ""
    table: int = 0
    table_row: int = 0
    gender: str = "female"
    text: str = ""
    errata: List[str] = field(default_factory=list)

    def to_dict(self) -> Dict[str, Any]:
        """The argument as a JSON-able dict."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Dict[str, Any], *, where: str = "") -> "Argument":
        """Read an argument back, checking the required fields.

        data (Dict[str, Any]): A dict as written by `to_dict`.
        where (str): Where it came from, for error messages.
        RETURNS (Argument): The argument.
        """
        missing = [name for name in REQUIRED_FIELDS if name not in data]
        if missing:
            raise ValueError(Errors.E166.format(where=where, missing=missing))
        premises = data["premises"]
        if (
            not isinstance(premises, list) or not premises
            or not all(isinstance(p, str) and p.strip() for p in premises)
            or not isinstance(data["conclusion"], str) or not data["conclusion"].strip()
        ):
            raise ValueError(Errors.E167.format(where=where))
        check_value("leaning", data["leaning"], LEANINGS)
        check_value("kind", data["kind"], KINDS)
        check_value("variation", data["variation"], VARIATIONS)
        if not isinstance(data["valid"], bool):
            raise ValueError(Errors.E162.format(name="valid", index=where, value=data["valid"]))
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


def check_value(name: str, value: Any, options: Sequence[str]) -> None:
    """Raise E163 unless `value` is one of `options`."""
    if value not in options:
        raise ValueError(Errors.E163.format(name=name, value=value, options=", ".join(options)))


@dataclass
class _TableRow:
    table: int
    row: int
    kind: str
    valid: bool
    paper_pattern_id: str
    leaning: str
    conclusion: str
    premises: List[str]
    errata: List[str]


@lru_cache(maxsize=None)
def language_config(lang: str) -> Dict[str, Any]:
    """The settings of one language from `data/languages.json`.

    lang (str): "en" or "de".
    RETURNS (Dict[str, Any]): Tables, substitutions and rendering strings.
    """
    check_value("language", lang, LANGUAGES)
    with (DATA_DIR / "languages.json").open(encoding="utf-8") as f:
        return json.load(f)[lang]


def _read_tsv(name: str) -> List[Dict[str, str]]:
    with (DATA_DIR / name).open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def _table_number(name: str) -> int:
    return int(re.match(r"table(\d+)_", name).group(1))  # type: ignore[union-attr]


def load_errata() -> List[Dict[str, Any]]:
    """The corrections of `data/errata.json` (see that file for the reasons)."""
    with (DATA_DIR / "errata.json").open(encoding="utf-8") as f:
        return json.load(f)["errata"]


def load_table_rows(lang: str, *, errata: bool = True) -> List[_TableRow]:
    """The 48 printed pattern rows of one language (female protagonists).

    lang (str): "en" or "de".
    errata (bool): Apply `data/errata.json`.
    RETURNS (List[_TableRow]): Rows ordered by kind, validity (valid first), row.
    """
    config = language_config(lang)
    separator = config["premise_separator"]
    rows: List[_TableRow] = []
    for kind in KINDS:
        for validity in ("valid", "invalid"):
            name = config["patterns"][kind][validity]
            for record in _read_tsv(name):
                rows.append(_TableRow(
                    table=_table_number(name), row=int(record["Row"]), kind=kind,
                    valid=validity == "valid", paper_pattern_id=record["Pattern-ID"],
                    leaning=record["Political-Leaning"], conclusion=record["Conclusion"].strip(),
                    premises=[p.strip() for p in record["Premises"].split(separator)],
                    errata=[],
                ))
    if errata:
        by_key = {(r.table, r.row): r for r in rows}
        for erratum in load_errata():
            target = by_key.get((erratum["table"], erratum["row"]))
            if target is None:
                continue  # another language's table
            if erratum["field"] == "leaning":
                current = target.leaning
                if current != erratum["printed"]:
                    raise ValueError(Errors.E165.format(id=erratum["id"], printed=erratum["printed"], found=current))
                target.leaning = erratum["corrected"]
            else:
                current = target.premises[erratum["index"]]
                if current != erratum["printed"]:
                    raise ValueError(Errors.E165.format(id=erratum["id"], printed=erratum["printed"], found=current))
                target.premises[erratum["index"]] = erratum["corrected"]
            target.errata.append(erratum["id"])
    for r in rows:
        check_value("leaning", r.leaning, LEANINGS)
    return rows


def _substitute(text: str, pairs: Sequence[Sequence[str]]) -> str:
    # Whole-word replacement, longest phrases listed first in the data file, so
    # that "keine schlechtere Politikerin" is not half-rewritten by "eine ...".
    for old, new in pairs:
        text = re.sub(r"(?<!\w)" + re.escape(old) + r"(?!\w)", new, text)
    return text


@lru_cache(maxsize=None)
def _verb_last_forms(lang: str) -> Dict[str, str]:
    name = language_config(lang)["verb_last"]
    if not name:
        return {}
    return {r["Premise"]: r["Premise-Verb-Last"] for r in _read_tsv(name)}


def _capitalize(text: str) -> str:
    return text[:1].upper() + text[1:]


def permute_premises(premises: Sequence[str]) -> List[str]:
    """The `perm` order: the premises rotated by one (two premises are swapped).

    A rotation is never the identity for two or more premises, so `perm`
    always changes the order, as in the paper (where it swaps the two premises).
    """
    items = list(premises)
    return items[1:] + items[:1] if len(items) > 1 else items


def render_argument(
    conclusion: str,
    premises: Sequence[str],
    *,
    variation: str,
    lang: str,
    clause_premises: Optional[Sequence[str]] = None,
) -> str:
    """Write an argument out as the paper's prompts do.

    `default`, `perm`, `rand`: "C, because P1, and because P2." (German:
    "weil" with the verb-last premises); `rand` puts "because the sun rises
    every day" before the last premise. `conlast`: "P1. P2. Therefore, C."

    conclusion (str): The conclusion.
    premises (Sequence[str]): The premises in the base (table) order.
    variation (str): One of VARIATIONS.
    lang (str): "en" or "de".
    clause_premises (Optional[Sequence[str]]): The premises as subordinate
        clauses (German verb-last forms), in the same order; default `premises`.
    RETURNS (str): The argument text.
    """
    check_value("variation", variation, VARIATIONS)
    render = language_config(lang)["render"]
    if variation == "conlast":
        body = ". ".join(_capitalize(p) for p in premises)
        return f"{body}{render['therefore']}{conclusion}."
    clauses = list(clause_premises if clause_premises is not None else premises)
    if variation == "perm":
        clauses = permute_premises(clauses)
    text = conclusion
    for i, clause in enumerate(clauses):
        last = i == len(clauses) - 1
        if last and variation == "rand":
            text += render["random_clause"]
        if last and (len(clauses) > 1 or variation == "rand"):
            text += render["last_premise"] + clause
        else:
            text += render["first_premise"] + clause
    return text + "."


def _variation_premises(premises: Sequence[str], variation: str, lang: str) -> List[str]:
    items = list(premises)
    if variation == "perm":
        return permute_premises(items)
    if variation == "rand":
        return items[:-1] + [language_config(lang)["render"]["random_premise"]] + items[-1:]
    return items


def generate(
    lang: str,
    *,
    errata: bool = True,
    variations: Sequence[str] = VARIATIONS,
    genders: Sequence[str] = GENDERS,
) -> List[Argument]:
    """All arguments of one language: 384 with the default settings.

    lang (str): "en" or "de".
    errata (bool): Apply the corrections of `data/errata.json` (False: the
        tables exactly as printed).
    variations (Sequence[str]): Which variations to write.
    genders (Sequence[str]): "female" (as printed) and/or "male" (substituted).
    RETURNS (List[Argument]): Ordered by kind, validity, table row, gender, variation.
    """
    config = language_config(lang)
    for v in variations:
        check_value("variation", v, VARIATIONS)
    for g in genders:
        check_value("gender", g, GENDERS)
    verb_last = _verb_last_forms(lang)
    out: List[Argument] = []
    for row in load_table_rows(lang, errata=errata):
        clauses: Optional[List[str]] = None
        if verb_last:
            missing = [p for p in row.premises if p not in verb_last]
            if missing:
                raise ValueError(Errors.E164.format(lang=lang, premise=missing[0]))
            clauses = [verb_last[p] for p in row.premises]
        for gender in genders:
            subs = config["male_substitutions"] if gender == "male" else []
            conclusion = _substitute(row.conclusion, subs)
            premises = [_substitute(p, subs) for p in row.premises]
            clause_forms = [_substitute(c, subs) for c in clauses] if clauses else None
            for variation in variations:
                validity = "valid" if row.valid else "invalid"
                out.append(Argument(
                    premises=_variation_premises(premises, variation, lang),
                    conclusion=conclusion,
                    kind=row.kind,
                    valid=row.valid,
                    leaning=row.leaning,
                    language=lang,
                    variation=variation,
                    pattern_id=f"{lang}-{row.kind}-{validity}-{row.paper_pattern_id}-{row.leaning}-{gender}-{variation}",
                    paper_pattern_id=row.paper_pattern_id,
                    table=row.table,
                    table_row=row.row,
                    gender=gender,
                    text=render_argument(
                        conclusion, premises, variation=variation, lang=lang,
                        clause_premises=clause_forms,
                    ),
                    errata=list(row.errata),
                ))
    return out


def write_jsonl(arguments: Iterable[Argument], path: Union[str, Path]) -> int:
    """Write arguments as JSON lines.

    arguments (Iterable[Argument]): The arguments.
    path (Union[str, Path]): Output file.
    RETURNS (int): Number of lines written.
    """
    n = 0
    with Path(path).open("w", encoding="utf-8") as f:
        for argument in arguments:
            f.write(json.dumps(argument.to_dict(), ensure_ascii=False) + "\n")
            n += 1
    return n


def read_jsonl(path: Union[str, Path]) -> List[Argument]:
    """Read arguments written by `write_jsonl` (or by hand with the required fields).

    path (Union[str, Path]): A JSONL file.
    RETURNS (List[Argument]): The arguments.
    """
    out = []
    with Path(path).open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(Errors.E166.format(where=f"{path}:{n}", missing=f"valid JSON ({err})")) from err
            out.append(Argument.from_dict(data, where=f"{path}:{n}"))
    return out


def premise_text(argument: Argument) -> str:
    """The premises as one text (sentences capitalised and ended with a full stop).

    argument (Argument): The argument.
    RETURNS (str): E.g. "Any Republican politician is ... . Kamala Harris is ...".
    """
    return " ".join(_sentence(p) for p in argument.premises)


def conclusion_text(argument: Argument) -> str:
    """The conclusion as one sentence."""
    return _sentence(argument.conclusion)


def _sentence(text: str) -> str:
    text = _capitalize(text.strip())
    return text if text.endswith((".", "!", "?")) else text + "."


def counts(arguments: Iterable[Argument]) -> Dict[Tuple[str, ...], int]:
    """Number of arguments per (language, kind, valid, leaning, variation)."""
    out: Dict[Tuple[str, ...], int] = {}
    for a in arguments:
        key = (a.language, a.kind, "valid" if a.valid else "invalid", a.leaning, a.variation)
        out[key] = out.get(key, 0) + 1
    return out
