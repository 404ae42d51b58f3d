// Where the phases of a pass put their register windows: the shared-memory padding, the
// window that covers a run of half-cleaners, and the phases compiled with compile-time
// windows (`Static`).
#pragma once

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

// The phases with compile-time windows: those of a MERGE pass on a tile of 2^TB (the
// tuned tile: half-cleaners on bits TB-1 .. 0) and the mirror phase of a whole window at
// q = TB - LOGE (every GROUP pass with the mirror and k >= LOGE, the last stage of
// SORT).  The GROUP passes of kmax steps use the same windows as MERGE (with the tables'
// 128-byte rows, for 4- and 8-byte elements), and so do the phases at q = 0 that end
// every SORT stage.  Every other phase runs the run-time
// copies.  DISTSORT_STATIC_PHASE(id) lets the CPU emulation record which ones ran
// (id: the MERGE phase's index, 31 for the mirror phase); it is empty on the GPU.
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
