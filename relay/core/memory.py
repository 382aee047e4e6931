"""The memory an object graph holds, measured: what a cache bounded in bytes counts for
an entry whose size no formula gives (a compiled scope of the Frontend API: 2 to 8 times
the bytes of the flags it came from, as their shapes go).

Every object reachable from the root is counted once (``sys.getsizeof``), except what it
shares with the rest of the process: modules and their globals, classes, code, builtins.
On the evaluator's compiled documents this agrees with tracemalloc within 1 % (the test
measures both), at about the cost of compiling them once more.
"""

from __future__ import annotations

import gc
import sys
import types
from collections.abc import Mapping

_SHARED = (
    type,
    types.ModuleType,
    types.CodeType,
    types.BuiltinFunctionType,
    types.FrameType,
)


def measured(root: object, reserved: Mapping[type, int] | None = None) -> int:
    """Bytes of the objects ``root`` reaches; an object of a type in ``reserved`` counts
    as that many bytes instead (memory outside Python's reach, such as RE2's, at its
    bound)."""
    extra = reserved or {}
    shared = {id(vars(module)) for module in list(sys.modules.values())}
    seen: set[int] = set()
    total, todo = 0, [root]
    while todo:
        found = []
        for obj in todo:
            key = id(obj)
            if key in seen or key in shared or isinstance(obj, _SHARED):
                continue
            seen.add(key)
            total += extra.get(type(obj)) or sys.getsizeof(obj)
            found.append(obj)
        todo = gc.get_referents(*found)
    return total
