// Pieces of the all-ascending ("flip") bitonic network, on ITEMS elements that one
// thread holds in registers.  Every comparator puts the smaller element at the
// lower index.  Register arrays are indexed only by compile-time constants (all
// loops are unrolled), so they stay in registers.
#pragma once
#include "order.cuh"

// lo, hi = min and max of 64-bit codes a and b.  Written as min and max in C++, nvcc
// compares the codes twice (a < b for one, a > b for the other: 4 ISETP + 4 SEL per
// comparator, and the 64-bit sorts are bound by that ALU work); one predicate for
// the four selects: 2 + 4.  The CPU emulation compiles the plain form.
__device__ __forceinline__ void minmax64(u64_t a, u64_t b, u64_t& lo, u64_t& hi) {
#ifdef __CUDA_ARCH__
    asm("{\n\t.reg .pred p;\n\t.reg .b32 al, ah, bl, bh, ll, lh, hl, hh;\n\t"
        "setp.lt.u64 p, %2, %3;\n\t"
        "mov.b64 {al, ah}, %2;\n\tmov.b64 {bl, bh}, %3;\n\t"
        "selp.b32 ll, al, bl, p;\n\tselp.b32 lh, ah, bh, p;\n\t"
        "selp.b32 hl, bl, al, p;\n\tselp.b32 hh, bh, ah, p;\n\t"
        "mov.b64 %0, {ll, lh};\n\tmov.b64 %1, {hl, hh};\n\t}"
        : "=l"(lo), "=l"(hi) : "l"(a), "l"(b));
#else
    lo = a < b ? a : b;
    hi = a < b ? b : a;
#endif
}

template <class K, class V> struct Cmp {
    typedef typename K::U U;
    typedef typename V::U VU;
    // Integer keys and values of at most 4 bytes: the key order is the code order and
    // ties go by the value's code, so one 64-bit compare of (key code, value code)
    // decides (2 ISETP instead of a compare, an equality test and a second compare).
    static constexpr bool PACKED = HasValues<V>::value && K::KIND != KIND_FLOAT &&
                                   V::KIND != KIND_FLOAT && sizeof(U) <= 4 && sizeof(VU) <= 4;
    // Compare-exchange of a (lower index) and b.  Keys-only: codes are a bijection,
    // so min/max is exact.  Keyed: swap only when strictly greater, so the +inf
    // padding (the largest element) never moves.
    static __device__ __forceinline__ void cx(U& a, U& b, VU& va, VU& vb, U dm) {
        if constexpr (!HasValues<V>::value && sizeof(U) == 8) {
            minmax64(b, a, a, b);
        } else if constexpr (!HasValues<V>::value) {
            U lo = b < a ? b : a;
            U hi = b < a ? a : b;
            a = lo;
            b = hi;
        } else {
            const bool g = gt(a, b, va, vb, dm);
            U t = g ? b : a; b = g ? a : b; a = t;
            VU s = g ? vb : va; vb = g ? va : vb; va = s;
        }
    }
    // a > b in the sort order: keys' canonical codes, then the values' canonical
    // codes (ascending), then -- only where those tie, i.e. -0.0/+0.0 or NaN payloads
    // -- the key's total code and the value's total code, so that the result is one
    // order whatever the input order or chunking (a total order on bit patterns).
    static __device__ __forceinline__ bool gt(U a, U b, VU va, VU vb, U dm) {
        if constexpr (!HasValues<V>::value) {
            return a > b;
        } else if constexpr (PACKED) {  // canonical codes are the total codes here
            return ((u64_t)a << 32 | V::value_code(va)) > ((u64_t)b << 32 | V::value_code(vb));
        } else {
            const U ka = K::code(K::canon_total(K::uncode(a, dm)), dm);
            const U kb = K::code(K::canon_total(K::uncode(b, dm)), dm);
            const VU ca = V::value_code(va), cb = V::value_code(vb);
            if (ka != kb) return ka > kb;
            if (ca != cb) return ca > cb;
            if constexpr (K::KIND == KIND_FLOAT || V::KIND == KIND_FLOAT) {
                if (a != b) return a > b;
                return V::total(va) > V::total(vb);
            }
            return false;
        }
    }
};

// Half-cleaner on register bit J: m <-> m + 2^J for every m with bit J clear.
template <class K, class V, int ITEMS, int J>
__device__ __forceinline__ void half_clean(typename K::U* r, typename V::U* w, typename K::U dm) {
#pragma unroll
    for (int m = 0; m < ITEMS; ++m)
        if (!(m & (1 << J))) Cmp<K, V>::cx(r[m], r[m | (1 << J)], w[m], w[m | (1 << J)], dm);
}

// Half-cleaners on register bits J, J-1, ..., J-S+1 at compile time: straight-line
// code, so the compiler renames registers from one step to the next instead of moving
// every minimum back into its register (a run-time loop over `static_switch` must).
template <class K, class V, int ITEMS, int J, int S>
__device__ __forceinline__ void half_clean_seq(typename K::U* r, typename V::U* w,
                                               typename K::U dm) {
    if constexpr (S > 0) {
        half_clean<K, V, ITEMS, J>(r, w, dm);
        half_clean_seq<K, V, ITEMS, J - 1, S - 1>(r, w, dm);
    }
}

// Mirror step of blocks of 2^S registers: m <-> block end - (m - block start).
template <class K, class V, int ITEMS, int S>
__device__ __forceinline__ void mirror(typename K::U* r, typename V::U* w, typename K::U dm) {
    constexpr int B = 1 << S;
#pragma unroll
    for (int m = 0; m < ITEMS; ++m)
        if ((m & (B - 1)) < B / 2) {
            const int p = (m & ~(B - 1)) | (B - 1 - (m & (B - 1)));
            Cmp<K, V>::cx(r[m], r[p], w[m], w[p], dm);
        }
}

// The step Step::run<C> for the compile-time C equal to a run-time c, C = LO .. LO+N-1
// (the phases whose window is known only at run time): one switch, for every step kind,
// instead of a copy per kind.  Cases C >= LO + N are empty (`if constexpr`: the step
// does not exist there), as is any other c; N <= 6 (ITEMS <= 64).  Everything inlines
// into the phase, so the switch is the only run-time cost.  A switch, not a chain of
// `if (c == C)` (or a recursion over C): nvcc lays a chain out differently (other PTX),
// and this switch gives the PTX of the two hand-written ones it replaced.
template <class Step, int LO, int N, class... A>
__device__ __forceinline__ void static_switch(int c, A... a) {
    static_assert(N >= 1 && N <= 6, "one case per register bit, ITEMS <= 64");
    switch (c) {
        case LO: Step::template run<LO>(a...); break;
        case LO + 1: if constexpr (N > 1) Step::template run<LO + 1>(a...); break;
        case LO + 2: if constexpr (N > 2) Step::template run<LO + 2>(a...); break;
        case LO + 3: if constexpr (N > 3) Step::template run<LO + 3>(a...); break;
        case LO + 4: if constexpr (N > 4) Step::template run<LO + 4>(a...); break;
        case LO + 5: if constexpr (N > 5) Step::template run<LO + 5>(a...); break;
        default: break;
    }
}

// The register steps as a type for `static_switch` (a function template cannot be a
// template argument): run<C> is mirror<K, V, ITEMS, C> (blocks of 2^C registers,
// C = 1 .. log2 ITEMS) with MIRROR, else half_clean<K, V, ITEMS, C> (bit C = 0 .. log2
// ITEMS - 1).
template <class K, class V, int ITEMS, bool MIRROR> struct RegStep {
    template <int C>
    static __device__ __forceinline__ void run(typename K::U* r, typename V::U* w,
                                               typename K::U dm) {
        if constexpr (MIRROR) mirror<K, V, ITEMS, C>(r, w, dm);
        else half_clean<K, V, ITEMS, C>(r, w, dm);
    }
};

// Stage S of the network inside the registers: mirror, then half-cleaners S-2..0.
template <class K, class V, int ITEMS, int S>
__device__ __forceinline__ void reg_stage(typename K::U* r, typename V::U* w, typename K::U dm) {
    mirror<K, V, ITEMS, S>(r, w, dm);
    half_clean_seq<K, V, ITEMS, S - 2, S - 1>(r, w, dm);
}

// Sort ITEMS registers completely (stages 1..log2 ITEMS).
template <class K, class V, int ITEMS>
__device__ __forceinline__ void reg_sort(typename K::U* r, typename V::U* w, typename K::U dm) {
    reg_stage<K, V, ITEMS, 1>(r, w, dm);
    if constexpr (ITEMS >= 4) reg_stage<K, V, ITEMS, 2>(r, w, dm);
    if constexpr (ITEMS >= 8) reg_stage<K, V, ITEMS, 3>(r, w, dm);
    if constexpr (ITEMS >= 16) reg_stage<K, V, ITEMS, 4>(r, w, dm);
    if constexpr (ITEMS >= 32) reg_stage<K, V, ITEMS, 5>(r, w, dm);
    if constexpr (ITEMS >= 64) reg_stage<K, V, ITEMS, 6>(r, w, dm);
}

template <int N> struct Log2 { static constexpr int v = 1 + Log2<N / 2>::v; };
template <> struct Log2<1> { static constexpr int v = 0; };
