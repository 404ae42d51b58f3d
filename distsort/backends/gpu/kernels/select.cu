// One pass of selection by rank (distsort.backends.cpu.bands): over a chunk's order
// codes, count the codes below and equal to each of `nb` sorted bounds, and keep the
// codes (and, where asked, their positions) of the slots that `take` names.
//
// Slots: 2j holds the codes strictly between bounds[j-1] and bounds[j] (slot 0: below
// bounds[0], slot 2nb: above the last), 2j+1 those equal to bounds[j].  A code's slot is
// 2 * (bounds below it) + (1 if it equals one); `take` has bit s set for each slot kept.
//
// Counts: every thread counts in registers (MAXB bounds, unrolled: nb <= MAXB), then a
// warp adds its threads' counts and one lane adds them to `counts` (below[j] at j,
// equal[j] at MAXB + j, unsigned 64-bit).  Kept codes: each block tile (THREADS * ITEMS
// codes) scans its threads' kept counts, takes room in `out` with one atomicAdd on
// `out_count` and writes them there, in no particular order (the caller sorts them);
// room past `capacity` is counted, not written, so the caller can grow `out` and run
// the pass again.
typedef unsigned char u8_t;
typedef unsigned short u16_t;
typedef unsigned int u32_t;
typedef unsigned long long u64_t;

#define SELECT_THREADS 256
#define SELECT_ITEMS 8
#define FULL_MASK 0xffffffffu

template <typename T, int MAXB>
__global__ void __launch_bounds__(SELECT_THREADS)
slot_pass(const T* __restrict__ codes, long long n, const T* __restrict__ bounds, int nb,
          u64_t take, u64_t* __restrict__ counts, T* __restrict__ out,
          long long* __restrict__ out_pos, int with_pos, long long pos_offset,
          u64_t* __restrict__ out_count, long long capacity) {
    T b[MAXB];
    u32_t below[MAXB], equal[MAXB];
#pragma unroll
    for (int j = 0; j < MAXB; ++j) {
        b[j] = j < nb ? bounds[j] : (T)0;
        below[j] = 0;
        equal[j] = 0;
    }
    __shared__ u32_t warp_base[SELECT_THREADS / 32];
    __shared__ u64_t block_base;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const long long tile = (long long)SELECT_THREADS * SELECT_ITEMS;
    // `start` is the same for every thread of a block: all reach each __syncthreads.
    for (long long start = (long long)blockIdx.x * tile; start < n;
         start += (long long)gridDim.x * tile) {
        T c[SELECT_ITEMS];
        bool keep[SELECT_ITEMS];
        u32_t mine = 0;
#pragma unroll
        for (int e = 0; e < SELECT_ITEMS; ++e) {
            const long long i = start + (long long)e * SELECT_THREADS + threadIdx.x;
            keep[e] = false;
            c[e] = (T)0;
            if (i < n) {
                const T v = codes[i];
                int under = 0, same = 0;
#pragma unroll
                for (int j = 0; j < MAXB; ++j) {
                    if (j < nb) {
                        const u32_t lt = v < b[j], eq = v == b[j];
                        below[j] += lt;
                        equal[j] += eq;
                        under += b[j] < v;
                        same += eq;
                    }
                }
                const int slot = 2 * under + same;
                keep[e] = (take >> slot) & 1ull;
                c[e] = v;
                mine += keep[e];
            }
        }
        // The block's exclusive scan of the kept counts: warps by shuffles, then the
        // warps' totals by one thread, which takes the block's room in `out`.
        u32_t incl = mine;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const u32_t y = __shfl_up_sync(FULL_MASK, incl, o);
            if (lane >= o) incl += y;
        }
        if (lane == 31) warp_base[warp] = incl;
        __syncthreads();
        if (threadIdx.x == 0) {
            u32_t total = 0;
            for (int w = 0; w < SELECT_THREADS / 32; ++w) {
                const u32_t s = warp_base[w];
                warp_base[w] = total;
                total += s;
            }
            block_base = total ? atomicAdd(out_count, (u64_t)total) : 0ull;
        }
        __syncthreads();
        long long at = (long long)block_base + warp_base[warp] + (incl - mine);
#pragma unroll
        for (int e = 0; e < SELECT_ITEMS; ++e) {
            if (keep[e]) {
                if (at < capacity) {
                    out[at] = c[e];
                    if (with_pos)
                        out_pos[at] = pos_offset + start + (long long)e * SELECT_THREADS + threadIdx.x;
                }
                ++at;
            }
        }
        __syncthreads();  // warp_base and block_base are the next tile's
    }
#pragma unroll
    for (int j = 0; j < MAXB; ++j) {
        if (j < nb) {
            u64_t lt = below[j], eq = equal[j];
#pragma unroll
            for (int o = 16; o; o >>= 1) {
                lt += __shfl_down_sync(FULL_MASK, lt, o);
                eq += __shfl_down_sync(FULL_MASK, eq, o);
            }
            if (lane == 0) {
                if (lt) atomicAdd(&counts[j], lt);
                if (eq) atomicAdd(&counts[MAXB + j], eq);
            }
        }
    }
}
