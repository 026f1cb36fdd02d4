"""L-BFGS: a quasi-Newton method that builds an inverse-Hessian estimate from the last
few steps, optionally with a strong-Wolfe line search (after Mark Schmidt's minFunc)."""
from __future__ import annotations

from typing import Any, Callable, Iterable

from ..autograd.grad_mode import enable_grad, no_grad
from ..errors import EmberTypeError
from ..ops import registry
from ..ops.creation import zeros
from ..ops.shape import cat
from ..tensor import Tensor
from .optimizer import Optimizer, OptimizerError

__all__ = ["LBFGS"]


class LBFGS(Optimizer):
    """L-BFGS, with PyTorch's algorithm, defaults and state.

    One :meth:`step` runs up to ``max_iter`` iterations: each builds a search direction
    from the stored curvature pairs (the two-loop recursion), then moves ``lr`` along
    it (the first iteration ever: ``lr * min(1, 1 / |g|_1)``), or as far as a
    strong-Wolfe line search finds. It stops early when the gradient's largest entry
    is below ``tolerance_grad``, or the step or the loss change is below
    ``tolerance_change``, or after ``max_eval`` evaluations of the closure.

    The closure is required: it clears the gradients, computes the loss, calls
    ``backward()`` and returns the loss; it is called several times per step.
    All parameters form one group (no per-parameter options). The whole state is kept
    under the first parameter (``state[params[0]]``), as PyTorch keeps it.

    Its stopping tests and line search branch on the loss and gradient values, so a
    step cannot be compiled with ``ember.jit`` (it raises; ``ember.jit(fn,
    fallback=True)`` runs it eagerly).

    Args:
        params: the tensors to optimize (one group).
        lr: learning rate (the step length along the direction).
        max_iter: the most iterations per :meth:`step`.
        max_eval: the most closure evaluations per :meth:`step` (default
            ``max_iter * 5 // 4``).
        tolerance_grad: stop when ``max |gradient|`` is at most this.
        tolerance_change: stop when the step or the loss changes by less than this.
        history_size: how many curvature pairs to keep.
        line_search_fn: ``None`` (fixed steps) or ``"strong_wolfe"``.

    State (of the first parameter): ``func_evals``, ``n_iter``, ``d``, ``t``,
    ``old_dirs``, ``old_stps``, ``ro``, ``H_diag``, ``prev_flat_grad``, ``prev_loss``
    and, after the second iteration, ``al``.

    >>> opt = ember.optim.LBFGS(model.parameters(), line_search_fn="strong_wolfe")
    >>> def closure():
    ...     opt.zero_grad()
    ...     loss = loss_fn(model(x), y)
    ...     loss.backward()
    ...     return loss
    >>> opt.step(closure)
    """

    def __init__(self, params: Iterable, lr: float = 1, max_iter: int = 20,
                 max_eval: int | None = None, tolerance_grad: float = 1e-7,
                 tolerance_change: float = 1e-9, history_size: int = 100,
                 line_search_fn: str | None = None) -> None:
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = dict(lr=lr, max_iter=max_iter, max_eval=max_eval,
                        tolerance_grad=tolerance_grad, tolerance_change=tolerance_change,
                        history_size=history_size, line_search_fn=line_search_fn)
        super().__init__(params, defaults)
        self._check_one_group()

    def _check_group(self, group: dict[str, Any]) -> None:
        if not 0.0 <= group["lr"]:
            raise OptimizerError(f"LBFGS: Invalid learning rate: {group['lr']}")
        history_size = group["history_size"]
        if not isinstance(history_size, int) or history_size < 1:
            raise OptimizerError(f"LBFGS: history_size must be a positive int, got "
                                 f"{history_size!r}")
        if group["line_search_fn"] not in (None, "strong_wolfe"):
            raise OptimizerError("LBFGS: only 'strong_wolfe' is supported as "
                                 f"line_search_fn (or None), got {group['line_search_fn']!r}")

    def _check_one_group(self) -> None:
        if len(self.param_groups) != 1:
            raise OptimizerError("LBFGS doesn't support per-parameter options (parameter "
                                 f"groups); got {len(self.param_groups)} groups")

    @property
    def _params(self) -> list[Tensor]:
        return self.param_groups[0]["params"]

    # The parameters as one flat vector --------------------------------------------------
    def _flat_grad(self) -> Tensor:
        """All gradients, concatenated (zeros for a parameter without one)."""
        parts = []
        for p in self._params:
            if p.grad is None:
                parts.append(zeros(p.numel(), dtype=p.dtype, device=p.device))
            else:
                parts.append(p.grad.reshape(-1))
        return cat(parts, 0)

    def _move(self, step_size, direction: Tensor) -> None:
        """``params += step_size * direction`` (``direction`` flat)."""
        alpha = float(step_size)
        offset = 0
        for p in self._params:
            n = p.numel()
            p.add_(direction[offset:offset + n].reshape(p.shape), alpha=alpha)
            offset += n

    def _loss_and_grad_at(self, closure, start: list[Tensor], t, d: Tensor):
        """The loss and flat gradient at ``start + t * d``; the parameters are put back
        to ``start`` afterwards."""
        self._move(t, d)
        loss = float(_call(closure))
        flat_grad = self._flat_grad()
        for p, saved in zip(self._params, start):
            p.copy_(saved)
        return loss, flat_grad

    def step(self, closure: Callable[[], Any] = None):
        """Run up to ``max_iter`` L-BFGS iterations; returns the closure's first loss.

        Args:
            closure: clears the gradients, computes the loss, calls ``backward()`` and
                returns the loss.
        """
        if closure is None or not callable(closure):
            raise EmberTypeError("LBFGS.step: needs a closure that clears the gradients, "
                                 "computes the loss, calls backward() and returns the "
                                 f"loss; got {type(closure).__name__}")
        if registry._trace is not None:
            from ..compiler.trace import TraceError  # (only on this error path)
            raise TraceError("ember.jit: LBFGS.step cannot be compiled: its stopping "
                             "tests and line search branch on the values of the loss "
                             "and the gradients. Call it outside the compiled function, "
                             "or use ember.jit(fn, fallback=True) to run it eagerly.")
        self._check_one_group()
        with no_grad():
            return self._run(closure)

    def _run(self, closure):
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        history_size, line_search = group["history_size"], group["line_search_fn"]
        if line_search not in (None, "strong_wolfe"):
            raise OptimizerError(f"LBFGS: only 'strong_wolfe' is supported as "
                                 f"line_search_fn (or None), got {line_search!r}")

        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        first_loss = _call(closure)
        loss = float(first_loss)
        evals = 1
        state["func_evals"] += 1
        flat_grad = self._flat_grad()
        if flat_grad.abs().max() <= tolerance_grad:
            return first_loss  # already optimal

        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        H_diag = state.get("H_diag")
        prev_flat_grad, prev_loss = state.get("prev_flat_grad"), state.get("prev_loss")

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1

            # The search direction.
            if state["n_iter"] == 1:
                d = flat_grad.neg()
                old_dirs, old_stps, ro = [], [], []
                H_diag = 1
            else:
                y = flat_grad.sub(prev_flat_grad)
                s = d.mul(t)
                ys = y.dot(s)
                if ys > 1e-10:  # keep the pair only where the curvature is positive
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    H_diag = ys / y.dot(y)  # the initial inverse Hessian's scale
                if "al" not in state:
                    state["al"] = [None] * history_size
                d = _two_loop(flat_grad, old_dirs, old_stps, ro, H_diag, state["al"])

            if prev_flat_grad is None:
                prev_flat_grad = flat_grad.clone()
            else:
                prev_flat_grad.copy_(flat_grad)
            prev_loss = loss

            # The step length.
            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / flat_grad.abs().sum()) * lr
            else:
                t = lr
            gtd = flat_grad.dot(d)  # the directional derivative
            if gtd > -tolerance_change:
                break  # not a descent direction (any more)

            used = 0
            if line_search is not None:
                start = [p.clone() for p in self._params]

                def loss_and_grad(t_, d_, start=start):
                    return self._loss_and_grad_at(closure, start, t_, d_)
                loss, flat_grad, t, used = _strong_wolfe(
                    loss_and_grad, t, d, loss, flat_grad, gtd,
                    tolerance_change=tolerance_change, max_ls=max_eval - evals)
                self._move(t, d)
                optimal = flat_grad.abs().max() <= tolerance_grad
            else:
                self._move(t, d)
                if n_iter != max_iter:
                    # (a last iteration's loss is not needed: skip its evaluation)
                    loss = float(_call(closure))
                    flat_grad = self._flat_grad()
                    optimal = flat_grad.abs().max() <= tolerance_grad
                    used = 1
            evals += used
            state["func_evals"] += used

            # Stopping tests.
            if n_iter == max_iter or evals >= max_eval or optimal:
                break
            if d.mul(t).abs().max() <= tolerance_change:
                break  # the step is negligible
            if abs(loss - prev_loss) < tolerance_change:
                break  # the loss no longer changes

        state["d"] = d
        state["t"] = t
        state["old_dirs"] = old_dirs
        state["old_stps"] = old_stps
        state["ro"] = ro
        state["H_diag"] = H_diag
        state["prev_flat_grad"] = prev_flat_grad
        state["prev_loss"] = prev_loss
        return first_loss


def _call(closure):
    with enable_grad():
        return closure()


def _two_loop(flat_grad: Tensor, old_dirs: list, old_stps: list, ro: list, H_diag,
              al: list) -> Tensor:
    """The L-BFGS direction ``-H g``: the inverse-Hessian estimate of the stored pairs
    (y in ``old_dirs``, s in ``old_stps``, 1 / y.s in ``ro``) applied to ``-g``, in one
    buffer. ``al`` (state, reused) receives the first loop's coefficients."""
    q = flat_grad.neg()
    for i in range(len(old_dirs) - 1, -1, -1):
        al[i] = old_stps[i].dot(q) * ro[i]
        q.add_(old_dirs[i], alpha=-float(al[i]))
    r = q.mul(H_diag)
    for i in range(len(old_dirs)):
        be_i = old_dirs[i].dot(r) * ro[i]
        r.add_(old_stps[i], alpha=float(al[i] - be_i))
    return r


def _cubic_minimum(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimiser of the cubic through two points with their values ``f`` and slopes
    ``g``, clamped to ``bounds`` (default: between the points); the bounds' midpoint
    when the cubic has no minimum."""
    if bounds is None:
        bounds = (x1, x2) if x1 <= x2 else (x2, x1)
    low, high = bounds
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 ** 2 - g1 * g2
    if not d2_square >= 0:
        return (low + high) / 2.0
    d2 = d2_square.sqrt()
    if x1 <= x2:
        at = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        at = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(at, low), high)


def _strong_wolfe(loss_and_grad, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9,
                  max_ls=25):
    """A line search along ``d`` for a step ``t`` meeting the strong Wolfe conditions
    (sufficient decrease ``c1``, curvature ``c2``), from the loss ``f``, gradient ``g``
    and slope ``gtd`` at ``t = 0``. ``loss_and_grad(t, d)`` evaluates a trial step.

    Returns ``(loss, flat_grad, t, evaluations)`` at the step found."""
    d_norm = d.abs().max()
    g = g.clone()
    f_new, g_new = loss_and_grad(t, d)
    evals = 1
    gtd_new = g_new.dot(d)

    # Bracketing: grow the step until an interval holds a point meeting the conditions.
    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
    done = False
    ls_iter = 0
    while ls_iter < max_ls:
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.clone()], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.clone()], [gtd_prev, gtd_new]
            break
        # extrapolate, between 1.01 and 10 times the current step
        min_step = t + 0.01 * (t - t_prev)
        max_step = t * 10
        t_prev, t = t, _cubic_minimum(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                                      bounds=(min_step, max_step))
        f_prev, g_prev, gtd_prev = f_new, g_new.clone(), gtd_new
        f_new, g_new = loss_and_grad(t, d)
        evals += 1
        gtd_new = g_new.dot(d)
        ls_iter += 1
    if ls_iter == max_ls:  # out of evaluations: the best of the start and the last trial
        bracket, bracket_f, bracket_g = [0, t], [f, f_new], [g, g_new]

    # Zoom: shrink the bracket around a point meeting the conditions.
    insufficient_progress = False
    low, high = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break  # the bracket is too small to matter
        t = _cubic_minimum(bracket[0], bracket_f[0], bracket_gtd[0],
                           bracket[1], bracket_f[1], bracket_gtd[1])
        # A trial too close to an end of the bracket (twice in a row, or at it) moves
        # a tenth of the bracket inside it.
        lo_t, hi_t = min(bracket), max(bracket)
        eps = 0.1 * (hi_t - lo_t)
        if min(hi_t - t, t - lo_t) < eps:
            if insufficient_progress or t >= hi_t or t <= lo_t:
                t = hi_t - eps if abs(t - hi_t) < abs(t - lo_t) else lo_t + eps
                insufficient_progress = False
            else:
                insufficient_progress = True
        else:
            insufficient_progress = False

        f_new, g_new = loss_and_grad(t, d)
        evals += 1
        gtd_new = g_new.dot(d)
        ls_iter += 1
        if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low]:
            # not enough decrease, or no better than the low end: the new high end
            bracket[high], bracket_f[high] = t, f_new
            bracket_g[high], bracket_gtd[high] = g_new.clone(), gtd_new
            low, high = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True  # the strong Wolfe conditions hold
            elif gtd_new * (bracket[high] - bracket[low]) >= 0:
                # the minimum lies on the other side: the old low end becomes the high
                bracket[high], bracket_f[high] = bracket[low], bracket_f[low]
                bracket_g[high], bracket_gtd[high] = bracket_g[low], bracket_gtd[low]
            bracket[low], bracket_f[low] = t, f_new
            bracket_g[low], bracket_gtd[low] = g_new.clone(), gtd_new

    return bracket_f[low], bracket_g[low], bracket[low], evals
