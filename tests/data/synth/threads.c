/* Threads: each thread runs on its own qemu CPU, so the synthesized trace
 * has one trace unit (trace ID) per CPU, in formatter frames. The barrier
 * keeps both workers alive at once, so that they get CPUs of their own. */
#include <pthread.h>
#include <stdio.h>

static pthread_barrier_t barrier;

static void *work(void *arg)
{
    long n = (long)arg, s = 0;
    pthread_barrier_wait(&barrier);
    for (long i = 0; i < 2000 * n; i++)
        s += i % 7 == 0 ? i : 1;
    return (void *)s;
}

int main(void)
{
    pthread_t t[2];
    long r[2];
    pthread_barrier_init(&barrier, 0, 2);
    for (long i = 0; i < 2; i++)
        pthread_create(&t[i], 0, work, (void *)(i + 1));
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], (void **)&r[i]);
    printf("r=%ld,%ld\n", r[0], r[1]);
    return 0;
}
