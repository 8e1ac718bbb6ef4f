#include <stdio.h>
#include <string.h>
#include "util.h"

struct point {
    int x, y;
};

static int counter;

/* A static function that stays out of line. */
static __attribute__((noinline)) int scale(struct point *p, int k)
{
    p->x = clamp(p->x * k, -1000, 1000);
    p->y = clamp(p->y * k, -1000, 1000);
    return p->x + p->y;
}

/* Inlined into main at -O2. */
static inline int square(int v)
{
    counter++;
    return v * v;
}

int dot(const struct point *a, const struct point *b)
{
    return a->x * b->x + a->y * b->y;
}

/* A loop inlined into a loop, each on one line so that the line table has
   discriminators: addr2line prints the innermost one on the inlined-by
   frames too. */
static inline __attribute__((always_inline)) int weigh(const int *p, int n)
{
    int s = 0;
    for (int i = 0; i < n; i++) s += p[i] * (i & 3 ? 2 : 3);
    return s;
}

__attribute__((noinline)) int weigh_all(const int *p, int n, int m)
{
    int t = 0;
    for (int j = 0; j < m; j++) t += weigh(p + j, n) + (j & 1 ? weigh(p, j) : 0);
    return t;
}

int main(int argc, char **argv)
{
    struct point p = { argc, argc + 1 };
    struct point q = { 3, 4 };
    int s = scale(&p, 7);
    int d = dot(&p, &q);
    int c = checksum((const unsigned char *)argv[0], (int)strlen(argv[0]));
    printf("%d %d %d %d %ld %d\n", s, d, square(d), c, fib(argc + 10),
           weigh_all((const int *)argv, argc, argc + 2));
    return counter;
}
