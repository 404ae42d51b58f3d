// Benchmark helpers: the baseline bitonic sort (one launch per network step, the
// kernel of seed 004 in the all-ascending form, any length), an in-place random
// fill, and a cheap on-device check (order violations, sum and xor checksums).
typedef unsigned int u32;
typedef unsigned long long u64;

// One step of the flip network over uint32 keys: thread t owns comparator t.
// mirror: stage 2^s, lo = block*2^s + r, hi = block*2^s + 2^s-1-r; else stride 2^j.
extern "C" __global__ void bitonic_step(u32* a, long long n, long long pairs, int s, int j,
                                        int mirror) {
    long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (t >= pairs) return;
    long long lo, hi;
    if (mirror) {
        long long half = 1LL << (s - 1), blk = t >> (s - 1), r = t & (half - 1);
        lo = (blk << s) + r;
        hi = (blk << s) + (2 * half - 1 - r);
    } else {
        lo = ((t >> j) << (j + 1)) | (t & ((1LL << j) - 1));
        hi = lo + (1LL << j);
    }
    if (hi >= n) return;  // virtual padding
    u32 x = a[lo], y = a[hi];
    if (y < x) { a[lo] = y; a[hi] = x; }
}

__device__ __forceinline__ u64 mix(u64 z) {  // splitmix64
    z += 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

// kind 0: uint32 bits, 1: uint64 bits, 2: float32 in [-1e6, 1e6), 3: float64 likewise.
extern "C" __global__ void fill_random(void* out, long long n, u64 seed, int kind) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        u64 r = mix(seed ^ mix(i));
        if (kind == 0) ((u32*)out)[i] = (u32)r;
        else if (kind == 1) ((u64*)out)[i] = r;
        else if (kind == 2) ((float*)out)[i] = (float)((double)(r >> 40) * 0x1p-24 * 2e6 - 1e6);
        else ((double*)out)[i] = (double)(r >> 11) * 0x1p-53 * 2e6 - 1e6;
    }
}

// out[0] += #{i : a[i+1] < a[i]}, out[1] += sum a[i] (mod 2^64), out[2] ^= xor of a[i].
extern "C" __global__ void check_u32(const u32* a, long long n, u64* out) {
    u64 bad = 0, sum = 0, x = 0;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        u32 v = a[i];
        sum += v;
        x ^= v;
        if (i + 1 < n && a[i + 1] < v) bad++;
    }
    for (int o = 16; o > 0; o >>= 1) {
        bad += __shfl_xor_sync(0xffffffffu, bad, o);
        sum += __shfl_xor_sync(0xffffffffu, sum, o);
        x ^= __shfl_xor_sync(0xffffffffu, x, o);
    }
    if ((threadIdx.x & 31) == 0) {
        atomicAdd(out, bad);
        atomicAdd(out + 1, sum);
        atomicXor(out + 2, x);
    }
}
