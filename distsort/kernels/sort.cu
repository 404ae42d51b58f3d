// In-place bitonic sort kernels (Peters et al., section 3.2, with virtual padding).
//
// One kernel, `bitonic_pass`, does every pass over global memory.  A block loads
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
// Virtual padding: positions >= n load as the largest element and are never
// stored; every comparator puts the smaller element low, so the padding never moves
// and no padding memory exists.  Lanes (batched sorts) are blockIdx.y.
#include "bitonic.cuh"

template <typename U> struct Pad {  // one spare slot per 128 bytes: no bank conflicts
    static constexpr int SHIFT = sizeof(U) == 1 ? 7 : sizeof(U) == 2 ? 6 : sizeof(U) == 4 ? 5 : 4;
    static __device__ __forceinline__ int at(int i) { return i + (i >> SHIFT); }
};

// One phase: every group of E elements at tile index
//   hi << (q + LOGE) | m << q | x      (x^(2^q - 1) for the upper half with `mir`)
// runs, with `mir`, the mirror step of blocks of 2^(q+LOGE), then half-cleaners on
// register bits jtop, jtop-1, ... (nsteps steps in all).
template <class K, class V, int E, int NT>
__device__ __forceinline__ void phase(typename K::U* sk, typename V::U* sv, int tb, int q, bool mir,
                                      int jtop, int nsteps, typename K::U dm) {
    typedef typename K::U U;
    typedef typename V::U VU;
    constexpr int LOGE = Log2<E>::v;
    constexpr bool HV = HasValues<V>::value;
    const int groups = 1 << (tb - LOGE);
    const int qmask = (1 << q) - 1;
    for (int g = threadIdx.x; g < groups; g += NT) {
        const int x = g & qmask;
        const int base = (g >> q) << (q + LOGE);
        U r[E];
        VU w[E];
#pragma unroll
        for (int m = 0; m < E; ++m) {
            const int L = base | (m << q) | ((mir && m >= E / 2) ? (x ^ qmask) : x);
            r[m] = sk[Pad<U>::at(L)];
            if constexpr (HV) w[m] = sv[Pad<VU>::at(L)];
        }
        int j = jtop, s = nsteps;
        if (mir) {
            mirror<K, V, E, LOGE>(r, w, dm);
            j = LOGE - 2;
            s -= 1;
        }
        for (; s > 0; --s, --j) half_clean_rt<K, V, E>(j, r, w, dm);
#pragma unroll
        for (int m = 0; m < E; ++m) {
            const int L = base | (m << q) | ((mir && m >= E / 2) ? (x ^ qmask) : x);
            sk[Pad<U>::at(L)] = r[m];
            if constexpr (HV) sv[Pad<VU>::at(L)] = w[m];
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
        U r[E];
        VU w[E];
#pragma unroll
        for (int m = 0; m < E; ++m) {
            r[m] = sk[Pad<U>::at(g * E + m)];
            if constexpr (HV) w[m] = sv[Pad<VU>::at(g * E + m)];
        }
        reg_sort<K, V, E>(r, w, dm);
#pragma unroll
        for (int m = 0; m < E; ++m) {
            sk[Pad<U>::at(g * E + m)] = r[m];
            if constexpr (HV) sv[Pad<VU>::at(g * E + m)] = w[m];
        }
    }
}

// Half-cleaners on tile bits rem, rem-1, ..., stop, in phases of up to LOGE bits.
template <class K, class V, int E, int NT>
__device__ __forceinline__ void half_cleaners(typename K::U* sk, typename V::U* sv, int tb, int rem,
                                              int stop, typename K::U dm) {
    constexpr int LOGE = Log2<E>::v;
    while (rem >= stop) {
        int q = rem - LOGE + 1;
        q = q < stop ? stop : q;
        q = q > tb - LOGE ? tb - LOGE : q;
        const int low = q > stop ? q : stop;
        __syncthreads();
        phase<K, V, E, NT>(sk, sv, tb, q, false, rem - q, rem - low + 1, dm);
        rem = low - 1;
    }
}

struct Map {  // tile index -> global index of this block
    long long n;
    int tb, mode, top, k, mirror;
    long long blk;
    __device__ __forceinline__ long long at(int L) const {
        if (mode != 2) return (blk << tb) + L;
        const int c = tb - k, midbits = top - k + 1 - c;
        const long long mid = blk & ((1LL << midbits) - 1), outer = blk >> midbits;
        const int M = L >> c;
        const long long m2 = (mirror && (M >> (k - 1))) ? (mid ^ ((1LL << midbits) - 1)) : mid;
        return (outer << (top + 1)) | ((long long)M << (top - k + 1)) | (m2 << c) | (L & ((1 << c) - 1));
    }
};

template <class K, class V, int E, int NT, int MINB>
__global__ void __launch_bounds__(NT, MINB)
bitonic_pass(typename K::U* keys, typename V::U* vals, long long n, long long lane, int tb,
             int mode, int top, int k, int mirror, u64_t dmask) {
    typedef typename K::U U;
    typedef typename V::U VU;
    constexpr int LOGE = Log2<E>::v;
    constexpr bool HV = HasValues<V>::value;
    extern __shared__ __align__(16) unsigned char smem[];
    const int T = 1 << tb;
    U* sk = reinterpret_cast<U*>(smem);
    VU* sv = reinterpret_cast<VU*>(smem + ((Pad<U>::at(T) * sizeof(U) + 15) & ~15));
    const U dm = (U)dmask;
    const Map map{n, tb, mode, top, k, mirror, (long long)blockIdx.x};
    if (map.at(0) >= n) return;  // all padding (the map is increasing in L)
    keys += blockIdx.y * lane;
    vals += HV ? blockIdx.y * lane : 0;

    // Load: BATCH loads per thread in flight before any shared-memory store (one block
    // per SM, so memory-level parallelism comes from each thread's outstanding loads).
    constexpr int BATCH = sizeof(U) + sizeof(VU) <= 8 ? 16 : 8;
    for (int L0 = threadIdx.x; L0 < T; L0 += NT * BATCH) {
        U c[BATCH];
        VU v[BATCH];
#pragma unroll
        for (int u = 0; u < BATCH; ++u) {
            const int L = L0 + u * NT;
            const long long i = L < T ? map.at(L) : n;
            c[u] = (U)~(U)0;
            v[u] = 0;
            if constexpr (HV) v[u] = V::value_max();
            if (i < n) {
                c[u] = (U)(K::total(keys[i]) ^ dm);
                if constexpr (HV) v[u] = vals[i];
            }
        }
#pragma unroll
        for (int u = 0; u < BATCH; ++u) {
            const int L = L0 + u * NT;
            if (L < T) {
                sk[Pad<U>::at(L)] = c[u];
                if constexpr (HV) sv[Pad<VU>::at(L)] = v[u];
            }
        }
    }
    if (mode == 0) {
        __syncthreads();
        phase_sort<K, V, E, NT>(sk, sv, tb, dm);
        for (int s = LOGE + 1; s <= tb; ++s) {
            __syncthreads();
            phase<K, V, E, NT>(sk, sv, tb, s - LOGE, true, 0, LOGE, dm);
            half_cleaners<K, V, E, NT>(sk, sv, tb, s - LOGE - 1, 0, dm);
        }
    } else if (mode == 1) {
        half_cleaners<K, V, E, NT>(sk, sv, tb, top, 0, dm);
    } else {
        int rem = tb - 1;
        if (mirror) {
            const int steps = k < LOGE ? k : LOGE;
            __syncthreads();
            phase<K, V, E, NT>(sk, sv, tb, tb - LOGE, true, 0, steps, dm);
            rem -= steps;
        }
        half_cleaners<K, V, E, NT>(sk, sv, tb, rem, tb - k, dm);
    }
    __syncthreads();
#pragma unroll 4
    for (int L = threadIdx.x; L < T; L += NT) {
        const long long i = map.at(L);
        if (i < n) {
            keys[i] = K::untotal((U)(sk[Pad<U>::at(L)] ^ dm));
            if constexpr (HV) vals[i] = sv[Pad<VU>::at(L)];
        }
    }
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
