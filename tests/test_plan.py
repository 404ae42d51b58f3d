"""The chunk-level network, on integers alone."""
import itertools

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from distsort.plan.network import (is_regular, normalize_chunks, padded_count, plan_network,
                                   regular_chunks, round_count)


def apply_network(rounds, columns):
    """Run comparators on columns of a 2-D array (one row per input)."""
    x = columns.copy()
    for rnd in rounds:
        for lo, hi in rnd.pairs:
            a, b = x[:, lo].copy(), x[:, hi].copy()
            x[:, lo], x[:, hi] = np.minimum(a, b), np.maximum(a, b)
    return x


@pytest.mark.parametrize("c", range(0, 17))
def test_zero_one_principle_exhaustive(c):
    """Every 0-1 input of length c comes out sorted: the network sorts everything."""
    rounds = plan_network(c)
    inputs = np.array(list(itertools.product((0, 1), repeat=c)), dtype=np.int8).reshape(2**c, c)
    out = apply_network(rounds, inputs)
    assert (np.diff(out, axis=1) >= 0).all()


@pytest.mark.parametrize("c", range(0, 40))
def test_pairs_are_disjoint_real_and_ordered(c):
    rounds = plan_network(c)
    assert len(rounds) <= round_count(c)
    for rnd in rounds:
        touched = [i for pair in rnd.pairs for i in pair]
        assert len(touched) == len(set(touched)), "a chunk appears twice in a round"
        assert all(0 <= lo < hi < c for lo, hi in rnd.pairs)
        assert rnd.pairs, "empty rounds are omitted"


@pytest.mark.parametrize("c", [1, 2, 4, 8, 16, 32, 64])
def test_power_of_two_has_full_round_count(c):
    levels = c.bit_length() - 1
    assert len(plan_network(c)) == levels * (levels + 1) // 2
    assert all(len(r.pairs) == c // 2 for r in plan_network(c))


def test_padding_drops_rounds_and_pairs():
    assert [r.pairs for r in plan_network(3)] == [((0, 1),), ((1, 2),), ((0, 1),)]
    assert padded_count(0) == padded_count(1) == 1
    assert padded_count(5) == 8 and padded_count(8) == 8 and padded_count(9) == 16
    with pytest.raises(ValueError):
        padded_count(-1)


def merge_split_network(blocks):
    """Compare-split of sorted blocks (the last may be shorter), as the graph does."""
    blocks = [np.sort(b) for b in blocks]
    for rnd in plan_network(len(blocks)):
        for lo, hi in rnd.pairs:
            both = np.sort(np.concatenate([blocks[lo], blocks[hi]]))
            blocks[lo], blocks[hi] = both[:len(blocks[lo])], both[len(blocks[lo]):]
    return np.concatenate(blocks) if blocks else np.array([], dtype=np.int64)


@settings(max_examples=150, deadline=None)
@given(n=st.integers(0, 400), chunk=st.integers(1, 40), seed=st.integers(0, 2**32 - 1))
def test_merge_split_sorts_random_integer_blocks(n, chunk, seed):
    """Beyond 16 chunks: random integer blocks, regular chunking with a short last chunk."""
    rng = np.random.default_rng(seed)
    data = rng.integers(-5, 5, size=n) if seed % 2 else rng.integers(-10**9, 10**9, size=n)
    sizes = regular_chunks(n, chunk)
    blocks = np.split(data, np.cumsum(sizes)[:-1])
    np.testing.assert_array_equal(merge_split_network(blocks), np.sort(data))


@pytest.mark.parametrize("c", [17, 31, 33, 63, 100])
def test_merge_split_many_chunks(c):
    rng = np.random.default_rng(c)
    data = rng.integers(0, 50, size=c * 7 - 3)
    blocks = np.split(data, np.cumsum(regular_chunks(len(data), 7))[:-1])
    assert len(blocks) == c
    np.testing.assert_array_equal(merge_split_network(blocks), np.sort(data))


def test_regular_chunkings():
    assert regular_chunks(10, 4) == (4, 4, 2)
    assert regular_chunks(8, 4) == (4, 4)
    assert regular_chunks(0, 3) == (0,)
    with pytest.raises(ValueError):
        regular_chunks(5, 0)
    assert is_regular((4, 4, 2)) and is_regular((0,)) and is_regular((7,))
    assert not is_regular((2, 4)) and not is_regular((4, 0, 4)) and not is_regular((4, 4, 0))


@given(st.lists(st.integers(0, 30), min_size=1, max_size=40))
def test_normalize_chunks_is_regular_and_keeps_length(chunks):
    out = normalize_chunks(tuple(chunks))
    assert sum(out) == sum(chunks)
    assert is_regular(out)
    assert len(out) <= max(1, sum(1 for c in chunks if c))
    if is_regular(tuple(chunks)):
        assert out == tuple(chunks)


@pytest.mark.parametrize("c", range(0, 13))
@pytest.mark.parametrize("run", [1, 2, 4, 8])
def test_network_from_sorted_runs_sorts_0_1_inputs(c, run):
    """Groups of ``run`` chunks sorted first (as one GPU sorts what fits it), then the
    rounds of ``plan_network(c, run)``: every 0-1 input comes out sorted."""
    inputs = np.array(list(itertools.product((0, 1), repeat=c)), dtype=np.int8).reshape(2**c, c)
    for g in range(0, c, run):
        inputs[:, g:g + run] = np.sort(inputs[:, g:g + run], axis=1)
    rounds = plan_network(c, run)
    assert len(rounds) <= round_count(c, run)
    out = apply_network(rounds, inputs)
    assert (np.diff(out, axis=1) >= 0).all()


def test_network_from_runs_is_the_tail_of_the_full_network():
    full = plan_network(16)
    assert plan_network(16, 4) == full[len(full) - round_count(16, 4):]
    assert plan_network(16, 16) == () and round_count(16, 32) == 0
    with pytest.raises(ValueError):
        plan_network(8, 3)
