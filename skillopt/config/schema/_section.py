"""The base every config section is built on (:class:`_Section`): pydantic coerces and checks
the fields, the section checks the rules between them, and every error is worded as our
message naming the key. Also the helper a section uses for a group of keys inside it
(``tracking.mlflow``: :func:`_subsection`)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar, Self

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError, model_validator

from skillopt.config._fields import FieldError
from skillopt.config._keys import unknown_key_message
from skillopt.errors import ConfigError
from skillopt.validation import problems, show


class _Section(BaseModel):
    """Base of the sections: pydantic coerces every field to its type and checks its declared
    bounds and choices, then :meth:`_validate` checks the rules between fields. Keyword-only and
    frozen: a changed section is a new one (:meth:`replace`)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False, use_attribute_docstrings=True)

    SECTION: ClassVar[str] = ""
    #: Enum field → {alternative spelling: canonical value} (also listed in error messages).
    ALIASES: ClassVar[Mapping[str, Mapping[str, str]]] = MappingProxyType({})

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise _field_error(type(self), exc) from None

    @model_validator(mode="after")
    def _checked(self) -> _Section:
        self._validate()
        return self

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The field names of this section, in declaration order."""
        return tuple(cls.model_fields)

    @classmethod
    def required_keys(cls) -> tuple[str, ...]:
        """Fields without a default (only ``env.name``)."""
        return tuple(name for name, f in cls.model_fields.items() if f.is_required())

    @classmethod
    def field_type(cls, name: str) -> Any:
        return cls.model_fields[name].annotation

    def replace(self, **changes: Any) -> Self:
        """A new section with ``changes`` over this one's values, built and checked like any
        other (unlike ``model_copy(update=...)``, which checks nothing).

        Raises:
            FieldError: a changed value is invalid.
        """
        return type(self)(**{**{name: getattr(self, name) for name in type(self).model_fields}, **changes})

    def _key(self, name: str) -> str:
        return f"{self.SECTION}.{name}"

    def _validate(self) -> None:
        """The rules between fields (and within a value) that no field type declares; raise
        :class:`FieldError` naming the key."""

    def _non_empty(self, name: str) -> None:
        if not getattr(self, name).strip():
            raise FieldError(self._key(name), "must not be empty")

    def to_dict(self) -> dict[str, Any]:
        """Plain data: enums as their values, tuples as lists, a group of keys as a mapping."""
        return {name: _plain(getattr(self, name)) for name in type(self).model_fields}


def _hints(model: type[BaseModel]) -> dict[str, Any]:
    """Field name → annotation with its declared metadata (bounds, choices' wording)."""
    return {name: f.rebuild_annotation() for name, f in model.model_fields.items()}


def _field_error(cls: type[_Section], exc: ValidationError) -> FieldError:
    """The first problem pydantic found, as our message."""
    key, problem = problems(exc, prefix=cls.SECTION, hints=_hints(cls), aliases=cls.ALIASES)[0]
    return FieldError(key, problem)


def _plain(value: Any) -> Any:
    """``value`` as plain data (JSON's types), recursively."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, _Section):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


def _subsection(cls: type[_Section]) -> Any:
    """The before-validator of a group of keys inside a section (``tracking.mlflow``): a mapping
    is built into ``cls`` (its keys checked and its errors named in full, e.g.
    ``tracking.mlflow.enabled``); null is the defaults."""

    def build(raw: Any) -> Any:
        if raw is None:
            return cls()
        if isinstance(raw, cls):
            return raw
        if not isinstance(raw, Mapping):
            raise FieldError(
                cls.SECTION,
                f"expected a mapping of keys ({', '.join(cls.field_names())}), got {show(raw, cls.SECTION)}",
            )
        for name in raw:
            if name not in cls.field_names():
                raise ConfigError(unknown_key_message(f"{cls.SECTION}.{name}", str(name), cls.field_names()))
        return cls(**raw)

    return BeforeValidator(build)
