"""The launch plan of the GPU sort (``distsort.backends.gpu.passes``), on integers alone."""
import pytest

from distsort.backends.gpu import passes, tuning


def network(p, merge=False):
    """The steps of the bitonic network on 2^p elements, in order: ``("mirror", bit)``
    (the first step of the stage of blocks 2^(bit+1)) or ``("half", bit)``."""
    if merge:
        return [("half", b) for b in range(p - 1, -1, -1)]
    return [(("mirror" if b == s - 1 else "half"), b) for s in range(1, p + 1)
            for b in range(s - 1, -1, -1)]


def steps(ps):
    """The steps the passes run, from what ``sort.cu`` says each mode does."""
    out = []
    for q in ps:
        if q.mode == passes.SORT:
            out += network(q.tile_bits)
        elif q.mode == passes.MERGE:
            out += [("half", b) for b in range(q.top, -1, -1)]
        else:
            out += [("half", b) for b in range(q.pre - 1, -1, -1)]
            out += [("mirror" if q.mirror and i == 0 else "half", q.top - i) for i in range(q.k)]
    return out


SHAPES = [(6, 2, 3), (8, 3, 5), (13, 4, 9), (13, 4, 8), (14, 5, 9), (10, 3, 7), (9, 2, 1)]


@pytest.mark.parametrize("tile,loge,kmax", SHAPES)
def test_schedule_runs_the_network(tile, loge, kmax):
    """Every size's passes run exactly the steps of the network on the padded length,
    each within what one block holds: a GROUP pass's rows of c = tb - k bits lie
    below its row bits, hold its ``pre`` steps and are at least the coalesced
    ``tile - kmax`` bits; a MERGE pass stays inside its tile."""
    for n in [2, 3, 17, 2**tile - 1, 2**tile + 1, 3 * 2**(tile + 2), 2**(tile + 9) + 5,
              2**(tile + 17)]:
        p = max((n - 1).bit_length(), loge)
        for merge in (False, True):
            ps = passes.schedule(n, tile, loge, kmax, merge)
            # A SORT pass sorts whole tiles: lengths below one pad to the tile.
            assert steps(ps) == network(max(p, 0 if merge else ps[0].tile_bits), merge), (n, merge)
            for q in ps:
                assert q.tile_bits <= max(tile, 2 * loge)
                if q.mode == passes.GROUP:
                    c = q.tile_bits - q.k
                    assert 1 <= q.k <= kmax and q.pre <= c <= q.top - q.k + 1
                    assert c >= tile - kmax
                elif q.mode == passes.MERGE:
                    assert q.top < q.tile_bits


@pytest.mark.parametrize("key,value,count,before", [
    (4, 0, 27, 34), (8, 0, 30, 37), (4, 4, 31, 38)])
def test_hopper_pass_counts(key, value, count, before):
    """2^28 elements on Hopper's block shapes: a stage's end and the next stage's start
    share a pass (``before``: one MERGE pass per stage, the counts of the v9 kernels)."""
    cfg = passes.config(tuning.TABLES[9], key, value)
    assert len(passes.plan(cfg, 2**28)) == count
    bits = cfg.tile_bits
    per_stage = 1 + sum(1 + -(-(s - bits) // cfg.kmax) for s in range(bits + 1, 29))
    assert per_stage == before
    # A bitonic merge is one stage: its passes are as before.
    merge = passes.plan(cfg, 2**29, merge=True)
    assert len(merge) == 1 + -(-(29 - cfg.tile_bits) // cfg.kmax)


@pytest.mark.parametrize("key,value,items,bits", [
    (4, 0, 32, 14), (8, 0, 32, 13), (4, 4, 16, 13), (8, 8, 8, 12), (1, 0, 32, 16)])
def test_hopper_block_shapes(key, value, items, bits):
    """Hopper's table: three 128-thread blocks per SM, 32 elements per thread for keys of
    4 bytes and of 8 (``keys8``, also the packed sorts' shape), 16 for other elements of
    8 bytes; the shared memory of ``min_blocks`` blocks fits an SM (228 KB, 1 KB of it
    reserved per block)."""
    cfg = passes.config(tuning.TABLES[9], key, value)
    shape = (cfg.threads, cfg.min_blocks, cfg.items_per_thread, cfg.tile_bits)
    assert shape == (128, 3, items, bits)
    assert cfg.min_blocks * (cfg.smem + 1024) <= 228 * 1024


def test_tuning_override_holds_for_every_size(monkeypatch):
    """``DISTSORT_TUNING`` sets one shape for every element size (``keys8`` is dropped)."""
    monkeypatch.setenv("DISTSORT_TUNING", '{"threads": 512, "min_blocks": 1}')
    tab = tuning.table(9)
    for key, value in [(4, 0), (8, 0), (4, 4)]:
        cfg = passes.config(tab, key, value)
        items = 32 if key + value <= 4 else 16
        assert (cfg.threads, cfg.min_blocks, cfg.items_per_thread) == (512, 1, items)
    monkeypatch.delenv("DISTSORT_TUNING")
    assert passes.config(tuning.table(9), 8, 0).items_per_thread == 32


def test_group_shape_only_with_the_same_schedule():
    """A table's ``group`` entries give GROUP passes that end no stage another block
    shape, only where its tile and steps per pass are the plan's (else it is dropped)."""
    base = {"smem": 8192, "threads": 16, "items_per_thread": [32, 16, 8], "row_bytes": 32,
            "min_blocks": 1}
    cfg = passes.config({**base, "group": {"threads": 8, "items_per_thread": [16, 8, 4]}}, 4)
    assert cfg.group == passes.config({**base, "threads": 8, "items_per_thread": [16, 8, 4]}, 4)
    shapes = {(p.mode, p.pre > 0): passes.pass_shape(cfg, p).threads
              for p in passes.plan(cfg, 2**20)}
    assert shapes == {(passes.SORT, False): 16, (passes.GROUP, False): 8,
                      (passes.GROUP, True): 16, (passes.MERGE, False): 16}
    assert passes.config({**base, "group": {"smem": 4096}}, 4).group is None  # smaller tile
    hopper = passes.config(tuning.TABLES[9], 8)
    assert (hopper.group.threads, hopper.group.tile_bits) == (256, hopper.tile_bits)
    assert passes.config(tuning.TABLES[9], 4).group is None
