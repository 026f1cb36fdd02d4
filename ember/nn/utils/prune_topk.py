"""Which ``k`` entries of a 1-D array ``torch.topk`` on the CPU picks, ties included.

``torch.nn.utils.prune`` decides which weights to drop with ``torch.topk``. Where the
k-th and (k+1)-th values differ the answer is simply the k smallest (or largest), and
NumPy gives it. Where equal values straddle that boundary (equal magnitudes, constant
weights, equal channel norms), PyTorch's choice is whatever its CPU kernel leaves in
front: ``std::partial_sort`` when ``64 * k <= n``, else ``std::nth_element``, both
from libstdc++, comparing values only. This module replays those two algorithms step
for step on (value, index) pairs, so that ember's masks equal PyTorch's even then.
"""
from __future__ import annotations

import numpy as np

__all__ = ["topk_indices"]


def _ranks(values: np.ndarray, largest: bool) -> np.ndarray:
    """Integer keys whose ``<`` is PyTorch's topk comparator: NaN counts as the largest
    value and all NaNs are equal; ``largest`` puts the largest first."""
    n = values.size
    order = np.argsort(values, kind="stable")  # (NaNs last)
    ordered = values[order]
    nan = np.isnan(ordered)
    step = np.empty(n, dtype=np.int64)
    if n:
        step[0] = 0
        step[1:] = (ordered[1:] != ordered[:-1]) & ~(nan[1:] & nan[:-1])
    ranks = np.empty(n, dtype=np.int64)
    ranks[order] = np.cumsum(step)
    return -ranks if largest else ranks


def topk_indices(values: np.ndarray, k: int, largest: bool) -> np.ndarray:
    """The indices (int64, unordered) of the ``k`` entries of 1-D ``values`` that
    ``torch.topk(values, k, largest=largest)`` returns on the CPU.

    >>> topk_indices(np.ones(10), 3, largest=False)   # PyTorch picks these too
    array([6, 7, 8])
    """
    values = np.asarray(values, dtype=np.float64).ravel()
    n = values.size
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    keys = _ranks(values, largest)
    if k >= n:
        return np.arange(n, dtype=np.int64)
    order = np.argsort(keys, kind="stable")
    if keys[order[k - 1]] != keys[order[k]]:  # no tie across the boundary: one answer
        return np.sort(order[:k])
    queue = list(zip(keys.tolist(), range(n)))
    if k * 64 <= n:
        _heap_select(queue, 0, k, n)
    else:
        _nth_element(queue, k - 1)
    return np.sort(np.fromiter((i for _, i in queue[:k]), dtype=np.int64, count=k))


# libstdc++'s algorithms (bits/stl_algo.h, bits/stl_heap.h), on a list of (key, index),
# comparing keys only -------------------------------------------------------------------
def _nth_element(q: list, nth: int) -> None:
    first, last = 0, len(q)
    if first == last or nth == last:
        return
    depth = 2 * ((last - first).bit_length() - 1)
    while last - first > 3:
        if depth == 0:
            _heap_select(q, first, nth + 1, last)
            q[first], q[nth] = q[nth], q[first]
            return
        depth -= 1
        cut = _unguarded_partition_pivot(q, first, last)
        if cut <= nth:
            first = cut
        else:
            last = cut
    _insertion_sort(q, first, last)


def _unguarded_partition_pivot(q: list, first: int, last: int) -> int:
    mid = first + (last - first) // 2
    _move_median_to_first(q, first, first + 1, mid, last - 1)
    return _unguarded_partition(q, first + 1, last, q[first][0])


def _move_median_to_first(q: list, result: int, a: int, b: int, c: int) -> None:
    ka, kb, kc = q[a][0], q[b][0], q[c][0]
    if ka < kb:
        pick = b if kb < kc else (c if ka < kc else a)
    else:
        pick = a if ka < kc else (c if kb < kc else b)
    q[result], q[pick] = q[pick], q[result]


def _unguarded_partition(q: list, first: int, last: int, pivot) -> int:
    while True:
        while q[first][0] < pivot:
            first += 1
        last -= 1
        while pivot < q[last][0]:
            last -= 1
        if not first < last:
            return first
        q[first], q[last] = q[last], q[first]
        first += 1


def _insertion_sort(q: list, first: int, last: int) -> None:
    for i in range(first + 1, last):
        value = q[i]
        if value[0] < q[first][0]:
            q[first + 1:i + 1] = q[first:i]
            q[first] = value
            continue
        j = i
        while value[0] < q[j - 1][0]:
            q[j] = q[j - 1]
            j -= 1
        q[j] = value


def _heap_select(q: list, first: int, middle: int, last: int) -> None:
    _make_heap(q, first, middle)
    for i in range(middle, last):
        if q[i][0] < q[first][0]:
            value = q[i]  # (pop_heap: the top goes to i, the heap re-forms around value)
            q[i] = q[first]
            _adjust_heap(q, first, 0, middle - first, value)


def _make_heap(q: list, first: int, last: int) -> None:
    length = last - first
    if length < 2:
        return
    parent = (length - 2) // 2
    while True:
        _adjust_heap(q, first, parent, length, q[first + parent])
        if parent == 0:
            return
        parent -= 1


def _adjust_heap(q: list, first: int, hole: int, length: int, value) -> None:
    top = hole
    child = hole
    while child < (length - 1) // 2:
        child = 2 * (child + 1)
        if q[first + child][0] < q[first + child - 1][0]:
            child -= 1
        q[first + hole] = q[first + child]
        hole = child
    if length % 2 == 0 and child == (length - 2) // 2:
        child = 2 * (child + 1)
        q[first + hole] = q[first + child - 1]
        hole = child - 1
    parent = (hole - 1) // 2
    while hole > top and q[first + parent][0] < value[0]:
        q[first + hole] = q[first + parent]
        hole = parent
        parent = (hole - 1) // 2
    q[first + hole] = value
