/* Freestanding: a switch jump table, function pointers and system calls
 * (checked-in snapshot). */
#include "mini.h"

enum { PUSH, ADD, MUL, DUP, SWAP, JNZ, DEC, OUT, HALT, DROP, OVER, NEG, AND, OR, XOR, SHL, SHR, MOD, NOP };

static long vm(const int *code)
{
    long st[16];
    int sp = 0, pc = 0;
    long out = 0;
    for (;;) {
        switch (code[pc++]) {
        case PUSH: st[sp++] = code[pc++]; break;
        case ADD: sp--; st[sp - 1] += st[sp]; break;
        case MUL: sp--; st[sp - 1] *= st[sp]; break;
        case DUP: st[sp] = st[sp - 1]; sp++; break;
        case SWAP: { long t = st[sp - 1]; st[sp - 1] = st[sp - 2]; st[sp - 2] = t; } break;
        case JNZ: { int to = code[pc++]; if (st[sp - 1]) pc = to; } break;
        case DEC: st[sp - 1]--; break;
        case OUT: out += st[sp - 1]; break;
        case HALT: return out;
        case DROP: sp--; break;
        case OVER: st[sp] = st[sp - 2]; sp++; break;
        case NEG: st[sp - 1] = -st[sp - 1]; break;
        case AND: sp--; st[sp - 1] &= st[sp]; break;
        case OR: sp--; st[sp - 1] |= st[sp]; break;
        case XOR: sp--; st[sp - 1] ^= st[sp]; break;
        case SHL: sp--; st[sp - 1] <<= st[sp]; break;
        case SHR: sp--; st[sp - 1] >>= st[sp]; break;
        case MOD: sp--; st[sp - 1] %= st[sp]; break;
        case NOP: break;
        default: return -1;
        }
    }
}

static int sq(int x) { return x * x % 977; }
static int tw(int x) { return 2 * x + 1; }
static int hf(int x) { return x / 2; }
static int (*const fns[])(int) = { sq, tw, hf };

int main(void)
{
    static const int prog[] = { PUSH, 1, PUSH, 6, SWAP, PUSH, 3, MUL, NOP, PUSH, 1000, MOD, OUT, SWAP, DEC, JNZ, 4, HALT };
    long r = vm(prog);
    int v = 5;
    for (int i = 0; i < 12; i++)
        v = fns[(v + i) % 3](v);
    long pid = sys3(SYS_getpid, 0, 0, 0);
    long ts[2];
    sys3(SYS_clock_gettime, 1, (long)ts, 0);
    put("vm=");
    put_num(r);
    put(" v=");
    put_num(v);
    put(pid > 0 ? " pid ok\n" : " pid?\n");
    return 0;
}
