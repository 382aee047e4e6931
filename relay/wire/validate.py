"""``/edge/validate``: which of a list of keys are valid (a relay asks its upstream)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from relay.wire.common import MAX_LIST, KeyType, Strict


class ValidateKeys(Strict):
    model_config = ConfigDict(title="tokenStringListSchema", extra="ignore")

    tokens: Annotated[list[Annotated[str, Field(max_length=1024)]], Field(max_length=MAX_LIST)]


class ValidatedKey(BaseModel):
    token: str
    type: KeyType
    projects: list[str]
    environment: str


class ValidatedKeys(BaseModel):
    model_config = ConfigDict(title="validatedEdgeTokensSchema")

    tokens: list[ValidatedKey]
