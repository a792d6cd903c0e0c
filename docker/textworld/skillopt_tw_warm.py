"""Imported once by the runner of a skillopt-textworld container (``--preimport``), before any
work arrives: loads TextWorld's knowledge bases (the default one and those of the coin
collector and cooking challenges) and answers TextWorld's logic parser from them, so that each
game step, a process forked from the runner, does not parse its game's logic again (~0.7 s a
step here). A game whose logic is not among them is parsed as without this module."""

import pickle
from pathlib import Path

import textworld  # noqa: F401
from textworld.challenges.tw_coin_collector import coin_collector
from textworld.challenges.tw_cooking import cooking
from textworld.generator.data import KnowledgeBase
from textworld.logic import GameLogic

#: The parsed logics, pickled at image build (``build_cache``): loading them takes ~3 ms, parsing
#: the knowledge bases again ~0.38 s of CPU in every container (measured).
_CACHE = Path(__file__).with_name("skillopt_tw_logic.pickle")


def _parsed() -> dict:
    """``{serialized logic: parsed logic}`` of the knowledge bases the challenges use."""
    kbs = [
        KnowledgeBase.default(),
        KnowledgeBase.load(coin_collector.KB_PATH),
        KnowledgeBase.load(logic_path=cooking.KB_LOGIC_PATH, grammar_path=cooking.KB_GRAMMAR_PATH),
        KnowledgeBase.load(logic_path=cooking.KB_LOGIC_DROP_PATH, grammar_path=cooking.KB_GRAMMAR_PATH),
    ]
    # A game file carries its knowledge base's logic as text (kb.logic.serialize() at
    # generation), which GameLogic.deserialize parses: the loaded logic is that parse.
    return {kb.logic.serialize(): kb.logic for kb in kbs}


def build_cache() -> None:
    """Pickle the parsed logics next to this module (the image build runs this once, as root)."""
    _CACHE.write_bytes(pickle.dumps(_parsed(), protocol=pickle.HIGHEST_PROTOCOL))


def _known() -> dict:
    try:
        with open(_CACHE, "rb") as fh:
            known = pickle.load(fh)  # written by this image's build: trusted as its code is
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError):
        return _parsed()
    return known if isinstance(known, dict) else _parsed()


def _install() -> None:
    known = _known()
    parse = GameLogic.parse

    def cached_parse(cls, document):
        logic = known.get(document)
        return logic if logic is not None else parse(document)

    GameLogic.parse = classmethod(cached_parse)


_install()
