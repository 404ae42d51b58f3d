// The kernel of distsort/backends/gpu/kernels/select.cu compiled for the CPU, for tests
// on machines without a GPU.  A block's threads are std::threads that meet at a
// std::barrier for __syncthreads; blocks run one after another (the same threads, a
// barrier between blocks).  The kernel's warp shuffles are called by every thread of a
// block together (its control flow is the same in every thread at each one), so a
// shuffle here is a write to a block-wide slot, a barrier, a read of the lane's partner
// and a barrier.  Built by tests/kernel_emulator.py.
#include <atomic>
#include <barrier>
#include <thread>
#include <vector>

struct EmuIdx { unsigned x = 0, y = 0, z = 0; };
thread_local EmuIdx threadIdx, blockIdx;
static EmuIdx gridDim;
static std::barrier<>* emu_barrier;
inline void __syncthreads() { emu_barrier->arrive_and_wait(); }
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static

static unsigned long long emu_lanes[1024];

template <class V> V __shfl_up_sync(unsigned, V v, int o) {
    const unsigned t = threadIdx.x;
    emu_lanes[t] = (unsigned long long)v;
    __syncthreads();
    const V r = (int)(t & 31) >= o ? (V)emu_lanes[t - o] : v;
    __syncthreads();
    return r;
}

template <class V> V __shfl_down_sync(unsigned, V v, int o) {
    const unsigned t = threadIdx.x;
    emu_lanes[t] = (unsigned long long)v;
    __syncthreads();
    const V r = (int)(t & 31) + o < 32 ? (V)emu_lanes[t + o] : v;
    __syncthreads();
    return r;
}

template <class T> T atomicAdd(T* p, T v) { return std::atomic_ref<T>(*p).fetch_add(v); }

#include "select.cu"

template <class T, int M>
static void emu_run(const void* codes, long long n, const void* bounds, int nb,
                    unsigned long long take, unsigned long long* counts, void* out,
                    long long* out_pos, int with_pos, long long offset,
                    unsigned long long* out_count, long long capacity, long long gx) {
    std::barrier<> bar(SELECT_THREADS);
    emu_barrier = &bar;
    gridDim.x = (unsigned)gx;
    std::vector<std::thread> threads;
    for (int t = 0; t < SELECT_THREADS; ++t)
        threads.emplace_back([=] {
            threadIdx.x = t;
            for (long long bx = 0; bx < gx; ++bx) {
                blockIdx.x = (unsigned)bx;
                slot_pass<T, M>((const T*)codes, n, (const T*)bounds, nb, take, counts,
                                (T*)out, out_pos, with_pos, offset, out_count, capacity);
                emu_barrier->arrive_and_wait();  // the next block reuses the shared memory
            }
        });
    for (auto& th : threads) th.join();
}

template <class T>
static int emu_sized(int maxb, const void* codes, long long n, const void* bounds, int nb,
                     unsigned long long take, unsigned long long* counts, void* out,
                     long long* out_pos, int with_pos, long long offset,
                     unsigned long long* out_count, long long capacity, long long gx) {
    switch (maxb) {
    case 2: emu_run<T, 2>(codes, n, bounds, nb, take, counts, out, out_pos, with_pos, offset,
                          out_count, capacity, gx); return 0;
    case 8: emu_run<T, 8>(codes, n, bounds, nb, take, counts, out, out_pos, with_pos, offset,
                          out_count, capacity, gx); return 0;
    case 16: emu_run<T, 16>(codes, n, bounds, nb, take, counts, out, out_pos, with_pos, offset,
                            out_count, capacity, gx); return 0;
    default: return 1;
    }
}

// `slot_pass<T, maxb>` over a grid of `gx` blocks, T the unsigned type of `itemsize`
// bytes; 1 where no such instantiation exists.
extern "C" int emu_slot_pass(int itemsize, int maxb, const void* codes, long long n,
                             const void* bounds, int nb, unsigned long long take,
                             unsigned long long* counts, void* out, long long* out_pos,
                             int with_pos, long long offset, unsigned long long* out_count,
                             long long capacity, long long gx) {
    switch (itemsize) {
    case 1: return emu_sized<u8_t>(maxb, codes, n, bounds, nb, take, counts, out, out_pos,
                                   with_pos, offset, out_count, capacity, gx);
    case 2: return emu_sized<u16_t>(maxb, codes, n, bounds, nb, take, counts, out, out_pos,
                                    with_pos, offset, out_count, capacity, gx);
    case 4: return emu_sized<u32_t>(maxb, codes, n, bounds, nb, take, counts, out, out_pos,
                                    with_pos, offset, out_count, capacity, gx);
    case 8: return emu_sized<u64_t>(maxb, codes, n, bounds, nb, take, counts, out, out_pos,
                                    with_pos, offset, out_count, capacity, gx);
    default: return 1;
    }
}
