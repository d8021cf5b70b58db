"""The in-place rewrites of the stress splits, rule by rule on small texts: what each rule changes,
what it leaves alone (names, numbers where they are the label, the code around a docstring), and
that the same row gets the same rewrite every time."""

from __future__ import annotations

import random

import pytest

from evaluator.data.builders import stress_rules as R
from evaluator.data.builders.stress import PROSE, StressPolicy, rewrite, rewrite_traced


def rng() -> random.Random:
    return random.Random(0)


def paraphrase(text: str, *, numbers: bool = True, code: bool = False) -> tuple[str, list[str]]:
    return R.paraphrase(text, rng(), numbers=numbers, code=code)


# --------------------------------------------------------------------------- paraphrase


def test_synonyms_swap_common_words_and_leave_the_names_alone():
    out, fired = paraphrase("The city of Rio de Janeiro is in China.")
    assert out in (
        "The city of Rio de Janeiro is located in China.",
        "The city of Rio de Janeiro lies in China.",
    )
    assert fired == ["synonyms"]
    # "is in" becomes a place phrase only before a place
    assert paraphrase("The answer is in the box.")[0] == "The answer is in the box."
    assert paraphrase("The client asks if Oslo is in Norway.")[0].startswith(
        "The customer asks whether Oslo "
    )
    # a swap is made once: "is located in" is not rewritten again into something else
    assert paraphrase("Kyiv lies in Ukraine.")[0] in ("Kyiv is located in Ukraine.", "Kyiv is in Ukraine.")


def test_a_word_inside_a_title_is_never_swapped_and_an_article_follows_its_new_word():
    # "Movie" and "Which" are capitalised inside a name; the lower-case "film" outside it is swapped
    out, _ = paraphrase('Who starred in the film "Scary Movie Which Way"?')
    assert out == 'Who starred in the movie "Scary Movie Which Way"?'
    assert paraphrase("Then choose a wrong answer.")[0] == "Then select an incorrect answer."


def test_clause_order_moves_if_and_because_clauses_both_ways():
    assert paraphrase("If each pan holds 12 cupcakes, how many pans should she bake?", numbers=False)[0] == (
        "How many pans should she bake if each pan holds 12 cupcakes?"
    )
    assert paraphrase("The walls are 80 square feet because 10 x 8 = 80", numbers=False)[0] == (
        "Because 10 x 8 = 80, the walls are 80 square feet"
    )
    assert paraphrase("Because it rained, the match was called off.")[0] == (
        "The match was called off because it rained."
    )
    # a one-word label before the sentence stays in front
    assert paraphrase("Solution: He can buy six boards because 24 / 4 = 6", numbers=False)[0] == (
        "Solution: Because 24 / 4 = 6, he can buy six boards"
    )


@pytest.mark.parametrize(
    "text",
    [
        "Paris hosted it because the bid won.",  # a name is never lowered
        "The Beatles split because of money.",  # "The" starts a name
        "If it rains, then we stay.",  # the moved clause is tied to the first
        "If you answer, I get help; if you refuse, I leave.",  # a semicolon: not one simple sentence
        "If each lollipop costs $0.40, how much are ten?",  # a decimal point inside a clause
        'If she said "yes", we go.',  # quotes
    ],
)
def test_clause_order_leaves_a_sentence_it_cannot_move_safely(text):
    assert R.clause_order(text) == text


def test_numbers_change_format_never_value_and_only_where_the_task_allows():
    assert (
        R.thousands("over 250000 people and 54,462 votes in 1998")
        == "over 250,000 people and 54462 votes in 1998"
    )
    assert R.thousands("a 4-digit year 1972 and 1,000 sheep") == "a 4-digit year 1972 and 1000 sheep"
    assert (
        R.dates("born March 5, 1990 and died 7 November 2020")
        == "born 5 March 1990 and died November 7, 2020"
    )
    assert R.number_words("he lost three members and 8 years") == "he lost 3 members and eight years"
    # a number in a name, a product or a formula, or before nothing, is left alone
    for text in (
        "Apollo 13 launched",
        "Ocean's 11 is a film",
        "a 2 x 4 board",
        "the Three Musketeers",
        "ends at 5.",
    ):
        assert R.number_words(text) == text
    # a task whose numbers are its label gets none of the number rules
    text = "It costs 250000 dollars for three cars, paid March 5, 1990."
    assert paraphrase(text, numbers=False) == (text, [])
    out, fired = paraphrase(text, numbers=True)
    assert out == "It costs 250,000 dollars for 3 cars, paid 5 March 1990."
    assert fired == ["dates", "thousands", "number_words"]


# --------------------------------------------------------------------------- the registers


def test_the_casual_register_contracts_and_uses_everyday_words():
    out, fired = R.casual(
        'The agent replies: "It is in Kazakhstan." I do not need assistance regarding it.', rng(), code=False
    )
    assert out == "The agent replies: \"It's in Kazakhstan.\" I don't need help about it."
    assert fired == ["register_lexicon", "contractions"]
    # a contraction never ends a clause, and "let us know" is not "let's know"
    assert (
        R.casual("Leave it as it is. Let us know.", rng(), code=False)[0] == "Leave it as it is. Let us know."
    )


def test_the_formal_register_expands_and_uses_formal_words():
    out, fired = R.formal(
        "I'm sure it's been a while. Can you help me get the book? So he left.", rng(), code=False
    )
    assert out == "I am sure it has been a while. Can you assist me obtain the book? Therefore, he left."
    assert fired == ["expansions", "register_lexicon"]
    # "get ... wrong" is not "obtain ... wrong"; "So many" is not "Therefore, many"
    assert (
        R.formal("Get this one wrong. So many left.", rng(), code=False)[0]
        == "Get this one wrong. So many left."
    )
    # a title keeps its contraction
    assert (
        R.formal('She loved "Don\'t Look Up" a lot.', rng(), code=False)[0]
        == 'She loved "Don\'t Look Up" a lot.'
    )


def test_a_code_row_is_rewritten_inside_its_docstrings_only():
    code = 'def f(x):\n    """You are given a list. It is not empty."""\n    is_not = x is not None\n    return is_not\n'
    out, fired = R.casual(code, rng(), code=True)
    assert (
        out
        == 'def f(x):\n    """You\'re given a list. It\'s not empty."""\n    is_not = x is not None\n    return is_not\n'
    )
    assert fired == ["contractions"]
    typoed, _ = R.typos(code, random.Random(1), protected=frozenset(), code=True)
    assert typoed.split('"""')[0] == code.split('"""')[0] and typoed.split('"""')[2] == code.split('"""')[2]
    assert typoed != code


# --------------------------------------------------------------------------- typos


def test_typos_touch_only_lower_case_words_that_are_not_numbers_names_or_protected():
    text = "Brian sold seven apples in Dar es Salaam yesterday, 1200 cars, the same country"
    names = R.name_words([text])
    assert {"Dar", "es", "Salaam"} <= names
    assert R.typo_candidates("Brian", names) == []  # capitalised
    assert R.typo_candidates("seven", names) == []  # a number word
    assert R.typo_candidates("yesterday,", names) == []  # punctuation attached
    assert R.typo_candidates("same", names | {"same"}) == []  # the task's protected list
    # the inner pairs of two different letters ("pp" is no swap; the first and last letters stay)
    assert R.typo_candidates("apples", names) == [2, 3]
    for seed in range(20):
        out, fired = R.typos(text, random.Random(seed), protected=names | {"same"}, code=False)
        changed = [(a, b) for a, b in zip(text.split(" "), out.split(" "), strict=True) if a != b]
        assert fired == ["typos"] and len(changed) == 1
        assert changed[0][0] in ("sold", "apples", "country")


def test_a_row_with_no_word_that_may_carry_a_typo_keeps_its_text():
    assert R.typos("The city of Oslo is in Norway.", rng(), protected=frozenset(), code=False)[0] != (
        "The city of Oslo is in Norway."
    )  # "city" may carry one
    assert R.typos("Oslo is in Norway.", rng(), protected=frozenset(), code=False) == (
        "Oslo is in Norway.",
        [],
    )


# --------------------------------------------------------------------------- one row, one rewrite


def test_the_same_row_gets_the_same_rewrite_and_another_row_may_get_another():
    text = "The city of Kyiv is in Ukraine. The client asks if Kyiv is in Ukraine."
    runs = {rewrite(text, "paraphrase", task_id="t-v1", row_id="r1") for _ in range(3)}
    assert len(runs) == 1
    others = {rewrite(text, "paraphrase", task_id="t-v1", row_id=f"r{i}") for i in range(12)}
    assert len(others) > 1  # the alternatives are drawn per row


def test_rewrite_follows_the_task_s_policy():
    text = "About 250000 people watched three films."
    numbers_off = StressPolicy(hard_negatives=True, hard_negatives_why="", numbers=False, numbers_why="")
    assert rewrite_traced(text, "paraphrase", task_id="t", row_id="r", policy=PROSE)[0] == (
        "About 250,000 people watched 3 movies."
    )
    assert rewrite_traced(text, "paraphrase", task_id="t", row_id="r", policy=numbers_off)[0] == (
        "About 250000 people watched three movies."
    )
    assert rewrite_traced(text, "chat", task_id="t", row_id="r")[1] == []
