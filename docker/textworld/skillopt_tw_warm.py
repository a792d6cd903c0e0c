"""Imported once by the runner of a skillopt-textworld container (``--preimport``), before any
work arrives: parses the logic of TextWorld's knowledge bases (the default one and those of the
coin collector and cooking challenges), so that each game step, a process forked from the
runner, finds them in TextWorld's parse cache instead of parsing them again (~0.7 s a step).
A game whose logic is not among them still works: it is parsed in the step, as without this."""

import textworld  # noqa: F401
from textworld.challenges.tw_coin_collector import coin_collector
from textworld.challenges.tw_cooking import cooking
from textworld.generator.data import KnowledgeBase
from textworld.logic import GameLogic


def _warm():
    kbs = [
        KnowledgeBase.default(),
        KnowledgeBase.load(coin_collector.KB_PATH),
        KnowledgeBase.load(logic_path=cooking.KB_LOGIC_PATH, grammar_path=cooking.KB_GRAMMAR_PATH),
        KnowledgeBase.load(logic_path=cooking.KB_LOGIC_DROP_PATH, grammar_path=cooking.KB_GRAMMAR_PATH),
    ]
    for kb in kbs:
        GameLogic.parse(kb.logic.serialize())


_warm()
