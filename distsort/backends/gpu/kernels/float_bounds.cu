// Where CUB's radix order of floats (cupy.sort: keys twiddled, -0.0 and +0.0 equal)
// differs from distsort's (order.cuh's `total`): negative NaNs come first, not after
// the positive ones, and zeros of both signs keep their input order, not -0.0 first.
// Over the sorted keys' bits `u`, three binary searches (one thread each) find the
// first index where each predicate below stops holding; every predicate holds on a
// prefix of CUB's order:
//   out[0]: negative NaN                 (the leading negative NaNs end)
//   out[1]: sign bit set and not -0.0    (the negative non-zero keys end: zeros start)
//   out[2]: sign bit set, or +0.0        (the zeros end)
// and out[3] is zeroed, for float_zeros_count.
//
// The fix-up kernels below then put the keys in distsort's order in place, reading the
// bounds where float_bounds wrote them, in device memory: the task that sorts never
// waits for the GPU to read them back, and each kernel returns at once where there is
// nothing to fix (no zeros, no negative NaN), which is the common case.  They loop over
// their range with a grid of any size.
typedef unsigned int u32_t;
typedef unsigned long long u64_t;

template <typename U>
__device__ __forceinline__ bool holds(U u, int which) {
    const U sign = (U)((U)1 << (8 * sizeof(U) - 1));
    const U mag = (U)(u & (U)(sign - 1));
    const U exp = sizeof(U) == 4 ? (U)0x7F800000u : (U)0x7FF0000000000000ull;
    if (which == 0) return (u & sign) && mag > exp;
    if (which == 1) return (u & sign) && mag != 0;
    return (u & sign) || u == 0;
}

template <typename U>
__global__ void float_bounds(const U* __restrict__ u, long long n, long long* out) {
    const int which = threadIdx.x;
    if (which == 3) out[3] = 0;
    if (which > 2) return;
    long long lo = 0, hi = n;  // the answer lies in [lo, hi]
    while (lo < hi) {
        const long long mid = lo + (hi - lo) / 2;
        if (holds<U>(u[mid], which)) lo = mid + 1; else hi = mid;
    }
    out[which] = lo;
}

__device__ __forceinline__ long long first_index() {
    return (long long)blockIdx.x * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ long long grid_stride() {
    return (long long)gridDim.x * blockDim.x;
}

// out[3] += the -0.0 among the zeros u[out[1]:out[2]] (only -0.0 has a bit set there).
// Blocks of a multiple of 32 threads.
template <typename U>
__global__ void float_zeros_count(const U* __restrict__ u, long long* out) {
    const long long lo = out[1], hi = out[2];
    if (hi - lo < 2) return;  // one zero or none: already in order
    unsigned long long mine = 0;
    for (long long i = lo + first_index(); i < hi; i += grid_stride()) mine += u[i] != 0;
    for (int offset = 16; offset; offset >>= 1) mine += __shfl_down_sync(0xffffffffu, mine, offset);
    if ((threadIdx.x & 31) == 0 && mine) atomicAdd((unsigned long long*)&out[3], mine);
}

// The zeros rewritten: out[3] of -0.0, then the +0.0.
template <typename U>
__global__ void float_zeros_write(U* __restrict__ u, const long long* out) {
    const long long lo = out[1], hi = out[2], negative = out[3];
    if (hi - lo < 2) return;
    const U sign = (U)((U)1 << (8 * sizeof(U) - 1));
    for (long long i = lo + first_index(); i < hi; i += grid_stride())
        u[i] = i - lo < negative ? sign : (U)0;
}

template <typename U>
__device__ __forceinline__ void swap_at(U* u, long long i, long long j) {
    const U t = u[i];
    u[i] = u[j];
    u[j] = t;
}

// The k = out[0] leading negative NaNs moved after the rest, in place and in order, as
// a rotation by three reversals: this kernel reverses u[:k] and u[k:], the next the whole.
template <typename U>
__global__ void float_nans_reverse_parts(U* __restrict__ u, long long n, const long long* out) {
    const long long k = out[0];
    if (k == 0 || k == n) return;
    const long long a = k / 2, b = (n - k) / 2, m = a > b ? a : b;
    for (long long t = first_index(); t < m; t += grid_stride()) {
        if (t < a) swap_at(u, t, k - 1 - t);
        if (t < b) swap_at(u, k + t, n - 1 - t);
    }
}

template <typename U>
__global__ void float_nans_reverse_whole(U* __restrict__ u, long long n, const long long* out) {
    const long long k = out[0];
    if (k == 0 || k == n) return;
    for (long long t = first_index(); t < n / 2; t += grid_stride()) swap_at(u, t, n - 1 - t);
}
