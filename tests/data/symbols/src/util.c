#include "util.h"

/* A loop at -O2 gives the line table discriminators. */
int checksum(const unsigned char *p, int n)
{
    int sum = 0;
    for (int i = 0; i < n; i++)
        sum = (sum * 31 + p[i]) & 0xffff;
    return clamp(sum, 16, 60000);
}

long fib(int n)
{
    long a = 0, b = 1;
    while (n-- > 0) {
        long t = a + b;
        a = b;
        b = t;
    }
    return a;
}
