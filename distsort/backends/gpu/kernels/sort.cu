// In-place bitonic sort kernels (Peters et al., section 3.2, with virtual padding).
//
// One kernel, `bitonic_pass`, does every pass over global memory (and `merge_pass`, the
// same pass reading two sorted runs, the first pass of a merge; `packed_pass`, the passes
// of a key-value sort of 4-byte integers as 64-bit codes, see `Packed`).  A block loads
// 2^tile_bits elements (a "tile", as large as shared memory allows) into shared memory,
// runs several steps of the network on them, and stores them back.  Inside the
// block the steps run in "phases": each thread takes ITEMS elements whose tile
// indices differ in log2(ITEMS) consecutive bits into registers, runs up to log2(ITEMS)
// steps there, and puts them back; a barrier separates phases.
//
// What one pass does (`mode`):
//   0  SORT   sort each contiguous tile completely (stages 1..tile_bits);
//   1  MERGE  half-cleaners on tile bits `top`..0 of each contiguous tile (the end of
//             every stage larger than a tile, and bitonic merges that fit a tile);
//   2  GROUP  the global steps of a stage: the block holds 2^k "rows" at global
//             strides 2^top .. 2^(top-k+1) (the group bits), each row 2^(tile_bits-k)
//             contiguous elements (coalesced), and runs the k steps of those bits;
//             with `mirror` the first is the stage's mirror step (stage 2^(top+1)).
//             With `pre` > 0 it first ends the previous stage: half-cleaners on the
//             row bits pre-1 .. 0 (each row is a contiguous run of the array), so a
//             stage's last steps and the next stage's first share one pass.
// Virtual padding: positions >= n load as the largest element and are never
// stored; every comparator puts the smaller element low, so the padding never moves
// and no padding memory exists.  Lanes (batched sorts) are blockIdx.y.
//
// The pieces, as CUB splits a sort: order.cuh (keys as order codes), bitonic.cuh (the
// network in registers), windows.cuh and phases.cuh (the phases in shared memory),
// tile_map.cuh and tile_io.cuh (which elements a block loads and stores, and how),
// layouts.cuh (where a pass reads and writes them), probes.cuh (instrumentation hooks);
// this file: `run_pass` and the kernels.
#include "layouts.cuh"
#include "phases.cuh"

// One pass (see the top of this file), its elements read from `src` and written to `dst`;
// `dm` is the descending mask of the keyed compares.
template <class K, class V, int ITEMS, int THREADS, int TILE_BITS, class Src, class Dst>
__device__ __forceinline__ void run_pass(const Src& src, const Dst& dst, long long n, int tile_bits,
                                         int mode, int top, int k, int mirror, int pre,
                                         typename K::U dm) {
    typedef typename K::U U;
    typedef typename V::U VU;
    constexpr int LOG_ITEMS = Log2<ITEMS>::v;
    constexpr int B = Batch<K, V>::N;
    extern __shared__ __align__(16) unsigned char smem[];
    U* sk = reinterpret_cast<U*>(smem);
    const auto key_bytes = (pad<LOG_ITEMS>(1 << tile_bits) * sizeof(U) + 15) & ~15;
    VU* sv = reinterpret_cast<VU*>(smem + key_bytes);
    const Tile tile((long long)blockIdx.x, tile_bits, mode, top, k, mirror);
    if (tile.start >= n) return;  // all padding (the map increases with L)
    const Walk<THREADS, LOG_ITEMS> wk(tile, tile_bits);
    const bool full = tile.last(tile_bits) < n;
    const int io = io_kind<B>(wk, full);
    DISTSORT_IO_KIND(io);
    // A whole MERGE tile of the tuned size: its first phase loads from global memory.
    const bool direct = mode == 1 && tile_bits == TILE_BITS && top == TILE_BITS - 1 && full &&
                        !PROBE && src.affine(TILE_BITS - LOG_ITEMS);
    if (PROBE == 2) {  // phases only: the tile is whatever shared memory holds
    } else if (direct)
        merge_first_phase<K, V, ITEMS, THREADS, TILE_BITS>(src, tile.start, sk, sv, dm);
    else load_any<K, V, THREADS, LOG_ITEMS>(io, src, n, wk, sk, sv);
    if (PROBE != 1) {  // the steps (none when probing global loads and stores only)
        if (mode == 0) {
            __syncthreads();
            phase_sort<K, V, ITEMS, THREADS>(sk, sv, tile_bits, dm);
        }
        if (mode == 2 && pre > 0)
            half_cleaners<K, V, ITEMS, THREADS, TILE_BITS>(sk, sv, tile_bits, pre - 1, 0, dm);
        // The steps of the pass as a list of segments: a first phase (a mirror step and the
        // half-cleaners in its window), then half-cleaners from bit `rem` down to `stop` in
        // phases.  SORT: one segment per stage above LOG_ITEMS; MERGE and GROUP: one.
        for (int s = LOG_ITEMS + 1, last = mode == 0 ? tile_bits : LOG_ITEMS + 1; s <= last; ++s) {
            int q = 0, mb = -1, steps = 0, rem, stop = 0;
            if (mode == 0) {  // the stage's mirror, its steps above bit LOG_ITEMS, then the rest
                q = s - LOG_ITEMS > LOG_ITEMS ? s - LOG_ITEMS : LOG_ITEMS;
                mb = s - 1 - q, steps = mb + 1;
                rem = q - 1;
            } else if (mode == 1) {
                rem = direct ? window(top, 0, tile_bits, LOG_ITEMS).low - 1 : top;
            } else {
                steps = mirror ? (k < LOG_ITEMS ? k : LOG_ITEMS) : 0;
                q = tile_bits - LOG_ITEMS, mb = LOG_ITEMS - 1;
                rem = tile_bits - 1 - steps, stop = tile_bits - k;
            }
            if (steps) {
                __syncthreads();
                run_phase<K, V, ITEMS, THREADS, TILE_BITS>(sk, sv, tile_bits, q, mb, mb - 1, steps,
                                                           dm);
            }
            half_cleaners<K, V, ITEMS, THREADS, TILE_BITS>(sk, sv, tile_bits, rem, stop, dm);
        }
    }
    __syncthreads();
    if (PROBE == 2) return;
    if (io == IO_ROWS) store_tile<K, V, THREADS, LOG_ITEMS, IO_ROWS>(dst, n, wk, sk, sv);
    else if (io == IO_STRIDED) store_tile<K, V, THREADS, LOG_ITEMS, IO_STRIDED>(dst, n, wk, sk, sv);
    else if (io == IO_SHORT) store_tile<K, V, THREADS, LOG_ITEMS, IO_SHORT>(dst, n, wk, sk, sv);
    else store_tile<K, V, THREADS, LOG_ITEMS, IO_ANY>(dst, n, wk, sk, sv);
}

template <class K, class V, int ITEMS, int THREADS, int MIN_BLOCKS, int TILE_BITS>
__global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
bitonic_pass(typename K::U* keys, typename V::U* vals, long long n, long long lane, int tile_bits,
             int mode, int top, int k, int mirror, int pre, u64_t dmask) {
    const typename K::U dm = (typename K::U)dmask;
    const Flat<K, V> io(keys + blockIdx.y * lane,
                        vals + (HasValues<V>::value ? blockIdx.y * lane : 0), dm);
    run_pass<K, V, ITEMS, THREADS, TILE_BITS>(io, io, n, tile_bits, mode, top, k, mirror, pre, dm);
}

// The first pass of a compare-split's merge: it reads the lower run a[0 .. ma) reversed,
// then b[0 .. n - ma) (the V-shaped sequence, `Runs`), and writes the n elements to
// keys/vals; the merge's other passes are `bitonic_pass` on keys/vals.  One lane.
template <class K, class V, int ITEMS, int THREADS, int MIN_BLOCKS, int TILE_BITS>
__global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
merge_pass(typename K::U* keys, typename V::U* vals, long long n, const typename K::U* a,
           const typename V::U* av, long long ma, const typename K::U* b,
           const typename V::U* bv, int tile_bits, int mode, int top, int k, int mirror, int pre,
           u64_t dmask) {
    const typename K::U dm = (typename K::U)dmask;
    const Runs<K, V> src(a, av, ma, b, bv, dm);
    run_pass<K, V, ITEMS, THREADS, TILE_BITS>(src, Flat<K, V>(keys, vals, dm), n, tile_bits, mode,
                                              top, k, mirror, pre, dm);
}

// A pass of a packed key-value sort (`Packed`) of 4-byte integer keys (KS) and values
// (VS): ENDS bit 0 for its first pass (it reads the keys and values, `Pairs`), bit 1 for
// its last (it writes them); the others read and write `Split` (its bit `zb`).
template <class KS, class VS, int ITEMS, int THREADS, int MIN_BLOCKS, int TILE_BITS, int ENDS>
__global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
packed_pass(u32_t* keys, u32_t* vals, long long n, long long lane, int tile_bits, int mode, int top,
            int k, int mirror, int pre, int zb, u64_t dmask) {
    typedef Packed<KS, VS> K;
    keys += blockIdx.y * lane;
    vals += blockIdx.y * lane;
    const Pairs<KS, VS> pairs{keys, vals, (u32_t)dmask};
    const Split split{reinterpret_cast<u64_t*>(keys), reinterpret_cast<u64_t*>(vals), zb};
    if constexpr (ENDS == 0)
        run_pass<K, NoValue, ITEMS, THREADS, TILE_BITS>(split, split, n, tile_bits, mode, top, k,
                                                        mirror, pre, 0);
    else if constexpr (ENDS == 1)
        run_pass<K, NoValue, ITEMS, THREADS, TILE_BITS>(pairs, split, n, tile_bits, mode, top, k,
                                                        mirror, pre, 0);
    else if constexpr (ENDS == 2)
        run_pass<K, NoValue, ITEMS, THREADS, TILE_BITS>(split, pairs, n, tile_bits, mode, top, k,
                                                        mirror, pre, 0);
    else
        run_pass<K, NoValue, ITEMS, THREADS, TILE_BITS>(pairs, pairs, n, tile_bits, mode, top, k,
                                                        mirror, pre, 0);
}

// Crossing count of a compare-split: #{i < min(ma, mb) : A[ma-1-i] > B[i]} by binary
// search (the predicate holds for i < k and fails after).  One thread.
template <class K, class V>
__global__ void crossing_count(const typename K::U* a, const typename V::U* av, long long ma,
                               const typename K::U* b, const typename V::U* bv, long long mb,
                               u64_t dmask, long long* out) {
    typedef typename K::U U;
    typedef typename V::U VU;
    constexpr bool HV = HasValues<V>::value;
    const U dm = (U)dmask;
    long long lo = 0, hi = ma < mb ? ma : mb;
    while (lo < hi) {
        const long long mid = (lo + hi) / 2, ia = ma - 1 - mid;
        const U ca = K::code(K::total(a[ia]), dm), cb = K::code(K::total(b[mid]), dm);
        const VU va = HV ? av[ia] : 0, vb = HV ? bv[mid] : 0;
        if (Cmp<K, V>::gt(ca, cb, va, vb, dm)) lo = mid + 1; else hi = mid;
    }
    *out = lo;
}
