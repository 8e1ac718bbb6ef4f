/* Freestanding support for the mini_* programs: raw Linux system calls and
 * a _start that calls main and exits. No C library, so the programs (and
 * their checked-in snapshots) stay a few kilobytes. */
#ifndef MINI_H
#define MINI_H

static inline long sys3(long nr, long a, long b, long c)
{
    register long x8 __asm__("x8") = nr;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    __asm__ volatile("svc #0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory");
    return x0;
}

#define SYS_write 64
#define SYS_exit_group 94
#define SYS_getpid 172
#define SYS_clock_gettime 113

static long put(const char *s)
{
    long n = 0;
    while (s[n])
        n++;
    return sys3(SYS_write, 1, (long)s, n);
}

static void put_num(long v)
{
    char b[24];
    int i = 23;
    b[i] = 0;
    int neg = v < 0;
    unsigned long u = neg ? -(unsigned long)v : (unsigned long)v;
    do {
        b[--i] = '0' + u % 10;
        u /= 10;
    } while (u);
    if (neg)
        b[--i] = '-';
    put(b + i);
}

void *memset(void *d, int c, unsigned long n)
{
    unsigned char *p = d;
    while (n--)
        *p++ = (unsigned char)c;
    return d;
}

void *memcpy(void *d, const void *s, unsigned long n)
{
    unsigned char *p = d;
    const unsigned char *q = s;
    while (n--)
        *p++ = *q++;
    return d;
}

int main(void);

__attribute__((noreturn)) void _start(void)
{
    long r = main();
    for (;;)
        sys3(SYS_exit_group, r, 0, 0);
}

#endif
