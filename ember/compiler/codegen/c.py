"""The C renderer: a :class:`~ember.compiler.fused.FusedKernel` as one C function.

The source depends on the kernel's program, dtypes and layout *pattern*, not on its
sizes (they come at run time), so kernels that differ only in shape — the optimizer's
update of every parameter — share one compiled function. The function is

``void ember_kernel(sizes, in0, ..., inN, out0, ..., outM)``

over the collapsed dims of the kernel's layout: one-element values are computed before
the loops, the outer dims are one loop over rows (split across cores with OpenMP when
the work is large), the last dim is a simple inner loop the compiler vectorises. A
kernel with reductions makes one inner pass per stage of its reductions (a softmax:
max, then exp and sum, then divide); values a later pass needs again are recomputed,
or read back from an output that already holds them, or (for the last pass) from an
output it is about to overwrite. A float reduction's loop stores the values it reduces
into a block buffer that a :mod:`~ember.compiler.codegen.lanes` helper reduces in vector
registers; other reductions are OpenMP ``simd`` reductions. Either way the loops
vectorise.

Arguments are the NumPy arrays themselves (read through their documented
``PyArrayObject`` layout, where the data pointer follows the object header), which
costs less per call than asking each array for its address; where that layout cannot be
verified the arrays' addresses are passed instead.
"""
from __future__ import annotations

import time

import numpy as np

from ...errors import EmberError
from ..fused import INNER, ROW, UNIFORM, FusedKernel, numel
from . import build, lanes, scalar

# Below this much work a kernel runs on one core (starting threads costs more): its
# elements, each counted once plus COSTLY_STEP_WEIGHT times per costly step it computes
# (a libm call, a polynomial, a division: tens of cycles, where an add takes one). A
# masked softmax over 16K elements (exp and two divisions) then runs on two cores.
PARALLEL_MIN_ELEMENTS = 32768
COSTLY_STEP_WEIGHT = 8
COSTLY_STEPS = frozenset({"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt",
                          "rsqrt", "sin", "cos", "tan", "asin", "acos", "atan", "atan2",
                          "sinh", "cosh", "tanh", "erf", "sigmoid", "pow", "xlogy", "div",
                          "reciprocal"})

# float32 sums add this many values in float (vectorised), then the sum in double.
SUM_BLOCK = 256

# A kernel that may run on several cores times itself on one core and on all of them for
# a few calls, every this many calls, and keeps the faster: on a machine other jobs
# keep busy, a parallel loop waits for a descheduled thread and loses many times over.
RETUNE_EVERY = 500


class CRenderer:
    """Renders fused kernels as C, compiles them with the system compiler (through the
    on-disk kernel cache) and binds each kernel to its compiled function."""
    name = "c"

    def render(self, kernel: FusedKernel) -> str:
        return render(kernel, build.array_data_offset())

    def prepare(self, kernels, compile_now: bool = False, extra=()) -> None:
        """Bind each kernel to its compiled function when the cache has it; the others
        are compiled together when the first of them is called (with ``compile_now``:
        here). A kernel never runs any other code first, so its values are the same at
        every call."""
        offset = build.array_data_offset()
        sources = [(k.name, render(k, offset)) for k in kernels]
        pending = []
        for kernel, source, function in zip(kernels, sources,
                                            build.load_kernels(sources, compile=False)):
            if function is None:
                pending.append((kernel, source))
            else:
                kernel.bind(_runner(kernel, function, offset is not None), "c")
        if pending:
            batch = _PendingBatch(pending, offset, list(extra))
            for kernel, _ in pending:
                kernel.bind(batch.runner(kernel), "c-pending")
            if compile_now:
                batch.compile()


def render(kernel: FusedKernel, data_offset: int | None) -> str:
    """The C source of ``kernel``; ``data_offset`` is where an ndarray object keeps its
    data pointer (None: the arguments are the data pointers)."""
    return _Writer(kernel, data_offset).source()


class _Writer:
    def __init__(self, kernel: FusedKernel, data_offset):
        self.k = kernel
        self.offset = data_offset
        self.level, self.phase = kernel.schedule
        self.patterns = kernel.layout.patterns
        self.ndim = len(kernel.layout.sizes)
        self.lines: list[str] = []
        self.out_of = {v: j for j, v in enumerate(kernel.outputs)}
        self.reductions = [kernel.first_step + j for j, s in enumerate(kernel.steps)
                           if s.is_reduction]
        self.last_pass, self.spills = 0, {}  # set by row_loop

    # Helpers ------------------------------------------------------------------------
    def emit(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def ctype(self, i: int) -> str:
        return scalar.c_type(self.k.avals[i][1])

    def expr(self, i: int) -> str:
        k = self.k
        step = k.steps[i - k.first_step]
        args = [f"v{a}" for a in step.args]
        text = scalar.expression(step.op.name, args, [k.avals[a][1] for a in step.args],
                                 step.dtype, step.params)
        if text is None:  # the fuse pass only groups ops the table can express
            raise NotImplementedError(f"{step.op.name}: no C rule for these dtypes")
        return text

    def is_input(self, i: int) -> bool:
        return i < len(self.k.inputs)

    def is_literal(self, i: int) -> bool:
        return len(self.k.inputs) <= i < self.k.first_step

    # Source -------------------------------------------------------------------------
    def source(self) -> str:
        k = self.k
        head = [f"/* ember fused kernel {k.name}: {len(k.steps)} ops, "
                f"{self.ndim} collapsed dims */",
                "#include <math.h>", "#include <stdint.h>"]
        if self.offset is None:
            head.append("#define ARRAY_DATA(a) ((void *)(a))")
        else:
            head.append(f"#define ARRAY_DATA(a) (*(void *const *)((const char *)(a) + "
                        f"{self.offset}))")
        params = ["const void *a_sizes"]
        params += [f"const void *a_in{i}" for i in range(len(k.inputs))]
        params += [f"void *a_out{j}" for j in range(k.n_outputs)]
        head.append(f"void ember_kernel({', '.join(params)})")
        self.emit(0, "{")
        self.emit(1, "const int64_t *restrict sizes = ARRAY_DATA(a_sizes);")
        for d in range(self.ndim):
            self.emit(1, f"const int64_t s{d} = sizes[{d}];")
        self.emit(1, f"const int threads = (int)sizes[{self.ndim}];")
        for i, (shape, dtype) in enumerate(k.inputs):
            self.emit(1, f"const {scalar.c_type(dtype)} *restrict in{i} = "
                         f"ARRAY_DATA(a_in{i});")
        for j, v in enumerate(k.outputs):
            self.emit(1, f"{self.ctype(v)} *restrict out{j} = ARRAY_DATA(a_out{j});")
        self.prologue()
        if self.ndim:
            if not self.reductions and self.ndim == 1:
                self.flat_loop()
            else:
                self.row_loop()
        self.emit(0, "}")
        body = "\n".join(self.lines)
        if any(name + "(" in body for name in scalar.PRELUDE_NAMES):
            head.insert(3, scalar.PRELUDE)
        if any(name + "(" in body for name in lanes.NAMES):
            head.insert(3, lanes.SOURCE)
        return "\n".join(head) + "\n" + body + "\n"

    def prologue(self) -> None:
        """One-element values: read, folded or computed once, before any loop."""
        k = self.k
        for i in range(len(k.avals)):
            if self.level[i] != UNIFORM:
                continue
            if self.is_input(i):
                value = f"in{i}[0]"
            elif self.is_literal(i):
                lit = k.literals[i - len(k.inputs)]
                value = scalar.literal(lit.reshape(-1)[0], k.avals[i][1])
            else:
                value = self.expr(i)
            self.emit(1, f"const {self.ctype(i)} v{i} = {value};")
            if i in self.out_of:
                self.emit(1, f"out{self.out_of[i]}[0] = v{i};")

    def flat_loop(self) -> None:
        """No reductions, one collapsed dim: a single loop over every element."""
        # (a plain ``if`` would apply to ``simd`` too: one thread would not vectorise)
        self.emit(1, "#pragma omp parallel for simd schedule(static) num_threads(threads) "
                     "if (parallel: threads > 1)")
        self.emit(1, "for (int64_t c = 0; c < s0; c++) {")
        pointers = {i: f"in{i}" for i in range(len(self.k.inputs))}
        stores = {i: f"out{j}" for i, j in self.out_of.items() if self.level[i] == INNER}
        self.inner_body(2, 0, pointers, stores)
        self.emit(1, "}")

    def row_loop(self) -> None:
        """Outer dims flattened into rows (split across cores), the last dim inner."""
        k, nd = self.k, self.ndim
        rows = " * ".join(f"s{d}" for d in range(nd - 1)) or "1"
        self.emit(1, f"const int64_t rows = {rows}, cols = s{nd - 1};")
        self.emit(1, "#pragma omp parallel for schedule(static) num_threads(threads) "
                     "if (threads > 1 && rows > 1)")
        self.emit(1, "for (int64_t o = 0; o < rows; o++) {")
        pointers = {}
        offsets = {}
        for i in range(len(k.inputs)):
            if self.level[i] != UNIFORM:
                offsets[i] = self.row_offset(self.patterns[i])
        if any(off is None for off in offsets.values()):
            self.emit(2, "int64_t rest = o;")
            for d in range(nd - 2, 0, -1):
                self.emit(2, f"const int64_t i{d} = rest % s{d};")
                self.emit(2, f"rest /= s{d};")
            self.emit(2, "const int64_t i0 = rest;")
            for i, off in offsets.items():
                if off is None:
                    offsets[i] = self.indexed_offset(self.patterns[i])
        for i, off in offsets.items():
            if self.level[i] == ROW:
                self.emit(2, f"const {self.ctype(i)} v{i} = in{i}[{off}];")
            else:
                self.emit(2, f"const {self.ctype(i)} *restrict p{i} = in{i} + {off};")
                pointers[i] = f"p{i}"
        stores = {}
        for i, j in self.out_of.items():
            if self.level[i] == INNER:
                self.emit(2, f"{self.ctype(i)} *restrict q{j} = out{j} + o * cols;")
                stores[i] = f"q{j}"
        # pass p feeds the reductions whose results are ready at p + 1, and stores the
        # inner outputs computed at p
        n_passes = max([1] + [self.phase[r] for r in self.reductions] +
                       [self.phase[i] + 1 for i in stores])
        self.last_pass = n_passes - 1
        self.spills = self.plan_spills(self.last_pass, pointers, stores)
        for p in range(n_passes):
            self.row_values(2, p)
            self.inner_pass(2, p, pointers, stores)
        self.row_values(2, n_passes)
        self.emit(1, "}")

    def computed_in(self, p: int, pointers, stores) -> set:
        """The inner values pass ``p`` computes (its outputs, its reductions' operands
        and what they are made from), as :meth:`inner_body` finds them."""
        k, found = self.k, set()

        def need(i):
            if self.level[i] != INNER or i in found or i in pointers or \
                    (i in stores and self.phase[i] < p):
                return
            found.add(i)
            for a in k.steps[i - k.first_step].args:
                need(a)
        for i in stores:
            if self.phase[i] == p:
                need(i)
        for r in self.reductions:
            if self.phase[r] == p + 1:
                need(k.steps[r - k.first_step].args[0])
        return found

    def plan_spills(self, last: int, pointers, stores) -> dict:
        """Values the last pass would recompute that the pass before it computed (a
        softmax's exp): the pass before stores each in an output the last pass writes
        (of the same C type), and the last pass reads it back from there before
        writing that element. Returns {value: output pointer}."""
        if last < 1:
            return {}
        free: dict = {}
        for i, q in stores.items():
            if self.phase[i] == last:
                free.setdefault(self.ctype(i), []).append(q)
        before = self.computed_in(last - 1, pointers, stores)
        spills, seen = {}, set()

        def visit(i):  # from the last pass's outputs down: the latest values first
            if self.level[i] != INNER or i in seen or i in pointers or \
                    (i in stores and self.phase[i] < last):
                return
            seen.add(i)
            if i in before and i not in stores and free.get(self.ctype(i)):
                spills[i] = free[self.ctype(i)].pop()
                return
            for a in self.k.steps[i - self.k.first_step].args:
                visit(a)
        for i in sorted(stores):
            if self.phase[i] == last:
                visit(i)
        return spills

    def row_offset(self, pattern):
        """An input's offset at row ``o`` when it is simple (None: needs indices)."""
        outer = pattern[:-1]
        if all(outer):
            return "o * cols" if pattern[-1] else "o"
        if not any(outer):
            return "0"
        return None

    def indexed_offset(self, pattern) -> str:
        terms = []
        for d in range(self.ndim - 1):
            if pattern[d]:
                stride = [f"s{e}" for e in range(d + 1, self.ndim) if pattern[e]]
                terms.append(f"i{d} * {' * '.join(stride) or '1'}")
        return " + ".join(terms)

    def row_values(self, depth: int, p: int) -> None:
        """Row values that become ready at pass ``p`` (after its reductions)."""
        k = self.k
        for j, step in enumerate(k.steps):
            i = k.first_step + j
            if self.level[i] != ROW or step.is_reduction or self.phase[i] != p:
                continue
            self.emit(depth, f"const {self.ctype(i)} v{i} = {self.expr(i)};")
            if i in self.out_of:
                self.emit(depth, f"out{self.out_of[i]}[o] = v{i};")

    def inner_pass(self, depth: int, p: int, pointers, stores) -> None:
        """One loop over the inner dim: the inner values computed in pass ``p``, the
        reductions fed in it, then the reductions' results. The loop runs over blocks of
        :data:`SUM_BLOCK` values where it reduces floats: each block's values go to a
        buffer that a lanes helper reduces (:meth:`buffered`), and float32 sums add the
        blocks' sums in double. Other reductions are OpenMP simd reductions."""
        k = self.k
        reducing = [r for r in self.reductions if self.phase[r] == p + 1]
        computing = [i for i in stores if self.phase[i] == p]
        if not reducing and not computing:
            return
        clauses, blocked = [], []
        buffered = [r for r in reducing if self.buffered(r)]
        for r in reducing:
            step = k.steps[r - k.first_step]
            name = step.op.name
            acc_type = scalar.accumulator_type(name, step.dtype)
            start = scalar.accumulator_start(name, step.dtype)
            self.emit(depth, f"{acc_type} acc{r} = {start};")
            if scalar.tracks_nan(name, step.dtype):
                self.emit(depth, f"int nan{r} = 0;")
            if r in buffered:
                continue
            if name == "sum" and step.dtype.name == "float32":
                blocked.append(r)
                clauses.append(f"reduction(+:part{r})")
            else:
                clauses.append(f"reduction({scalar.REDUCTION_OPERATORS[name]}:acc{r})")
            if scalar.tracks_nan(name, step.dtype):
                clauses.append(f"reduction(|:nan{r})")
        loop = "for (int64_t c = 0; c < cols; c++) {"
        if blocked or buffered:
            for r in buffered:
                self.emit(depth, f"{self.operand_ctype(r)} red{r}[{SUM_BLOCK}] "
                                 f"__attribute__((aligned(64)));")
            self.emit(depth, f"for (int64_t c0 = 0; c0 < cols; c0 += {SUM_BLOCK}) {{")
            depth += 1
            self.emit(depth, f"const int64_t c1 = cols - c0 < {SUM_BLOCK} ? cols : "
                             f"c0 + {SUM_BLOCK};")
            for r in blocked:
                self.emit(depth, f"float part{r} = 0;")
            loop = "for (int64_t c = c0; c < c1; c++) {"
        if clauses or buffered:
            self.emit(depth, f"#pragma omp simd {' '.join(clauses)}".rstrip())
        self.emit(depth, loop)
        self.inner_body(depth + 1, p, pointers, stores, reducing, blocked, buffered)
        self.emit(depth, "}")
        if blocked or buffered:
            for r in blocked:
                self.emit(depth, f"acc{r} += part{r};")
            for r in buffered:
                self.emit(depth, self.lanes_call(r))
            depth -= 1
            self.emit(depth, "}")
        for r in reducing:
            ctype = self.ctype(r)
            value = f"({ctype})acc{r}"
            if scalar.tracks_nan(k.steps[r - k.first_step].op.name, k.avals[r][1]):
                value = f"nan{r} ? ({ctype})NAN : acc{r}"
            self.emit(depth, f"const {ctype} v{r} = {value};")
            if r in self.out_of:
                self.emit(depth, f"out{self.out_of[r]}[o] = v{r};")

    def buffered(self, r: int) -> bool:
        """Whether reduction ``r`` goes through a block buffer and a :mod:`lanes` helper
        (a float or double operand reduced in its own type): its loop then stores each
        operand, and the helper reduces the block in vector registers. Other reductions
        are OpenMP simd reductions."""
        step = self.k.steps[r - self.k.first_step]
        return self.operand_ctype(r) in lanes.C_TYPES and \
            self.operand_ctype(r) == scalar.c_type(step.dtype)

    def operand_ctype(self, r: int) -> str:
        """The C type of the value reduction ``r`` reduces."""
        (a,) = self.k.steps[r - self.k.first_step].args
        return self.ctype(a)

    def lanes_call(self, r: int) -> str:
        """The statement folding the block buffer of reduction ``r`` into its total."""
        name = self.k.steps[r - self.k.first_step].op.name
        t = self.operand_ctype(r)
        if name == "sum":
            return f"acc{r} += ember_sum_{t}(red{r}, c1 - c0);"
        helper = "ember_max" if name == "amax" else "ember_min"
        return f"acc{r} = {helper}_{t}(red{r}, c1 - c0, acc{r}, &nan{r});"

    def inner_body(self, depth: int, p: int, pointers, stores, reducing=(),
                   blocked=(), buffered=()) -> None:
        """The loop body of pass ``p``; the spilled values (:meth:`plan_spills`) are
        stored by the pass before the last, and read back first by the last."""
        k = self.k
        done: set = set()
        if p == self.last_pass:
            for i, q in self.spills.items():
                self.emit(depth, f"const {self.ctype(i)} v{i} = {q}[c];")
                done.add(i)

        def need(i):
            if self.level[i] != INNER or i in done:
                return
            done.add(i)
            if i in pointers:
                self.emit(depth, f"const {self.ctype(i)} v{i} = {pointers[i]}[c];")
                return
            if self.phase[i] < p and i in stores:  # an earlier pass stored it
                self.emit(depth, f"const {self.ctype(i)} v{i} = {stores[i]}[c];")
                return
            for a in k.steps[i - k.first_step].args:
                need(a)
            self.emit(depth, f"const {self.ctype(i)} v{i} = {self.expr(i)};")
            if i in stores and self.phase[i] == p:
                self.emit(depth, f"{stores[i]}[c] = v{i};")
            elif i in self.spills and p == self.last_pass - 1:
                self.emit(depth, f"{self.spills[i]}[c] = v{i};")

        for i in sorted(stores):
            if self.phase[i] == p:
                need(i)
        for r in reducing:
            step = k.steps[r - k.first_step]
            (a,) = step.args
            need(a)
            if r in buffered:
                self.emit(depth, f"red{r}[c - c0] = v{a};")
                continue
            acc = f"part{r}" if r in blocked else f"acc{r}"
            self.emit(depth, scalar.accumulate(step.op.name, acc, f"v{a}"))
            if scalar.tracks_nan(step.op.name, step.dtype):
                self.emit(depth, f"nan{r} |= v{a} != v{a};")


# Calling the compiled function -------------------------------------------------------
class _PendingBatch:
    """Kernels prepared together whose code is not compiled yet: the first call of any
    of them compiles them all, in parallel (a graph that is traced but never run never
    pays for the compiler)."""

    def __init__(self, pending, offset, extra=()):
        self.pending = pending
        self.offset = offset
        self.extra = extra  # more (name, source) to build with them (see prepare_kernels)
        self.error = None  # a failed compile fails every later call the same way

    def runner(self, kernel: FusedKernel):
        def run(xp, *arrays, out=None):
            self.compile()
            return kernel.forward(xp, *arrays, out=out)
        return run

    def compile(self) -> None:
        if self.error is not None:
            raise self.error
        try:  # (the extra loops' own callers load them from the cache; one that fails to
            # build takes its NumPy path there, and fails no kernel here)
            functions = build.load_kernels([source for _, source in self.pending],
                                           merge=True, alongside=self.extra)
            self.extra = []
        except EmberError as exc:
            self.error = exc
            raise
        for (kernel, _), function in zip(self.pending, functions):
            kernel.bind(_runner(kernel, function, self.offset is not None), "c")
        self.pending = []


def _runner(kernel: FusedKernel, function, object_mode: bool):
    """``run(xp, *arrays)`` calling the compiled ``function`` for ``kernel``'s shapes."""
    import ctypes
    # the collapsed sizes, then the number of threads to use
    sizes = np.array(kernel.layout.sizes + (1,), dtype=np.int64)
    n_args = 1 + len(kernel.inputs) + kernel.n_outputs
    function.restype = None
    function.argtypes = [ctypes.py_object if object_mode else ctypes.c_void_p] * n_args
    in_specs = [(dtype.np, numel(shape) > 1) for shape, dtype in kernel.inputs]
    out_specs = [(tuple(kernel.avals[v][0]), kernel.avals[v][1].np) for v in kernel.outputs]
    ndarray, empty, asarray = np.ndarray, np.empty, np.asarray
    single = kernel.n_outputs == 1
    threads = build.max_threads()
    costly = sum(step.op.name in COSTLY_STEPS for step in kernel.steps)
    work = numel(kernel.domain) * (1 + COSTLY_STEP_WEIGHT * costly)
    parallel = work >= PARALLEL_MIN_ELEMENTS and threads > 1 and \
        (kernel.layout.rows > 1 or not kernel.reduced)
    call = _ThreadTuner(function, sizes, threads) if parallel else function
    if not object_mode:
        def call(*args, _call=call):
            return _call(*[a.ctypes.data for a in args])

    def run(xp, *arrays, out=None):
        args = [sizes]
        for a, (dtype, whole) in zip(arrays, in_specs):
            if a.__class__ is not ndarray or a.dtype is not dtype or \
                    (whole and not a.flags.c_contiguous):
                a = asarray(a, dtype=dtype, order="C")
            args.append(a)
        if out is None:
            outs = [empty(shape, dtype) for shape, dtype in out_specs]
        else:
            outs = [empty(spec[0], spec[1]) if o is None else o for o, spec in zip(out, out_specs)]
        call(*args, *outs)
        return outs[0] if single else tuple(outs)
    return run


class _ThreadTuner:
    """Calls a kernel with the number of threads that has lately been faster: every
    :data:`RETUNE_EVERY` calls, three on all cores and three on one are timed."""
    __slots__ = ("function", "sizes", "threads", "calls", "times")

    def __init__(self, function, sizes, threads: int):
        self.function, self.sizes, self.threads = function, sizes, threads
        self.calls = 0
        self.times: dict = {1: [], threads: []}

    def __call__(self, *args):
        phase = self.calls % RETUNE_EVERY
        self.calls += 1
        if phase >= 6:
            return self.function(*args)
        n = 1 if phase % 2 else self.threads
        self.sizes[-1] = n
        start = time.perf_counter()
        self.function(*args)
        self.times[n].append(time.perf_counter() - start)
        if phase == 5:
            one, many = (sorted(self.times[k])[1] for k in (1, self.threads))
            self.sizes[-1] = self.threads if many < 0.9 * one else 1
            for k in self.times:
                self.times[k].clear()


__all__ = ["CRenderer", "render", "PARALLEL_MIN_ELEMENTS", "RETUNE_EVERY"]
