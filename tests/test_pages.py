"""NumPy output chunks of the k-way merge in the pages of the runs they consumed
(``distsort.backends.outofcore.pages``): the plan on integers against a simulation of
the memory it writes, and whole merges through shared blocks of a pool on the CPU."""
import itertools
import os

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from distsort.backends.outofcore import pages, pinned
from distsort.backends.outofcore.pinned import PinnedPool

from arrays import brute_co_ranks

pytestmark = pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="Linux only")


@st.composite
def chunk_ranges(draw):
    """Byte ranges of a chunk in ``k`` runs, cut into segments: ``starts``, ``ends``,
    ``out_ends``, page and item size."""
    size = draw(st.sampled_from([1, 4, 8]))
    page = draw(st.sampled_from([8, 16, 64]))
    k = draw(st.integers(1, 5))
    starts = [draw(st.integers(0, 40)) * size for _ in range(k)]
    segments = draw(st.integers(1, 5))
    steps = [[draw(st.integers(0, 30)) for _ in range(k)] for _ in range(segments)]
    columns = list(zip(*steps, strict=True))  # each run's steps
    ends = [[a + size * sum(col[:s + 1]) for a, col in zip(starts, columns, strict=True)]
            for s in range(segments)]
    out_ends = list(itertools.accumulate(size * sum(row) for row in steps))
    return starts, ends, out_ends, page


def _simulate(starts, ends, out_ends, page):
    """Carry out the plan on byte arrays: each segment reads its slices, then writes
    distinct bytes where the plan says; every write must land in a page the chunk has
    wholly read by then, or in the spare."""
    writes, mapped, spare = pages.page_plan(starts, ends, out_ends, page)
    k = len(starts)
    files = [np.full(max(ends[-1][r], starts[r]) + 2 * page, 255, np.uint8) for r in range(k)]
    files.append(np.full((spare + 1) * page, 255, np.uint8))
    expected = (np.arange(out_ends[-1] if out_ends else 0) % 251).astype(np.uint8)
    done, read = 0, list(starts)
    for s, end in enumerate(out_ends):
        read = ends[s]
        covered = 0
        for o, n, r, p in writes[s]:
            assert o == done + covered and n > 0
            if r < k:
                first, last = p // page * page, (p + n - 1) // page * page + page
                assert starts[r] <= first and last <= read[r], "a page not yet read"
            files[r][p:p + n] = expected[o:o + n]
            covered += n
        assert done + covered == end
        done = end
    return mapped, spare, files, expected


@settings(max_examples=300, deadline=None)
@given(chunk_ranges())
def test_page_plan_writes_only_read_pages_and_maps_the_chunk_in_order(case):
    starts, ends, out_ends, page = case
    mapped, spare, files, expected = _simulate(starts, ends, out_ends, page)
    k = len(starts)
    assert spare <= 2 * k + 1
    want = -(-out_ends[-1] // page)
    assert [o for o, n, _, _ in mapped] == list(itertools.accumulate(
        [0] + [n for _, n, _, _ in mapped]))[:-1]
    assert sum(n for _, n, _, _ in mapped) == want
    taken = [(r, p + i) for _, n, r, p in mapped for i in range(n)]
    assert len(set(taken)) == len(taken), "a page taken twice"
    # The chunk read through its pages is what was written.
    got = np.concatenate([files[r][p * page:(p + n) * page] for _, n, r, p in mapped]
                         or [np.zeros(0, np.uint8)])
    np.testing.assert_array_equal(got[:out_ends[-1]], expected)


def _pool():
    return PinnedPool(register=lambda a, n: None, unregister=lambda a: None, spares=False)


def _merge_chunk(pool, keys, values, cuts):
    """A k-way merge task on the CPU, as the GPU engine runs it: each segment reads its
    slices where they are now, merges them and writes the bytes to the plan's pages."""
    paged = [pages.paged_chunk(part, cuts, pool) for part in (keys, values)]
    o = 0
    for s, (c0, c1) in enumerate(itertools.pairwise(cuts)):
        k = np.concatenate([x[a:b] for x, a, b in zip(keys, c0, c1, strict=True)])
        v = np.concatenate([x[a:b] for x, a, b in zip(values, c0, c1, strict=True)])
        perm = np.argsort(k, kind="stable")
        for chunk, part in zip(paged, (k[perm], v[perm]), strict=True):
            raw, first = part.view(np.uint8), o * part.itemsize
            for at, target in chunk.targets(s):
                target[:] = raw[at - first:at - first + target.size]
        o += len(k)
    return [c.array(p[0].dtype) for c, p in zip(paged, (keys, values), strict=True)]


@pytest.mark.parametrize("dtype", ["float32", "int64", "uint16"])
def test_chunks_merged_in_any_order_take_their_runs_pages_and_equal_numpy(dtype, monkeypatch):
    # Blocks of a few files of three pages each: the chunks' pages cross files.
    monkeypatch.setattr(pinned, "PAGE", 16 * pages.PAGE)
    monkeypatch.setattr(pages, "FILE_BYTES", 3 * pages.PAGE)
    rng = np.random.default_rng(7)
    pool = _pool()
    lengths, chunk, segment = [9000, 1, 14000, 6000], 5000, 1300
    runs, positions, start = [], [], 0
    for n in lengths:
        data = np.sort(rng.integers(0, 300, n).astype(dtype), kind="stable")
        run = pool.empty(n, dtype)
        run[:] = data
        pos = pool.empty(n, np.int64)
        pos[:] = np.arange(start, start + n)
        runs.append(run)
        positions.append(pos)
        start += n
    total = sum(lengths)
    expected = np.concatenate([r.copy() for r in runs])
    order = np.argsort(expected, kind="stable")
    ends = list(range(0, total, chunk)) + [total]
    # Every co-rank is found before any task writes (``outofcore_graph.kway_cuts``).
    cuts = [[brute_co_ranks(runs, r) for r in [*range(a, b, segment), b]]
            for a, b in itertools.pairwise(ends)]
    chunks = {}
    for j in rng.permutation(len(cuts)):  # tasks run in any order
        chunks[j] = _merge_chunk(pool, runs, positions, cuts[j])
    keys = np.concatenate([chunks[j][0] for j in range(len(chunks))])
    vals = np.concatenate([chunks[j][1] for j in range(len(chunks))])
    np.testing.assert_array_equal(keys, expected[order])
    np.testing.assert_array_equal(vals, order)
    # Each chunk holds the runs' blocks: they return once runs and chunks are gone.
    in_use = pool.stats()["in_use_bytes"]
    del runs, positions, run, pos
    assert pool.stats()["in_use_bytes"] == in_use
    del chunks, keys, vals
    assert pool.stats()["in_use_bytes"] == 0


def test_a_run_outside_the_pool_takes_no_pages():
    pool = _pool()
    pooled, elsewhere = pool.empty(10, "int32"), np.zeros(10, "int32")
    assert pages.paged_chunk([pooled, elsewhere], [(0, 0), (5, 5)], pool) is None
    assert pages.paged_chunk([pooled], [(0,), (5,)], pool) is not None


def test_stitched_pages_write_through_to_their_files():
    block = pages.SharedBlock(3 * pages.PAGE, file_bytes=2 * pages.PAGE)
    out = pages.stitch([(0, 1, 0, 2), (1, 2, 0, 0)], 3 * pages.PAGE - 5, [block], [])
    out[:] = 1
    view = np.frombuffer(block.buffer, np.uint8)
    assert view[2 * pages.PAGE:].sum() == pages.PAGE  # the chunk's first page
    assert view[:2 * pages.PAGE].sum() == 2 * pages.PAGE - 5
    del out, view
    block.close()


def test_blocks_past_the_soft_descriptor_limit_raise_it_to_the_hard_one():
    import resource
    import subprocess
    import sys
    import textwrap
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 512:
        pytest.skip("the hard limit leaves no room")
    script = textwrap.dedent("""
        import os, resource
        from distsort.backends.outofcore import pages
        low = len(os.listdir("/proc/self/fd")) + 4
        resource.setrlimit(resource.RLIMIT_NOFILE,
                           (low, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
        blocks = [pages.SharedBlock(16 * pages.PAGE, file_bytes=pages.PAGE)
                  for _ in range(2)]
        print(sum(len(b.files) for b in blocks),
              resource.getrlimit(resource.RLIMIT_NOFILE)[0] > low)
        """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["32", "True"]
