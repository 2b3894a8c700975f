"""The 0/1 knapsack the advice solves: which files (or datasets) to stage
within the fast tier's free capacity, maximising the predicted saving.
Exact dynamic programming when the instance is small, otherwise the
greedy-by-ratio solution or the single best item, whichever saves more (at
least half the optimum); `_fill_in_order` is the "take it if it fits" loop
the rules and the greedy top-up share."""
from __future__ import annotations

import numpy as np

DP_CELLS = 20_000_000                 # items x capacity units solved exactly
BLOCK = 4096                          # capacity unit for the exact solution


def knapsack(sizes: np.ndarray, values: np.ndarray, capacity: int) -> np.ndarray:
    """Indices of the items to take (sizes in bytes, values >= 0)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    values = np.asarray(values, dtype=np.float64)
    cand = np.nonzero((sizes <= capacity) & (values > 0))[0]
    if len(cand) == 0 or capacity <= 0:
        return np.zeros(0, dtype=np.int64)
    if sizes[cand].sum() <= capacity:
        return cand
    # exact over capacity units as fine as the table allows; sizes round up,
    # the capacity down, so the choice always fits
    unit = max(1, -(-capacity * len(cand) // DP_CELLS))
    if unit <= BLOCK:
        return cand[_exact(-(-sizes[cand] // unit), values[cand], capacity // unit)]
    return cand[_greedy(sizes[cand], values[cand], capacity)]


def _exact(w: np.ndarray, v: np.ndarray, cap: int) -> np.ndarray:
    """0/1 knapsack by dynamic programming over capacity units."""
    best = np.zeros(cap + 1)
    took = np.zeros((len(w), cap + 1), dtype=bool)
    for i in range(len(w)):
        wi = int(w[i])
        if wi > cap:
            continue
        cand = np.full(cap + 1, -1.0)
        cand[wi:] = best[: cap + 1 - wi] + v[i]
        better = cand > best
        took[i] = better
        best = np.where(better, cand, best)
    chosen, c = [], cap
    for i in range(len(w) - 1, -1, -1):
        if took[i, c]:
            chosen.append(i)
            c -= int(w[i])
    return np.array(sorted(chosen), dtype=np.int64)


def _greedy(sizes: np.ndarray, values: np.ndarray, capacity: int) -> np.ndarray:
    """Greedy by value per byte, or the best single item if it is worth
    more: never less than half the optimum."""
    order = np.argsort(-(values / np.maximum(sizes, 1)), kind="stable")
    csum = np.cumsum(sizes[order])
    k = int(np.searchsorted(csum, capacity, side="right"))
    room = capacity - (int(csum[k - 1]) if k else 0)
    chosen = np.concatenate([order[:k], _fill_in_order(order[k:], sizes, room)]).astype(np.int64)   # top up
    best_single = int(np.argmax(np.where(sizes <= capacity, values, -1)))
    if values[best_single] > values[chosen].sum():
        chosen = np.array([best_single], dtype=np.int64)
    return np.sort(chosen)


def _fill_in_order(order: np.ndarray, sizes: np.ndarray, capacity: int) -> np.ndarray:
    """Take items in order while they fit, skipping those that do not."""
    order = np.asarray(order, dtype=np.int64)
    csum = np.cumsum(sizes[order])
    k = int(np.searchsorted(csum, capacity, side="right"))     # the prefix that fits at once
    room = capacity - (int(csum[k - 1]) if k else 0)
    taken, rest = [order[:k]], order[k:]
    # the rest as the loop "take it if it fits, stop when full" takes them, a run
    # at a time: a run that fits is taken whole, the item after it cannot fit
    # (nor can anything larger than the room left, later)
    while len(rest):
        rest = rest[sizes[rest] <= room]
        if not len(rest):
            break
        csum = np.cumsum(sizes[rest])
        k = int(np.searchsorted(csum, room, side="right"))
        full = int(np.searchsorted(csum, room, side="left"))     # the item that leaves no room: stop after it
        if full < k:
            taken.append(rest[:full + 1])
            break
        taken.append(rest[:k])
        room -= int(csum[k - 1])
        rest = rest[k + 1:]
    return np.sort(np.concatenate(taken).astype(np.int64))
