"""HTTP errors, each with its status and Unleash's error name, and the one place where
domain errors become them (``from_domain``).

Every error response of the service has the body
``{"id", "name", "message", "details": [{"path"?, "message"}]}``.
"""

from __future__ import annotations

import math
import uuid
from typing import ClassVar

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from relay.core import errors as domain
from relay.wire.common import ErrorBody, ErrorDetail
from relay.wire.ofrep import ErrorCode, OfrepErrorBody


class ApiError(Exception):
    status: ClassVar[int] = 500
    name: ClassVar[str] = "InternalError"

    def __init__(self, message: str, details: list[ErrorDetail] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details if details else [ErrorDetail(message=message)]

    def body(self) -> ErrorBody:
        return ErrorBody(
            id=str(uuid.uuid4()), name=self.name, message=self.message, details=self.details
        )

    def headers(self) -> dict[str, str]:
        return {}


class BadDataError(ApiError):
    status, name = 400, "BadDataError"


class AuthenticationRequired(ApiError):
    status, name = 401, "AuthenticationRequired"


class NoAccessError(ApiError):
    status, name = 403, "NoAccessError"


class InvalidOperationError(ApiError):
    status, name = 403, "InvalidOperationError"


class NotFoundError(ApiError):
    status, name = 404, "NotFoundError"


class OfrepError(ApiError):
    """An error OFREP's providers read: its ``errorCode`` and ``errorDetails`` (the
    message), and the flag's ``key`` when there is one, in Unleash's shape too."""

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        details: list[ErrorDetail] | None = None,
        key: str | None = None,
    ) -> None:
        super().__init__(message, details)
        self.code, self.key = code, key

    def body(self) -> ErrorBody:
        plain = super().body()
        return OfrepErrorBody(
            **plain.model_dump(), key=self.key, errorCode=self.code, errorDetails=self.message
        )


class OfrepBadRequest(OfrepError):
    status, name = 400, "BadDataError"


class OfrepNotFound(OfrepError):
    status, name = 404, "NotFoundError"


class OfrepUnavailable(OfrepError):
    status, name = 503, "ServiceUnavailableError"


class MethodNotAllowed(ApiError):
    status, name = 405, "MethodNotAllowedError"


class RequestTimeout(ApiError):
    status, name = 408, "RequestTimeoutError"


class NameExistsError(ApiError):
    status, name = 409, "NameExistsError"


class ContentTooLarge(ApiError):
    status, name = 413, "ContentTooLargeError"


class UnsupportedMediaType(ApiError):
    status, name = 415, "ContentTypeError"


class TooManyRequests(ApiError):
    status, name = 429, "TooManyRequestsError"

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(max(1, math.ceil(self.retry_after)))}


class UnprocessableContent(ApiError):
    status, name = 422, "UnprocessableContentError"


class InternalError(ApiError):
    status, name = 500, "InternalError"


class NotImplementedHere(ApiError):
    """A path switched off that says so (the Unleash Proxy's ``/proxy/all``)."""

    status, name = 501, "NotImplementedError"


class BadGateway(ApiError):
    status, name = 502, "BadGatewayError"


class ServiceUnavailable(ApiError):
    status, name = 503, "ServiceUnavailableError"


class GatewayTimeout(ApiError):
    status, name = 504, "GatewayTimeoutError"


def from_domain(error: domain.DomainError) -> ApiError:
    """The HTTP answer to a domain error."""
    match error:
        case domain.InvalidInput(path=str(path)):
            detail = ErrorDetail(path=path, message=f"The `{path}` property {error.message}")
            return BadDataError(f"Request validation failed: {detail.message}", [detail])
        case domain.InvalidInput():
            return BadDataError(error.message)
        case domain.NotFound():
            return NotFoundError(error.message)
        case domain.Conflict():
            return NameExistsError(error.message)
        case domain.InvalidOperation():
            return InvalidOperationError(error.message)
        case domain.Unauthorized():
            return AuthenticationRequired(error.message)
        case domain.Forbidden():
            return NoAccessError(error.message)
        case domain.Throttled():
            return TooManyRequests(error.message, error.retry_after)
        case domain.KeyReused():
            return UnprocessableContent(error.message)
        case domain.Unstorable():
            return BadDataError(error.message)
        case domain.Unavailable():
            return ServiceUnavailable(error.message)
        case _:  # a new kind of domain error without its answer: a bug, never a silent 4xx
            return InternalError("Internal error")


def from_validation(exc: ValidationError, root: str = "/body") -> BadDataError:
    """A 400 naming every bad field by its JSON pointer, e.g. ``/body/metrics/0/yes``."""
    details = []
    for error in exc.errors(include_url=False, include_input=False):
        path = "/".join([root, *(str(part) for part in error["loc"])])
        if error["type"] == "json_invalid":
            path = root
        details.append(ErrorDetail(path=path, message=f"The `{path}` property {_why(error)}"))
    if not details:
        details = [ErrorDetail(path=root, message="The request body is invalid")]
    summary = details[0].message
    more = f" (and {len(details) - 1} more)" if len(details) > 1 else ""
    return BadDataError(f"Request validation failed: {summary}{more}", details)


def _why(error: ErrorDetails) -> str:
    kind, msg = error["type"], error["msg"]
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        return "is not allowed (unknown key)"
    if kind == "json_invalid":
        return f"is not valid JSON: {(error.get('ctx') or {}).get('error', msg)}"
    return f"is invalid: {msg}"
