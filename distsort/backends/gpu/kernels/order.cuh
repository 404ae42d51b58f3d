// The orders of distsort/core/order.py on the GPU: keys as unsigned codes.
//
// A kernel loads a key's bits, turns them into its `total` code (a bijection, so
// the original bits, NaN payloads and -0.0 included, come back on store), maps it by
// the descending mask (`code`: descending, the reverse order with NaNs still last),
// and compares codes.  Keyed sorts compare the `canonical`
// code (-0.0 == +0.0, one NaN), computed from the stored total code, and break
// ties by the value's canonical code (always ascending), as NumPy's backend does.
#pragma once

typedef unsigned char u8_t;
typedef unsigned short u16_t;
typedef unsigned int u32_t;
typedef unsigned long long u64_t;

enum { KIND_UNSIGNED = 0, KIND_SIGNED = 1, KIND_FLOAT = 2 };

template <typename U> struct Bits;
template <> struct Bits<u8_t>  { static constexpr int n = 8;  static constexpr int nmant = 0; };
template <> struct Bits<u16_t> { static constexpr int n = 16; static constexpr int nmant = 10; };
template <> struct Bits<u32_t> { static constexpr int n = 32; static constexpr int nmant = 23; };
template <> struct Bits<u64_t> { static constexpr int n = 64; static constexpr int nmant = 52; };

// One scalar type: its storage U and kind.  `total`/`untotal` are the bijection of
// order.py; `canon_total` maps a total code to the total code of its canonical key.
template <typename U_, int KIND_> struct Scalar {
    typedef U_ U;
    static constexpr int KIND = KIND_;
    static constexpr U SIGN = (U)((U)1 << (Bits<U>::n - 1));
    static constexpr U ONES = (U)~(U)0;
    static constexpr int NMANT = Bits<U>::nmant;
    // Negative NaNs are the lowest codes after the sign fold; subtracting their
    // count rotates them above the positive NaNs (order.py, _float_constants).
    static constexpr U NNEG = (U)(((U)1 << (NMANT > 0 ? NMANT : 1)) - 1);
    static constexpr U EXP = (U)(((SIGN - 1) >> NMANT) << NMANT);  // exponent mask
    static constexpr U QNAN = (U)(EXP | ((U)1 << (NMANT > 0 ? NMANT - 1 : 0)));
    // The NaNs' bit patterns, the top codes of `total` (floats; none for other kinds).
    static constexpr U NANS = (U)(KIND == KIND_FLOAT ? 2 * NNEG : 0);

    // The order code of total code t under the descending mask dm (0 or all ones), as
    // order.py's encode: ascending t; descending ~(t + NANS), the reverse order of the
    // codes below the NaNs', the NaNs' wrapped round and complemented back to the top.
    static __host__ __device__ __forceinline__ U code(U t, U dm) {
        return (U)((U)(t + (U)(dm & NANS)) ^ dm);
    }
    static __host__ __device__ __forceinline__ U uncode(U c, U dm) {
        return (U)((U)(c ^ dm) - (U)(dm & NANS));
    }

    static __host__ __device__ __forceinline__ U total(U u) {
        if (KIND == KIND_SIGNED) return (U)(u ^ SIGN);
        if (KIND == KIND_FLOAT) {
            u = (u & SIGN) ? (U)~u : (U)(u | SIGN);
            return (U)(u - NNEG);
        }
        return u;
    }
    static __host__ __device__ __forceinline__ U untotal(U c) {
        if (KIND == KIND_SIGNED) return (U)(c ^ SIGN);
        if (KIND == KIND_FLOAT) {
            c = (U)(c + NNEG);
            return (c & SIGN) ? (U)(c & (U)(SIGN - 1)) : (U)~c;
        }
        return c;
    }
    // Total code of the canonical key of the key whose total code is t.
    static __host__ __device__ __forceinline__ U canon_total(U t) {
        if (KIND != KIND_FLOAT) return t;
        const U tinf = total(EXP), tneg0 = total(SIGN), tpos0 = total((U)0);
        U r = t > tinf ? total(QNAN) : t;
        return r == tneg0 ? tpos0 : r;
    }
    // Canonical code of a value (ties of keyed sorts; always ascending).
    static __host__ __device__ __forceinline__ U value_code(U raw) {
        return canon_total(total(raw));
    }
    // Raw bits of the padding's value: the largest in every level of the keyed order
    // (canonical code and total code), so that no real element ever exceeds it.
    static __host__ __device__ __forceinline__ U value_max() { return untotal(ONES); }
};

// No values: keys-only sorts.  A 1-byte dummy so that pointers and arrays compile.
struct NoValue {
    typedef u8_t U;
    static constexpr int KIND = KIND_UNSIGNED;
};

template <class V> struct HasValues { static constexpr bool value = true; };
template <> struct HasValues<NoValue> { static constexpr bool value = false; };
