"""The closed word lists of the stress splits' in-place rewrites (:mod:`evaluator.data.builders.stress_rules`
applies them): each entry a :class:`Swap` of common words into a few fixed alternatives, for the
paraphrase's synonyms, the formal register (its words and the expansion of contractions) and the
casual register (its words and the contractions). Data, not logic: what an entry may match is
decided by the rules module's :class:`~evaluator.data.builders.stress_rules.Lexicon`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


def word_set(words: str) -> frozenset[str]:
    """The whitespace-separated words of ``words``."""
    return frozenset(words.split())


# --------------------------------------------------------------------------- lexicon swaps


@dataclass(frozen=True)
class Swap:
    """One entry of a closed lexicon: ``phrase`` (case-exact, whole words; an apostrophe matches
    ' and ’) becomes one of ``into`` (the row's seeded choice where there are several). ``then``:
    a pattern the text right after it must match; ``after`` / ``not_after``: words the word
    before it must be / may not be (lower-cased); ``start``: only at a sentence's start."""

    phrase: str
    into: tuple[str, ...]
    then: str = ""
    after: tuple[str, ...] = ()
    not_after: tuple[str, ...] = ()
    start: bool = False


def _s(phrase: str, *into: str, **kw) -> Swap:
    return Swap(phrase, into, **kw)


def _capitalised(swaps: Iterable[Swap]) -> list[Swap]:
    """Each entry, and the same with its first letter capitalised (both sides): for function words
    and contractions, which may start a sentence."""
    out: list[Swap] = []
    for s in swaps:
        out.append(s)
        out.append(
            Swap(s.phrase[0].upper() + s.phrase[1:], tuple(i[0].upper() + i[1:] for i in s.into), s.then)
        )
    return out


#: a place follows (a capitalised word)
_PLACE = r" (?:the )?(?=[^\W\d_])(?![a-zß-öø-ÿ])"
_DETERMINER = r" (?:a|an|the|some|more|any|this|that|these|those|my|your|his|her|their|our)\b"
#: a word follows (a contraction never ends a clause: "as it is." stays)
_WORD_NEXT = r" [\w$£€]"
_PARTICIPLES = (
    r" (?:been|got|had|seen|read|heard|done|made|tried|found|lost|never|always|just|already|often|"
    r"ever|written|given|taken|asked|told|used|wondered)\b"
)
#: the nouns after which "what" and "which" ask the same question
_QUESTION_NOUN = (
    r" (?:year|film|movie|country|city|town|state|band|team|company|sport|university|college|album|song|"
    r"series|language|genre|position|award|instrument|nationality|profession|occupation|river|island)\b"
)
#: "child" in a compound noun stays ("child pornography", "child care")
_NOT_COMPOUND = (
    r"(?! (?:pornography|abuse|care|support|labou?r|actors?|actress|stars?|prodigy|soldiers?|custody|"
    r"protection|safety|marriage|trafficking|exploitation|development|psychology|benefit)\b)"
)
#: "about" after one of these nouns is "regarding" ("questions about X"), not "approximately"
_TOPIC_NOUNS = tuple(
    sorted(
        word_set(
            "question questions information details facts article story paragraph essay post email letter "
            "note notes report something anything more advice tips explanation poem speech joke document"
        )
    )
)
_ARTICLES = ("a", "an", "the", "one", "another", "first", "last", "good", "nice", "my", "your", "his", "her")

#: Neutral synonyms, the paraphrase's lexicon: same register, same meaning, common words only.
PARAPHRASE_LEXICON: tuple[Swap, ...] = (
    _s("is located in", "lies in", "is in", then=_PLACE),
    _s("is in", "is located in", "lies in", then=_PLACE),
    _s("lies in", "is located in", "is in", then=_PLACE),
    _s("Therefore, ", "Hence, ", "Thus, "),
    _s("Hence, ", "Therefore, "),
    _s("Thus, ", "Therefore, "),
    _s("It follows that", "This means that"),
    _s("This means that", "It follows that"),
    _s("We know that", "It is known that"),
    _s("shows", "places", then=_PLACE),
    _s("asks if", "asks whether"),
    _s("asks whether", "asks if"),
    _s("asked if", "asked whether"),
    _s("asked whether", "asked if"),
    _s("check if", "check whether"),
    _s("check whether", "check if"),
    _s("wondering if", "wondering whether"),
    _s("wondering whether", "wondering if"),
    _s("decides whether", "decides if"),
    _s("customer", "client"),
    _s("client", "customer"),
    _s("replies", "responds"),
    _s("responds", "replies"),
    _s("film", "movie"),
    _s("films", "movies"),
    _s("movie", "film"),
    _s("movies", "films"),
    _s("often", "frequently"),
    _s("frequently", "often"),
    _s("known as", "called", not_after=("better", "best", "well", "least", "most")),
    _s("someone", "somebody"),
    _s("somebody", "someone"),
    _s("anyone", "anybody"),
    _s("anybody", "anyone"),
    _s("everyone", "everybody"),
    _s("everybody", "everyone"),
    _s("no one", "nobody"),
    _s("nobody", "no one"),
    _s("wrong", "incorrect", then=r"(?! with\b)"),
    _s("incorrect", "wrong"),
    _s("choose", "select"),
    _s("select", "choose"),
    _s("collected", "gathered"),
    _s("gathered", "collected"),
    _s("explain", "describe"),
    _s("create", "make"),
    _s("instructions", "directions"),
    _s("detailed", "thorough"),
    _s("thorough", "detailed"),
    _s("step-by-step", "step by step"),
    _s("step by step", "step-by-step"),
    _s("begin", "start"),
    _s("began", "started"),
    _s("begins", "starts"),
    _s("in total", "altogether"),
    _s("altogether", "in total"),
    # a question word before one of a closed list of nouns ("What year" ↔ "Which year")
    *(
        _s(a, b, then=_QUESTION_NOUN)
        for a, b in (("What", "Which"), ("Which", "What"), ("what", "which"), ("which", "what"))
    ),
)

#: The contractions both registers use, expanded (formal) and formed (casual). Only the
#: unambiguous ones: never "'d" (had or would) and never "'s" after a name (possessive or is).
EXPANSIONS: tuple[Swap, ...] = (
    *_capitalised(
        (
            _s("don't", "do not"),
            _s("doesn't", "does not"),
            _s("didn't", "did not"),
            _s("isn't", "is not"),
            _s("aren't", "are not"),
            _s("wasn't", "was not"),
            _s("weren't", "were not"),
            _s("haven't", "have not"),
            _s("hasn't", "has not"),
            _s("hadn't", "had not"),
            _s("can't", "cannot"),
            _s("couldn't", "could not"),
            _s("won't", "will not"),
            _s("wouldn't", "would not"),
            _s("shouldn't", "should not"),
            _s("you're", "you are"),
            _s("you've", "you have"),
            _s("you'll", "you will"),
            _s("we're", "we are"),
            _s("we've", "we have"),
            _s("we'll", "we will"),
            _s("they're", "they are"),
            _s("they've", "they have"),
            _s("they'll", "they will"),
            _s("let's", "let us"),
            # "'s" after a function word is "is", or "has" before a participle
            *(
                s
                for w in ("it", "that", "what", "there", "here", "who", "where", "he", "she")
                for s in (_s(f"{w}'s", f"{w} has", then=r" (?:been|got|gotten)\b"), _s(f"{w}'s", f"{w} is"))
            ),
        )
    ),
    _s("I'm", "I am"),
    _s("I've", "I have"),
    _s("I'll", "I will"),
)


def contractions() -> tuple[Swap, ...]:
    """The casual register's contractions: each expansion of :data:`EXPANSIONS` back, where a
    word follows it (a contraction never ends a clause); "I have" only before a participle."""
    out: list[Swap] = []
    for s in EXPANSIONS:
        full, short = s.into[0], s.phrase
        if s.then or full.lower() == "let us":  # "it has" → "it's" is not formed; "let us know" stays
            continue
        if full in ("I have", "you have", "we have", "they have", "You have", "We have", "They have"):
            out.append(Swap(full, (short,), _PARTICIPLES))
        else:
            out.append(Swap(full, (short,), _WORD_NEXT))
    return tuple(out)


#: Casual to formal: the formal register's lexicon (beside the contractions, expanded).
FORMAL_LEXICON: tuple[Swap, ...] = (
    _s(
        "get",
        "obtain",
        then=_DETERMINER
        + r"(?![^.?!,;:\n]*\b(?:wrong|right|done|ready|back|rid|away|out|up|off|through|better|worse)\b)",
    ),
    _s(
        "got",
        "obtained",
        then=_DETERMINER
        + r"(?![^.?!,;:\n]*\b(?:wrong|right|done|ready|back|rid|away|out|up|off|through|better|worse)\b)",
    ),
    _s("help", "assistance", after=("any", "some", "your", "my", "for", "no", "extra", "of")),
    _s("help", "assist", then=r" (?:me|you|him|her|us|them|with|to)\b"),
    _s("about", "regarding", after=_TOPIC_NOUNS, then=r" (?!to\b)[^\W\d_]"),
    _s("about", "approximately", then=r" \$?\d"),
    _s("buy", "purchase"),
    _s("buys", "purchases"),
    _s("bought", "purchased"),
    _s("buying", "purchasing"),
    _s("need", "require", then=_DETERMINER),
    _s("needs", "requires", then=_DETERMINER),
    _s("kids", "children"),
    _s("TV", "television"),
    _s("info", "information"),
    _s("photo", "photograph"),
    _s("photos", "photographs"),
    _s("kid", "child", not_after=("i", "you", "we", "they", "just")),
    _s("mom", "mother"),
    _s("moms", "mothers"),
    _s("dad", "father"),
    _s("maybe", "perhaps"),
    _s("Maybe", "Perhaps"),
    _s("try to", "attempt to", not_after=_ARTICLES),
    _s("tries to", "attempts to", not_after=_ARTICLES),
    _s("tried to", "attempted to"),
    _s("want to", "wish to"),
    _s("wants to", "wishes to"),
    _s("wanna", "want to"),
    _s("gonna", "going to"),
    _s("gotta", "have to"),
    _s("find out", "ascertain", then=r"(?! about\b)"),
    _s("figure out", "determine"),
    _s("check that", "verify that"),
    _s("check whether", "verify whether"),
    _s("check if", "verify whether"),
    _s("tell me", "inform me"),
    _s("thanks", "thank you", then=r"(?! to\b)"),
    _s("Thanks", "Thank you", then=r"(?! to\b)"),
    _s("yeah", "yes"),
    _s("anyway", "in any case"),
    _s("dumb", "foolish"),
    _s("big", "large", then=r"(?! deal\b)"),
    _s("bigger", "larger"),
    _s("biggest", "largest"),
    _s("cheap", "inexpensive"),
    _s("cheapest", "least expensive"),
    _s("a bit", "somewhat", then=r"(?! of\b)"),
    _s("totally", "completely"),
    _s("right now", "at present"),
    _s("right away", "immediately"),
    _s("says", "states"),
    _s("say", "state", then=r"(?: that| what| whether|:)"),
    _s("said", "stated", then=r"(?: that|:)"),
    _s("asks", "enquires", then=r"(?::| whether| if)"),
    _s("asked", "enquired", then=r"(?::| whether| if)"),
    _s("replies", "responds"),
    _s("answers", "responds", then=r":"),
    _s("shows", "indicates", then=_PLACE),
    _s("is in", "is situated in", then=_PLACE),
    _s("is located in", "is situated in", then=_PLACE),
    _s("lies in", "is situated in", then=_PLACE),
    _s(
        "So ",
        "Therefore, ",
        then=r"(?!many\b|much\b|far\b|long\b|few\b|that\b|to\b|what\b|how\b|if\b|why\b)[a-z]",
        start=True,
    ),
    _s("Also, ", "Furthermore, ", start=True),
    _s("But ", "However, ", then=r"[a-z]", start=True),
)

#: Formal to casual: the casual register's lexicon (beside the contractions, formed).
CASUAL_LEXICON: tuple[Swap, ...] = (
    _s("obtain", "get"),
    _s("obtains", "gets"),
    _s("obtained", "got"),
    _s("assist", "help"),
    _s("assists", "helps"),
    _s("assisted", "helped"),
    _s("assistance", "help"),
    _s("regarding", "about"),
    _s("purchase", "buy", then=_DETERMINER),
    _s("purchased", "bought"),
    _s("purchasing", "buying"),
    _s("require", "need"),
    _s("requires", "needs"),
    _s("required", "needed"),
    _s("children", "kids", then=_NOT_COMPOUND),
    _s("child", "kid", then=_NOT_COMPOUND),
    _s("perhaps", "maybe"),
    _s("Perhaps", "Maybe"),
    _s("approximately", "about"),
    _s("Therefore, ", "So ", start=True),
    _s("Hence, ", "So ", start=True),
    _s("Thus, ", "So ", start=True),
    _s("It follows that", "So"),
    _s("However, ", "But ", start=True),
    _s("Furthermore, ", "Also, ", start=True),
    _s("Moreover, ", "Also, ", start=True),
    _s("Additionally, ", "Also, ", start=True),
    _s("numerous", "lots of", not_after=("the", "its", "his", "her", "their", "our", "my", "your")),
    _s("sufficient", "enough"),
    _s("enquire", "ask"),
    _s("inquire", "ask"),
    _s("enquires", "asks"),
    _s("inquires", "asks"),
    _s("demonstrate", "show"),
    _s("demonstrates", "shows"),
    _s("utilize", "use"),
    _s("utilise", "use"),
    _s("individuals", "people"),
    _s("receive", "get"),
    _s("receives", "gets"),
    _s("received", "got"),
    _s("wish to", "want to"),
    _s("information", "info"),
    _s("television", "TV"),
    _s("photograph", "photo"),
    _s("photographs", "photos"),
    _s("examine", "look at"),
    _s("determine", "figure out"),
    _s("determines", "figures out"),
    _s("ascertain", "find out"),
    _s("Thank you", "Thanks"),
    _s("thank you", "thanks"),
    _s("a great deal of", "a lot of"),
    _s("the majority of", "most of"),
    _s("in order to", "to"),
    _s("prior to", "before"),
    _s("completely", "totally"),
    _s("incorrect", "wrong"),
    _s("incorrectly", "wrong"),
    _s("large", "big", not_after=("at", "by")),
    _s("larger", "bigger"),
    _s("largest", "biggest"),
    _s("inexpensive", "cheap"),
    _s("difficult", "hard"),
    _s("excellent", "great"),
    _s("extremely", "really"),
    _s("states", "says", then=r"(?::| that)"),
    _s("stated", "said", then=r"(?::| that)"),
    _s("indicates", "shows"),
    _s("commence", "start"),
    _s("commences", "starts"),
    _s("commenced", "started"),
    _s("is located in", "is in", then=_PLACE),
    _s("is situated in", "is in", then=_PLACE),
    _s("lies in", "is in", then=_PLACE),
)
