"""Bodies of the admin API (admin key): projects, environments, keys, usage. Strategies are in
``relay.wire.strategies``, flags and segments in ``relay.wire.flags``."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from relay.wire.client import ConnectVia
from relay.wire.common import MAX_LIST, KeyType, Name, Strict, Text
from relay.wire.strategies import SortOrder, Strategy


class ProjectEnvironment(Strict):
    """``projectEnvironmentSchema``: body of add-environment."""

    model_config = ConfigDict(title="projectEnvironmentSchema")

    environment: Annotated[str, Field(min_length=1, max_length=100)]
    changeRequestsEnabled: StrictBool | None = None
    defaultStrategy: Strategy | None = None


Identifier = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.~-]+$")]


class CreateProject(Strict):
    model_config = ConfigDict(title="createProjectSchema")

    id: Identifier
    name: Name
    description: Annotated[str, Field(max_length=1000)] | None = None


class UpdateProject(Strict):
    """``updateProjectSchema``: a project's new name (its id stays)."""

    model_config = ConfigDict(title="updateProjectSchema")

    name: Name
    description: Annotated[str, Field(max_length=1000)] | None = None


class UpdateEnvironment(Strict):
    """``updateEnvironmentSchema``: an environment's type and order. Its name is its
    identity (client keys carry it: ``project:environment.secret``) and does not change."""

    model_config = ConfigDict(title="updateEnvironmentSchema")

    type: Annotated[str, Field(min_length=1, max_length=100)] | None = None
    sortOrder: SortOrder | None = None


class CreateEnvironment(Strict):
    model_config = ConfigDict(title="createEnvironmentSchema")

    name: Identifier
    type: Annotated[str, Field(min_length=1, max_length=100)]
    enabled: StrictBool = True
    sortOrder: SortOrder | None = None


class CreateApiKey(Strict):
    """``createApiTokenSchema``. A client key has one environment; ``projects`` defaults to all."""

    model_config = ConfigDict(title="createApiTokenSchema")

    type: KeyType
    environment: Annotated[str, Field(min_length=1, max_length=100)] | None = None
    projects: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=100)]],
        Field(min_length=1, max_length=MAX_LIST),
    ] = ["*"]
    project: Annotated[str, Field(min_length=1, max_length=100)] | None = None
    tokenName: Text | None = None


# --- responses (documented in the OpenAPI document) ---


class ApiKeyOut(BaseModel):
    """Unleash's ``apiTokenSchema``. ``secret`` is the whole key only in the answer that
    created it; listed keys show it redacted (``project:environment.****``): only hashes
    are stored. ``id`` names the key to revoke; ``seenAt`` is its last use."""

    model_config = ConfigDict(title="apiTokenSchema")

    id: str
    secret: str
    tokenName: str | None = None
    type: KeyType
    environment: str
    projects: list[str]
    project: str
    createdAt: datetime
    seenAt: datetime | None = None


class ApiKeysOut(BaseModel):
    model_config = ConfigDict(title="apiTokensSchema")

    tokens: list[ApiKeyOut]


class ProjectEnvironmentOut(BaseModel):
    environment: str
    enabled: bool
    changeRequestsEnabled: bool
    defaultStrategy: dict[str, Any] | None


class ProjectOut(BaseModel):
    model_config = ConfigDict(title="projectSchema")

    id: str
    name: str
    description: str | None
    createdAt: datetime
    environments: list[ProjectEnvironmentOut]


class ProjectListed(BaseModel):
    """A project in ``projectsSchema``: its flags counted (archived ones not)."""

    model_config = ConfigDict(title="projectListedSchema")

    id: str
    name: str
    description: str | None
    createdAt: datetime
    featureCount: int


class ProjectsOut(BaseModel):
    model_config = ConfigDict(title="projectsSchema")

    version: int = 1
    projects: list[ProjectListed]


class EnvironmentOut(BaseModel):
    model_config = ConfigDict(title="environmentSchema")

    name: str
    type: str
    enabled: bool
    sortOrder: int


class EnvironmentsOut(BaseModel):
    model_config = ConfigDict(title="environmentsSchema")

    version: int = 1
    environments: list[EnvironmentOut]


class RawMetric(BaseModel):
    featureName: str
    appName: str
    environment: str
    timestamp: datetime
    yes: int
    no: int
    variants: dict[str, int]


class FeatureMetricsRaw(BaseModel):
    model_config = ConfigDict(title="featureMetricsSchema")

    version: int = 1
    maturity: str = "stable"
    data: list[RawMetric]
    next: str | None = Field(
        None, description="URL of the next page when this one stops short of the last row"
    )


class ApplicationInstance(BaseModel):
    instanceId: str
    environment: str
    sdkVersion: str | None
    connectVia: list[ConnectVia]
    strategies: list[str]
    interval: float | None
    started: datetime | None
    firstSeen: datetime
    lastSeen: datetime


_NEXT = "URL of the next page when this one stops short of the last instance"


class ApplicationOut(BaseModel):
    model_config = ConfigDict(title="applicationSchema")

    appName: str
    instances: list[ApplicationInstance]
    next: str | None = Field(None, description=_NEXT)


class ApplicationInstances(BaseModel):
    """An application's instances within a page of ``applicationsSchema``."""

    appName: str
    instances: list[ApplicationInstance]


class ApplicationsOut(BaseModel):
    """A page of instances, grouped by application; one application's instances may go
    on in the next page."""

    model_config = ConfigDict(title="applicationsSchema")

    applications: list[ApplicationInstances]
    next: str | None = Field(None, description=_NEXT)
