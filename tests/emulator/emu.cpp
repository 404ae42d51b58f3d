// The kernels of distsort/kernels/sort.cu compiled for the CPU, for tests on machines
// without a GPU.  A block's threads are std::threads that meet at a std::barrier for
// __syncthreads; blocks run one after another (the same threads, a barrier between
// blocks) and share one static buffer as their shared memory.  The kernels use no warp-level operations, so this is the CUDA
// execution model they rely on.  Built by tests/kernel_emulator.py with -DKT, -DVT,
// -DE_, -DNT_, -DTB_ naming one instantiation.  `emu_static_hits` says which of the
// kernel's compile-time phases (`Static` in sort.cu) have run, and `emu_io_hits` which
// ways of addressing global memory (IO_*), so that the tests can check that each one did.
#include <atomic>
#include <barrier>
#include <thread>
#include <vector>

struct EmuIdx { unsigned x = 0, y = 0, z = 0; };
thread_local EmuIdx threadIdx, blockIdx;
static std::barrier<>* emu_barrier;
inline void __syncthreads() { emu_barrier->arrive_and_wait(); }
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(threads, blocks)
#define __shared__
#define __align__(n) __attribute__((aligned(n)))
alignas(16) unsigned char smem[1 << 20];
static std::atomic<unsigned> emu_hits{0};
#define DISTSORT_STATIC_PHASE(id) emu_hits.fetch_or(1u << (id), std::memory_order_relaxed)
#define DISTSORT_DIRECT_PHASE() DISTSORT_STATIC_PHASE(30)
static std::atomic<unsigned> emu_io{0};
#define DISTSORT_IO_KIND(io) emu_io.fetch_or(1u << (io), std::memory_order_relaxed)

#include "sort.cu"

typedef typename KT::U KU;
typedef typename VT::U VU;

// A grid of gx * gy blocks of NT_ threads, each running block(); 1 if the tile needs
// more shared memory than the emulator has.
template <class Block>
static int emu_launch(long long gx, long long gy, long long smem_bytes, Block block) {
    if (smem_bytes > (long long)sizeof(smem)) return 1;
    std::barrier<> bar(NT_);
    emu_barrier = &bar;
    std::vector<std::thread> threads;
    for (int t = 0; t < NT_; ++t)
        threads.emplace_back([=] {
            threadIdx.x = t;
            for (long long by = 0; by < gy; ++by)
                for (long long bx = 0; bx < gx; ++bx) {
                    blockIdx.x = (unsigned)bx;
                    blockIdx.y = (unsigned)by;
                    block();
                    emu_barrier->arrive_and_wait();  // the next block reuses the shared memory
                }
        });
    for (auto& th : threads) th.join();
    return 0;
}

extern "C" int emu_pass(void* keys, void* vals, long long n, long long lane, int tb, int mode,
                        int top, int k, int mirror, int pre, unsigned long long dmask, long long gx,
                        long long gy, long long smem_bytes) {
    return emu_launch(gx, gy, smem_bytes, [=] {
        bitonic_pass<KT, VT, E_, NT_, 1, TB_>((KU*)keys, (VU*)vals, n, lane, tb, mode, top, k,
                                              mirror, pre, dmask);
    });
}

extern "C" int emu_merge_pass(void* keys, void* vals, long long n, void* a, void* av,
                              long long ma, void* b, void* bv, int tb, int mode, int top, int k,
                              int mirror, int pre, unsigned long long dmask, long long gx,
                              long long smem_bytes) {
    return emu_launch(gx, 1, smem_bytes, [=] {
        merge_pass<KT, VT, E_, NT_, 1, TB_>((KU*)keys, (VU*)vals, n, (const KU*)a, (const VU*)av,
                                            ma, (const KU*)b, (const VU*)bv, tb, mode, top, k,
                                            mirror, pre, dmask);
    });
}

// A pass of a packed key-value sort (`packed_pass`; `ends` its ENDS); 2 where KT and VT
// are not 4-byte integers (the kernel does not exist).
template <int ENDS>
static int emu_packed(void* keys, void* vals, long long n, long long lane, int tb, int mode,
                      int top, int k, int mirror, int pre, int zb, unsigned long long dmask,
                      long long gx, long long gy, long long smem_bytes) {
    if constexpr (sizeof(KU) == 4 && sizeof(VU) == 4 && KT::KIND != KIND_FLOAT &&
                  VT::KIND != KIND_FLOAT) {
        return emu_launch(gx, gy, smem_bytes, [=] {
            packed_pass<KT, VT, E_, NT_, 1, TB_, ENDS>((u32_t*)keys, (u32_t*)vals, n, lane, tb,
                                                      mode, top, k, mirror, pre, zb, dmask);
        });
    } else {
        return 2;
    }
}

extern "C" int emu_packed_pass(void* keys, void* vals, long long n, long long lane, int tb,
                               int mode, int top, int k, int mirror, int pre, int zb, int ends,
                               unsigned long long dmask, long long gx, long long gy,
                               long long smem_bytes) {
    auto run = [&](auto f) { return f(keys, vals, n, lane, tb, mode, top, k, mirror, pre, zb,
                                      dmask, gx, gy, smem_bytes); };
    switch (ends) {
    case 0: return run(emu_packed<0>);
    case 1: return run(emu_packed<1>);
    case 2: return run(emu_packed<2>);
    default: return run(emu_packed<3>);
    }
}

extern "C" long long emu_crossing(void* a, void* av, long long ma, void* b, void* bv,
                                  long long mb, unsigned long long dmask) {
    long long out = -1;
    crossing_count<KT, VT>((KU*)a, (VU*)av, ma, (KU*)b, (VU*)bv, mb, dmask, &out);
    return out;
}

// Bit i: MERGE phase i of a 2^TB_ tile ran (since the last call); bit 30: the first
// MERGE phase from global memory; bit 31: the whole-window mirror phase.
// `emu_static_all`: the bits of every compile-time phase.
extern "C" unsigned emu_static_hits() { return emu_hits.exchange(0); }
extern "C" unsigned emu_static_all() { return Static<Log2<E_>::v, TB_>::mask(); }

// Bit i: a block addressed its tile's global memory in the way IO_* = i of sort.cu
// (since the last call).
extern "C" unsigned emu_io_hits() { return emu_io.exchange(0); }
