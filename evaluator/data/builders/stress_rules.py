"""The in-place rewrites of the stress splits: typos, a paraphrase, and a casual and a formal register.

Each rewrites inside a row's content by closed, listed rules; none adds a sentence before or after
it, and none touches what a label can depend on. Every rule here is one of:

- a **lexicon swap** (:class:`Swap`): a phrase of common words, matched case-exactly on whole
  words, becomes one of a few fixed alternatives. Lower-case entries only, apart from a few
  sentence connectors and function words written out with their capital ("Therefore, ", "It is");
  an entry may ask for what follows (``then``, e.g. a capitalised place after "is in") or what
  comes before (``after`` / ``not_after``, e.g. "try to" but not "a try to"), or for a sentence
  start. A match that overlaps a name (:func:`name_spans`: two or more capitalised words, joined by
  spaces or by small connectors such as "de", "and", "of") is left alone, so a title such as
  "Don't Look Up" keeps its words.
- a **clause order** rule: "If Y, X." ↔ "X if Y." and "X because Y." ↔ "Because Y, X." within one
  sentence, only where each clause is free of commas, semicolons, colons, quotes and brackets, and
  the clause that loses the sentence start begins with a common word (:data:`STARTERS`), which is
  lowered; a capitalised name never is.
- a **number format** rule: thousands separators ("250000" ↔ "250,000", five digits and more or
  already grouped; four-digit numbers are left alone, as they are often years), small numbers
  ("two" … "twelve" ↔ "2" … "12") only as a count before a lower-case word and after no capitalised
  one ("3 yards" ↔ "three yards", never "Apollo 13" or "2 x 4"), and dates ("March 5, 1990" ↔
  "5 March 1990"). The value never changes; a task whose numbers are its label does not get them
  (``StressPolicy.numbers`` in :mod:`evaluator.data.builders.stress`).

Voice (active ↔ passive) is not rewritten: no rule short of parsing the sentence keeps the tense,
the agreement and the meaning, so none is used.

Typos swap two different adjacent inner letters of about one word in ten (at least one) among the
words that may carry one: a word of lower-case letters only (no capital anywhere, so no name and
no sentence-initial word; no digit; no attached punctuation), not a number word
(:data:`NUMBER_WORDS`), not a word of one of the task's names (:func:`name_words`, derived from
the task's test rows), and not a word of the task's declared list (``StressPolicy.protected``). A row of code (``StressPolicy.code``) is rewritten only inside its
docstrings, by every in-place rule: its code, and so its label, is unchanged.

Every function returns the new text and the names of the rules that changed it, so a build can
count, per task and rule, the rows each rule changed (``python -m evaluator data-stress --stats``).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable, Sequence

from evaluator.data.builders.stress_lexicon import (
    CASUAL_LEXICON,
    EXPANSIONS,
    FORMAL_LEXICON,
    PARAPHRASE_LEXICON,
    Swap,
    contractions,
    word_set,
)

# --------------------------------------------------------------------------- words and names


#: a word: letters, with inner apostrophes ("don't", "Maya's"); digits are not letters here
_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*")
#: the small words that may join the capitalised words of one name ("Dar es Salaam", "Bosnia and
#: Herzegovina", "Gone with the Wind")
NAME_CONNECTORS = word_set(
    "a al am an and at aan da das de del della den der des di do dos du e el en es for from i im "
    "in la las le les los of on op the to um upon van von with y"
)
#: number words: never given a typo, wherever they stand (a count in a maths problem is the label)
NUMBER_WORDS = word_set(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety "
    "hundred thousand million billion dozen half twice double triple quarter first second third "
    "fourth fifth sixth seventh eighth ninth tenth"
)


def name_spans(text: str) -> list[tuple[int, int]]:
    """The (start, end) of every name in ``text``: two or more capitalised words, each joined to
    the next by spaces or by lower-case :data:`NAME_CONNECTORS`."""
    words = [(m.start(), m.end(), m.group(0)) for m in _WORD.finditer(text)]
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(words):
        if not words[i][2][0].isupper():
            i += 1
            continue
        caps, last, j = 1, i, i + 1
        while j < len(words):
            gap = text[words[j - 1][1] : words[j][0]]
            if gap.strip(" -"):  # punctuation between them: the name ends
                break
            word = words[j][2]
            if word[0].isupper():
                caps, last = caps + 1, j
            elif word not in NAME_CONNECTORS:
                break
            j += 1
        if caps >= 2:
            spans.append((words[i][0], words[last][1]))
        i = last + 1
    return spans


def name_words(texts: Iterable[str]) -> frozenset[str]:
    """Every word of every name (:func:`name_spans`) in ``texts``, as written: a task's list of
    words that typos never touch (its city and country names on the geography tasks, titles'
    small words on the trivia tasks)."""
    out: set[str] = set()
    for text in texts:
        for start, end in name_spans(text):
            out.update(m.group(0) for m in _WORD.finditer(text[start:end]))
    return frozenset(out)


# --------------------------------------------------------------------------- the code rows' prose

_DOCSTRING = re.compile(r"(\"\"\"|''')(.*?)(\1)", re.S)


def _segments(text: str, code: bool) -> list[tuple[str, bool]]:
    """``text`` cut into (piece, editable) pieces: one editable piece for prose; for code, the
    insides of its docstrings are editable and the rest is not."""
    if not code:
        return [(text, True)]
    out: list[tuple[str, bool]] = []
    at = 0
    for m in _DOCSTRING.finditer(text):
        out += [(text[at : m.start(2)], False), (m.group(2), True)]
        at = m.end(2)
    out.append((text[at:], False))
    return out


def _join(segments: Sequence[tuple[str, bool]]) -> str:
    return "".join(piece for piece, _ in segments)


# --------------------------------------------------------------------------- typos


def typo_candidates(word: str, protected: frozenset[str]) -> list[int]:
    """The positions j where ``word`` may get its letters j and j+1 swapped ([] when it may get
    none): inner letters (first and last stay), two different ones, in a word of lower-case letters
    only that is neither a number word nor in ``protected``."""
    if not (word.isalpha() and word.islower()) or word in NUMBER_WORDS or word in protected:
        return []
    return [j for j in range(1, len(word) - 2) if word[j] != word[j + 1]]


def typos(text: str, rng: random.Random, *, protected: frozenset[str], code: bool) -> tuple[str, list[str]]:
    """About one word in ten (at least one) among the words that may carry a typo, with two
    adjacent inner letters swapped; a row with no such word is unchanged."""
    segments = _segments(text, code)
    words = [piece.split(" ") if editable else [] for piece, editable in segments]
    candidates = [
        (s, i) for s, ws in enumerate(words) for i, w in enumerate(ws) if typo_candidates(w, protected)
    ]
    if not candidates:
        return text, []
    for s, i in sorted(rng.sample(candidates, max(1, len(candidates) // 10))):
        w = words[s][i]
        j = rng.choice(typo_candidates(w, protected))
        words[s][i] = w[:j] + w[j + 1] + w[j] + w[j + 2 :]
    out = [
        (" ".join(words[s]) if editable else piece, editable) for s, (piece, editable) in enumerate(segments)
    ]
    return _join(out), ["typos"]


#: what may come right before a sentence's first word: the text's start, a line's start, a
#: sentence's end, or a one-word label ("Solution: ")
_START = r"(?:^|(?<=\n)|(?<=[.?!] )|(?<=[.?!]\" )|(?<=[.?!]” )|(?<=: ))"


def _guards(s: Swap) -> str:
    """The regex of ``s``'s conditions on what comes before it (fixed-width lookbehinds, so a
    failed condition lets the next entry try the same place)."""
    out = _START if s.start else ""
    if s.after:
        out += "(?:" + "|".join(f"(?<=\\b{re.escape(w)} )" for w in s.after) + ")"
    out += "".join(f"(?<!\\b{re.escape(w)} )" for w in s.not_after)
    return out


class Lexicon:
    """Closed lists of :class:`Swap` entries applied in one pass (a word is rewritten at most
    once, so "is in" → "is located in" is never rewritten again), the longest phrase first where
    two start at the same place, and the first declared where two are as long."""

    def __init__(self, name: str, swaps: Sequence[Swap]):
        self.name = name
        self.swaps = sorted(swaps, key=lambda s: -len(s.phrase))  # stable: declared order on ties
        parts = []
        for i, s in enumerate(self.swaps):
            body = re.escape(s.phrase).replace("'", "['’]")
            tail = r"(?![\w'’-])" if s.phrase[-1].isalnum() else ""
            then = f"(?={s.then})" if s.then else ""
            parts.append(f"(?P<s{i}>{_guards(s)}(?<![\\w'’-]){body}{tail}{then})")
        self.pattern = re.compile("|".join(parts))

    def apply(self, text: str, rng: random.Random) -> str:
        """``text`` with every entry's matches swapped, except inside a name; an article right
        before a swapped word follows its new first letter ("a wrong" → "an incorrect")."""
        names = name_spans(text)
        out: list[str] = []
        at = 0
        for m in self.pattern.finditer(text):
            if any(a < m.end() and m.start() < b for a, b in names):
                continue  # inside a name: a title keeps its words
            s = self.swaps[int(str(m.lastgroup)[1:])]
            new = s.into[0] if len(s.into) == 1 else rng.choice(s.into)
            out.append(_article(text[at : m.start()], new))
            out.append(new)
            at = m.end()
        out.append(text[at:])
        return "".join(out)

    def words(self) -> frozenset[str]:
        """Every capitalised word this lexicon may rewrite (none is a name)."""
        return frozenset(w for s in self.swaps for w in _WORD.findall(s.phrase) if w[0].isupper())


PARAPHRASE_SYNONYMS = Lexicon("synonyms", PARAPHRASE_LEXICON)
FORMAL_WORDS = Lexicon("register_lexicon", FORMAL_LEXICON)
FORMAL_EXPANSIONS = Lexicon("expansions", EXPANSIONS)
CASUAL_WORDS = Lexicon("register_lexicon", CASUAL_LEXICON)
CASUAL_CONTRACTIONS = Lexicon("contractions", contractions())


def _article(before: str, word: str) -> str:
    """``before`` with a last word "a"/"an" (any case) made to fit ``word``'s first letter."""
    m = re.search(r"(?<![\w'’-])([Aa])(n?) $", before)
    if m is None:
        return before
    want = "n" if word[:1].lower() in "aeiou" else ""
    return before[: m.start()] + m.group(1) + want + " "


# --------------------------------------------------------------------------- clause order

#: common words that may start a clause and be lowered when it no longer starts the sentence
STARTERS = word_set(
    "A All An Both Each Every He Her His In It Its Most My On Our She Some That The Their There "
    "These They This Those We You Your"
)
_CLAUSE = r"[^,;:.?!\"“”()\[\]\n]+"
_LEAD = r"(?P<lead>(?:[A-Z][a-z]+: )?)"
_IF_FIRST = re.compile(rf"{_LEAD}If (?P<y>{_CLAUSE}), (?P<x>{_CLAUSE})(?P<end>[.?!]?)")
_BECAUSE_FIRST = re.compile(rf"{_LEAD}Because (?P<y>{_CLAUSE}), (?P<x>{_CLAUSE})(?P<end>[.?!]?)")
_BECAUSE_LAST = re.compile(rf"{_LEAD}(?P<x>{_CLAUSE}?),? because (?P<y>{_CLAUSE})(?P<end>[.?!]?)")
#: words a moved clause may not start with (they tie it to what came before)
_TIED = ("then", "and", "or", "but", "so", "because", "if", "when", "than")
#: a sentence: up to [.?!] before a space, a line end or the end (not a decimal point or "Mr.")
_SENTENCE = re.compile(r"\S[^\n]*?(?:(?<!\bMr)(?<!\bMrs)(?<!\bDr)(?<!\bSt)[.?!](?=\s|$)|$)", re.M)


def _upper_first(clause: str) -> str:
    return clause[:1].upper() + clause[1:]


def _lower_first(clause: str) -> str | None:
    """The clause with its first word lowered, or None when that word is not a common starter (a
    name keeps its capital; "I" is kept as it is) or starts a name."""
    first = clause.split(" ", 1)[0]
    if first == "I":
        return clause
    if first not in STARTERS or any(a == 0 for a, _ in name_spans(clause)):
        return None
    return first.lower() + clause[len(first) :]


def _reorder(sentence: str) -> str:
    """One sentence with its clauses swapped where a rule fits it whole, else unchanged."""
    if m := _IF_FIRST.fullmatch(sentence):
        x, y = m["x"], m["y"]
        if x.split(" ", 1)[0].lower() not in _TIED and " if " not in y:
            return f"{m['lead']}{_upper_first(x)} if {y}{m['end']}"
    elif m := _BECAUSE_FIRST.fullmatch(sentence):
        x, y = m["x"], m["y"]
        if x.split(" ", 1)[0].lower() not in _TIED:
            return f"{m['lead']}{_upper_first(x)} because {y}{m['end']}"
    elif m := _BECAUSE_LAST.fullmatch(sentence):
        x, y = m["x"], m["y"]
        lowered = _lower_first(x)
        if lowered is not None and len(x.split()) > 1 and " because " not in y:
            return f"{m['lead']}Because {y}, {lowered}{m['end']}"
    return sentence


def clause_order(text: str) -> str:
    return _SENTENCE.sub(lambda m: _reorder(m.group(0)), text)


# --------------------------------------------------------------------------- numbers and dates

MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
_DATE = re.compile(
    rf"\b(?:(?P<m1>{MONTHS}) (?P<d1>\d{{1,2}}), (?P<y1>\d{{4}})|(?P<d2>\d{{1,2}}) (?P<m2>{MONTHS}) (?P<y2>\d{{4}}))\b"
)
_NUMBER = re.compile(r"(?<![\w.,])(?:(?P<g>\d{1,3}(?:,\d{3})+)|(?P<p>\d{5,}))(?![\w]|[.,]\d)")
SMALL_NUMBERS = ("two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve")
_SMALL_WORD = re.compile(rf"(?<![\w'’-])({'|'.join(SMALL_NUMBERS)})(?![\w'’-])(?= (?!x\b)[a-z]{{2}})")
_SMALL_DIGIT = re.compile(
    r"(?<![\w.,:/$£€%#+*=<>^'’-])([2-9]|1[0-2])(?![\w%]|[.,:/]\d|-)(?= (?!x\b)[a-z]{2})"
)


def dates(text: str) -> str:
    def swap(m: re.Match[str]) -> str:
        if m["m1"]:
            return f"{m['d1']} {m['m1']} {m['y1']}"
        return f"{m['m2']} {m['d2']}, {m['y2']}"

    return _DATE.sub(swap, text)


def thousands(text: str) -> str:
    """A grouped number loses its separators, one of five digits and more gains them (one pass)."""

    def swap(m: re.Match[str]) -> str:
        return m["g"].replace(",", "") if m["g"] else f"{int(m['p']):,}"

    return _NUMBER.sub(swap, text)


def _after_name(text: str, at: int) -> bool:
    """Whether the token before ``at`` is a capitalised word that is not a common starter
    ("Apollo 13"), a number or an operator ("2 x 4")."""
    if re.search(r"(?:^|\s)(?:[x×*+/=<>-]|\d[\d.,]*)\s+$", text[:at]):
        return True
    prev = re.search(r"([^\W\d_]+)(?:['’]s)?\W*$", text[:at])
    return bool(prev and prev.group(1)[0].isupper() and prev.group(1) not in STARTERS)


def number_words(text: str) -> str:
    """Small counts as words ↔ as digits, before a lower-case word and after no capitalised one."""
    marks: list[tuple[int, int, str]] = []
    for m in _SMALL_WORD.finditer(text):
        if not _after_name(text, m.start()):
            marks.append((m.start(), m.end(), str(SMALL_NUMBERS.index(m.group(1)) + 2)))
    for m in _SMALL_DIGIT.finditer(text):
        if not _after_name(text, m.start()):
            marks.append((m.start(), m.end(), SMALL_NUMBERS[int(m.group(1)) - 2]))
    for start, end, new in sorted(marks, reverse=True):
        text = text[:start] + new + text[end:]
    return text


# --------------------------------------------------------------------------- the three rewrites

Step = tuple[str, Callable[[str, random.Random], str]]


def _run(text: str, rng: random.Random, steps: Sequence[Step], code: bool) -> tuple[str, list[str]]:
    """Each step in turn on the editable pieces of ``text``; the steps that changed it."""
    segments = _segments(text, code)
    fired: list[str] = []
    for name, step in steps:
        new = [(step(piece, rng) if editable else piece, editable) for piece, editable in segments]
        if new != segments:
            fired.append(name)
        segments = new
    return _join(segments), fired


def paraphrase(text: str, rng: random.Random, *, numbers: bool, code: bool) -> tuple[str, list[str]]:
    """Neutral synonyms, clause order, and (``numbers``) dates, thousands separators and small
    counts, in that order."""
    steps: list[Step] = [
        ("synonyms", PARAPHRASE_SYNONYMS.apply),
        ("clause_order", lambda t, _: clause_order(t)),
    ]
    if numbers:
        steps += [
            ("dates", lambda t, _: dates(t)),
            ("thousands", lambda t, _: thousands(t)),
            ("number_words", lambda t, _: number_words(t)),
        ]
    return _run(text, rng, steps, code)


def formal(text: str, rng: random.Random, *, code: bool) -> tuple[str, list[str]]:
    """Contractions expanded, then the formal lexicon."""
    return _run(
        text, rng, [("expansions", FORMAL_EXPANSIONS.apply), ("register_lexicon", FORMAL_WORDS.apply)], code
    )


def casual(text: str, rng: random.Random, *, code: bool) -> tuple[str, list[str]]:
    """The casual lexicon, then contractions formed."""
    return _run(
        text,
        rng,
        [("register_lexicon", CASUAL_WORDS.apply), ("contractions", CASUAL_CONTRACTIONS.apply)],
        code,
    )


#: every capitalised word an in-place rule may change or lower: connectors, function words,
#: clause starters; none is a name
RULE_WORDS: frozenset[str] = (
    PARAPHRASE_SYNONYMS.words()
    | FORMAL_WORDS.words()
    | FORMAL_EXPANSIONS.words()
    | CASUAL_WORDS.words()
    | CASUAL_CONTRACTIONS.words()
    | STARTERS
    | {"If", "Because"}
)
