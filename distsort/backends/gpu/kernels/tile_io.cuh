// Tile IO: a block's loads of its tile from global into shared memory (through registers,
// or by cp.async) and its stores back, by the addressing of tile_map.cuh.
#pragma once
#include "probes.cuh"
#include "tile_map.cuh"

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
template <class K, class V> struct Async {  // element sizes cp.async copies
    static constexpr bool ok = (sizeof(typename K::U) == 4 || sizeof(typename K::U) == 8) &&
        (!HasValues<V>::value || sizeof(typename V::U) == 4 || sizeof(typename V::U) == 8);
};

template <class K, class V> struct Batch {  // loads in flight per thread
    // one or two blocks per SM: memory-level parallelism comes from each thread's loads
    static constexpr int N = sizeof(typename K::U) + sizeof(typename V::U) <= 8 ? 16 : 8;
};

template <class K, class V, int THREADS, int LOG_ITEMS, int IO, class Src>
__device__ __forceinline__ void load_tile(const Src& src, long long n,
                                          const Walk<THREADS, LOG_ITEMS>& wk,
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
                src.fetch(i0, batch_at<THREADS, LOG_ITEMS, IO>(wk, u), c[u], v[u]);
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
template <class K, class V, int THREADS, int LOG_ITEMS, int IO, class Src>
__device__ __forceinline__ void load_tile_async(const Src& src, const Walk<THREADS, LOG_ITEMS>& wk,
                                                typename K::U* sk, typename V::U* sv) {
    constexpr int B = Batch<K, V>::N;
    for (int e0 = 0; e0 < wk.count; e0 += B) {
        const long long i0 = wk.at(e0);
#pragma unroll
        for (int u = 0; u < B; ++u) {
            const int a = wk.spos(e0 + u);
            src.copy(i0, batch_at<THREADS, LOG_ITEMS, IO>(wk, u), sk + a, sv + a);
        }
    }
    copy_async_wait();
    if (src.raw())
        for (int e = 0; e < wk.count; ++e) src.fix(sk[wk.spos(e)]);
}

// The load of a tile entirely below n (IO_ROWS, IO_STRIDED, IO_SHORT): by cp.async where
// the sizes allow, else through registers.
template <class K, class V, int THREADS, int LOG_ITEMS, int IO, class Src>
__device__ __forceinline__ void load_whole(const Src& src, long long n,
                                           const Walk<THREADS, LOG_ITEMS>& wk,
                                           typename K::U* sk, typename V::U* sv) {
    if constexpr (Async<K, V>::ok && DISTSORT_ASYNC)
        load_tile_async<K, V, THREADS, LOG_ITEMS, IO>(src, wk, sk, sv);
    else
        load_tile<K, V, THREADS, LOG_ITEMS, IO>(src, n, wk, sk, sv);
}

// The load of a tile by the addressing `io`.
template <class K, class V, int THREADS, int LOG_ITEMS, class Src>
__device__ __forceinline__ void load_any(int io, const Src& src, long long n,
                                         const Walk<THREADS, LOG_ITEMS>& wk, typename K::U* sk,
                                         typename V::U* sv) {
    switch (io) {
    case IO_ROWS: return load_whole<K, V, THREADS, LOG_ITEMS, IO_ROWS>(src, n, wk, sk, sv);
    case IO_STRIDED: return load_whole<K, V, THREADS, LOG_ITEMS, IO_STRIDED>(src, n, wk, sk, sv);
    case IO_SHORT: return load_whole<K, V, THREADS, LOG_ITEMS, IO_SHORT>(src, n, wk, sk, sv);
    }
    load_tile<K, V, THREADS, LOG_ITEMS, IO_ANY>(src, n, wk, sk, sv);
}

template <class K, class V, int THREADS, int LOG_ITEMS, int IO, class Dst>
__device__ __forceinline__ void store_tile(const Dst& dst, long long n,
                                           const Walk<THREADS, LOG_ITEMS>& wk,
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
                dst.put(i0, batch_at<THREADS, LOG_ITEMS, IO>(wk, u), sk[a], HV ? sv[a] : (VU)0);
            }
        }
    }
}
