// C++ exceptions: throw through several frames with destructors to run,
// catch by base class, rethrow. The unwinder walks frames with many
// indirect branches and returns.
#include <cstdio>
#include <stdexcept>
#include <string>

static int destroyed;

struct Guard {
    ~Guard() { destroyed++; }
};

static int deep(int n)
{
    Guard g;
    if (n == 0)
        throw std::runtime_error("bottom");
    return deep(n - 1) + 1;
}

static int middle(int n)
{
    try {
        return deep(n);
    } catch (const std::logic_error &) {
        return -1;
    } catch (...) {
        throw;
    }
}

int main()
{
    int caught = 0;
    for (int i = 0; i < 4; i++) {
        try {
            middle(i + 2);
        } catch (const std::exception &e) {
            caught += std::string(e.what()).size() > 0;
        }
    }
    std::printf("caught=%d destroyed=%d\n", caught, destroyed);
    return 0;
}
