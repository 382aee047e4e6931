"""The Unleash Proxy's bodies (``/proxy``): a ``POST`` carries a context, as the Frontend
API's does, and may name the toggles it wants (the Proxy's ``lookupTogglesSchema``),
``MAX_TOGGLES`` at most."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from relay.wire.common import MAX_NAME, empty
from relay.wire.frontend import FrontendContext

MAX_TOGGLES = 1000
"""Toggles one ``POST`` may name: each is one evaluation, so the work of a request is
bounded by what its answer lists."""


class LookupToggles(BaseModel):
    """``POST /proxy`` and ``/proxy/all``: a context, and the toggles to evaluate (none:
    those the path gives, enabled ones or all)."""

    model_config = ConfigDict(title="lookupTogglesSchema")

    context: FrontendContext = Field(default_factory=FrontendContext)
    toggles: Annotated[
        list[Annotated[str, Field(max_length=MAX_NAME)]], Field(max_length=MAX_TOGGLES)
    ] = empty(list)
