/* Loops: nested counted loops, a sieve, a matrix product and a loop with
 * break/continue. Long runs of taken and not-taken conditional branches. */
#include <stdio.h>
#include <string.h>

static unsigned char sieve[4000];

int main(void)
{
    int primes = 0;
    memset(sieve, 1, sizeof sieve);
    for (int i = 2; i < 4000; i++) {
        if (!sieve[i])
            continue;
        primes++;
        for (int j = 2 * i; j < 4000; j += i)
            sieve[j] = 0;
    }
    int m[8][8], n[8][8], p[8][8];
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++) {
            m[i][j] = i + j;
            n[i][j] = i - j;
        }
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++) {
            int s = 0;
            for (int k = 0; k < 8; k++)
                s += m[i][k] * n[k][j];
            p[i][j] = s;
        }
    int collatz = 0;
    for (unsigned v = 27; v != 1; collatz++) {
        if (v & 1)
            v = 3 * v + 1;
        else
            v /= 2;
        if (collatz > 1000)
            break;
    }
    printf("primes=%d p[7][7]=%d collatz(27)=%d\n", primes, p[7][7], collatz);
    return 0;
}
