"""The event log as Unleash 8 answers it: ``eventsSchema`` (``GET /api/admin/events``) and
``featureEventsSchema`` (``GET /api/admin/events/{featureName}``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from relay.wire.common import empty


class EventOut(BaseModel):
    """``eventSchema``: one admin change. ``data`` and ``preData`` are the thing after and
    before it as the admin API shows it (a flag, a strategy, a project...)."""

    model_config = ConfigDict(title="eventSchema")

    id: int
    createdAt: datetime
    type: str
    createdBy: str
    createdByUserId: int | None = None
    environment: str | None = None
    project: str | None = None
    featureName: str | None = None
    data: Any = None
    preData: Any = None
    tags: list[Any] = empty(list)


class EventsOut(BaseModel):
    model_config = ConfigDict(title="eventsSchema")

    version: Literal[1] = 1
    events: list[EventOut]
    totalEvents: int


class FeatureEventsOut(BaseModel):
    model_config = ConfigDict(title="featureEventsSchema")

    version: Literal[1] = 1
    toggleName: str
    events: list[EventOut]
    totalEvents: int
