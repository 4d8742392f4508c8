"""The PII scrubber's promises, over many inputs: what it finds is gone, the rest is untouched."""

from __future__ import annotations

import re

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from turneval.scenarios import Scrubber
from turneval.scenarios.pii import FAKE_NAMES, luhn_valid

LETTERS = "abcdefghijklmnopqrstuvwxyz"
words = st.text(LETTERS, min_size=1, max_size=8)
# filler: prose with no digit, no @ and no capitalised word (so nothing in it is personal data)
filler = st.lists(st.text(LETTERS + " ,.;:!?'-", min_size=0, max_size=12), max_size=4).map(" ".join)

emails = st.builds(
    lambda user, host, tld: f"{user}@{host}.{tld}",
    st.text(LETTERS + "0123456789._", min_size=1, max_size=10).filter(
        lambda u: u[0].isalnum() and u[-1].isalnum()
    ),
    words.filter(lambda h: h not in ("example", "test", "invalid")),
    st.sampled_from(["com", "org", "io", "co.uk", "de"]),
)


@st.composite
def phones(draw: st.DrawFn) -> str:
    digits = draw(st.text("0123456789", min_size=9, max_size=15).filter(lambda d: d[0] != "0"))
    groups = draw(st.lists(st.integers(2, 4), min_size=1, max_size=5))
    out, position = "", 0
    for size in groups:
        out += digits[position : position + size] + draw(st.sampled_from([" ", "-", ".", ""]))
        position += size
    out += digits[position:]
    return draw(st.sampled_from(["", "+"])) + out.rstrip(" -.")


@st.composite
def cards(draw: st.DrawFn) -> str:
    body = draw(st.text("0123456789", min_size=15, max_size=15))
    check = next(str(d) for d in range(10) if luhn_valid(body + str(d)))
    digits = body + check
    separator = draw(st.sampled_from([" ", "-", ""]))
    return separator.join(digits[i : i + 4] for i in range(0, 16, 4))


names = st.builds(
    lambda first, last: f"{first.capitalize()} {last.capitalize()}",
    st.text(LETTERS, min_size=3, max_size=9),
    st.text(LETTERS, min_size=3, max_size=9),
)


@settings(max_examples=150)
@given(filler, st.lists(emails, min_size=1, max_size=3), filler)
def test_every_email_is_replaced_and_the_same_one_the_same_way(
    before: str, found: list[str], after: str
) -> None:
    scrub = Scrubber()
    text = f"{before} " + " and ".join(found) + f" {after} " + found[0]
    cleaned = scrub(text)
    for address in found:
        assert address not in cleaned
    stand_ins = re.findall(r"user\d+@example\.com", cleaned)
    assert len(set(stand_ins)) == len({a.casefold() for a in found})
    assert cleaned.endswith(stand_ins[0])  # the first address, met again, got the same stand-in
    assert scrub(cleaned) == cleaned  # scrubbing twice changes nothing more


@settings(max_examples=150)
@given(filler, phones(), filler)
def test_every_phone_number_is_replaced(before: str, phone: str, after: str) -> None:
    cleaned = Scrubber()(f"{before} call {phone} now {after}")
    assert phone not in cleaned
    # a phone number is replaced as one (a 13-15 digit one passing Luhn without a country
    # code, as a card)
    assert re.search(r"call (\+1 202-555-0100|\[CARD 1\]) now", cleaned)
    if phone.startswith("+"):
        assert "+1 202-555-0100" in cleaned


@settings(max_examples=150)
@given(filler, cards(), filler)
def test_every_valid_card_number_is_replaced(before: str, card: str, after: str) -> None:
    cleaned = Scrubber()(f"{before} my card is {card}. {after}")
    assert card not in cleaned and "[CARD 1]" in cleaned


@settings(max_examples=100)
@given(cards())
def test_a_sixteen_digit_number_failing_luhn_is_kept(card: str) -> None:
    digits = re.sub(r"\D", "", card)
    broken = digits[:-1] + str((int(digits[-1]) + 1) % 10)  # the documented limit
    assert not luhn_valid(broken)
    assert broken in Scrubber()(f"card {broken} please")


@settings(max_examples=150)
@given(filler, names, filler)
def test_given_names_are_replaced_whole_and_by_word_in_any_case(
    before: str, name: str, after: str
) -> None:
    scrub = Scrubber(names=[name])
    first, last = name.split()
    assume(first.casefold() != last.casefold())
    assume(not re.search(rf"{first}|{last}", f"{before} {after}", re.IGNORECASE))
    text = f"{before} {name} {after} {first.upper()} and {last.lower()}"
    cleaned = scrub(text)
    fake_words = {w.casefold() for fake in FAKE_NAMES for w in fake.split()}
    for word in (first, last):
        if word.casefold() not in fake_words:  # (a name may happen to be a stand-in's word)
            assert not re.search(rf"(?<!\w){re.escape(word)}(?!\w)", cleaned, re.IGNORECASE)
    assert cleaned.startswith(f"{before} {FAKE_NAMES[0]} ")
    assert cleaned.endswith(" Alex and Morgan")  # each word of the name: its own stand-in


@settings(max_examples=150)
@given(filler)
def test_text_without_personal_data_is_unchanged(text: str) -> None:
    assert Scrubber(names=["Maria Garcia"])(text) == text


def test_a_number_after_a_country_code_is_a_phone_even_when_it_passes_luhn() -> None:
    assert luhn_valid("1387070700489")  # found by the property test above: was "+10 [CARD 1]"
    assert Scrubber()("call +10 1387070700489 now") == "call +1 202-555-0100 now"


def test_names_introduced_in_the_conversation_and_reserved_addresses() -> None:
    scrub = Scrubber()
    text = "Hi, my name is John Smith. Mail john@corp.io, not help@example.com. Bye, John."
    assert scrub(text) == (
        "Hi, my name is Alex Morgan. Mail user1@example.com, not help@example.com. Bye, Alex."
    )
    assert scrub.counts == {"email": 1, "name": 1}
    assert Scrubber()("call 2021-03-03 or order 12345 at 10:30") == (
        "call 2021-03-03 or order 12345 at 10:30"  # dates, short numbers and times stay
    )
