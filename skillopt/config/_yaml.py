"""The YAML dialect of config files and ``--set`` values.

PyYAML implements YAML 1.1, whose implicit scalars are traps in a config file:

* ``split_ratio: 2:1:7`` is read as the base-60 integer 7267;
* ``simulate: off`` / ``lr_control_mode: no`` are read as booleans;
* ``longitudinal_pair_policy: 10_01`` is read as the integer 1001, ``010`` as octal 8;
* ``2026-01-02`` becomes a ``datetime.date``.

:class:`ConfigLoader` keeps PyYAML's safe loader but resolves scalars like the YAML 1.2 core
schema (only ``true``/``false`` are booleans; ints and floats are plain decimals), and refuses
duplicate keys, which PyYAML otherwise resolves silently in favour of the last one.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from skillopt.logs import redact_text

__all__ = ["ConfigLoader", "YamlSyntaxError", "parse_yaml"]

_BOOL = "tag:yaml.org,2002:bool"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_MERGE = "tag:yaml.org,2002:merge"


class YamlSyntaxError(ValueError):
    """The text is not valid YAML (message already redacted)."""


class ConfigLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` with YAML 1.2 core-schema scalars and duplicate-key detection."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        # Check the explicit keys before PyYAML flattens ``<<`` merges into the node, so a key
        # that overrides a merged anchor is not mistaken for a duplicate.
        if isinstance(node, yaml.MappingNode):
            seen: set[Any] = set()
            for key_node, _value in node.value:
                if key_node.tag == _MERGE:
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    duplicate = key in seen
                except TypeError:  # unhashable key: PyYAML reports it below
                    continue
                if duplicate:
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping",
                        node.start_mark,
                        f"found duplicate key {key!r}",
                        key_node.start_mark,
                    )
                seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def construct_decimal_int(self, node: yaml.ScalarNode) -> int:
        # YAML 1.2: a leading zero does not mean octal.
        return int(self.construct_scalar(node))


# Own copy of the resolver table (PyYAML's add_implicit_resolver would otherwise append to
# the lists shared with SafeLoader).
ConfigLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in (_BOOL, _INT, _FLOAT, _TIMESTAMP)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
ConfigLoader.add_implicit_resolver(_BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
# Ints before floats: resolvers for the same first character are tried in order.
ConfigLoader.add_implicit_resolver(_INT, re.compile(r"^[-+]?[0-9]+$"), list("-+0123456789"))
ConfigLoader.add_implicit_resolver(
    _FLOAT,
    re.compile(
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+0123456789."),
)
ConfigLoader.add_constructor(_INT, ConfigLoader.construct_decimal_int)


def parse_yaml(text: str) -> Any:
    """Parse ``text`` with :class:`ConfigLoader`.

    Raises:
        YamlSyntaxError: invalid YAML or a duplicate key. The message names the problem and
            its line and column but, unlike PyYAML's own message, never quotes the offending
            line: that line may hold a secret.
    """
    try:
        return yaml.load(text, Loader=ConfigLoader)  # ConfigLoader is a SafeLoader
    except yaml.MarkedYAMLError as exc:
        parts = []
        for what, mark in ((exc.context, exc.context_mark), (exc.problem, exc.problem_mark)):
            if what:
                where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
                parts.append(f"{what}{where}")
        raise YamlSyntaxError(redact_text("; ".join(parts) or "invalid YAML")) from None
    except yaml.YAMLError as exc:
        raise YamlSyntaxError(redact_text(str(exc))) from None
