// Where the phases of a pass put their register windows: the shared-memory padding, the
// window that covers a run of half-cleaners, and the phases compiled with compile-time
// windows (`Static`).
#pragma once

// Shared memory holds one spare slot after every ITEMS elements, so that the ITEMS elements of
// a phase group sit at  base + m * step  (see `phase`) and a warp's accesses fall in
// 32 different banks.
template <int LOG_ITEMS> __device__ __forceinline__ int pad(int i) { return i + (i >> LOG_ITEMS); }

// Which phase covers the half-cleaners from bit `rem` down to `stop` of a tile of 2^tile_bits
// (rem >= stop): the largest window of log2 ITEMS bits at q = 0 or q >= LOG_ITEMS (the padding
// then stays affine) and q <= tile_bits - LOG_ITEMS, holding bits rem .. low.  The kernel's loop
// below and the compile-time phases (`Static`) take their windows from here.
struct Window {
    int q, j, s, low;  // window at bit q; half-cleaners on register bits j .. j-s+1
};
__host__ __device__ constexpr Window window(int rem, int stop, int tile_bits, int log_items) {
    int q = 0;
    if (rem >= log_items) {
        q = rem - log_items + 1 > stop ? rem - log_items + 1 : stop;
        q = q < log_items ? log_items : q > tile_bits - log_items ? tile_bits - log_items : q;
    }
    const int low = q > stop ? q : stop;
    return Window{q, rem - q, rem - low + 1, low};
}

// The phases with compile-time windows: those of a MERGE pass on a tile of 2^TILE_BITS (the
// tuned tile: half-cleaners on bits TILE_BITS-1 .. 0) and the mirror phase of a whole window at
// q = TILE_BITS - LOG_ITEMS (every GROUP pass with the mirror and k >= LOG_ITEMS, the last stage of
// SORT).  The GROUP passes of kmax steps use the same windows as MERGE (with the tables'
// 128-byte rows, for 4- and 8-byte elements), and so do the phases at q = 0 that end
// every SORT stage.  Every other phase runs the run-time
// copies.  DISTSORT_STATIC_PHASE(id) lets the CPU emulation record which ones ran
// (id: the MERGE phase's index, 31 for the mirror phase); it is empty on the GPU.
template <int LOG_ITEMS, int TILE_BITS> struct Static {
    // MERGE phases of a 2^TILE_BITS tile, the window at `rem` and those after it.
    static __host__ __device__ constexpr int count(int rem = TILE_BITS - 1) {
        return rem < 0 ? 0 : 1 + count(window(rem, 0, TILE_BITS, LOG_ITEMS).low - 1);
    }
    // Bits of `count()` MERGE phases, 30: the first MERGE phase from global memory
    // (`merge_first_phase`), 31: the whole-window mirror.
    static __host__ __device__ constexpr unsigned mask() {
        return ((1u << count()) - 1) | (1u << 30) | (1u << 31);
    }
};
