import numpy
import pytest
import spacy

from spacy_inconsistency.alignment import FEATURE_NAMES, facts_of_texts, load_parser, pair_features
from spacy_inconsistency.pair_scoring import unit_alignment

TEXTS = {
    "never": "The mayor has never visited the plant.",
    "mayor": "The mayor toured the plant on Monday.",
    "governor": "The governor toured the plant on Monday.",
    "employed": "The hospital employed 200 nurses in March 2016.",
    "about": "The hospital employed about 210 nurses.",
    "later": "By 2019, the hospital employed 350 nurses.",
    "hedge": "Reyes believes the lab may close in May.",
    "pronoun": "She won the race in 2004.",
    "second": "A second chick, from another pair, hatched on Friday.",
}


@pytest.fixture(scope="module")
def facts():
    return dict(zip(TEXTS, facts_of_texts(list(TEXTS.values()))))


def features(a, b):
    return dict(zip(FEATURE_NAMES, pair_features(a, b).tolist()))


def test_unit_facts(facts):
    assert facts["never"].negated and not facts["mayor"].negated
    assert facts["never"].subject == {"mayor"} and facts["governor"].subject == {"governor"}
    assert facts["never"].tense == "past"  # present perfect reports the past
    assert facts["mayor"].weekdays == {"monday"}
    assert facts["employed"].years == {2016} and facts["employed"].months == {"march"}
    assert facts["employed"].numbers == ((200.0, "nurse", False),)
    assert facts["about"].numbers == ((210.0, "nurse", True),)
    assert facts["later"].time_shift >= 1 and facts["employed"].time_shift == 0
    # "may" is a modal verb here, but the month in "in May".
    assert facts["hedge"].modal and facts["hedge"].months == {"may"}
    assert facts["pronoun"].subject_pronoun and not facts["pronoun"].subject
    assert facts["second"].other_entity == 2


def test_pair_features_are_symmetric(facts):
    names = list(TEXTS)
    for a in names:
        for b in names:
            numpy.testing.assert_array_equal(pair_features(facts[a], facts[b]), pair_features(facts[b], facts[a]))


def test_same_and_different_subject(facts):
    same = features(facts["never"], facts["mayor"])
    other = features(facts["never"], facts["governor"])
    assert same["subject_same"] == 1.0 and same["subject_different"] == 0.0
    assert other["subject_same"] == 0.0 and other["subject_different"] == 1.0
    assert same["negation_mismatch"] == 1.0 and other["negation_mismatch"] == 1.0
    assert features(facts["pronoun"], facts["mayor"])["subject_unknown"] == 1.0


def test_numbers_dates_and_time(facts):
    changed = features(facts["employed"], facts["later"])
    assert changed["number_conflict"] == 1.0
    assert changed["year_conflict"] == 1.0
    assert changed["time_shift_any"] == 1.0
    # "about 210" is compatible with 200; the same numbers do not conflict.
    assert features(facts["employed"], facts["about"])["number_conflict"] == 0.0
    assert features(facts["employed"], facts["employed"])["number_conflict"] == 0.0
    assert features(facts["employed"], facts["employed"])["number_shared"] == 1.0


def test_overlap_bounds(facts):
    f = features(facts["mayor"], facts["mayor"])
    assert f["overlap"] == 1.0 and f["jaccard"] == 1.0
    f = features(facts["mayor"], facts["hedge"])
    assert f["overlap"] == 0.0 and f["modal_any"] == 1.0


def test_unit_alignment_reads_a_parsed_doc_or_parses():
    text = "The mayor has never visited the plant. The governor toured the plant."
    parsed = load_parser()(text)
    from_parse = unit_alignment(list(parsed.sents))
    blank = spacy.blank("en")(text)
    units = [blank[0:8], blank[8:]]
    from_text = unit_alignment(units)
    assert [f.subject for f in from_parse] == [f.subject for f in from_text] == [{"mayor"}, {"governor"}]
    assert unit_alignment([spacy.blank("de")("Der Bürgermeister kam.")[:]]) is None
    assert unit_alignment([]) == []


def test_second_round_features():
    texts = [
        "The main shaft of the mine descends 1,200 metres.",
        "The mine's ventilation shaft is just 800 metres deep.",
        "All of the samples were contaminated.",
        "Most samples were clean, according to the lab.",
        "The bridge was open on Monday.",
        "The bridge remained closed on Monday.",
    ]
    f = facts_of_texts(texts)
    shafts = features(f[0], f[1])
    assert shafts["subject_same"] == 1.0 and shafts["subject_modifier_conflict"] == 1.0
    samples = features(f[2], f[3])
    # "All of the samples": the subject is the noun after "of".
    assert f[2].subject == f[3].subject == {"sample"}
    assert samples["quantifier_mismatch"] == 1.0 and samples["attribution_any"] == 1.0
    assert samples["subject_modifier_conflict"] == 0.0
    bridge = features(f[4], f[5])
    assert bridge["antonym"] == 1.0 and bridge["subject_same"] == 1.0
    assert features(f[4], f[4])["antonym"] == 0.0


def test_pronoun_subjects_take_a_recent_explicit_subject():
    from spacy_inconsistency.alignment import resolve_pronoun_subjects

    texts = ["Senator Ruth Calloway did not vote on the bill.", "The debate lasted hours.",
             "She voted against it.", "It ended late.", "They left.", "We stayed.", "He agreed."]
    resolved = resolve_pronoun_subjects(facts_of_texts(texts))
    # "She" skips "the debate" (not a person) for the senator; "It" takes the debate.
    assert resolved[2].subject == {"ruth", "calloway", "senator"}
    assert resolved[3].subject == {"debate"}
    # "They" takes the nearest explicit subject within 3 units; a resolved pronoun lends nothing.
    assert resolved[4].subject == {"debate"}
    assert resolved[6].subject == frozenset()  # no explicit subject in the 3 units before
    assert features(resolved[0], resolved[2])["subject_same"] == 1.0


def test_unit_alignment_of_paired_units_only_matches_reading_all():
    import numpy

    text = ("Senator Ruth Calloway did not vote on the bill. The debate lasted hours. "
            "The weather was cold. She voted against it. The mayor toured the plant.")
    doc = spacy.blank("en")(text)
    units = [doc[s.start:s.end] for s in load_parser()(text).sents]
    units = [doc.char_span(u.start_char, u.end_char) for u in units]
    assert len(units) == 5
    every = unit_alignment(units)
    # Pairs without a pronoun subject: only their units are read.
    some = unit_alignment(units, numpy.array([[2, 4]]))
    assert [f is None for f in some] == [True, True, False, True, False]
    assert some[2] == every[2] and some[4] == every[4]
    # "She" (unit 3) takes its subject from unit 0, which is in no pair but is read as a lender.
    some = unit_alignment(units, numpy.array([[3, 4]]))
    assert some[3] == every[3] and some[4] == every[4]
    assert some[3].subject == {"ruth", "calloway", "senator"}


def test_a_reported_clause_is_the_event_when_asked():
    from spacy_inconsistency.alignment import unit_facts

    texts = [
        "Officials said no one was injured in the storm.",
        "Two people were seriously injured when a tree fell on their car.",
        "Lenka Dorsey told reporters that she had resigned.",
        "The company denied that any workers were laid off.",
        "The mayor said on Monday that the bridge would open in June.",
        "The bridge will open in December.",
    ]
    docs = list(load_parser().pipe(texts))
    f = [unit_facts(d, reported_clause=True) for d in docs]
    # The injuries are the event: negated by "no one", which is neither a subject nor a count.
    assert f[0].negated and f[0].subject == frozenset() and f[0].numbers == () and f[0].attribution
    storm = features(f[0], f[1])
    assert storm["subject_different"] == 0.0 and storm["negation_mismatch"] == 1.0
    assert storm["number_conflict"] == 0.0
    # "she" in the reported clause is the person who reports.
    assert f[2].subject == {"lenka", "dorsey"} and not f[2].subject_pronoun
    # A denial changes what its clause claims: the denier stays the subject.
    assert f[3].subject == {"company"}
    bridge = features(f[4], f[5])
    assert f[4].subject == {"bridge"} and bridge["subject_same"] == 1.0 and bridge["month_day_conflict"] == 1.0
    # The default reads the main clause: the officials said something, "one" is a count.
    plain = [unit_facts(d) for d in docs]
    assert plain[0].subject == {"official"} and not plain[0].negated and plain[0].numbers == ((1.0, "", False),)
    assert features(plain[0], plain[1])["subject_different"] == 1.0
    assert plain[4].subject == {"mayor"}


def test_a_change_of_state_and_another_one_of_a_noun():
    texts = [
        "Until 2019, the museum was closed to visitors.",
        "After the storm, the museum was closed to visitors.",
        "The museum is no longer closed.",
        "The museum is longer than the library.",
        "A contractor sprayed the cooperative's apple orchards in July.",
        "A contractor sprayed the Brenner estate's apple orchards in July.",
        "The cooperative's orchards were not sprayed in July.",
    ]
    f = facts_of_texts(texts)
    # "until" and "no longer" say that a state changed; "after" anchors one event; "longer than" compares.
    assert [x.time_change for x in f[:4]] == [1, 0, 1, 0]
    assert f[1].time_shift >= 1  # the wider marker list still reads "after"
    assert features(f[0], f[1])["time_change_any"] == 1.0 and features(f[1], f[3])["time_change_any"] == 0.0
    assert ("orchard", "poss", frozenset({"cooperative"})) in f[4].noun_modifiers
    assert features(f[4], f[5])["noun_modifier_conflict"] == 1.0  # two owners' orchards
    assert features(f[4], f[6])["noun_modifier_conflict"] == 0.0  # the same owner's
    assert features(f[4], f[4])["noun_modifier_conflict"] == 0.0
    numpy.testing.assert_array_equal(pair_features(f[4], f[5]), pair_features(f[5], f[4]))


def test_who_a_unit_attributes_its_statement_to():
    texts = [
        '"This is a big disappointment for us," said Misbah.',
        '"It was great to see him step up," said captain Alastair Cook, who made 105.',
        "According to Misbah, the team played well.",
        "He said the bridge was closed.",
        "Officials said no one was injured.",
        "Two people were seriously injured, police said.",
        "The bridge is closed.",
    ]
    f = facts_of_texts(texts)
    assert [sorted(x.sources) for x in f] == [
        ["misbah"], ["alastair", "cook"], ["misbah"], [], ["official"], ["police"], []]
    assert features(f[0], f[1])["source_different"] == 1.0 and features(f[0], f[1])["source_same"] == 0.0
    assert features(f[0], f[2])["source_same"] == 1.0 and features(f[0], f[2])["source_different"] == 0.0
    assert features(f[4], f[5])["source_different"] == 1.0
    # A pronoun or no source at all says nothing either way.
    for a, b in ((f[3], f[4]), (f[4], f[6])):
        assert features(a, b)["source_same"] == 0.0 and features(a, b)["source_different"] == 0.0
    numpy.testing.assert_array_equal(pair_features(f[0], f[1]), pair_features(f[1], f[0]))


def test_facts_round_trip_through_the_ray_units_table_json():
    """The Ray engine stores each unit's facts as JSON: sets inside tuples (the noun modifiers)
    come back as sets, and a table written before a field existed reads it as its default."""
    import json

    from spacy_inconsistency.ray_across import facts_from_json, facts_to_json

    f = facts_of_texts(["A contractor sprayed the cooperative's 40 apple orchards until 2019, Misbah said."])[0]
    assert f.noun_modifiers and f.numbers and f.time_change and f.sources
    assert facts_from_json(facts_to_json(f)) == f
    older = json.loads(facts_to_json(f))
    del older["time_change"], older["noun_modifiers"], older["sources"]
    read = facts_from_json(json.dumps(older))
    assert read.time_change == 0 and read.noun_modifiers == () and read.sources == frozenset()
    assert read.numbers == f.numbers
