"""Selection by rank without sorting the chunks: random samples, bands, one counting pass.

What the tasks of ``distsort.graph.select`` do for quantiles and the top k of unsorted
chunks (NumPy or CuPy alike):

1. :func:`sample_codes`: a random sample of a chunk's order codes (positions hashed
   from a counter where the chunk is, the same on NumPy and CuPy);
2. :func:`plan_bands`: the samples of all chunks, merged, bracket every rank between two
   sample codes (``distsort.plan.select.rank_margin`` elements either side); brackets
   that overlap merge into one *band*.  The band's ends are the *bounds*; the elements
   fall into *slots*: slot ``2j`` holds those strictly between ``bounds[j-1]`` and
   ``bounds[j]``, slot ``2j + 1`` those equal to ``bounds[j]``;
3. :func:`slot_pass`: one pass over a chunk counts every slot and keeps the elements of
   the slots asked for (the bands' insides, a small fraction): on the GPU one kernel
   (``distsort.backends.gpu.select``);
4. :func:`locate` and :func:`pick`: the counts of all chunks place every rank in its slot;
   a rank in a band's inside is read from the sorted elements kept, one equal to a bound
   is that bound; a rank the sample missed (its slot was not kept) is found by a second
   pass that keeps that slot (:func:`missed_slots`).

Equal elements never widen a band: the count of a bound's slot is all that a rank
equal to it takes.

>>> from distsort.backends.cpu.select import values_of
>>> chunk = np.array([5.0, 1.0, 4.0, 2.0, 3.0, 0.0])
>>> bounds = codes_of(np.array([1.0, 4.0]))
>>> hist, kept, _ = slot_pass(codes_of(chunk), bounds, take_slots(2, [2]))
>>> hist.tolist(), np.sort(values_of(kept, np.float64)).tolist()
([1, 1, 2, 1, 1], [2.0, 3.0])
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from distsort.backends.cpu.select import codes_of, to_host
from distsort.core.order import TIME_KINDS
from distsort.core.xp import namespace

__all__ = ["Bands", "sample_codes", "nan_count", "plan_bands", "take_slots", "slot_pass",
           "total_hist", "locate", "pick", "missed_slots", "sort_kept"]


class Bands(NamedTuple):
    """The bounds (sorted distinct codes, a host array) and the slots a pass keeps
    (a host bool array of ``2 * len(bounds) + 1``), for ``ranks`` of ``n`` elements;
    ``kept``: the sample's estimate of the fraction of the elements kept."""
    bounds: np.ndarray
    take: np.ndarray
    ranks: tuple
    n: int
    kept: float = 0.0


def sample_codes(chunk, size, seed, *, canonical=False, descending=False, nans=False):
    """``(codes, nan count)``: the order codes of ``size`` elements of ``chunk`` drawn at
    random positions (with replacement, from ``seed``; the whole chunk where ``size`` is
    its length) and, where ``nans``, the exact count of NaN (NaT) elements of the chunk,
    else 0."""
    flat = chunk.ravel()
    flat_sample = flat[_random_positions(namespace(chunk), flat.size, size, seed)] \
        if size < flat.size else flat
    codes = codes_of(flat_sample, canonical=canonical, descending=descending)
    return codes, nan_count(flat) if nans else 0


def _random_positions(xp, n, size, seed):
    """``size`` positions below ``n``, uniform and independent as far as any data can
    tell: SplitMix64 of a counter that starts after ``seed << 32``, the same on either
    array module and made where the chunk is, in a few elementwise passes (no
    generator to set up on the device)."""
    z = xp.arange(1, size + 1, dtype=np.uint64)
    z += np.uint64((int(seed) % 2**32) << 32)
    z *= np.uint64(0x9E3779B97F4A7C15)
    z ^= z >> np.uint64(30)
    z *= np.uint64(0xBF58476D1CE4E5B9)
    z ^= z >> np.uint64(27)
    z *= np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    return (z % np.uint64(n)).astype(np.int64)


def nan_count(chunk):
    """How many elements of ``chunk`` are NaN (or NaT)."""
    xp = namespace(chunk)
    if chunk.dtype.kind == "f":
        return int(xp.count_nonzero(xp.isnan(chunk)))
    if chunk.dtype.kind in TIME_KINDS:
        return int(xp.count_nonzero(chunk.view(np.int64) == np.iinfo(np.int64).min))
    return 0


def _merged_sample(samples, lengths):
    """The samples' codes sorted, the cumulative count of elements each stands for
    (an estimate of the elements at or below it), the largest weight, and the elements
    of the chunks sampled in part with the largest weight of those (0 where all were
    taken whole, so that the estimate is exact)."""
    parts = [(s, n) for s, n in zip(samples, lengths, strict=True) if s.size]
    xp = namespace(parts[0][0])
    codes = xp.concatenate([s for s, _ in parts])
    weights = xp.concatenate([xp.full(s.size, n / s.size) for s, n in parts])
    order = xp.argsort(codes)
    partial = [(n, n / s.size) for s, n in parts if s.size < n]
    return (codes[order], xp.cumsum(weights[order]), max(n / s.size for s, n in parts),
            sum(n for n, _ in partial), max((w for _, w in partial), default=0.0))


def plan_bands(samples, lengths, ranks, margin, *, above=False):
    """The :class:`Bands` of ``ranks`` (sorted) of the chunks of ``lengths`` from their
    samples (:func:`sample_codes`), each rank's bracket ``margin(p, sampled, weight)``
    elements either side (``distsort.plan.select.rank_margin``).  ``above``: one rank,
    and every element above it is wanted too (the top k): its band is open upwards."""
    n = int(sum(lengths))
    ranks = tuple(int(r) for r in ranks)
    if not ranks:
        return Bands(np.empty(0, np.uint8), np.zeros(1, bool), ranks, n)
    codes, cumulative, weight, sampled, partial_weight = _merged_sample(samples, lengths)
    size = codes.size
    xp = namespace(codes)
    r = np.asarray(ranks, np.float64)
    margin = np.array([margin(x / n, sampled, partial_weight) for x in ranks])
    lows = to_host(xp.searchsorted(cumulative, xp.asarray(r - margin), side="right")) - 1
    highs = to_host(xp.searchsorted(cumulative, xp.asarray(r + margin + weight), side="left"))
    if above:
        highs[:] = codes.size
    spans = _merge(lows.tolist(), highs.tolist())
    code_at = _at(codes, {i for span in spans for i in span if 0 <= i < size})
    below = _at(cumulative, {i for lo, hi in spans for i in (lo, hi - 1) if 0 <= i < size})
    bounds = np.unique(np.asarray(list(code_at.values()), codes.dtype))
    take = np.zeros(2 * bounds.size + 1, bool)
    kept = 0.0
    for lo, hi in spans:
        lo_code, hi_code = code_at.get(lo), code_at.get(hi)
        if lo_code is not None and lo_code == hi_code:
            continue  # one value brackets the ranks: its count is all they take
        gap = 0 if lo_code is None else int(np.searchsorted(bounds, lo_code)) + 1
        take[2 * gap] = True
        kept += (n if hi >= size else below.get(hi - 1, 0)) - below.get(lo, 0)
    return Bands(bounds, take, ranks, n, max(0.0, kept / n))


def _at(a, where):
    """``{i: a[i]}`` for the indices ``where``, read to the host at once."""
    where = sorted(where)
    if not where:
        return {}
    values = to_host(a[namespace(a).asarray(np.asarray(where, np.int64))]).tolist()
    return dict(zip(where, values, strict=True))


def _merge(lows, highs):
    """Sample index spans ``(lo, hi)`` (-1 and the sample's size: no bound), those
    that overlap merged; the spans come sorted, as the ranks are."""
    out = []
    for lo, hi in zip(lows, highs, strict=True):
        if out and lo < out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def take_slots(bounds_count, slots):
    """The bool array of ``2 * bounds_count + 1`` slots with ``slots`` set."""
    take = np.zeros(2 * int(bounds_count) + 1, bool)
    take[list(slots)] = True
    return take


def slot_pass(codes, bounds, take, *, positions=False, offset=0, expect=None):
    """``(hist, kept, where)``: how many of ``codes`` fall in each slot of ``bounds``
    (host int64, ``2 * len(bounds) + 1``), the codes of the slots ``take`` keeps (any
    order, on ``codes``' array module) and, where ``positions``, their positions plus
    ``offset`` (int64), else None.  CuPy codes: one kernel pass
    (``distsort.backends.gpu.select.slot_pass``, whose first room for the kept codes
    ``expect`` sizes: a fraction of the codes, or None)."""
    xp = namespace(codes)
    if xp is not np:
        from distsort.backends.gpu.select import slot_pass as on_gpu
        return on_gpu(codes, bounds, take, positions=positions, offset=offset, expect=expect)
    b = np.asarray(bounds, codes.dtype)
    slot = np.searchsorted(b, codes, side="left") + np.searchsorted(b, codes, side="right")
    hist = np.bincount(slot, minlength=2 * b.size + 1).astype(np.int64)
    keep = np.asarray(take, bool)[slot]
    where = np.flatnonzero(keep)
    return hist, codes[where], where.astype(np.int64) + int(offset) if positions else None


def total_hist(passes, bounds):
    """The slot counts of all chunks: the sum of every pass's ``hist``."""
    total = np.zeros(2 * len(bounds) + 1, np.int64)
    for p in passes:
        total += p[0]
    return total


def locate(hist, rank):
    """``(slot, index)``: the slot of ``rank`` (from 0, of all elements in code order)
    and its index among that slot's elements."""
    starts = np.concatenate([[0], np.cumsum(hist)])
    slot = int(np.searchsorted(starts, rank, side="right")) - 1
    return slot, int(rank - starts[slot])


def sort_kept(passes):
    """The codes the ``passes`` kept, of all chunks, sorted (on their array module)."""
    parts = [p[1] for p in passes if p is not None]
    if not parts:
        return np.empty(0, np.uint8)
    xp = namespace(parts[0])
    kept = xp.concatenate(parts)
    kept.sort()
    return kept


def missed_slots(bands, hist):
    """The slots (not kept) where ranks of ``bands`` fell: what a second pass keeps."""
    return sorted({s for s in (locate(hist, r)[0] for r in bands.ranks)
                   if s % 2 == 0 and not bands.take[s]})


def pick(bands, hist, kept, take, ranks):
    """The codes (a host array) of ``ranks`` whose slot ``take`` kept (``kept``: those
    elements of all chunks, sorted) or a bound holds; None for a rank elsewhere."""
    out = []
    kept_before = np.concatenate([[0], np.cumsum(np.where(take, hist, 0))])
    wanted = []
    for r in ranks:
        slot, index = locate(hist, r)
        if slot % 2:
            out.append(int(bands.bounds[slot // 2]))
        elif take[slot]:
            out.append(None)
            wanted.append((len(out) - 1, int(kept_before[slot]) + index))
        else:
            out.append(None)
    if wanted:
        xp = namespace(kept)
        found = to_host(kept[xp.asarray(np.asarray([w for _, w in wanted], np.int64))])
        for (i, _), code in zip(wanted, found.tolist(), strict=True):
            out[i] = code
    return out


# -- the tasks of a selection by bands

def run_pass(chunk, bands, take=None, *, canonical=False, descending=False, positions=False,  # noqa: PLR0913
             offset=0):
    """:func:`slot_pass` of ``chunk``'s codes over ``bands`` (keeping the slots of
    ``take``, by default the bands'); positions counted from ``offset``."""
    codes = codes_of(chunk, canonical=canonical, descending=descending)
    take = bands.take if take is None else take
    return slot_pass(codes, bands.bounds, take, positions=positions, offset=offset,
                     expect=bands.kept)


def run_again(chunk, bands, found, **options):
    """The second pass of a chunk (:func:`run_pass`, keeping the slots ``found``'s last
    item names), or None where the first found every rank."""
    take = found[-1]
    return None if take is None else run_pass(chunk, bands, take, **options)


def find_ranks(bands, passes):
    """``(codes, hist, take)`` after the first pass of every chunk: the codes of the
    bands' ranks (None where the sample missed one), the slot counts of all chunks and
    the slots a second pass keeps (None where none is needed)."""
    hist = total_hist(passes, bands.bounds)
    codes = pick(bands, hist, sort_kept(passes), bands.take, bands.ranks)
    missed = missed_slots(bands, hist)
    return codes, hist, take_slots(bands.bounds.size, missed) if missed else None


def ranks_found(bands, found, again):
    """The codes of the bands' ranks (a list), from :func:`find_ranks`' ``found`` and
    the second passes ``again``."""
    codes, hist, take = found
    if take is None:
        return codes
    second = pick(bands, hist, sort_kept(again), take, bands.ranks)
    return [a if a is not None else b for a, b in zip(codes, second, strict=True)]


def top_slots(bands, passes, positions):
    """``(slot, hist, take)`` after the first pass of the top k: the slot of the k-th
    largest, the slot counts, and the slots at or above it that a second pass keeps
    (None where none is): every such slot for ``positions``, else the insides only
    (elements equal to a bound are that bound, however many)."""
    hist = total_hist(passes, bands.bounds)
    slot = locate(hist, bands.ranks[0])[0]
    missed = [s for s in range(slot, hist.size) if not bands.take[s] and hist[s]
              and (positions or s % 2 == 0)]
    return slot, hist, take_slots(bands.bounds.size, missed) if missed else None


def top_kept(bands, found, passes, again, k, positions):
    """``(codes, where)``: every code kept by the passes of the top ``k`` and, for
    values, each bound at or above the k-th's slot as many times as the top k can take
    it; ``where`` their positions (None for values)."""
    slot, hist, _ = found
    done = [p for p in (*passes, *again) if p is not None]
    xp = namespace(done[0][1])
    codes = [p[1] for p in done]
    if not positions:
        for s in range(slot, hist.size):
            if s % 2 and hist[s]:
                codes.append(xp.full(min(int(hist[s]), k), bands.bounds[s // 2],
                                     dtype=done[0][1].dtype))
    where = xp.concatenate([p[2] for p in done]) if positions else None
    return xp.concatenate(codes), where
