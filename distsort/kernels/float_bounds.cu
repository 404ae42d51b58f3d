// Where CUB's radix order of floats (cupy.sort: keys twiddled, -0.0 and +0.0 equal)
// differs from distsort's (order.cuh's `total`): negative NaNs come first, not after
// the positive ones, and zeros of both signs keep their input order, not -0.0 first.
// Over the sorted keys' bits `u`, three binary searches (one thread each) find the
// first index where each predicate below stops holding; every predicate holds on a
// prefix of CUB's order:
//   out[0]: negative NaN                 (the leading negative NaNs end)
//   out[1]: sign bit set and not -0.0    (the negative non-zero keys end: zeros start)
//   out[2]: sign bit set, or +0.0        (the zeros end)
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
    if (which > 2) return;
    long long lo = 0, hi = n;  // the answer lies in [lo, hi]
    while (lo < hi) {
        const long long mid = lo + (hi - lo) / 2;
        if (holds<U>(u[mid], which)) lo = mid + 1; else hi = mid;
    }
    out[which] = lo;
}
