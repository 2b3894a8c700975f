/* Darshan's record id: Bob Jenkins' 64-bit "lookup8" hash of the cleaned
 * path with level 0, as darshan_core_gen_record_id() computes it. The
 * algorithm is in the public domain; this is our own rendering of it. */
#include "darshan_hash.h"

#include "public.h"

static inline uint64_t load_le64(const unsigned char *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Reversible mixing of three 64-bit lanes; shifts are the published ones. */
#define MIX(a, b, c)                              \
    do {                                          \
        static const int sh[12] = {43, 9, 8, 38, 23, 5, 35, 49, 11, 12, 18, 22}; \
        for (int r = 0; r < 12; r += 3) {         \
            a -= b; a -= c; a ^= (c >> sh[r]);    \
            b -= c; b -= a; b ^= (a << sh[r + 1]); \
            c -= a; c -= b; c ^= (b >> sh[r + 2]); \
        }                                         \
    } while (0)

uint64_t tfd_hash64(const unsigned char *key, size_t len)
{
    uint64_t a = 0, b = 0, c = 0x9e3779b97f4a7c13ull;
    size_t left = len;

    while (left >= 24) {
        a += load_le64(key, 8);
        b += load_le64(key + 8, 8);
        c += load_le64(key + 16, 8);
        MIX(a, b, c);
        key += 24;
        left -= 24;
    }
    /* the tail: up to 8 bytes into a, 8 into b, 7 into c above its low byte,
     * whose low byte carries the total length */
    c += len;
    a += load_le64(key, left < 8 ? left : 8);
    if (left > 8)
        b += load_le64(key + 8, left < 16 ? left - 8 : 8);
    if (left > 16)
        c += load_le64(key + 16, left - 16) << 8;
    MIX(a, b, c);
    return c;
}

uint64_t tfd_darshan_hash(const char *key, size_t len)
{
    return tfd_hash64((const unsigned char *)key, len);
}
