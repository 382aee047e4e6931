"""JSON Patch (RFC 6902) applied to a JSON document, as Unleash's PATCH endpoints take it.

The result is validated afterwards by the same model as a PUT body, so a patch can do no
more than a PUT could. Any operation that cannot apply is refused whole (the input is never
changed: the patch works on a copy).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from relay.core.errors import InvalidInput
from relay.core.flags import MAX_ENVIRONMENT_BYTES
from relay.core.ingest_batch import whole_number
from relay.wire.flags import PatchOp, PatchOperation

Model = TypeVar("Model", bound=BaseModel)


def patched(
    model: type[Model], document: dict[str, Any], operations: Sequence[PatchOperation]
) -> Model:
    """``document`` patched, read as ``model`` (the body a PUT would take)."""
    result = apply(document, operations)
    try:
        return model.model_validate(result)
    except ValidationError as exc:
        error = exc.errors(include_url=False, include_input=False)[0]
        path = "/".join(["/body", *(str(part) for part in error["loc"])])
        raise InvalidInput(f"is invalid after the patch: {error['msg']}", path) from None


MAX_COPIED_BYTES = MAX_ENVIRONMENT_BYTES
"""What ``copy`` may create in one patch, as JSON: each copy can double what it copies
(``/a`` into ``/a/b``), and one long string is as costly as many values, so the budget is
bytes (counting values let 93 KB of patches build a 410 MB strategy). A patch need copy no
more than a flag may hold in an environment."""


def apply(document: dict[str, Any], operations: Sequence[PatchOperation]) -> dict[str, Any]:
    result = copy.deepcopy(document)
    budget = [MAX_COPIED_BYTES]
    for index, operation in enumerate(operations):
        try:
            result = _apply(result, operation, budget)
        except _Refused as exc:
            raise InvalidInput(str(exc), f"/body/{index}") from None
    if not isinstance(result, dict):
        raise InvalidInput("a patch must leave an object", "/body")
    return result


class _Refused(Exception):
    pass


def _apply(document: Any, operation: PatchOperation, budget: list[int]) -> Any:
    path = _pointer(operation.path)
    match operation.op:
        case PatchOp.ADD:
            return _add(document, path, copy.deepcopy(operation.value))
        case PatchOp.REMOVE:
            return _remove(document, path)[0]
        case PatchOp.REPLACE:
            document, _ = _remove(document, path)
            return _add(document, path, copy.deepcopy(operation.value))
        case PatchOp.MOVE:
            source = _pointer(_from(operation))
            if path[: len(source)] == source and len(path) > len(source):
                raise _Refused("cannot move a value into itself")
            document, value = _remove(document, source)
            return _add(document, path, value)
        case PatchOp.COPY:
            source = _get(document, _pointer(_from(operation)))
            budget[0] -= _json_bytes(source, budget[0])
            if budget[0] < 0:
                raise _Refused(f"copies more than {MAX_COPIED_BYTES} bytes of JSON")
            return _add(document, path, copy.deepcopy(source))
        case PatchOp.TEST:
            if _get(document, path) != operation.value:
                raise _Refused(f"test failed at {operation.path}")
            return document


def _json_bytes(value: Any, limit: int) -> int:
    """About the length of ``value`` as JSON (escapes aside), counted no further than past
    ``limit``: what a copy of it costs, without serialising a copy that may be huge."""
    size, pending = 0, [value]
    while pending and size <= limit:
        item = pending.pop()
        if isinstance(item, dict):
            size += 2 + sum(len(key) + 4 for key in item)  # "key": and a comma each
            pending.extend(item.values())
        elif isinstance(item, list):
            size += 2 + len(item)
            pending.extend(item)
        elif isinstance(item, str):
            size += len(item) + 2
        else:  # a number, true, false, null
            size += len(str(item))
    return size


def _from(operation: PatchOperation) -> str:
    if operation.from_ is None:
        raise _Refused(f"{operation.op.value} needs `from`")
    return operation.from_


def _pointer(text: str) -> list[str]:
    if text == "":
        return []
    if not text.startswith("/"):
        raise _Refused(f"{text!r} is not a JSON pointer")
    return [part.replace("~1", "/").replace("~0", "~") for part in text[1:].split("/")]


def _get(document: Any, path: list[str]) -> Any:
    for part in path:
        document = _child(document, part)
    return document


def _child(node: Any, part: str) -> Any:
    if isinstance(node, dict) and part in node:
        return node[part]
    if isinstance(node, list):
        return node[_index(node, part, allow_end=False)]
    raise _Refused(f"no value at {part!r}")


def _index(items: list[Any], part: str, allow_end: bool) -> int:
    if part == "-" and allow_end:
        return len(items)
    if not (part.isascii() and part.isdigit()) or (len(part) > 1 and part.startswith("0")):
        raise _Refused(f"{part!r} is not an array index")
    index = whole_number(part, len(items) if allow_end else len(items) - 1)
    if index is None:
        raise _Refused(f"index {part[:20]} is out of range")
    return index


def _add(document: Any, path: list[str], value: Any) -> Any:
    if not path:
        return value
    parent = _get(document, path[:-1])
    last = path[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, allow_end=True), value)
    else:
        raise _Refused(f"cannot add to a {type(parent).__name__}")
    return document


def _remove(document: Any, path: list[str]) -> tuple[Any, Any]:
    """(the document, the removed value)."""
    if not path:
        raise _Refused("cannot remove the whole document")
    parent = _get(document, path[:-1])
    last = path[-1]
    if isinstance(parent, dict) and last in parent:
        return document, parent.pop(last)
    if isinstance(parent, list):
        return document, parent.pop(_index(parent, last, allow_end=False))
    raise _Refused(f"no value at {'/'.join(path)!r}")
