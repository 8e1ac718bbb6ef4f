/* setjmp/longjmp: non-local exits out of a recursion, and back into a loop. */
#include <setjmp.h>
#include <stdio.h>

static jmp_buf env;
static int depth_reached;

static void dive(int depth, int limit)
{
    depth_reached = depth;
    if (depth == limit)
        longjmp(env, depth);
    dive(depth + 1, limit);
}

int main(void)
{
    int total = 0;
    for (int limit = 1; limit <= 12; limit++) {
        int r = setjmp(env);
        if (r == 0)
            dive(0, limit);
        else
            total += r;
    }
    printf("total=%d depth=%d\n", total, depth_reached);
    return 0;
}
