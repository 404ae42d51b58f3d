// Sources and destinations of a pass: where it reads its elements and writes them in
// global memory (Flat, Runs; and for packed key-value sorts Packed, Pairs, Split).
#pragma once
#include "tile_io.cuh"

// Where a pass reads its elements (`Src`) and writes them (`Dst`) in global memory.
// Element  i0 + d : i0 the first element of a thread's batch, d its offset in the batch
// (`batch_at`: multiples of THREADS; d = 0 in IO_ANY, where i0 is the element).  `fetch`
// reads an element's code and value through registers; `copy` puts its bits into its
// shared-memory slots by cp.async, and `fix` turns them into its code afterwards where
// `raw` says that they are not; `put` writes one.  `affine(q)`: offsets of 2^q are d's.
template <class K> struct Codes {  // keys as codes: the total order, by the descending mask
    typedef typename K::U U;
    U dm;
    __device__ __forceinline__ bool raw() const { return K::KIND != KIND_UNSIGNED || dm != 0; }
    __device__ __forceinline__ void fix(U& c) const { c = K::code(K::total(c), dm); }
    __device__ __forceinline__ bool affine(int) const { return true; }
};

// The array a pass sorts in place: element i at keys[i] (and vals[i]).
template <class K, class V> struct Flat : Codes<K> {
    typedef typename K::U U;
    typedef typename V::U VU;
    static constexpr bool HV = HasValues<V>::value;
    U* keys;
    VU* vals;
    __device__ __forceinline__ Flat(U* k, VU* v, U dm) : Codes<K>{dm}, keys(k), vals(v) {}
    __device__ __forceinline__ void fetch(long long i0, long long d, U& c, VU& v) const {
        c = K::code(K::total(keys[i0 + d]), this->dm);
        if constexpr (HV) v = vals[i0 + d];
    }
    __device__ __forceinline__ void copy(long long i0, long long d, U* ks, VU* vs) const {
        copy_async(ks, keys + i0 + d);
        if constexpr (HV) copy_async(vs, vals + i0 + d);
    }
    __device__ __forceinline__ void put(long long i0, long long d, U c, VU v) const {
        keys[i0 + d] = K::untotal(K::uncode(c, this->dm));
        if constexpr (HV) vals[i0 + d] = v;
    }
};

// The first pass of a compare-split's merge reads the two runs that the merge combines
// where they lie: element i of the V-shaped sequence is  a[ma - 1 - i]  below ma (the
// lower run, reversed) and  b[i - ma]  above.  It saves the merge a pass that would copy
// them into the output first.
template <class K, class V> struct Runs : Codes<K> {
    typedef typename K::U U;
    typedef typename V::U VU;
    static constexpr bool HV = HasValues<V>::value;
    const U* a_end;  // a + ma - 1: element i < ma is a_end[-i]
    const VU* av_end;
    const U* b;
    const VU* bv;
    long long ma;
    __device__ __forceinline__ Runs(const U* a, const VU* av, long long ma_, const U* b_,
                                    const VU* bv_, U dm)
        : Codes<K>{dm}, a_end(a + (ma_ - 1)), av_end(av + (HV ? ma_ - 1 : 0)), b(b_), bv(bv_),
          ma(ma_) {}
    __device__ __forceinline__ const U* key_at(long long i) const {
        return i < ma ? a_end - i : b + (i - ma);
    }
    __device__ __forceinline__ const VU* val_at(long long i) const {
        return i < ma ? av_end - i : bv + (i - ma);
    }
    __device__ __forceinline__ void fetch(long long i0, long long d, U& c, VU& v) const {
        c = K::code(K::total(*key_at(i0 + d)), this->dm);
        if constexpr (HV) v = *val_at(i0 + d);
    }
    __device__ __forceinline__ void copy(long long i0, long long d, U* ks, VU* vs) const {
        copy_async(ks, key_at(i0 + d));
        if constexpr (HV) copy_async(vs, val_at(i0 + d));
    }
};

// Packed key-value sorts: 4-byte integer keys and 4-byte integer values, each element one
// 64-bit code (the key's code above the value's, the keyed order of `Cmp`), so that every
// pass moves one stream of 8-byte elements with one compare per comparator, as a sort of
// uint64 keys does.  The first pass packs the user's keys and values (`Pairs`) and the
// last unpacks them; between them the elements live in the same bytes (`Split`).
template <class KS, class VS> struct Packed {
    static_assert(sizeof(typename KS::U) == 4 && sizeof(typename VS::U) == 4 &&
                  KS::KIND != KIND_FLOAT && VS::KIND != KIND_FLOAT,
                  "packed sorts: 4-byte integer keys and values");
    typedef u64_t U;
    static constexpr int KIND = KIND_UNSIGNED;
    static __host__ __device__ __forceinline__ U total(U c) { return c; }
    static __host__ __device__ __forceinline__ U untotal(U c) { return c; }
    // The value's code is its canonical code (integers: the total one, a bijection).
    static __host__ __device__ __forceinline__ U code(u32_t key, u32_t val, u32_t dm) {
        return (U)KS::code(KS::total(key), dm) << 32 | VS::value_code(val);
    }
    static __host__ __device__ __forceinline__ u32_t key(U c, u32_t dm) {
        return KS::untotal(KS::uncode((u32_t)(c >> 32), dm));
    }
    static __host__ __device__ __forceinline__ u32_t val(U c) { return VS::untotal((u32_t)c); }
};

// A packed sort's keys and values where the user has them (its first and last pass).
template <class KS, class VS> struct Pairs {
    typedef Packed<KS, VS> P;
    typedef u64_t U;
    typedef NoValue::U VU;
    u32_t* keys;
    u32_t* vals;
    u32_t dm;
    __device__ __forceinline__ void fetch(long long i0, long long d, U& c, VU&) const {
        c = P::code(keys[i0 + d], vals[i0 + d], dm);
    }
    __device__ __forceinline__ void copy(long long i0, long long d, U* ks, VU*) const {
        u32_t* w = reinterpret_cast<u32_t*>(ks);  // little-endian: the key is the high word
        copy_async(w + 1, keys + i0 + d);
        copy_async(w, vals + i0 + d);
    }
    __device__ __forceinline__ bool raw() const {
        return KS::KIND != KIND_UNSIGNED || VS::KIND != KIND_UNSIGNED || dm != 0;
    }
    __device__ __forceinline__ void fix(U& c) const { c = P::code((u32_t)(c >> 32), (u32_t)c, dm); }
    __device__ __forceinline__ void put(long long i0, long long d, U c, VU) const {
        keys[i0 + d] = P::key(c, dm);
        vals[i0 + d] = P::val(c);
    }
    __device__ __forceinline__ bool affine(int) const { return true; }
};

// A packed sort's elements between its first and last pass: element i in the 64-bit slot
// (i without its bit zb) of the keys' memory where that bit is 0, of the values' where 1.
// So a tile of 2^tile_bits > 2^zb elements fills exactly the bytes that its keys and values had
// (packing and unpacking are in place), runs of 2^zb elements (128 bytes) are contiguous,
// and an offset d that is a multiple of 2^(zb+1) (THREADS is, `passes.split_bit`) is d/2 slots.
struct Split {
    typedef u64_t U;
    typedef NoValue::U VU;
    u64_t* kz;
    u64_t* vz;
    int zb;
    __device__ __forceinline__ u64_t* at(long long i) const {
        const long long low = i & ((1LL << zb) - 1);
        return ((i >> zb) & 1 ? vz : kz) + ((i >> (zb + 1)) << zb | low);
    }
    __device__ __forceinline__ void fetch(long long i0, long long d, U& c, VU&) const {
        c = at(i0)[d >> 1];
    }
    __device__ __forceinline__ void copy(long long i0, long long d, U* ks, VU*) const {
        copy_async(ks, at(i0) + (d >> 1));
    }
    __device__ __forceinline__ bool raw() const { return false; }
    __device__ __forceinline__ void fix(U&) const {}
    __device__ __forceinline__ void put(long long i0, long long d, U c, VU) const {
        at(i0)[d >> 1] = c;
    }
    __device__ __forceinline__ bool affine(int q) const { return q > zb; }
};
