"""The fused-kernel op: a group of elementwise ops (and reductions over the last dims)
that :func:`~ember.compiler.passes.fuse.fuse_elementwise` puts into one instruction.

A :class:`FusedKernel` has the same ``forward(xp, *arrays)`` as a registry op, so the
executor runs it like any other. What it computes is a small program over local values:
its inputs, scalar literals (folded graph constants), then one value per :class:`Step`.
How it runs is chosen once, by :func:`ember.compiler.codegen.prepare_kernels`, from the
device of the graph's tensors: a generated C loop nest (``codegen/c.py``) or CUDA kernel
(``codegen/cuda.py``), or — with no C compiler, ``EMBER_JIT_BACKEND=numpy``, or a
backend whose renderer is ``"numpy"`` — the steps' own forwards in order, with the
backend's array module.

Every value lies on the kernel's *domain* (the shape of its largest values). The
:func:`plan_layout` of a kernel merges neighbouring dims of the domain that every value
treats alike, leaving a few *collapsed* dims; the last one is the inner loop (and, for a
kernel with reductions, the reduced one), the others are flattened into the outer loop
over rows. Each value then sits at one *level*: uniform (one element, computed once),
row (one element per outer index, such as a reduction's result) or inner (one per
element).
"""
from __future__ import annotations

import math

import numpy as np

from .codegen import scalar

UNIFORM, ROW, INNER = 0, 1, 2


class Step:
    """``op(*args, **params)`` inside a kernel; ``args`` index the kernel's values."""
    __slots__ = ("op", "args", "params", "shape", "dtype")

    def __init__(self, op, args, params, shape, dtype):
        self.op, self.args, self.params = op, tuple(args), params
        self.shape, self.dtype = tuple(shape), dtype

    @property
    def is_reduction(self) -> bool:
        return self.op.name in scalar.REDUCTIONS


class Layout:
    """The domain with alike dims merged: ``sizes`` of the collapsed dims and, for each
    value, along which of them it varies (``patterns``)."""
    __slots__ = ("sizes", "patterns")

    def __init__(self, sizes, patterns):
        self.sizes, self.patterns = tuple(sizes), patterns

    @property
    def rows(self) -> int:
        return math.prod(self.sizes[:-1])


def numel(shape) -> int:
    return math.prod(shape)


def keepdim_shape(domain, reduced) -> tuple:
    """The shape of a reduction's result with the reduced dims kept as 1."""
    return tuple(1 if d in reduced else n for d, n in enumerate(domain))


def plan_layout(domain, reduced, shapes) -> Layout | None:
    """Collapse ``domain`` for values of ``shapes`` (each broadcasting to it); with
    ``reduced`` dims, those must collapse into the last dim. None when not possible."""
    nd = len(domain)
    dims = [d for d in range(nd) if domain[d] != 1]
    columns = []
    for shape in shapes:
        if len(shape) > nd:
            return None
        pad = nd - len(shape)
        row = []
        for d in dims:
            n = shape[d - pad] if d >= pad else 1
            if n != 1 and n != domain[d]:
                return None
            row.append(n != 1)
        columns.append(row)
    groups: list[list[int]] = []
    for j, d in enumerate(dims):
        if groups:
            prev = groups[-1][-1]
            same = all(col[prev] == col[j] for col in columns) and \
                ((dims[prev] in reduced) == (d in reduced))
            if same:
                groups[-1].append(j)
                continue
        groups.append([j])
    if reduced:
        red = [i for i, g in enumerate(groups) if dims[g[0]] in reduced]
        if red != [len(groups) - 1]:
            return None
    sizes = [math.prod(domain[dims[j]] for j in g) for g in groups]
    patterns = [tuple(col[g[0]] for g in groups) for col in columns]
    return Layout(sizes, patterns)


class FusedKernel:
    """One loop nest computing a group of elementwise ops and reductions.

    Args:
        inputs: ``(shape, dtype)`` of each input array, in call order.
        literals: 1-element arrays folded into the kernel (graph constants).
        steps: the computation, in order; step ``i`` makes value
            ``len(inputs) + len(literals) + i``.
        outputs: the values returned, in order.
        domain: the shape every value broadcasts to (a reduction's input shape).
        reduced: the dims of ``domain`` the kernel's reductions reduce (or ``()``).
    """

    fresh_outputs = True  # outputs never share memory with inputs (the memory plan relies on it)

    def __init__(self, inputs, literals, steps, outputs, domain, reduced=()):
        self.inputs = [(tuple(s), d) for s, d in inputs]
        self.literals = list(literals)
        self.steps = list(steps)
        self.outputs = list(outputs)
        self.domain = tuple(domain)
        self.reduced = tuple(reduced)
        self.n_outputs = len(self.outputs)
        self.name = _kernel_name(self.steps)
        self.first_step = len(self.inputs) + len(self.literals)
        self.avals = (self.inputs + [(a.shape, _dtype_of(a)) for a in self.literals] +
                      [(s.shape, s.dtype) for s in self.steps])
        self.layout = None
        self.schedule = None
        self.backend = None  # once prepared: "c", "cuda", "numpy", "c-pending" (not compiled yet)
        self._run = None
        self._placed = (np, self.literals)  # (array module, the literals as its arrays)
        self._plan()

    # What it computes -----------------------------------------------------------------
    def logical_shape(self, i: int) -> tuple:
        """Value ``i``'s shape on the domain (a reduction's result keeps its dims)."""
        j = i - self.first_step
        if j >= 0 and self.steps[j].is_reduction:
            return keepdim_shape(self.domain, self.reduced)
        return self.avals[i][0]

    def _plan(self) -> None:
        shapes = [self.logical_shape(i) for i in range(len(self.avals))]
        self.layout = plan_layout(self.domain, self.reduced, shapes)
        if self.layout is None:
            raise ValueError(f"{self.name}: its values do not fit one loop nest over "
                             f"{list(self.domain)}")
        self.schedule = _schedule(self)

    def describe(self) -> str:
        """The kernel's program, one step a line (for reading graphs and tests)."""
        n_in = len(self.inputs)
        names = [f"in{i}" for i in range(n_in)]
        names += [f"lit{i}" for i in range(len(self.literals))]
        names += [f"t{i}" for i in range(len(self.steps))]
        lines = [f"{self.name} over {list(self.domain)}"
                 + (f" reducing dims {list(self.reduced)}" if self.reduced else "")]
        for i, step in enumerate(self.steps):
            args = ", ".join(names[a] for a in step.args)
            mark = " -> out" if self.first_step + i in self.outputs else ""
            lines.append(f"  {names[self.first_step + i]}:{step.dtype.name}"
                         f"{list(step.shape)} = {step.op.name}({args}){mark}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<FusedKernel {self.name}: {len(self.steps)} ops over {list(self.domain)}>"

    # Running ----------------------------------------------------------------------
    def forward(self, xp, *arrays, out=None):
        """The kernel's outputs for ``arrays`` (an array, or a tuple of them).
        ``out``: per output, an array to write it into, or None (the memory plan
        writes parameter updates straight into the parameters)."""
        run = self._run
        if run is None:
            if xp is not np:  # never prepared for a device: its steps, with xp
                return self.evaluate(xp, *arrays, out=out)
            from .codegen import prepare_kernels
            prepare_kernels([self])
            run = self._run
        return run(xp, *arrays, out=out)

    def writes_in_place(self, input_index: int) -> bool:
        """Whether an output may be written into input ``input_index``'s array: every
        element is then read before the same element is written (no reductions, and
        the input is not broadcast)."""
        return not self.reduced and self.inputs[input_index][0] == self.domain

    def bind(self, run, backend: str) -> None:
        """Run the kernel with ``run(xp, *arrays)`` from now on (set by a backend)."""
        self._run, self.backend = run, backend

    def evaluate(self, xp, *arrays, out=None):
        """The NumPy (any ``xp``) evaluation: each step's registry forward in order,
        reusing dead intermediate buffers through ufuncs' ``out=``."""
        if out is not None:
            results = self.evaluate(xp, *arrays)
            results = results if self.n_outputs > 1 else (results,)
            placed = []
            for r, o in zip(results, out):
                if o is not None:
                    xp.copyto(o, r, casting="unsafe")
                    r = o
                placed.append(r)
            return placed[0] if self.n_outputs == 1 else tuple(placed)
        env = list(arrays) + self._literals_in(xp) + [None] * len(self.steps)
        free: dict = {}
        owned = set()  # values whose buffer this evaluation made
        base = self.first_step
        for i, step in enumerate(self.steps):
            args = [env[a] for a in step.args]
            ufunc = _UFUNCS.get(step.op.name) if xp is np else None
            buf = None
            if ufunc is not None and step.shape:
                buf = self._reusable(i, step, env, owned, free)
            if buf is not None:
                result = ufunc(*args, out=buf)
                fresh = True
            else:
                result = step.op.forward(xp, *args, **step.params)
                fresh = result.__class__ is np.ndarray and result.base is None and \
                    all(result is not a for a in args)
            env[base + i] = result
            if fresh:
                owned.add(base + i)
            for dead in self._dies_at[i]:
                if dead in owned:
                    a = env[dead]
                    free.setdefault((a.shape, a.dtype), []).append(a)
                    owned.discard(dead)
                env[dead] = None
        if self.n_outputs == 1:
            return env[self.outputs[0]]
        return tuple(env[o] for o in self.outputs)

    def _literals_in(self, xp) -> list:
        """The literals as arrays of ``xp`` (made once per array module: another
        device's array module may not mix its arrays with NumPy's)."""
        placed_xp, literals = self._placed
        if placed_xp is not xp:
            literals = [xp.asarray(a) for a in self.literals]
            self._placed = (xp, literals)
        return literals

    def _reusable(self, i, step, env, owned, free):
        """A dead buffer of this step's shape and dtype, if one is at hand: first one
        of its own operands that dies here (in place), then any dead one."""
        key = (step.shape, step.dtype.np)
        for a in step.args:
            if a in owned and a in self._dies_at[i]:
                arr = env[a]
                if arr.shape == key[0] and arr.dtype == key[1]:
                    owned.discard(a)
                    return arr
        pool = free.get(key)
        return pool.pop() if pool else None

    @property
    def _dies_at(self):
        dies = self.__dict__.get("_dies")
        if dies is None:
            last = {}
            for i, step in enumerate(self.steps):
                for a in step.args:
                    last[a] = i
            keep = set(self.outputs)
            dies = [[] for _ in self.steps]
            for v, i in last.items():
                if v >= self.first_step and v not in keep:
                    dies[i].append(v)
            for j, step in enumerate(self.steps):  # results nothing reads
                v = self.first_step + j
                if v not in last and v not in keep:
                    dies[j].append(v)
            self.__dict__["_dies"] = dies
        return dies


# Ops whose registry forward is exactly one ufunc call on its operands, so writing into
# a spare buffer with out= gives the same numbers.
_UFUNCS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
           "neg": np.negative, "exp": np.exp, "log": np.log, "sqrt": np.sqrt,
           "tanh": np.tanh, "sin": np.sin, "cos": np.cos, "abs": np.absolute,
           "maximum": np.maximum, "minimum": np.minimum, "reciprocal": np.reciprocal}


def _schedule(kernel):
    """Each value's level and pass: an inner step runs in the pass after the
    reductions it needs; a row value is ready after them. Raises ValueError for what
    one loop nest cannot hold."""
    layout = kernel.layout
    n = len(kernel.avals)
    level = [UNIFORM] * n
    phase = [0] * n  # inner values: the pass computing them; others: when ready
    for i in range(len(kernel.inputs)):
        pattern = layout.patterns[i]
        level[i] = INNER if pattern and pattern[-1] else ROW if any(pattern) else UNIFORM
    for j, step in enumerate(kernel.steps):
        i = kernel.first_step + j
        if step.is_reduction:
            (a,) = step.args
            if level[a] != INNER:
                raise ValueError(f"{kernel.name}: {step.op.name} reduces a value that "
                                 "does not vary along the reduced dims")
            level[i], phase[i] = ROW, phase[a] + 1
            continue
        level[i] = max((level[a] for a in step.args), default=UNIFORM)
        phase[i] = max((phase[a] for a in step.args), default=0)
    for o in kernel.outputs:
        pattern = layout.patterns[o]
        if any(pattern) and not all(pattern[:-1]):  # stored whole, per row, or once
            raise ValueError(f"{kernel.name}: output of shape {list(kernel.avals[o][0])} "
                             f"is not the domain {list(kernel.domain)}, one value per "
                             "row, or one value")
    return level, phase


def _dtype_of(array):
    from ..dtypes import as_dtype
    return as_dtype(array.dtype)


def _kernel_name(steps) -> str:
    names: list[str] = []
    for s in steps:
        if s.op.name not in names:
            names.append(s.op.name)
    if len(names) > 6:
        names = names[:6] + [f"{len(names) - 6}more"]
    return "fused_" + "_".join(names)
