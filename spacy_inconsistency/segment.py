"""`inconsistency_segmenter`: statement units without a trained model.

Units are sentences, dialogue turns (``NAME: text``, the speaker kept as the
span label), list items and lines. The rules look only at punctuation, line
breaks and letter case, so they work for any language spaCy can tokenize.
"""
import re
from typing import Dict, Iterable, Iterator, List, Optional, Set, Tuple

import numpy
from spacy.attrs import SENT_START
from spacy.language import Language
from spacy.tokens import Doc, Span, SpanGroup, Token
from spacy.util import registry

from .errors import Errors
from .extensions import UNITS_KEY

TERMINALS = frozenset(".!?…。！？؟।॥።‼⁇⁈⁉")
CLOSERS = frozenset("\"'”’»)]}」』›")
# Lower-case name particles allowed inside a speaker name ("Ursula von der Leyen").
NAME_PARTICLES = frozenset(
    "van von der den de del della di da du la le bin al ibn y e".split()
)
SPEAKER_RE = re.compile(
    r"[ \t]*(?P<speaker>[^\W\d_][\w'’.\-]*(?:[ \t]+[\w'’.\-]+){0,3})[ \t]*:[ \t]+(?=\S)"
)
BULLET_RE = re.compile(
    r"[ \t]*(?:[-*•‣◦▪–—+]|\(?\d{1,3}[.)]|\(?[a-z][.)]|\([ivx]{1,4}\))[ \t]+(?=\S)"
)
MAX_SPEAKER_CHARS = 40
SOFT_BREAKS = frozenset(",;:—–")
# Invisible control and format characters (Unicode Cc and Cf, whitespace and the
# visible prepended marks such as U+0600 left out): NUL, bidi marks and
# embeddings (U+200E, U+200F, U+202A-U+202E, U+2066-U+2069), zero-width
# characters, BOM. The tokenizer keeps them inside a token ("2015.\u200fThe"),
# so a full stop followed by one would not end a unit.
CONTROLS = (
    "\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f\xad\u061c\u180e\u200b-\u200f\u202a-\u202e"
    "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000e0001\U000e0020-\U000e007f"
)
CONTROL_RE = re.compile(f"[{CONTROLS}]+")

# A full stop after one of these (tokenized apart from it, "No" + ".") does not end a
# unit. Titles hold before a capitalised name ("Gen. Lee", "Prof. Weber").
TITLES = frozenset(
    "Mr Mrs Ms Mx Dr Prof St Ste Mt Ft Gen Col Lt Sgt Capt Cmdr Cdr Adm Maj Cpl Pvt Sen Rep Gov "
    "Pres Supt Insp Det Rev Hon Msgr Fr Hr Frl Br Sr Jr Dipl Ing Mag".split()
)
# ... and these before a number ("No. 20", "Fig. 3", "p. 12", "Jan. 5", "Nr. 7", "Abb. 2").
BEFORE_NUMBER = frozenset(
    "No Nos no nos Nr Nrn nr Fig Figs fig figs Abb p pp S Art Artt Sec Sect sec Vol Vols vol Ch Chap "
    "ch Tab Tbl tab Bd Ref Eq Eqs eq Op Kap Para Par Pt Ex Exh Hwy Rte Rt Apt Bldg Rm Tel Ph Ziff Abs "
    "Jan Feb Febr Mar Apr Jun Jul Aug Sep Sept Oct Nov Dec Okt Dez Mär".split()
)
# ... and these whatever follows ("Smith vs. Jones", "approx. 20", "vgl. Abb. 3").
ALWAYS = frozenset("vs vgl bzw approx ca cf viz incl resp sog ggf evtl".split())
# Tokens that keep their full stop ("etc.", "usw.") end a unit before a capitalised word.
CLOSING_ABBREVIATIONS = frozenset("etc. usw. usf. etc".split())
# After a 1-3 digit ordinal token ("3.", German and other languages), these start a new
# unit; anything else ("3. Oktober", "19. Jahrhundert", "2. Liga") continues it.
SENTENCE_STARTERS = frozenset(
    "the a an this that these those he she it they we i you there his her its their our "
    "but and so then however in on at after before later today yesterday when while "
    "der die das ein eine er sie es wir ich ihr man dann danach doch aber und am im in "
    "auch so heute gestern als nach vor".split()
)


def _is_speaker(name: str) -> bool:
    if len(name) > MAX_SPEAKER_CHARS:
        return False
    for i, word in enumerate(name.split()):
        first = word[0]
        if first.islower() and not (i > 0 and word in NAME_PARTICLES):
            return False
    return True


def _is_terminal(text: str) -> bool:
    return bool(text) and all(ch in TERMINALS for ch in text)


def _is_control(text: str) -> bool:
    return CONTROL_RE.fullmatch(text) is not None


def _visible(text: str) -> str:
    """The text without leading control or format characters."""
    match = CONTROL_RE.match(text)
    return text[match.end() :] if match else text


# A full stop (and closing quotes or brackets) followed by control characters.
STOP_CONTROL_RE = re.compile(
    f"([{re.escape(''.join(sorted(TERMINALS)))}]+)([{re.escape(''.join(sorted(CLOSERS)))}]*)([{CONTROLS}]+)"
)


def split_stop_controls(doc: Doc, text: Optional[str] = None) -> int:
    """Split tokens where control characters follow a full stop, in place.

    "2015.\\x00Zully" is one token (the tokenizer does not split at a control
    character); it becomes "2015", ".", "\\x00", "Zully", so that the segmenter
    ends a unit there as it would at a space. An abbreviation with inner
    stops keeps its last one ("U.S.", "\\x00", "Army"). The text is unchanged;
    in a parsed Doc the new tokens attach to the first one.

    doc (Doc): The Doc.
    text (Optional[str]): `doc.text`, where the caller has it already.
    RETURNS (int): The number of tokens split.
    """
    if text is None:
        text = doc.text
    if CONTROL_RE.search(text) is None:
        return 0
    starts = doc.to_array("IDX").astype(numpy.int64)
    cuts: Dict[int, Set[int]] = {}
    for match in STOP_CONTROL_RE.finditer(text):
        for pos in (match.start(1), match.end(1), match.end(2), match.end(3)):
            token = doc[max(int(numpy.searchsorted(starts, pos, side="right")) - 1, 0)]
            if not token.idx < pos < token.idx + len(token):
                continue
            if pos == match.start(1) and "." in text[token.idx : pos]:
                continue
            cuts.setdefault(token.i, set()).add(pos - token.idx)
    if not cuts:
        return 0
    parsed = doc.has_annotation("DEP")
    with doc.retokenize() as retokenizer:
        for i, offsets in sorted(cuts.items()):
            token = doc[i]
            bounds = [0, *sorted(offsets), len(token)]
            pieces = [token.text[a:b] for a, b in zip(bounds, bounds[1:])]
            first = token.head if token.head.i != token.i else (token, 0)
            heads = [first] + [(token, 0)] * (len(pieces) - 1)
            attrs = {"DEP": [token.dep_] + ["dep"] * (len(pieces) - 1)} if parsed else {}
            retokenizer.split(token, pieces, heads=heads, attrs=attrs)
    return len(cuts)


def _continues_after_stop(doc: Doc, i: int, nxt: Token) -> bool:
    """Whether the full stop at token i belongs to an abbreviation before `nxt`."""
    if doc[i].text != "." or i == 0:
        return False
    prev = doc[i - 1]
    if prev.whitespace_:
        return False
    word = prev.text
    first = _visible(nxt.text)[:1]
    starts_upper = first.isupper()
    if word.lower() in ALWAYS:
        return True
    if word in BEFORE_NUMBER and first.isdigit():
        return True
    if word in TITLES and starts_upper:
        return True
    # An initial: "George W. Bush", "J. R. R. Tolkien".
    return len(word) == 1 and word.isalpha() and word.isupper() and starts_upper


def _token_ends_unit(token: Token, nxt: Token) -> bool:
    """Whether a token that carries its own full stop ends a unit before `nxt`."""
    text = token.text
    if len(text) < 2 or text[-1] != "." or not _visible(nxt.text)[:1].isupper():
        return False
    if text in CLOSING_ABBREVIATIONS:
        return True
    digits = text[:-1]
    if digits.isdigit():
        # "1989. Danach" ends a sentence; "3. Oktober" is an ordinal date.
        return len(digits) >= 4 or nxt.text.lower() in SENTENCE_STARTERS
    return False


class Segmenter:
    """Split a Doc into statement units.

    name (str): The component name.
    dialogue (bool): Read lines of the form ``NAME: text`` as dialogue turns.
    min_turns (int): Dialogue turns are read only when at least this many
        lines of the Doc look like turns, so that a lone "Note: ..." line
        stays ordinary text.
    list_items (bool): Read bullet and numbered lines as list items.
    split_lines (bool): Treat every hard line break as a unit boundary.
    max_unit_tokens (int): Units longer than this many tokens are cut into
        consecutive pieces (at a comma or similar where possible, else at
        the limit), so that no unit is too long for a pair model. Nothing is
        dropped. 0 turns this off.
    units_key (str): The `doc.spans` key to write.
    """

    def __init__(
        self,
        name: str = "inconsistency_segmenter",
        *,
        dialogue: bool = True,
        min_turns: int = 2,
        list_items: bool = True,
        split_lines: bool = True,
        max_unit_tokens: int = 128,
        units_key: str = UNITS_KEY,
    ) -> None:
        if max_unit_tokens < 0:
            raise ValueError(
                Errors.E006.format(
                    name="max_unit_tokens", expected="0 or more", value=max_unit_tokens
                )
            )
        self.name = name
        self.dialogue = dialogue
        self.min_turns = min_turns
        self.list_items = list_items
        self.split_lines = split_lines
        self.max_unit_tokens = max_unit_tokens
        self.units_key = units_key

    def __call__(self, doc: Doc) -> Doc:
        units, sent_starts = self.segment(doc)
        doc.spans[self.units_key] = SpanGroup(doc, name=self.units_key, spans=units)
        # A parsed Doc refuses new sentence starts; its parse keeps its own.
        if len(doc) and not doc.has_annotation("DEP"):
            # One array write: `token.is_sent_start = ...` rescans the Doc each time.
            values = numpy.full((len(doc), 1), -1, dtype=numpy.int64)
            values[[0, *sent_starts], 0] = 1
            doc.from_array([SENT_START], values.view(numpy.uint64))
        return doc

    def pipe(self, stream: Iterable[Doc], *, batch_size: int = 128) -> Iterator[Doc]:
        for doc in stream:
            yield self(doc)

    def segment(self, doc: Doc) -> Tuple[List[Span], List[int]]:
        """Find the units of a Doc.

        Tokens where control characters follow a full stop are split first
        (see `split_stop_controls`), so the Doc's tokens may change; its text
        does not. The work is linear in the length of the Doc.

        doc (Doc): The Doc.
        RETURNS (Tuple[List[Span], List[int]]): The unit spans (speaker as
            label) and the token indices where sentences start.
        """
        # `Doc.text` joins every token anew: read it once, not once per line.
        # Splitting tokens leaves the text as it is.
        text = doc.text
        split_stop_controls(doc, text)
        lines = self._lines(doc)
        use_turns = False
        if self.dialogue:
            n_turns = sum(1 for start, end in lines if self._speaker_prefix(doc, text, start, end))
            use_turns = n_turns >= self.min_turns
        units: List[Span] = []
        sent_starts: List[int] = []
        speaker = ""
        for start, end in lines:
            content_start = start
            prefix = self._speaker_prefix(doc, text, start, end) if use_turns else None
            if prefix is not None:
                speaker, content_start = prefix
            else:
                if start > 0 and _blank_line_before(doc, start):
                    speaker = ""
                if self.list_items:
                    content_start = self._bullet_end(doc, text, start, end)
            if content_start >= end:
                continue
            first = True
            for s, e in self._sentences(doc, content_start, end):
                for ps, pe in self._pieces(doc, s, e):
                    units.append(Span(doc, ps, pe, label=speaker if use_turns else ""))
                    sent_starts.append(start if first else ps)
                    first = False
        if not self.split_lines:
            units, sent_starts = self._merge_lines(doc, units, sent_starts)
        return units, sent_starts

    def _lines(self, doc: Doc) -> List[Tuple[int, int]]:
        """Token ranges of the non-empty lines, whitespace tokens excluded."""
        lines = []
        start: Optional[int] = None
        end = 0
        for token in doc:
            if token.is_space:
                if "\n" in token.text and start is not None:
                    lines.append((start, end))
                    start = None
                continue
            if start is None:
                start = token.i
            end = token.i + 1
        if start is not None:
            lines.append((start, end))
        return lines

    def _speaker_prefix(self, doc: Doc, text: str, start: int, end: int) -> Optional[Tuple[str, int]]:
        line = doc[start:end]
        match = SPEAKER_RE.match(text, line.start_char, line.end_char)
        if match is None or not _is_speaker(match.group("speaker")):
            return None
        content = doc.char_span(match.end(), line.end_char, alignment_mode="expand")
        if content is None or content.start <= start:
            return None
        return match.group("speaker"), content.start

    def _bullet_end(self, doc: Doc, text: str, start: int, end: int) -> int:
        line = doc[start:end]
        match = BULLET_RE.match(text, line.start_char, line.end_char)
        if match is None:
            return start
        content = doc.char_span(match.end(), line.end_char, alignment_mode="expand")
        if content is None or content.start <= start:
            return start
        return content.start

    def _sentences(self, doc: Doc, start: int, end: int) -> Iterator[Tuple[int, int]]:
        s = start
        i = start
        while i < end:
            token = doc[i]
            if _is_terminal(token.text):
                j = i + 1
                # Closing quotes, more stops and invisible controls stay with the unit.
                while j < end and (
                    doc[j].text in CLOSERS or _is_terminal(doc[j].text) or _is_control(doc[j].text)
                ):
                    j += 1
                if (
                    j < end
                    and not _visible(doc[j].text)[:1].islower()
                    and not _continues_after_stop(doc, i, doc[j])
                ):
                    yield s, j
                    s = j
                i = j
                continue
            if i + 1 < end and _token_ends_unit(token, doc[i + 1]):
                yield s, i + 1
                s = i + 1
            i += 1
        if s < end:
            yield s, end

    def _pieces(self, doc: Doc, start: int, end: int) -> Iterator[Tuple[int, int]]:
        limit = self.max_unit_tokens
        while limit and end - start > limit:
            cut = start + limit
            for k in range(start + limit - 1, start + limit // 2, -1):
                if doc[k].text in SOFT_BREAKS:
                    cut = k + 1
                    break
            yield start, cut
            start = cut
        yield start, end

    def _merge_lines(
        self, doc: Doc, units: List[Span], sent_starts: List[int]
    ) -> Tuple[List[Span], List[int]]:
        """Join units across single line breaks when lines are not boundaries."""
        merged: List[Span] = []
        starts: List[int] = []
        for unit, sent_start in zip(units, sent_starts):
            if merged:
                last = merged[-1]
                between = doc[last.end : unit.start]
                joinable = (
                    between
                    and all(t.is_space for t in between)
                    and "\n\n" not in between.text.replace(" ", "")
                    and not _is_terminal(last[-1].text)
                    and unit.label_ == last.label_
                    and (not self.max_unit_tokens or unit.end - last.start <= self.max_unit_tokens)
                )
                if joinable:
                    merged[-1] = Span(doc, last.start, unit.end, label=last.label_)
                    continue
            merged.append(unit)
            starts.append(sent_start)
        return merged, starts


def _blank_line_before(doc: Doc, start: int) -> bool:
    i = start - 1
    newlines = 0
    while i >= 0 and doc[i].is_space:
        newlines += doc[i].text.count("\n")
        i -= 1
    return newlines >= 2


@Language.factory(
    "inconsistency_segmenter",
    assigns=["token.is_sent_start", "doc.spans"],
    default_config={
        "dialogue": True,
        "min_turns": 2,
        "list_items": True,
        "split_lines": True,
        "max_unit_tokens": 128,
        "units_key": UNITS_KEY,
    },
)
def make_segmenter(
    nlp: Language,
    name: str,
    dialogue: bool,
    min_turns: int,
    list_items: bool,
    split_lines: bool,
    max_unit_tokens: int,
    units_key: str,
) -> Segmenter:
    """Create an `inconsistency_segmenter` (see `Segmenter` for the settings)."""
    return Segmenter(
        name,
        dialogue=dialogue,
        min_turns=min_turns,
        list_items=list_items,
        split_lines=split_lines,
        max_unit_tokens=max_unit_tokens,
        units_key=units_key,
    )


@registry.misc("spacy-inconsistency.Segmenter.v1")
def make_segmenter_settings(
    dialogue: bool = True,
    min_turns: int = 2,
    list_items: bool = True,
    split_lines: bool = True,
    max_unit_tokens: int = 128,
    units_key: str = UNITS_KEY,
) -> Segmenter:
    """A `Segmenter` for components that segment by themselves (`inconsistency_detector`)."""
    return Segmenter(
        dialogue=dialogue,
        min_turns=min_turns,
        list_items=list_items,
        split_lines=split_lines,
        max_unit_tokens=max_unit_tokens,
        units_key=units_key,
    )
