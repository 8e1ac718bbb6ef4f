/*
 * tracesight demo program: a small text-processing pipeline whose trace has
 * a bit of everything a viewer should show.
 *
 *   1. generate a pseudo-random corpus from a syllable table (loops),
 *   2. count its words in a hash table whose hash function is picked
 *      through a function pointer (indirect calls),
 *   3. sort the words by frequency with qsort (library code calling back),
 *   4. evaluate arithmetic expressions with a recursive-descent parser
 *      (recursion) and run them on a small stack machine (a switch compiled
 *      to a jump table),
 *   5. print a report (system calls).
 *
 * Build (see scripts/build-demo.sh):
 *   aarch64-linux-gnu-gcc -O2 -g -static -o demo demo.c
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- 1. corpus ----------------------------------------------------------- */

static const char *const syllables[] = {
    "ka", "ri", "to", "me", "su", "na", "lo", "vi", "de", "po", "an", "el", "or", "ung", "ith", "ex",
};

static unsigned long rng_state = 0x2545f4914f6cdd1dul;

static unsigned rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (unsigned)rng_state;
}

static size_t make_corpus(char *out, size_t cap, int words)
{
    size_t n = 0;
    for (int w = 0; w < words; w++) {
        /* Short words are far more common than long ones. */
        int parts = 1 + (rng() % 8 == 0) + (rng() % 3 == 0);
        for (int p = 0; p < parts; p++) {
            const char *s = syllables[(rng() >> 4) % (rng() % 4 == 0 ? 16 : 6)];
            while (*s && n + 2 < cap)
                out[n++] = *s++;
        }
        if (n + 1 < cap)
            out[n++] = (w % 11 == 10) ? '\n' : ' ';
    }
    out[n] = 0;
    return n;
}

/* ---- 2. word counting ------------------------------------------------------ */

struct entry {
    char word[24];
    int count;
};

#define TABLE_SIZE 512
static struct entry table[TABLE_SIZE];

static unsigned hash_fnv(const char *s, size_t n)
{
    unsigned h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

static unsigned hash_djb(const char *s, size_t n)
{
    unsigned h = 5381;
    for (size_t i = 0; i < n; i++)
        h = h * 33 + (unsigned char)s[i];
    return h;
}

static unsigned (*hash)(const char *, size_t) = hash_fnv;

static int count_word(const char *s, size_t n)
{
    if (n == 0 || n >= sizeof table[0].word)
        return 0;
    unsigned i = hash(s, n) % TABLE_SIZE;
    for (int probes = 0; probes < TABLE_SIZE; probes++, i = (i + 1) % TABLE_SIZE) {
        struct entry *e = &table[i];
        if (e->count == 0) {
            memcpy(e->word, s, n);
            e->word[n] = 0;
            e->count = 1;
            return 1;
        }
        if (strncmp(e->word, s, n) == 0 && e->word[n] == 0) {
            e->count++;
            return 0;
        }
    }
    return 0;
}

static int count_words(const char *text)
{
    int distinct = 0;
    const char *p = text;
    while (*p) {
        while (*p == ' ' || *p == '\n')
            p++;
        const char *start = p;
        while (*p && *p != ' ' && *p != '\n')
            p++;
        distinct += count_word(start, (size_t)(p - start));
    }
    return distinct;
}

/* ---- 3. sorting --------------------------------------------------------------- */

static int by_count(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;
    if (x->count != y->count)
        return y->count - x->count;
    return strcmp(x->word, y->word);
}

/* ---- 4. expressions ------------------------------------------------------------ */

enum op { OP_PUSH, OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_MOD, OP_NEG, OP_DUP, OP_SWAP, OP_DROP,
          OP_AND, OP_OR, OP_XOR, OP_SHL, OP_SHR, OP_MIN, OP_MAX, OP_HALT };

struct code {
    int op[256];
    long arg[256];
    int n;
};

static const char *src;

static void emit(struct code *c, int op, long arg)
{
    if (c->n < 255) {
        c->op[c->n] = op;
        c->arg[c->n++] = arg;
    }
}

static void expr(struct code *c);

static void primary(struct code *c)
{
    if (*src == '(') {
        src++;
        expr(c);
        if (*src == ')')
            src++;
    } else if (*src == '-') {
        src++;
        primary(c);
        emit(c, OP_NEG, 0);
    } else {
        long v = 0;
        while (*src >= '0' && *src <= '9')
            v = v * 10 + (*src++ - '0');
        emit(c, OP_PUSH, v);
    }
}

static void term(struct code *c)
{
    primary(c);
    while (*src == '*' || *src == '/' || *src == '%') {
        char o = *src++;
        primary(c);
        emit(c, o == '*' ? OP_MUL : o == '/' ? OP_DIV : OP_MOD, 0);
    }
}

static void expr(struct code *c)
{
    term(c);
    while (*src == '+' || *src == '-' || *src == '<' || *src == '>') {
        char o = *src++;
        term(c);
        emit(c, o == '+' ? OP_ADD : o == '-' ? OP_SUB : o == '<' ? OP_MIN : OP_MAX, 0);
    }
}

static long execute(const struct code *c)
{
    long st[64];
    int sp = 0;
    for (int pc = 0;; pc++) {
        long b = sp > 0 ? st[sp - 1] : 0;
        switch (c->op[pc]) {
        case OP_PUSH: st[sp++] = c->arg[pc]; break;
        case OP_ADD: st[--sp - 1] += b; break;
        case OP_SUB: st[--sp - 1] -= b; break;
        case OP_MUL: st[--sp - 1] *= b; break;
        case OP_DIV: sp--; st[sp - 1] = b ? st[sp - 1] / b : 0; break;
        case OP_MOD: sp--; st[sp - 1] = b ? st[sp - 1] % b : 0; break;
        case OP_NEG: st[sp - 1] = -b; break;
        case OP_DUP: st[sp++] = b; break;
        case OP_SWAP: st[sp - 1] = st[sp - 2]; st[sp - 2] = b; break;
        case OP_DROP: sp--; break;
        case OP_AND: st[--sp - 1] &= b; break;
        case OP_OR: st[--sp - 1] |= b; break;
        case OP_XOR: st[--sp - 1] ^= b; break;
        case OP_SHL: st[--sp - 1] <<= b; break;
        case OP_SHR: st[--sp - 1] >>= b; break;
        case OP_MIN: sp--; if (b < st[sp - 1]) st[sp - 1] = b; break;
        case OP_MAX: sp--; if (b > st[sp - 1]) st[sp - 1] = b; break;
        case OP_HALT:
        default: return sp > 0 ? st[sp - 1] : 0;
        }
    }
}

static long evaluate(const char *text)
{
    struct code c = { .n = 0 };
    src = text;
    expr(&c);
    emit(&c, OP_HALT, 0);
    return execute(&c);
}

/* ---- 5. report ------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 4;
    static char corpus[1 << 16];
    static const char *const exprs[] = {
        "1+2*3", "(7+5)*(3-1)/2", "100%7+-3", "((1+2)*(3+4)*(5+6))%97", "9>4<6", "2*2*2*2*2*2*2*2-1",
    };
    long checksum = 0;
    for (int r = 0; r < rounds; r++) {
        memset(table, 0, sizeof table);
        hash = (r & 1) ? hash_djb : hash_fnv;
        size_t len = make_corpus(corpus, sizeof corpus, 1200);
        int distinct = count_words(corpus);
        qsort(table, TABLE_SIZE, sizeof table[0], by_count);
        for (unsigned i = 0; i < sizeof exprs / sizeof exprs[0]; i++)
            checksum += evaluate(exprs[i]) * (r + 1);
        printf("round %d: %zu bytes, %d distinct words; top: %s (%d), %s (%d), %s (%d)\n", r, len, distinct,
               table[0].word, table[0].count, table[1].word, table[1].count, table[2].word, table[2].count);
    }
    printf("checksum %ld\n", checksum);
    return 0;
}
