"""ember's exceptions. They subclass the builtin PyTorch raises in the same place,
so ``except RuntimeError`` / ``except IndexError`` in a ported script still works."""
from __future__ import annotations


class EmberError(RuntimeError):
    """A user error in an ember op: the message names the op, what it got and expected."""


class ShapeError(EmberError):
    """Shapes that do not fit together (broadcasting, matmul, cat, view)."""


class EmberIndexError(EmberError, IndexError):
    """An index or dimension out of range."""


class EmberTypeError(EmberError, TypeError):
    """An argument of the wrong kind or dtype."""


class EmberValueError(EmberError, ValueError):
    """An argument with a bad value where PyTorch raises ``ValueError`` (a negative
    learning rate, lengths that do not add up)."""


def describe(values) -> str:
    """``shapes (3, 4) and (5,), dtypes float32 and int64`` for an error message."""
    shapes, dtypes = [], []
    for v in values:
        shape = getattr(v, "shape", None)
        if shape is None:
            shapes.append(type(v).__name__)
            continue
        shapes.append(str(tuple(shape)))
        dtypes.append(getattr(v.dtype, "name", str(v.dtype)))
    if len(shapes) == 1:
        text = f"shape {shapes[0]}"
        return text + (f", dtype {dtypes[0]}" if dtypes else "")
    text = "shapes " + _join(shapes)
    return text + (", dtypes " + _join(dtypes) if dtypes else "")


def _join(items) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
