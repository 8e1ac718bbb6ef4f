/* Helpers shared by prog.c and util.c; clamp() is inlined into its callers. */
#ifndef UTIL_H
#define UTIL_H

static inline __attribute__((always_inline)) int clamp(int v, int lo, int hi)
{
    if (v < lo)
        return lo;
    if (v > hi)
        return hi;
    return v;
}

int checksum(const unsigned char *p, int n);
long fib(int n);

#endif
