"""A record with some of its values replaced: what ``model_copy(update=...)`` makes, for less. Pure.

The normalize step replaces values on the common path (a vLLM spec line takes its engine, a v0 line
the interval it closes, the live state's sticky series keep earlier fields), so a copy is made per
record there. Pydantic's :meth:`~pydantic.BaseModel.model_copy` is general (extra fields, private
attributes, deep copies) and costs several calls; a record has neither extra fields (``extra="forbid"``)
nor private attributes, so its copy is its values with the update over them, and the update's names
added to the fields set, as :meth:`~pydantic.BaseModel.model_copy` does. A model that has either
is copied by pydantic.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel

from acceptmon.parse.records import Shared

M = TypeVar("M", bound=BaseModel)

_new = object.__new__
_set = object.__setattr__


def amended(model: M, update: Mapping[str, Any]) -> M:
    """``model.model_copy(update=update)``, no validation (the values already have their types)."""
    if model.__pydantic_extra__ is not None or model.__pydantic_private__ is not None:
        return model.model_copy(update=update)
    fields = model.__pydantic_fields_set__
    if type(fields) is not Shared or not update.keys() <= fields:
        fields = fields | update.keys()  # else already every field: the shared set, which refuses changes, as it is
    copy = _new(type(model))
    _set(copy, "__dict__", {**model.__dict__, **update})
    _set(copy, "__pydantic_extra__", None)
    _set(copy, "__pydantic_fields_set__", fields)
    _set(copy, "__pydantic_private__", None)
    return copy
