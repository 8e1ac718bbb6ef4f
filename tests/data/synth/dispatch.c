/* Indirect branches: a switch compiled to a jump table (a small bytecode
 * interpreter), calls through a table of function pointers, and qsort
 * calling back a comparison function. */
#include <stdio.h>
#include <stdlib.h>

enum { PUSH, ADD, SUB, MUL, DUP, SWAP, JNZ, DEC, PRINT, HALT, DROP, OVER, NEG, AND, OR, XOR, SHL, SHR, MOD, NOP };

static long run(const int *code)
{
    long stack[32];
    int sp = 0, pc = 0;
    long out = 0;
    for (;;) {
        switch (code[pc++]) {
        case PUSH: stack[sp++] = code[pc++]; break;
        case ADD: sp--; stack[sp - 1] += stack[sp]; break;
        case SUB: sp--; stack[sp - 1] -= stack[sp]; break;
        case MUL: sp--; stack[sp - 1] *= stack[sp]; break;
        case DUP: stack[sp] = stack[sp - 1]; sp++; break;
        case SWAP: { long t = stack[sp - 1]; stack[sp - 1] = stack[sp - 2]; stack[sp - 2] = t; } break;
        case JNZ: { int to = code[pc++]; if (stack[sp - 1]) pc = to; } break;
        case DEC: stack[sp - 1]--; break;
        case PRINT: out += stack[sp - 1]; break;
        case HALT: return out;
        case DROP: sp--; break;
        case OVER: stack[sp] = stack[sp - 2]; sp++; break;
        case NEG: stack[sp - 1] = -stack[sp - 1]; break;
        case AND: sp--; stack[sp - 1] &= stack[sp]; break;
        case OR: sp--; stack[sp - 1] |= stack[sp]; break;
        case XOR: sp--; stack[sp - 1] ^= stack[sp]; break;
        case SHL: sp--; stack[sp - 1] <<= stack[sp]; break;
        case SHR: sp--; stack[sp - 1] >>= stack[sp]; break;
        case MOD: sp--; stack[sp - 1] %= stack[sp]; break;
        case NOP: break;
        default: return -1;
        }
    }
}

static int sq(int x) { return x * x; }
static int neg(int x) { return -x; }
static int twice(int x) { return 2 * x; }
static int inc(int x) { return x + 1; }
static int (*const ops[])(int) = { sq, neg, twice, inc };

static int cmp(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

int main(void)
{
    /* acc = 1; n = 10; do { acc *= 2; n-- } while (n) */
    static const int prog[] = { PUSH, 1, PUSH, 10, SWAP, PUSH, 2, MUL, NOP, PUSH, 1000, MOD, PRINT, SWAP, DEC, JNZ, 4, HALT };
    long r = run(prog);
    int v = 3, w[40];
    for (int i = 0; i < 40; i++) {
        v = ops[(v + i) & 3](v) % 1000;
        w[i] = v;
    }
    qsort(w, 40, sizeof w[0], cmp);
    printf("vm=%ld v=%d w0=%d w39=%d\n", r, v, w[0], w[39]);
    return 0;
}
