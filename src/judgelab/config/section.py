"""What every params.yaml section is: a frozen pydantic model that forbids unknown keys, and
names the keys it renamed so that an old params.yaml fails with the new name."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError, ValidationError


class Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # old key -> its new name, kept for one release after a rename (CHANGELOG.md says which)
    renamed: ClassVar[dict[str, str]] = {}

    @model_validator(mode="wrap")
    @classmethod
    def _old_keys_name_the_new(cls, data: Any, handler: Any) -> Any:
        old = [k for k in cls.renamed if isinstance(data, dict) and k in data]
        if not old:
            return handler(data)
        errors = [
            InitErrorDetails(
                type=PydanticCustomError(
                    "renamed", "renamed to {new}: rename the key", {"new": repr(cls.renamed[k])}
                ),
                loc=(k,),
                input=data[k],
            )
            for k in old
        ]
        raise ValidationError.from_exception_data(cls.__name__, errors)
