"""The words the fake LLM server writes with: answers that read like sentences, and argument values.

Word lists by part of speech, sentence templates, and ``_answer_words``, which fills an answer of a given
length with sentences (after an optional preamble); the city and person names and the vocabulary also feed
the tool arguments of ``demo.tool_arguments``.
"""

from __future__ import annotations

import random
from collections.abc import Mapping


def _word_list(text: str) -> tuple[str, ...]:
    return tuple(text.split())


# Parts of speech for answers that read like sentences rather than word salad.
_WORDS: Mapping[str, tuple[str, ...]] = {
    "adj": _word_list(
        "recent relevant useful main key current previous detailed short simple important overall "
        "slow fast cached parallel final early late expensive cheap stable noisy"
    ),
    "noun": _word_list(
        "report summary answer agent tool step plan task request response latency cache model trace "
        "span service query search document source context memory forecast price market team project "
        "budget timeline meeting review update draft result estimate"
    ),
    "verb": _word_list(
        "shows suggests indicates returns includes covers explains compares confirms needs keeps "
        "reduces improves changes affects supports"
    ),
    "det": _word_list("the a this each every one"),
    "prep": _word_list("for from about across within after before during under over with"),
    "adv": ("First", "Next", "Then", "Finally", "Also", "However", "Overall", "Clearly", "In short"),
}
_TEMPLATES = (
    "det adj noun verb det noun prep det noun",
    "adv, det noun verb det adj noun",
    "det noun verb det adj noun prep det adj noun",
    "adv, det adj noun verb det noun",
    "det noun prep det noun verb det adj noun",
)
_VOCABULARY = tuple(word for kind in ("adj", "noun") for word in _WORDS[kind])
_CITIES = ("Paris", "Berlin", "Tokyo", "Lisbon", "Toronto", "Nairobi", "Oslo", "Seoul")
_NAMES = ("Ada Lovelace", "Alan Turing", "Grace Hopper", "Edsger Dijkstra", "Barbara Liskov")


def _answer_words(rng: random.Random, count: int, preamble: list[str]) -> list[str]:
    words = list(preamble)
    while len(words) < count:
        sentence: list[str] = []
        for slot in rng.choice(_TEMPLATES).split(" "):
            comma = slot.endswith(",")
            sentence.extend(rng.choice(_WORDS[slot.rstrip(",")]).split(" "))
            if comma:
                sentence[-1] += ","
        sentence[0] = sentence[0][0].upper() + sentence[0][1:]
        sentence[-1] += "."
        words.extend(sentence)
    words = words[:count]
    if words and words[-1][-1] not in ".,:;":
        words[-1] += "."
    return words
