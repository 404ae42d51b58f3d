// The phases of a pass: the network steps a block runs on its tile in shared memory,
// ITEMS elements per thread in registers at a time (see sort.cu).
#pragma once
#include "probes.cuh"
#include "windows.cuh"

// One phase: every group of ITEMS elements at tile index
//   hi << (q + LOG_ITEMS) | m << q | x,     m = 0 .. ITEMS-1 in registers,
// where the registers with bit `mb` set take x ^ (2^q - 1) instead of x (mb >= 0: the
// mirror step of register blocks of 2^(mb+1), i.e. of the stage with blocks of
// 2^(q+mb+1)), then half-cleaners on register bits jtop, jtop-1, ...: nsteps steps in
// all, the mirror included.  q is 0 or >= LOG_ITEMS: the padding then adds, per register,
// m * step to the group's base (no shifts or ORs per element).  MB is mb when known
// at compile time (-1: no mirror), or -2 (mb at run time: a select per element).
// Q, J, S >= 0: q, jtop and nsteps known at compile time (`Static`): the ITEMS addresses
// are one base plus immediate offsets and the steps are straight-line code; -1: at
// run time (one multiply-add per address, a switch and register moves per step).
template <class K, class V, int ITEMS, int THREADS, int MB, int Q = -1, int J = -1, int S = -1>
__device__ __forceinline__ void phase(typename K::U* sk, typename V::U* sv, int tile_bits, int q,
                                      int mb, int jtop, int nsteps, typename K::U dm) {
    typedef typename K::U U;
    typedef typename V::U VU;
    constexpr int LOG_ITEMS = Log2<ITEMS>::v;
    constexpr bool HV = HasValues<V>::value;
    constexpr bool CT = Q >= 0 && J >= 0 && S >= 0;
    if constexpr (CT) q = Q;
    else if constexpr (MB != -2) mb = MB;
    const int groups = 1 << (tile_bits - LOG_ITEMS);
    const int qmask = (1 << q) - 1;
    const int step = q == 0 ? 1 : (1 << q) + (1 << (q - LOG_ITEMS));
    for (int g = threadIdx.x; g < groups; g += THREADS) {
        const int x = g & qmask, hi = (g >> q) << (q + LOG_ITEMS);
        const int a0 = pad<LOG_ITEMS>(hi | x), a1 = pad<LOG_ITEMS>(hi | (x ^ qmask));
        auto at = [&](int m) {
            if constexpr (MB == -1) return a0 + m * step;
            else if constexpr (MB >= 0) return (((m >> MB) & 1) ? a1 : a0) + m * step;
            else return (((m >> mb) & 1) ? a1 : a0) + m * step;
        };
        U r[ITEMS];
        VU w[ITEMS];
#pragma unroll
        for (int m = 0; m < ITEMS; ++m) {
            r[m] = sk[at(m)];
            if constexpr (HV) w[m] = sv[at(m)];
        }
        if constexpr (CT) {
            if constexpr (MB >= 0) {
                mirror<K, V, ITEMS, MB + 1>(r, w, dm);
                half_clean_seq<K, V, ITEMS, MB - 1, S - 1>(r, w, dm);
            } else {
                half_clean_seq<K, V, ITEMS, J, S>(r, w, dm);
            }
        } else {
            int j = jtop, s = nsteps;
            if (mb >= 0) {
                static_switch<RegStep<K, V, ITEMS, true>, 1, LOG_ITEMS>(mb + 1, r, w, dm);
                j = mb - 1;
                s -= 1;
            }
            for (; s > 0; --s, --j)
                static_switch<RegStep<K, V, ITEMS, false>, 0, LOG_ITEMS>(j, r, w, dm);
        }
#pragma unroll
        for (int m = 0; m < ITEMS; ++m) {
            sk[at(m)] = r[m];
            if constexpr (HV) sv[at(m)] = w[m];
        }
    }
}

// Stages 1..LOG_ITEMS inside registers: each thread sorts ITEMS contiguous elements.
template <class K, class V, int ITEMS, int THREADS>
__device__ __forceinline__ void phase_sort(typename K::U* sk, typename V::U* sv, int tile_bits,
                                           typename K::U dm) {
    typedef typename K::U U;
    typedef typename V::U VU;
    constexpr int LOG_ITEMS = Log2<ITEMS>::v;
    constexpr bool HV = HasValues<V>::value;
    for (int g = threadIdx.x; g < (1 << (tile_bits - LOG_ITEMS)); g += THREADS) {
        const int a = g * (ITEMS + 1);  // pad(g << LOG_ITEMS)
        U r[ITEMS];
        VU w[ITEMS];
#pragma unroll
        for (int m = 0; m < ITEMS; ++m) {
            r[m] = sk[a + m];
            if constexpr (HV) w[m] = sv[a + m];
        }
        reg_sort<K, V, ITEMS>(r, w, dm);
#pragma unroll
        for (int m = 0; m < ITEMS; ++m) {
            sk[a + m] = r[m];
            if constexpr (HV) sv[a + m] = w[m];
        }
    }
}
// MERGE phase `ID` of a 2^TILE_BITS tile (its window at bit REM) if it is the phase asked for,
// else the next one; false when none is.
template <class K, class V, int ITEMS, int THREADS, int TILE_BITS, int REM = TILE_BITS - 1,
          int ID = 0>
__device__ __forceinline__ bool static_merge(typename K::U* sk, typename V::U* sv, int tile_bits,
                                             int q, int jtop, int nsteps, typename K::U dm) {
    constexpr int LOG_ITEMS = Log2<ITEMS>::v;
    if constexpr (REM < 0) {
        return false;
    } else {
        constexpr Window W = window(REM, 0, TILE_BITS, LOG_ITEMS);
        if (q == W.q && jtop == W.j && nsteps == W.s) {
            DISTSORT_STATIC_PHASE(ID);
            phase<K, V, ITEMS, THREADS, -1, W.q, W.j, W.s>(sk, sv, tile_bits, q, -1, jtop, nsteps,
                                                           dm);
            return true;
        }
        return static_merge<K, V, ITEMS, THREADS, TILE_BITS, W.low - 1, ID + 1>(sk, sv, tile_bits,
                                                                                q, jtop, nsteps, dm);
    }
}

// The one place a phase is run: the kernel holds one copy of each compile-time phase
// above and three run-time copies -- without a mirror, with the mirror of a whole
// window (GROUP, the larger stages of SORT), with the mirror of part of one (the
// smaller stages of SORT) -- not one per call site.  The choice is uniform per block.
template <class K, class V, int ITEMS, int THREADS, int TILE_BITS>
__device__ __noinline__ void run_phase(typename K::U* sk, typename V::U* sv, int tile_bits, int q,
                                       int mb, int jtop, int nsteps, typename K::U dm) {
    constexpr int LOG_ITEMS = Log2<ITEMS>::v;
    if (mb < 0) {
        if (!static_merge<K, V, ITEMS, THREADS, TILE_BITS>(sk, sv, tile_bits, q, jtop, nsteps, dm))
            phase<K, V, ITEMS, THREADS, -1>(sk, sv, tile_bits, q, mb, jtop, nsteps, dm);
    } else if (mb == LOG_ITEMS - 1) {
        if (q == TILE_BITS - LOG_ITEMS && nsteps == LOG_ITEMS) {
            DISTSORT_STATIC_PHASE(31);
            phase<K, V, ITEMS, THREADS, LOG_ITEMS - 1, TILE_BITS - LOG_ITEMS, LOG_ITEMS - 2,
                  LOG_ITEMS>(sk, sv, tile_bits, q, mb, jtop, nsteps, dm);
        } else {
            phase<K, V, ITEMS, THREADS, LOG_ITEMS - 1>(sk, sv, tile_bits, q, mb, jtop, nsteps, dm);
        }
    } else {
        phase<K, V, ITEMS, THREADS, -2>(sk, sv, tile_bits, q, mb, jtop, nsteps, dm);
    }
}

// Half-cleaners on tile bits rem .. stop, in phases (nothing when rem < stop).
template <class K, class V, int ITEMS, int THREADS, int TILE_BITS>
__device__ __forceinline__ void half_cleaners(typename K::U* sk, typename V::U* sv, int tile_bits,
                                              int rem, int stop, typename K::U dm) {
    constexpr int LOG_ITEMS = Log2<ITEMS>::v;
    while (rem >= stop) {
        const Window w = window(rem, stop, tile_bits, LOG_ITEMS);
        __syncthreads();
        run_phase<K, V, ITEMS, THREADS, TILE_BITS>(sk, sv, tile_bits, w.q, -1, w.j, w.s, dm);
        rem = w.low - 1;
    }
}

// The first phase of a MERGE pass over a whole tile of 2^TILE_BITS elements, its ITEMS registers
// loaded straight from global memory instead of through shared memory: its window sits
// at q = TILE_BITS - log2 ITEMS, so register m of group g holds tile element  m << q | g,  and a
// warp's loads of one m are 32 consecutive elements (coalesced).  It saves a shared-
// memory round trip and a barrier per pass, and each thread has ITEMS loads in flight.
// Only for tiles entirely below n (no virtual padding).  DISTSORT_DIRECT_PHASE() lets the
// CPU emulation record that it ran.
template <class K, class V, int ITEMS, int THREADS, int TILE_BITS, class Src>
__device__ __noinline__ void merge_first_phase(const Src src, long long start, typename K::U* sk,
                                               typename V::U* sv, typename K::U dm) {
    typedef typename K::U U;
    typedef typename V::U VU;
    constexpr int LOG_ITEMS = Log2<ITEMS>::v;
    constexpr bool HV = HasValues<V>::value;
    constexpr Window W = window(TILE_BITS - 1, 0, TILE_BITS, LOG_ITEMS);
    static_assert(W.q + LOG_ITEMS == TILE_BITS && W.q > 0,
                  "the first MERGE window spans the tile's top bits");
    constexpr int step = (1 << W.q) + (1 << (W.q - LOG_ITEMS));
    DISTSORT_DIRECT_PHASE();
    for (int g = threadIdx.x; g < (1 << W.q); g += THREADS) {
        U r[ITEMS];
        VU w[ITEMS];
#pragma unroll
        for (int m = 0; m < ITEMS; ++m) src.fetch(start + g, (long long)m << W.q, r[m], w[m]);
        half_clean_seq<K, V, ITEMS, W.j, W.s>(r, w, dm);
        const int a = pad<LOG_ITEMS>(g);
#pragma unroll
        for (int m = 0; m < ITEMS; ++m) {
            sk[a + m * step] = r[m];
            if constexpr (HV) sv[a + m * step] = w[m];
        }
    }
}
