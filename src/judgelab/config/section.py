"""What every params.yaml section is: a frozen pydantic model that forbids unknown keys, and
names the keys it renamed or removed so that an old params.yaml fails saying what became of
them."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError, ValidationError


class Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # old key -> its new name, kept for one release after a rename (CHANGELOG.md says which)
    renamed: ClassVar[dict[str, str]] = {}
    # old key -> what replaced it, for a key that is gone (the message says where to look)
    removed: ClassVar[dict[str, str]] = {}

    @model_validator(mode="wrap")
    @classmethod
    def _old_keys_name_the_new(cls, data: Any, handler: Any) -> Any:
        if not isinstance(data, dict):
            return handler(data)
        errors = [
            InitErrorDetails(
                type=PydanticCustomError(
                    "renamed", "renamed to {new}: rename the key", {"new": repr(cls.renamed[k])}
                ),
                loc=(k,),
                input=data[k],
            )
            for k in cls.renamed
            if k in data
        ] + [
            InitErrorDetails(
                type=PydanticCustomError(
                    "removed", "removed; {instead}: delete the key", {"instead": cls.removed[k]}
                ),
                loc=(k,),
                input=data[k],
            )
            for k in cls.removed
            if k in data
        ]
        if not errors:
            return handler(data)
        raise ValidationError.from_exception_data(cls.__name__, errors)
