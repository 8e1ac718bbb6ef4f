/* Freestanding: recursion and loops (checked-in snapshot). */
#include "mini.h"

static int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

static int ackermann(int m, int n)
{
    if (m == 0)
        return n + 1;
    if (n == 0)
        return ackermann(m - 1, 1);
    return ackermann(m - 1, ackermann(m, n - 1));
}

int main(void)
{
    int sum = 0;
    for (int i = 0; i < 20; i++)
        for (int j = 0; j < i; j++)
            sum += (i ^ j) & 3 ? j : -i;
    put("fib(12)=");
    put_num(fib(12));
    put(" ack(2,2)=");
    put_num(ackermann(2, 2));
    put(" sum=");
    put_num(sum);
    put("\n");
    return 0;
}
