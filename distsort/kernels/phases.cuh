// The phases of a pass: the network steps a block runs on its tile in shared memory,
// E elements per thread in registers at a time (see sort.cu).
#pragma once
#include "probes.cuh"
#include "windows.cuh"

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
