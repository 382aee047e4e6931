"""The OpenAPI 3.1 document, generated from the route table and the pydantic models that
parse the requests, so it describes exactly what is validated and served."""

from __future__ import annotations

from collections.abc import Sequence
from http import HTTPStatus
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from relay.api.routing import Route
from relay.wire.common import MAX_NAME, ErrorBody

# What ``relay.api.routing`` checks of every path parameter (names' rules).
_PARAMETER_SCHEMA = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_NAME,
    "pattern": "^[^\\x00]*$",
}


def document(routes: Sequence[Route], version: str) -> dict[str, Any]:
    models = _models(routes)
    _, top = models_json_schema(
        [(m, "validation") for m in models], ref_template="#/components/schemas/{model}"
    )
    names = {m.__name__: str(m.model_config.get("title") or m.__name__) for m in models}
    schemas = {names.get(k, k): _rename_refs(v, names) for k, v in top.get("$defs", {}).items()}
    paths: dict[str, dict[str, Any]] = {}
    operations: set[str] = set()
    for route in routes:
        operation = _operation(route, names)
        if operation["operationId"] in operations:
            raise ValueError(f"two routes have the operationId {operation['operationId']}")
        operations.add(operation["operationId"])
        paths.setdefault(route.path, {})[route.method.lower()] = operation
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "relay",
            "version": version,
            "description": "Feature-flag metrics relay and central service (Unleash-compatible)",
            "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"},
        },
        "servers": [{"url": "/", "description": "This service (relay or standalone mode)"}],
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "apiKey": {"type": "apiKey", "in": "header", "name": "Authorization"}
            },
        },
    }


def _models(routes: Sequence[Route]) -> list[type[BaseModel]]:
    found: dict[type[BaseModel], None] = {ErrorBody: None}
    for route in routes:
        if route.body is not None:
            found[route.body] = None
        for model in route.responses.values():
            if model is not None:
                found[model] = None
        if route.error_body is not None:
            found[route.error_body] = None
    return list(found)


def _ref(model: type[BaseModel], names: dict[str, str]) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{names.get(model.__name__, model.__name__)}"}


def _operation(route: Route, names: dict[str, str]) -> dict[str, Any]:
    op: dict[str, Any] = {
        "summary": route.summary,
        "tags": [route.tag],
        "operationId": route.operation or _camel(route.handler.__name__),
        "responses": {},
    }
    if route.parameters:
        op["parameters"] = [
            {"name": p, "in": "path", "required": True, "schema": _PARAMETER_SCHEMA}
            for p in route.parameters
        ]
    # every operation says what it needs: the key, or (an empty list) nothing
    op["security"] = [{"apiKey": []}] if route.auth is not None else []
    if route.body is not None:
        op["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": _ref(route.body, names)}},
        }
    for status, model in route.responses.items():
        response: dict[str, Any] = {"description": HTTPStatus(status).phrase}
        if model is not None:
            response["content"] = {"application/json": {"schema": _ref(model, names)}}
        op["responses"][str(status)] = response
    errors = set(route.errors)
    if route.parameters:
        errors.add(400)
    if route.auth is not None:
        errors |= {401, 403, 429}
    error_body = route.error_body or ErrorBody
    for status in sorted(errors):
        op["responses"][str(status)] = {
            "description": HTTPStatus(status).phrase,
            "content": {"application/json": {"schema": _ref(error_body, names)}},
        }
    return op


def _camel(name: str) -> str:
    """``raw_feature_metrics`` -> ``rawFeatureMetrics``, as Unleash names its operations."""
    first, *rest = name.split("_")
    return first + "".join(word.capitalize() for word in rest)


def _rename_refs(node: Any, names: dict[str, str]) -> Any:
    """Point references at each model's title (the spec's schema name, ``bulkMetricsSchema``)."""
    if isinstance(node, dict):
        return {
            key: _renamed(value, names) if key == "$ref" else _rename_refs(value, names)
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [_rename_refs(item, names) for item in node]
    return node


def _renamed(ref: str, names: dict[str, str]) -> str:
    prefix, _, name = ref.rpartition("/")
    return f"{prefix}/{names.get(name, name)}"
