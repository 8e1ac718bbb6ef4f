/* A dynamically linked program: library calls go through the PLT (an
 * indirect branch via the GOT), first resolved by the dynamic loader. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    const char *words[] = { "trace", "synthesis", "of", "a", "dynamically", "linked", "program" };
    size_t total = 0;
    for (int i = 0; i < 7; i++)
        total += strlen(words[i]);
    int n = atoi(argc > 1 ? argv[1] : "42");
    char *copy = malloc(64);
    strcpy(copy, words[1]);
    puts(copy);
    free(copy);
    printf("total=%zu n=%d\n", total, n);
    return 0;
}
