// In-place bitonic sort kernels (Peters et al., section 3.2, with virtual padding).
//
// One kernel, `bitonic_pass`, does every pass over global memory (and `merge_pass`, the
// same pass reading two sorted runs, the first pass of a merge; `packed_pass`, the passes
// of a key-value sort of 4-byte integers as 64-bit codes, see `Packed`).  A block loads
// 2^tb elements (a "tile", as large as shared memory allows) into shared memory,
// runs several steps of the network on them, and stores them back.  Inside the
// block the steps run in "phases": each thread takes E elements whose tile
// indices differ in log2(E) consecutive bits into registers, runs up to log2(E)
// steps there, and puts them back; a barrier separates phases.
//
// What one pass does (`mode`):
//   0  SORT   sort each contiguous tile completely (stages 1..tb);
//   1  MERGE  half-cleaners on tile bits `top`..0 of each contiguous tile (the end of
//             every stage larger than a tile, and bitonic merges that fit a tile);
//   2  GROUP  the global steps of a stage: the block holds 2^k "rows" at global
//             strides 2^top .. 2^(top-k+1) (the group bits), each row 2^(tb-k)
//             contiguous elements (coalesced), and runs the k steps of those bits;
//             with `mirror` the first is the stage's mirror step (stage 2^(top+1)).
//             With `pre` > 0 it first ends the previous stage: half-cleaners on the
//             row bits pre-1 .. 0 (each row is a contiguous run of the array), so a
//             stage's last steps and the next stage's first share one pass.
// Virtual padding: positions >= n load as the largest element and are never
// stored; every comparator puts the smaller element low, so the padding never moves
// and no padding memory exists.  Lanes (batched sorts) are blockIdx.y.
#include "bitonic.cuh"

// Shared memory holds one spare slot after every E elements, so that the E elements of
// a phase group sit at  base + m * step  (see `phase`) and a warp's accesses fall in
// 32 different banks.
template <int LOGE> __device__ __forceinline__ int pad(int i) { return i + (i >> LOGE); }

// Which phase covers the half-cleaners from bit `rem` down to `stop` of a tile of 2^tb
// (rem >= stop): the largest window of log2 E bits at q = 0 or q >= LOGE (the padding
// then stays affine) and q <= tb - LOGE, holding bits rem .. low.  The kernel's loop
// below and the compile-time phases (`Static`) take their windows from here.
struct Window {
    int q, j, s, low;  // window at bit q; half-cleaners on register bits j .. j-s+1
};
__host__ __device__ constexpr Window window(int rem, int stop, int tb, int loge) {
    int q = 0;
    if (rem >= loge) {
        q = rem - loge + 1 > stop ? rem - loge + 1 : stop;
        q = q < loge ? loge : q > tb - loge ? tb - loge : q;
    }
    const int low = q > stop ? q : stop;
    return Window{q, rem - q, rem - low + 1, low};
}

// One phase: every group of E elements at tile index
//   hi << (q + LOGE) | m << q | x,     m = 0 .. E-1 in registers,
// where the registers with bit `mb` set take x ^ (2^q - 1) instead of x (mb >= 0: the
// mirror step of register blocks of 2^(mb+1), i.e. of the stage with blocks of
// 2^(q+mb+1)), then half-cleaners on register bits jtop, jtop-1, ...: nsteps steps in
// all, the mirror included.  q is 0 or >= LOGE: the padding then adds, per register,
// m * step to the group's base (no shifts or ORs per element).  MB is mb when known
// at compile time (-1: no mirror), or -2 (mb at run time: a select per element).
// Q, J, S >= 0: q, jtop and nsteps known at compile time (`Static`): the E addresses
// are one base plus immediate offsets and the steps are straight-line code; -1: at
// run time (one multiply-add per address, a switch and register moves per step).
template <class K, class V, int E, int NT, int MB, int Q = -1, int J = -1, int S = -1>
__device__ __forceinline__ void phase(typename K::U* sk, typename V::U* sv, int tb, int q, int mb,
                                      int jtop, int nsteps, typename K::U dm) {
    typedef typename K::U U;
    typedef typename V::U VU;
    constexpr int LOGE = Log2<E>::v;
    constexpr bool HV = HasValues<V>::value;
    constexpr bool CT = Q >= 0 && J >= 0 && S >= 0;
    if constexpr (CT) q = Q;
    else if constexpr (MB != -2) mb = MB;
    const int groups = 1 << (tb - LOGE);
    const int qmask = (1 << q) - 1;
    const int step = q == 0 ? 1 : (1 << q) + (1 << (q - LOGE));
    for (int g = threadIdx.x; g < groups; g += NT) {
        const int x = g & qmask, hi = (g >> q) << (q + LOGE);
        const int a0 = pad<LOGE>(hi | x), a1 = pad<LOGE>(hi | (x ^ qmask));
        auto at = [&](int m) {
            if constexpr (MB == -1) return a0 + m * step;
            else if constexpr (MB >= 0) return (((m >> MB) & 1) ? a1 : a0) + m * step;
            else return (((m >> mb) & 1) ? a1 : a0) + m * step;
        };
        U r[E];
        VU w[E];
#pragma unroll
        for (int m = 0; m < E; ++m) {
            r[m] = sk[at(m)];
            if constexpr (HV) w[m] = sv[at(m)];
        }
        if constexpr (CT) {
            if constexpr (MB >= 0) {
                mirror<K, V, E, MB + 1>(r, w, dm);
                half_clean_seq<K, V, E, MB - 1, S - 1>(r, w, dm);
            } else {
                half_clean_seq<K, V, E, J, S>(r, w, dm);
            }
        } else {
            int j = jtop, s = nsteps;
            if (mb >= 0) {
                mirror_rt<K, V, E>(mb + 1, r, w, dm);
                j = mb - 1;
                s -= 1;
            }
            for (; s > 0; --s, --j) half_clean_rt<K, V, E>(j, r, w, dm);
        }
#pragma unroll
        for (int m = 0; m < E; ++m) {
            sk[at(m)] = r[m];
            if constexpr (HV) sv[at(m)] = w[m];
        }
    }
}

// Stages 1..LOGE inside registers: each thread sorts E contiguous elements.
template <class K, class V, int E, int NT>
__device__ __forceinline__ void phase_sort(typename K::U* sk, typename V::U* sv, int tb,
                                           typename K::U dm) {
    typedef typename K::U U;
    typedef typename V::U VU;
    constexpr int LOGE = Log2<E>::v;
    constexpr bool HV = HasValues<V>::value;
    for (int g = threadIdx.x; g < (1 << (tb - LOGE)); g += NT) {
        const int a = g * (E + 1);  // pad(g << LOGE)
        U r[E];
        VU w[E];
#pragma unroll
        for (int m = 0; m < E; ++m) {
            r[m] = sk[a + m];
            if constexpr (HV) w[m] = sv[a + m];
        }
        reg_sort<K, V, E>(r, w, dm);
#pragma unroll
        for (int m = 0; m < E; ++m) {
            sk[a + m] = r[m];
            if constexpr (HV) sv[a + m] = w[m];
        }
    }
}

// Where a block's tile lives in global memory.  Tile index L = M << c | col (row M of
// 2^c contiguous elements) is at  start + M * rowstep + col,  plus `flip` in the
// upper half of the rows in the mirror pass of a stage (its rows pair with the
// mirrored lower ones).  SORT and MERGE tiles are one contiguous row.
struct Tile {
    long long start, rowstep, flip;
    int c;
    __device__ __forceinline__ Tile(long long blk, int tb, int mode, int top, int k, int mirror) {
        if (mode != 2) {
            start = blk << tb, rowstep = 0, flip = 0, c = tb;
            return;
        }
        c = tb - k;
        const int midbits = top - k + 1 - c;
        const long long mmask = (1LL << midbits) - 1, mid = blk & mmask;
        start = ((blk >> midbits) << (top + 1)) + (mid << c);
        rowstep = 1LL << (top - k + 1);
        flip = mirror ? ((mid ^ mmask) - mid) << c : 0;
    }
    // The largest global index of the tile (the map increases with L).
    __device__ __forceinline__ long long last(int tb) const {
        const long long rows = 1LL << (tb - c);
        return start + (rows - 1) * rowstep + (rows > 1 ? flip : 0) + (1LL << c) - 1;
    }
};

// This thread's elements of the tile: L = threadIdx.x + e * NT, e = 0 .. count-1; in
// global memory at  b + e * d + (e >> sh) * w  (+ flip in the upper half of the rows).
// Tiles whose rows hold NT elements or more ("rows"): d = NT and every 2^sh elements
// start a new row; shorter rows ("strided"): each step of NT covers several rows, d
// apart, and w = 0.  `run` elements from any multiple of `run` lie d apart.
template <int NT, int LOGE> struct Walk {
    long long b, d, w, flip;
    int sh, half, count, run;
    bool rows;
    __device__ __forceinline__ Walk(const Tile& t, int tb) {
        constexpr int LNT = Log2<NT>::v;
        const int tid = threadIdx.x;
        const int T = 1 << tb;
        count = T > tid ? (T - tid + NT - 1) / NT : 0;
        half = (T / 2 + NT - 1 - tid) / NT;  // elements with L < T/2
        flip = t.flip;
        rows = t.c >= LNT;
        if (rows) {
            b = t.start + tid, d = NT, sh = t.c - LNT, w = t.rowstep - (1LL << t.c);
            run = 1 << sh;
        } else {
            b = t.start + (tid & ((1 << t.c) - 1)) + (long long)(tid >> t.c) * t.rowstep;
            d = (long long)(NT >> t.c) * t.rowstep, sh = 30, w = 0;
            run = flip ? half : count;
        }
    }
    __device__ __forceinline__ long long at(int e) const {
        return b + e * d + (long long)(e >> sh) * w + (e >= half ? flip : 0);
    }
    // Its shared-memory slot: pad(L), affine in e when E divides NT.
    __device__ __forceinline__ int spos(int e) const {
        if constexpr (NT % (1 << LOGE) == 0)
            return pad<LOGE>(threadIdx.x) + e * (NT + (NT >> LOGE));
        else
            return pad<LOGE>(threadIdx.x + e * NT);
    }
};

// How a batch of a thread's elements is addressed, the tile entirely below n and the
// batches whole: IO_ROWS and IO_STRIDED when every batch lies in one run: the batch's
// first index plus u * NT (immediate offsets) or u * d; IO_SHORT when a batch spans
// several whole rows of fewer than BATCH * NT elements (GROUP passes of 3 to 6 steps
// on Hopper's tiles): plus u * NT and a row step every 2^sh elements.  IO_ANY: each
// element on its own, with the bounds checks of the virtual padding (about twice
// the time of the others per pass on an H200).
enum { IO_ANY = 0, IO_ROWS = 1, IO_STRIDED = 2, IO_SHORT = 3 };

// Element u of a batch relative to the batch's first (IO_ROWS, IO_STRIDED, IO_SHORT:
// the callers offset the pointers to it), or element e itself (IO_ANY).
template <int NT, int LOGE, int IO>
__device__ __forceinline__ long long batch_at(const Walk<NT, LOGE>& wk, int e) {
    if constexpr (IO == IO_ROWS) return (long long)e * NT;
    else if constexpr (IO == IO_STRIDED) return e * wk.d;
    else if constexpr (IO == IO_SHORT) return (long long)e * NT + (e >> wk.sh) * wk.w;
    else return wk.at(e);
}

#ifndef DISTSORT_IO_KIND
#define DISTSORT_IO_KIND(io)
#endif
template <int BATCH, int NT, int LOGE>
__device__ __forceinline__ int io_kind(const Walk<NT, LOGE>& wk, bool full) {
    if (!full || wk.count % BATCH) return IO_ANY;
    if (wk.run % BATCH == 0) return wk.rows ? IO_ROWS : IO_STRIDED;
    // Whole rows per batch (batches start on a row), and no batch straddles the
    // mirror's flip at element `half`.
    if (wk.rows && BATCH % wk.run == 0 && (wk.flip == 0 || wk.half % BATCH == 0))
        return IO_SHORT;
    return IO_ANY;
}

// Copies from global to shared memory that hold no registers while in flight (cp.async,
// sm_80 and later; 4 or 8 bytes): a thread has its whole share of a tile in flight at
// once, where the loads through registers (`load_tile`) have one batch.  Three blocks of
// 128 threads per SM (Hopper's table) have too few registers for enough batches.
template <class T> __device__ __forceinline__ void copy_async(T* dst, const T* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    static_assert(sizeof(T) == 4 || sizeof(T) == 8, "cp.async copies 4, 8 or 16 bytes");
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n"
                 :: "r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src), "n"(sizeof(T))
                 : "memory");
#else
    *dst = *src;
#endif
}
__device__ __forceinline__ void copy_async_wait() {  // this thread's copies have landed
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}
// DISTSORT_ASYNC=0 (benchmarks/overlap_probe.py --define) loads every tile through registers.
#ifndef DISTSORT_ASYNC
#define DISTSORT_ASYNC 1
#endif
template <class K, class V> struct Async {  // element sizes cp.async copies
    static constexpr bool ok = (sizeof(typename K::U) == 4 || sizeof(typename K::U) == 8) &&
        (!HasValues<V>::value || sizeof(typename V::U) == 4 || sizeof(typename V::U) == 8);
};

// Where a pass reads its elements (`Src`) and writes them (`Dst`) in global memory.
// Element  i0 + d : i0 the first element of a thread's batch, d its offset in the batch
// (`batch_at`: multiples of NT; d = 0 in IO_ANY, where i0 is the element).  `fetch`
// reads an element's code and value through registers; `copy` puts its bits into its
// shared-memory slots by cp.async, and `fix` turns them into its code afterwards where
// `raw` says that they are not; `put` writes one.  `affine(q)`: offsets of 2^q are d's.
template <class K> struct Codes {  // keys as codes: the total order, XOR the descending mask
    typedef typename K::U U;
    U dm;
    __device__ __forceinline__ bool raw() const { return K::KIND != KIND_UNSIGNED || dm != 0; }
    __device__ __forceinline__ void fix(U& c) const { c = (U)(K::total(c) ^ dm); }
    __device__ __forceinline__ bool affine(int) const { return true; }
};

// The array a pass sorts in place: element i at keys[i] (and vals[i]).
template <class K, class V> struct Flat : Codes<K> {
    typedef typename K::U U;
    typedef typename V::U VU;
    static constexpr bool HV = HasValues<V>::value;
    U* keys;
    VU* vals;
    __device__ __forceinline__ Flat(U* k, VU* v, U dm) : Codes<K>{dm}, keys(k), vals(v) {}
    __device__ __forceinline__ void fetch(long long i0, long long d, U& c, VU& v) const {
        c = (U)(K::total(keys[i0 + d]) ^ this->dm);
        if constexpr (HV) v = vals[i0 + d];
    }
    __device__ __forceinline__ void copy(long long i0, long long d, U* ks, VU* vs) const {
        copy_async(ks, keys + i0 + d);
        if constexpr (HV) copy_async(vs, vals + i0 + d);
    }
    __device__ __forceinline__ void put(long long i0, long long d, U c, VU v) const {
        keys[i0 + d] = K::untotal((U)(c ^ this->dm));
        if constexpr (HV) vals[i0 + d] = v;
    }
};

// The first pass of a compare-split's merge reads the two runs that the merge combines
// where they lie: element i of the V-shaped sequence is  a[ma - 1 - i]  below ma (the
// lower run, reversed) and  b[i - ma]  above.  It saves the merge a pass that would copy
// them into the output first.
template <class K, class V> struct Runs : Codes<K> {
    typedef typename K::U U;
    typedef typename V::U VU;
    static constexpr bool HV = HasValues<V>::value;
    const U* a_end;  // a + ma - 1: element i < ma is a_end[-i]
    const VU* av_end;
    const U* b;
    const VU* bv;
    long long ma;
    __device__ __forceinline__ Runs(const U* a, const VU* av, long long ma_, const U* b_,
                                    const VU* bv_, U dm)
        : Codes<K>{dm}, a_end(a + (ma_ - 1)), av_end(av + (HV ? ma_ - 1 : 0)), b(b_), bv(bv_),
          ma(ma_) {}
    __device__ __forceinline__ const U* key_at(long long i) const {
        return i < ma ? a_end - i : b + (i - ma);
    }
    __device__ __forceinline__ const VU* val_at(long long i) const {
        return i < ma ? av_end - i : bv + (i - ma);
    }
    __device__ __forceinline__ void fetch(long long i0, long long d, U& c, VU& v) const {
        c = (U)(K::total(*key_at(i0 + d)) ^ this->dm);
        if constexpr (HV) v = *val_at(i0 + d);
    }
    __device__ __forceinline__ void copy(long long i0, long long d, U* ks, VU* vs) const {
        copy_async(ks, key_at(i0 + d));
        if constexpr (HV) copy_async(vs, val_at(i0 + d));
    }
};

// Packed key-value sorts: 4-byte integer keys and 4-byte integer values, each element one
// 64-bit code (the key's code above the value's, the keyed order of `Cmp`), so that every
// pass moves one stream of 8-byte elements with one compare per comparator, as a sort of
// uint64 keys does.  The first pass packs the user's keys and values (`Pairs`) and the
// last unpacks them; between them the elements live in the same bytes (`Split`).
template <class KS, class VS> struct Packed {
    static_assert(sizeof(typename KS::U) == 4 && sizeof(typename VS::U) == 4 &&
                  KS::KIND != KIND_FLOAT && VS::KIND != KIND_FLOAT,
                  "packed sorts: 4-byte integer keys and values");
    typedef u64_t U;
    static constexpr int KIND = KIND_UNSIGNED;
    static __host__ __device__ __forceinline__ U total(U c) { return c; }
    static __host__ __device__ __forceinline__ U untotal(U c) { return c; }
    // The value's code is its canonical code (integers: the total one, a bijection).
    static __host__ __device__ __forceinline__ U code(u32_t key, u32_t val, u32_t dm) {
        return (U)(KS::total(key) ^ dm) << 32 | VS::value_code(val);
    }
    static __host__ __device__ __forceinline__ u32_t key(U c, u32_t dm) {
        return KS::untotal((u32_t)(c >> 32) ^ dm);
    }
    static __host__ __device__ __forceinline__ u32_t val(U c) { return VS::untotal((u32_t)c); }
};

// A packed sort's keys and values where the user has them (its first and last pass).
template <class KS, class VS> struct Pairs {
    typedef Packed<KS, VS> P;
    typedef u64_t U;
    typedef NoValue::U VU;
    u32_t* keys;
    u32_t* vals;
    u32_t dm;
    __device__ __forceinline__ void fetch(long long i0, long long d, U& c, VU&) const {
        c = P::code(keys[i0 + d], vals[i0 + d], dm);
    }
    __device__ __forceinline__ void copy(long long i0, long long d, U* ks, VU*) const {
        u32_t* w = reinterpret_cast<u32_t*>(ks);  // little-endian: the key is the high word
        copy_async(w + 1, keys + i0 + d);
        copy_async(w, vals + i0 + d);
    }
    __device__ __forceinline__ bool raw() const {
        return KS::KIND != KIND_UNSIGNED || VS::KIND != KIND_UNSIGNED || dm != 0;
    }
    __device__ __forceinline__ void fix(U& c) const { c = P::code((u32_t)(c >> 32), (u32_t)c, dm); }
    __device__ __forceinline__ void put(long long i0, long long d, U c, VU) const {
        keys[i0 + d] = P::key(c, dm);
        vals[i0 + d] = P::val(c);
    }
    __device__ __forceinline__ bool affine(int) const { return true; }
};

// A packed sort's elements between its first and last pass: element i in the 64-bit slot
// (i without its bit zb) of the keys' memory where that bit is 0, of the values' where 1.
// So a tile of 2^tb > 2^zb elements fills exactly the bytes that its keys and values had
// (packing and unpacking are in place), runs of 2^zb elements (128 bytes) are contiguous,
// and an offset d that is a multiple of 2^(zb+1) (NT is, `passes.split_bit`) is d/2 slots.
struct Split {
    typedef u64_t U;
    typedef NoValue::U VU;
    u64_t* kz;
    u64_t* vz;
    int zb;
    __device__ __forceinline__ u64_t* at(long long i) const {
        const long long low = i & ((1LL << zb) - 1);
        return ((i >> zb) & 1 ? vz : kz) + ((i >> (zb + 1)) << zb | low);
    }
    __device__ __forceinline__ void fetch(long long i0, long long d, U& c, VU&) const {
        c = at(i0)[d >> 1];
    }
    __device__ __forceinline__ void copy(long long i0, long long d, U* ks, VU*) const {
        copy_async(ks, at(i0) + (d >> 1));
    }
    __device__ __forceinline__ bool raw() const { return false; }
    __device__ __forceinline__ void fix(U&) const {}
    __device__ __forceinline__ void put(long long i0, long long d, U c, VU) const {
        at(i0)[d >> 1] = c;
    }
    __device__ __forceinline__ bool affine(int q) const { return q > zb; }
};

template <class K, class V> struct Batch {  // loads in flight per thread
    // one or two blocks per SM: memory-level parallelism comes from each thread's loads
    static constexpr int N = sizeof(typename K::U) + sizeof(typename V::U) <= 8 ? 16 : 8;
};

template <class K, class V, int NT, int LOGE, int IO, class Src>
__device__ __forceinline__ void load_tile(const Src& src, long long n, const Walk<NT, LOGE>& wk,
                                          typename K::U* sk, typename V::U* sv) {
    typedef typename K::U U;
    typedef typename V::U VU;
    constexpr bool HV = HasValues<V>::value;
    constexpr int B = Batch<K, V>::N;
    for (int e0 = 0; e0 < wk.count; e0 += B) {
        const long long i0 = IO == IO_ANY ? 0 : wk.at(e0);
        U c[B];
        VU v[B];
        bool ok[B];
#pragma unroll
        for (int u = 0; u < B; ++u) {  // loads first: all B in flight
            if constexpr (IO == IO_ANY) {
                const long long i = wk.at(e0 + u);
                ok[u] = e0 + u < wk.count && i < n;
                if (ok[u]) src.fetch(i, 0, c[u], v[u]);
            } else {
                ok[u] = true;
                src.fetch(i0, batch_at<NT, LOGE, IO>(wk, u), c[u], v[u]);
            }
        }
#pragma unroll
        for (int u = 0; u < B; ++u) {
            if (IO == IO_ANY && e0 + u >= wk.count) continue;
            sk[wk.spos(e0 + u)] = ok[u] ? c[u] : (U)~(U)0;
            if constexpr (HV) sv[wk.spos(e0 + u)] = ok[u] ? v[u] : V::value_max();
        }
    }
}

// `load_tile` of a tile entirely below n (IO_ROWS, IO_STRIDED, IO_SHORT) by cp.async: the
// raw bits land in shared memory, and each thread then turns its own into codes
// (nothing to do for unsigned ascending keys).
template <class K, class V, int NT, int LOGE, int IO, class Src>
__device__ __forceinline__ void load_tile_async(const Src& src, const Walk<NT, LOGE>& wk,
                                                typename K::U* sk, typename V::U* sv) {
    constexpr int B = Batch<K, V>::N;
    for (int e0 = 0; e0 < wk.count; e0 += B) {
        const long long i0 = wk.at(e0);
#pragma unroll
        for (int u = 0; u < B; ++u) {
            const int a = wk.spos(e0 + u);
            src.copy(i0, batch_at<NT, LOGE, IO>(wk, u), sk + a, sv + a);
        }
    }
    copy_async_wait();
    if (src.raw())
        for (int e = 0; e < wk.count; ++e) src.fix(sk[wk.spos(e)]);
}

// The load of a tile entirely below n (IO_ROWS, IO_STRIDED, IO_SHORT): by cp.async where
// the sizes allow, else through registers.
template <class K, class V, int NT, int LOGE, int IO, class Src>
__device__ __forceinline__ void load_whole(const Src& src, long long n, const Walk<NT, LOGE>& wk,
                                           typename K::U* sk, typename V::U* sv) {
    if constexpr (Async<K, V>::ok && DISTSORT_ASYNC)
        load_tile_async<K, V, NT, LOGE, IO>(src, wk, sk, sv);
    else
        load_tile<K, V, NT, LOGE, IO>(src, n, wk, sk, sv);
}

// The load of a tile by the addressing `io`.
template <class K, class V, int NT, int LOGE, class Src>
__device__ __forceinline__ void load_any(int io, const Src& src, long long n,
                                         const Walk<NT, LOGE>& wk, typename K::U* sk,
                                         typename V::U* sv) {
    switch (io) {
    case IO_ROWS: return load_whole<K, V, NT, LOGE, IO_ROWS>(src, n, wk, sk, sv);
    case IO_STRIDED: return load_whole<K, V, NT, LOGE, IO_STRIDED>(src, n, wk, sk, sv);
    case IO_SHORT: return load_whole<K, V, NT, LOGE, IO_SHORT>(src, n, wk, sk, sv);
    }
    load_tile<K, V, NT, LOGE, IO_ANY>(src, n, wk, sk, sv);
}

template <class K, class V, int NT, int LOGE, int IO, class Dst>
__device__ __forceinline__ void store_tile(const Dst& dst, long long n, const Walk<NT, LOGE>& wk,
                                           const typename K::U* sk, const typename V::U* sv) {
    typedef typename V::U VU;
    constexpr bool HV = HasValues<V>::value;
    constexpr int B = Batch<K, V>::N;
    for (int e0 = 0; e0 < wk.count; e0 += B) {
        const long long i0 = IO == IO_ANY ? 0 : wk.at(e0);
#pragma unroll
        for (int u = 0; u < B; ++u) {
            const int a = wk.spos(e0 + u);
            if constexpr (IO == IO_ANY) {
                const long long i = wk.at(e0 + u);
                if (e0 + u >= wk.count || i >= n) continue;
                dst.put(i, 0, sk[a], HV ? sv[a] : (VU)0);
            } else {
                dst.put(i0, batch_at<NT, LOGE, IO>(wk, u), sk[a], HV ? sv[a] : (VU)0);
            }
        }
    }
}

// The phases with compile-time windows: those of a MERGE pass on a tile of 2^TB (the
// tuned tile: half-cleaners on bits TB-1 .. 0) and the mirror phase of a whole window at
// q = TB - LOGE (every GROUP pass with the mirror and k >= LOGE, the last stage of
// SORT).  The GROUP passes of kmax steps use the same windows as MERGE (with the tables'
// 128-byte rows, for 4- and 8-byte elements), and so do the phases at q = 0 that end
// every SORT stage.  Every other phase runs the run-time
// copies.  DISTSORT_STATIC_PHASE(id) lets the CPU emulation record which ones ran
// (id: the MERGE phase's index, 31 for the mirror phase); it is empty on the GPU.
#ifndef DISTSORT_STATIC_PHASE
#define DISTSORT_STATIC_PHASE(id)
#endif
template <int LOGE, int TB> struct Static {
    // MERGE phases of a 2^TB tile, the window at `rem` and those after it.
    static __host__ __device__ constexpr int count(int rem = TB - 1) {
        return rem < 0 ? 0 : 1 + count(window(rem, 0, TB, LOGE).low - 1);
    }
    // Bits of `count()` MERGE phases, 30: the first MERGE phase from global memory
    // (`merge_first_phase`), 31: the whole-window mirror.
    static __host__ __device__ constexpr unsigned mask() {
        return ((1u << count()) - 1) | (1u << 30) | (1u << 31);
    }
};

// MERGE phase `ID` of a 2^TB tile (its window at bit REM) if it is the phase asked for,
// else the next one; false when none is.
template <class K, class V, int E, int NT, int TB, int REM = TB - 1, int ID = 0>
__device__ __forceinline__ bool static_merge(typename K::U* sk, typename V::U* sv, int tb, int q,
                                             int jtop, int nsteps, typename K::U dm) {
    constexpr int LOGE = Log2<E>::v;
    if constexpr (REM < 0) {
        return false;
    } else {
        constexpr Window W = window(REM, 0, TB, LOGE);
        if (q == W.q && jtop == W.j && nsteps == W.s) {
            DISTSORT_STATIC_PHASE(ID);
            phase<K, V, E, NT, -1, W.q, W.j, W.s>(sk, sv, tb, q, -1, jtop, nsteps, dm);
            return true;
        }
        return static_merge<K, V, E, NT, TB, W.low - 1, ID + 1>(sk, sv, tb, q, jtop, nsteps, dm);
    }
}

// The one place a phase is run: the kernel holds one copy of each compile-time phase
// above and three run-time copies -- without a mirror, with the mirror of a whole
// window (GROUP, the larger stages of SORT), with the mirror of part of one (the
// smaller stages of SORT) -- not one per call site.  The choice is uniform per block.
template <class K, class V, int E, int NT, int TB>
__device__ __noinline__ void run_phase(typename K::U* sk, typename V::U* sv, int tb, int q, int mb,
                                       int jtop, int nsteps, typename K::U dm) {
    constexpr int LOGE = Log2<E>::v;
    if (mb < 0) {
        if (!static_merge<K, V, E, NT, TB>(sk, sv, tb, q, jtop, nsteps, dm))
            phase<K, V, E, NT, -1>(sk, sv, tb, q, mb, jtop, nsteps, dm);
    } else if (mb == LOGE - 1) {
        if (q == TB - LOGE && nsteps == LOGE) {
            DISTSORT_STATIC_PHASE(31);
            phase<K, V, E, NT, LOGE - 1, TB - LOGE, LOGE - 2, LOGE>(sk, sv, tb, q, mb, jtop,
                                                                     nsteps, dm);
        } else {
            phase<K, V, E, NT, LOGE - 1>(sk, sv, tb, q, mb, jtop, nsteps, dm);
        }
    } else {
        phase<K, V, E, NT, -2>(sk, sv, tb, q, mb, jtop, nsteps, dm);
    }
}

// Half-cleaners on tile bits rem .. stop, in phases (nothing when rem < stop).
template <class K, class V, int E, int NT, int TB>
__device__ __forceinline__ void half_cleaners(typename K::U* sk, typename V::U* sv, int tb,
                                              int rem, int stop, typename K::U dm) {
    constexpr int LOGE = Log2<E>::v;
    while (rem >= stop) {
        const Window w = window(rem, stop, tb, LOGE);
        __syncthreads();
        run_phase<K, V, E, NT, TB>(sk, sv, tb, w.q, -1, w.j, w.s, dm);
        rem = w.low - 1;
    }
}

// The first phase of a MERGE pass over a whole tile of 2^TB elements, its E registers
// loaded straight from global memory instead of through shared memory: its window sits
// at q = TB - log2 E, so register m of group g holds tile element  m << q | g,  and a
// warp's loads of one m are 32 consecutive elements (coalesced).  It saves a shared-
// memory round trip and a barrier per pass, and each thread has E loads in flight.
// Only for tiles entirely below n (no virtual padding).  DISTSORT_DIRECT_PHASE() lets the
// CPU emulation record that it ran.
#ifndef DISTSORT_DIRECT_PHASE
#define DISTSORT_DIRECT_PHASE()
#endif
template <class K, class V, int E, int NT, int TB, class Src>
__device__ __noinline__ void merge_first_phase(const Src src, long long start, typename K::U* sk,
                                               typename V::U* sv, typename K::U dm) {
    typedef typename K::U U;
    typedef typename V::U VU;
    constexpr int LOGE = Log2<E>::v;
    constexpr bool HV = HasValues<V>::value;
    constexpr Window W = window(TB - 1, 0, TB, LOGE);
    static_assert(W.q + LOGE == TB && W.q > 0, "the first MERGE window spans the tile's top bits");
    constexpr int step = (1 << W.q) + (1 << (W.q - LOGE));
    DISTSORT_DIRECT_PHASE();
    for (int g = threadIdx.x; g < (1 << W.q); g += NT) {
        U r[E];
        VU w[E];
#pragma unroll
        for (int m = 0; m < E; ++m) src.fetch(start + g, (long long)m << W.q, r[m], w[m]);
        half_clean_seq<K, V, E, W.j, W.s>(r, w, dm);
        const int a = pad<LOGE>(g);
#pragma unroll
        for (int m = 0; m < E; ++m) {
            sk[a + m * step] = r[m];
            if constexpr (HV) sv[a + m * step] = w[m];
        }
    }
}

// DISTSORT_PROBE (benchmarks/overlap_probe.py): 1 runs a pass's global loads and stores
// without its phases, 2 its phases without global memory; 0 (the library) both.
#ifndef DISTSORT_PROBE
#define DISTSORT_PROBE 0
#endif
constexpr int PROBE = DISTSORT_PROBE;

// One pass (see the top of this file), its elements read from `src` and written to `dst`;
// `dm` is the descending mask of the keyed compares.
template <class K, class V, int E, int NT, int TB, class Src, class Dst>
__device__ __forceinline__ void run_pass(const Src& src, const Dst& dst, long long n, int tb,
                                         int mode, int top, int k, int mirror, int pre,
                                         typename K::U dm) {
    typedef typename K::U U;
    typedef typename V::U VU;
    constexpr int LOGE = Log2<E>::v;
    constexpr int B = Batch<K, V>::N;
    extern __shared__ __align__(16) unsigned char smem[];
    U* sk = reinterpret_cast<U*>(smem);
    VU* sv = reinterpret_cast<VU*>(smem + ((pad<LOGE>(1 << tb) * sizeof(U) + 15) & ~15));
    const Tile tile((long long)blockIdx.x, tb, mode, top, k, mirror);
    if (tile.start >= n) return;  // all padding (the map increases with L)
    const Walk<NT, LOGE> wk(tile, tb);
    const bool full = tile.last(tb) < n;
    const int io = io_kind<B>(wk, full);
    DISTSORT_IO_KIND(io);
    // A whole MERGE tile of the tuned size: its first phase loads from global memory.
    const bool direct = mode == 1 && tb == TB && top == TB - 1 && full && !PROBE &&
                        src.affine(TB - LOGE);
    if (PROBE == 2) {  // phases only: the tile is whatever shared memory holds
    } else if (direct)
        merge_first_phase<K, V, E, NT, TB>(src, tile.start, sk, sv, dm);
    else load_any<K, V, NT, LOGE>(io, src, n, wk, sk, sv);
    if (PROBE != 1) {  // the steps (none when probing global loads and stores only)
        if (mode == 0) {
            __syncthreads();
            phase_sort<K, V, E, NT>(sk, sv, tb, dm);
        }
        if (mode == 2 && pre > 0) half_cleaners<K, V, E, NT, TB>(sk, sv, tb, pre - 1, 0, dm);
        // The steps of the pass as a list of segments: a first phase (a mirror step and the
        // half-cleaners in its window), then half-cleaners from bit `rem` down to `stop` in
        // phases.  SORT: one segment per stage above LOGE; MERGE and GROUP: one.
        for (int s = LOGE + 1, last = mode == 0 ? tb : LOGE + 1; s <= last; ++s) {
            int q = 0, mb = -1, steps = 0, rem, stop = 0;
            if (mode == 0) {  // the stage's mirror with its steps above bit LOGE, then the rest
                q = s - LOGE > LOGE ? s - LOGE : LOGE, mb = s - 1 - q, steps = mb + 1;
                rem = q - 1;
            } else if (mode == 1) {
                rem = direct ? window(top, 0, tb, LOGE).low - 1 : top;
            } else {
                steps = mirror ? (k < LOGE ? k : LOGE) : 0;
                q = tb - LOGE, mb = LOGE - 1, rem = tb - 1 - steps, stop = tb - k;
            }
            if (steps) {
                __syncthreads();
                run_phase<K, V, E, NT, TB>(sk, sv, tb, q, mb, mb - 1, steps, dm);
            }
            half_cleaners<K, V, E, NT, TB>(sk, sv, tb, rem, stop, dm);
        }
    }
    __syncthreads();
    if (PROBE == 2) return;
    if (io == IO_ROWS) store_tile<K, V, NT, LOGE, IO_ROWS>(dst, n, wk, sk, sv);
    else if (io == IO_STRIDED) store_tile<K, V, NT, LOGE, IO_STRIDED>(dst, n, wk, sk, sv);
    else if (io == IO_SHORT) store_tile<K, V, NT, LOGE, IO_SHORT>(dst, n, wk, sk, sv);
    else store_tile<K, V, NT, LOGE, IO_ANY>(dst, n, wk, sk, sv);
}

template <class K, class V, int E, int NT, int MINB, int TB>
__global__ void __launch_bounds__(NT, MINB)
bitonic_pass(typename K::U* keys, typename V::U* vals, long long n, long long lane, int tb,
             int mode, int top, int k, int mirror, int pre, u64_t dmask) {
    const typename K::U dm = (typename K::U)dmask;
    const Flat<K, V> io(keys + blockIdx.y * lane,
                        vals + (HasValues<V>::value ? blockIdx.y * lane : 0), dm);
    run_pass<K, V, E, NT, TB>(io, io, n, tb, mode, top, k, mirror, pre, dm);
}

// The first pass of a compare-split's merge: it reads the lower run a[0 .. ma) reversed,
// then b[0 .. n - ma) (the V-shaped sequence, `Runs`), and writes the n elements to
// keys/vals; the merge's other passes are `bitonic_pass` on keys/vals.  One lane.
template <class K, class V, int E, int NT, int MINB, int TB>
__global__ void __launch_bounds__(NT, MINB)
merge_pass(typename K::U* keys, typename V::U* vals, long long n, const typename K::U* a,
           const typename V::U* av, long long ma, const typename K::U* b,
           const typename V::U* bv, int tb, int mode, int top, int k, int mirror, int pre,
           u64_t dmask) {
    const typename K::U dm = (typename K::U)dmask;
    const Runs<K, V> src(a, av, ma, b, bv, dm);
    run_pass<K, V, E, NT, TB>(src, Flat<K, V>(keys, vals, dm), n, tb, mode, top, k, mirror, pre,
                              dm);
}

// A pass of a packed key-value sort (`Packed`) of 4-byte integer keys (KS) and values
// (VS): ENDS bit 0 for its first pass (it reads the keys and values, `Pairs`), bit 1 for
// its last (it writes them); the others read and write `Split` (its bit `zb`).
template <class KS, class VS, int E, int NT, int MINB, int TB, int ENDS>
__global__ void __launch_bounds__(NT, MINB)
packed_pass(u32_t* keys, u32_t* vals, long long n, long long lane, int tb, int mode, int top,
            int k, int mirror, int pre, int zb, u64_t dmask) {
    typedef Packed<KS, VS> K;
    keys += blockIdx.y * lane;
    vals += blockIdx.y * lane;
    const Pairs<KS, VS> pairs{keys, vals, (u32_t)dmask};
    const Split split{reinterpret_cast<u64_t*>(keys), reinterpret_cast<u64_t*>(vals), zb};
    if constexpr (ENDS == 0)
        run_pass<K, NoValue, E, NT, TB>(split, split, n, tb, mode, top, k, mirror, pre, 0);
    else if constexpr (ENDS == 1)
        run_pass<K, NoValue, E, NT, TB>(pairs, split, n, tb, mode, top, k, mirror, pre, 0);
    else if constexpr (ENDS == 2)
        run_pass<K, NoValue, E, NT, TB>(split, pairs, n, tb, mode, top, k, mirror, pre, 0);
    else
        run_pass<K, NoValue, E, NT, TB>(pairs, pairs, n, tb, mode, top, k, mirror, pre, 0);
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
        const U ca = (U)(K::total(a[ia]) ^ dm), cb = (U)(K::total(b[mid]) ^ dm);
        const VU va = HV ? av[ia] : 0, vb = HV ? bv[mid] : 0;
        if (Cmp<K, V>::gt(ca, cb, va, vb, dm)) lo = mid + 1; else hi = mid;
    }
    *out = lo;
}
