"""OFREP's bodies (the OpenFeature Remote Evaluation Protocol, open-feature/protocol's
``service/openapi.yaml``): the evaluation request and its context, parsed once; and the
answers, which ``relay.core.ofrep`` renders as bytes and these models document.

The context is the Frontend API's (``FrontendContext``: the fields Unleash names, any other
field a property, values strings, numbers or booleans, bounded) with OFREP's
``targetingKey``. A structure (an object or a list) is no value a constraint can read: it is
refused, naming the attribute, rather than ignored. ``appName`` names the application the
evaluations are counted for, so it is bounded as names are (``MAX_NAME``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from relay.wire.common import MAX_NAME, MAX_NAME_BYTES, ErrorBody
from relay.wire.frontend import FrontendContext, Value

Reason = Literal["STATIC", "TARGETING_MATCH", "SPLIT", "DISABLED", "DEFAULT"]
FailureCode = Literal["PARSE_ERROR", "TARGETING_KEY_MISSING", "INVALID_CONTEXT", "GENERAL"]
ErrorCode = Literal[FailureCode, "FLAG_NOT_FOUND"]


class OfrepContext(FrontendContext):
    """OFREP's evaluation context: ``targetingKey`` and the Frontend API's context."""

    model_config = ConfigDict(title="ofrepContext", extra="allow")

    targetingKey: Value | None = Field(
        None, description="Who is evaluated: the userId, unless the context names one"
    )

    @model_validator(mode="after")
    def _app_is_a_name(self) -> OfrepContext:
        app = self.appName
        if isinstance(app, str) and (len(app) > MAX_NAME or len(app.encode()) > MAX_NAME_BYTES):
            raise ValueError(
                f"appName names the application counted: at most {MAX_NAME} characters"
                f" ({MAX_NAME_BYTES} bytes in UTF-8)"
            )
        return self


class EvaluationRequest(BaseModel):
    """The body of both evaluations. Without ``context`` (what the Python provider sends
    when the application gives none), the context is empty."""

    model_config = ConfigDict(title="ofrepEvaluationRequest")

    context: OfrepContext = Field(default_factory=OfrepContext)


class EvaluationSuccess(BaseModel):
    model_config = ConfigDict(title="ofrepEvaluationSuccess")

    key: str
    reason: Reason
    variant: str
    value: Any = Field(
        None,
        description="A boolean (on/off), or the variant's payload as a string, number or"
        " JSON value; absent: use the code's default",
    )


class EvaluationFailure(BaseModel):
    model_config = ConfigDict(title="ofrepEvaluationFailure")

    key: str
    errorCode: FailureCode
    errorDetails: str


class EventStreamEndpoint(BaseModel):
    requestUri: str = Field(description="Path and query, on the origin the provider calls")


class EventStream(BaseModel):
    model_config = ConfigDict(title="ofrepEventStream")

    type: Literal["sse"]
    endpoint: EventStreamEndpoint


class BulkEvaluation(BaseModel):
    model_config = ConfigDict(title="ofrepBulkEvaluationSuccess")

    flags: list[EvaluationSuccess | EvaluationFailure]
    eventStreams: list[EventStream] | None = Field(
        None, description="Server-sent events naming a change (frontend keys only)"
    )


class OfrepErrorBody(ErrorBody):
    """An error of the OFREP paths: Unleash's error shape, with OFREP's fields where the
    protocol defines the answer (a request it cannot read, an unknown flag, a flag that
    cannot be evaluated); 401, 403 and 429 have Unleash's body only, as the protocol
    defines none."""

    model_config = ConfigDict(title="ofrepErrorSchema")

    key: str | None = None
    errorCode: ErrorCode | None = None
    errorDetails: str | None = None
