// Which global indices a block's tile covers (`Tile`), which of them each thread loads
// and stores and where they sit in shared memory (`Walk`), and how a batch of them is
// addressed (IO_*).
#pragma once
#include "bitonic.cuh"
#include "windows.cuh"

// Where a block's tile lives in global memory.  Tile index L = M << c | col (row M of
// 2^c contiguous elements) is at  start + M * rowstep + col,  plus `flip` in the
// upper half of the rows in the mirror pass of a stage (its rows pair with the
// mirrored lower ones).  SORT and MERGE tiles are one contiguous row.
struct Tile {
    long long start, rowstep, flip;
    int c;
    __device__ __forceinline__ Tile(long long blk, int tile_bits, int mode, int top, int k,
                                    int mirror) {
        if (mode != 2) {
            start = blk << tile_bits, rowstep = 0, flip = 0, c = tile_bits;
            return;
        }
        c = tile_bits - k;
        const int midbits = top - k + 1 - c;
        const long long mmask = (1LL << midbits) - 1, mid = blk & mmask;
        start = ((blk >> midbits) << (top + 1)) + (mid << c);
        rowstep = 1LL << (top - k + 1);
        flip = mirror ? ((mid ^ mmask) - mid) << c : 0;
    }
    // The largest global index of the tile (the map increases with L).
    __device__ __forceinline__ long long last(int tile_bits) const {
        const long long rows = 1LL << (tile_bits - c);
        return start + (rows - 1) * rowstep + (rows > 1 ? flip : 0) + (1LL << c) - 1;
    }
};

// This thread's elements of the tile: L = threadIdx.x + e * THREADS, e = 0 .. count-1; in
// global memory at  b + e * d + (e >> sh) * w  (+ flip in the upper half of the rows).
// Tiles whose rows hold THREADS elements or more ("rows"): d = THREADS and every 2^sh elements
// start a new row; shorter rows ("strided"): each step of THREADS covers several rows, d
// apart, and w = 0.  `run` elements from any multiple of `run` lie d apart.
template <int THREADS, int LOG_ITEMS> struct Walk {
    long long b, d, w, flip;
    int sh, half, count, run;
    bool rows;
    __device__ __forceinline__ Walk(const Tile& t, int tile_bits) {
        constexpr int LOG_THREADS = Log2<THREADS>::v;
        const int tid = threadIdx.x;
        const int T = 1 << tile_bits;
        count = T > tid ? (T - tid + THREADS - 1) / THREADS : 0;
        half = (T / 2 + THREADS - 1 - tid) / THREADS;  // elements with L < T/2
        flip = t.flip;
        rows = t.c >= LOG_THREADS;
        if (rows) {
            b = t.start + tid, d = THREADS, sh = t.c - LOG_THREADS, w = t.rowstep - (1LL << t.c);
            run = 1 << sh;
        } else {
            b = t.start + (tid & ((1 << t.c) - 1)) + (long long)(tid >> t.c) * t.rowstep;
            d = (long long)(THREADS >> t.c) * t.rowstep, sh = 30, w = 0;
            run = flip ? half : count;
        }
    }
    __device__ __forceinline__ long long at(int e) const {
        return b + e * d + (long long)(e >> sh) * w + (e >= half ? flip : 0);
    }
    // Its shared-memory slot: pad(L), affine in e when ITEMS divides THREADS.
    __device__ __forceinline__ int spos(int e) const {
        if constexpr (THREADS % (1 << LOG_ITEMS) == 0)
            return pad<LOG_ITEMS>(threadIdx.x) + e * (THREADS + (THREADS >> LOG_ITEMS));
        else
            return pad<LOG_ITEMS>(threadIdx.x + e * THREADS);
    }
};

// How a batch of a thread's elements is addressed, the tile entirely below n and the
// batches whole: IO_ROWS and IO_STRIDED when every batch lies in one run: the batch's
// first index plus u * THREADS (immediate offsets) or u * d; IO_SHORT when a batch spans
// several whole rows of fewer than BATCH * THREADS elements (GROUP passes of 3 to 6 steps
// on Hopper's tiles): plus u * THREADS and a row step every 2^sh elements.  IO_ANY: each
// element on its own, with the bounds checks of the virtual padding (about twice
// the time of the others per pass: docs/performance.md).
enum { IO_ANY = 0, IO_ROWS = 1, IO_STRIDED = 2, IO_SHORT = 3 };

// Element u of a batch relative to the batch's first (IO_ROWS, IO_STRIDED, IO_SHORT:
// the callers offset the pointers to it), or element e itself (IO_ANY).
template <int THREADS, int LOG_ITEMS, int IO>
__device__ __forceinline__ long long batch_at(const Walk<THREADS, LOG_ITEMS>& wk, int e) {
    if constexpr (IO == IO_ROWS) return (long long)e * THREADS;
    else if constexpr (IO == IO_STRIDED) return e * wk.d;
    else if constexpr (IO == IO_SHORT) return (long long)e * THREADS + (e >> wk.sh) * wk.w;
    else return wk.at(e);
}

template <int BATCH, int THREADS, int LOG_ITEMS>
__device__ __forceinline__ int io_kind(const Walk<THREADS, LOG_ITEMS>& wk, bool full) {
    if (!full || wk.count % BATCH) return IO_ANY;
    if (wk.run % BATCH == 0) return wk.rows ? IO_ROWS : IO_STRIDED;
    // Whole rows per batch (batches start on a row), and no batch straddles the
    // mirror's flip at element `half`.
    if (wk.rows && BATCH % wk.run == 0 && (wk.flip == 0 || wk.half % BATCH == 0))
        return IO_SHORT;
    return IO_ANY;
}
