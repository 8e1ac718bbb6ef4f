/* Recursion: naive Fibonacci, Ackermann, mutual recursion and a recursive
 * quicksort. Deep call chains exercise BL/RET pairs and the return stack. */
#include <stdio.h>

static int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

static int ackermann(int m, int n)
{
    if (m == 0)
        return n + 1;
    if (n == 0)
        return ackermann(m - 1, 1);
    return ackermann(m - 1, ackermann(m, n - 1));
}

static int is_odd(unsigned n);
static int is_even(unsigned n) { return n == 0 ? 1 : is_odd(n - 1); }
static int is_odd(unsigned n) { return n == 0 ? 0 : is_even(n - 1); }

static void quicksort(int *a, int lo, int hi)
{
    if (lo >= hi)
        return;
    int p = a[(lo + hi) / 2], i = lo, j = hi;
    while (i <= j) {
        while (a[i] < p)
            i++;
        while (a[j] > p)
            j--;
        if (i <= j) {
            int t = a[i];
            a[i++] = a[j];
            a[j--] = t;
        }
    }
    quicksort(a, lo, j);
    quicksort(a, i, hi);
}

int main(void)
{
    int a[64];
    unsigned x = 12345;
    for (int i = 0; i < 64; i++) {
        x = x * 1103515245u + 12345u;
        a[i] = (int)(x >> 16) % 1000;
    }
    quicksort(a, 0, 63);
    printf("fib(16)=%d ack(2,3)=%d even(77)=%d min=%d max=%d\n", fib(16), ackermann(2, 3), is_even(77), a[0], a[63]);
    return 0;
}
