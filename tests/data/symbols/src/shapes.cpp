// A small C++ program: namespaces, a template, virtual methods, an anonymous
// namespace, a static function, an inlined function and a lambda.
#include <cstdio>

namespace geo {

struct Shape {
    virtual ~Shape() {}
    virtual double area() const = 0;
};

struct Rect : Shape {
    double w, h;
    Rect(double w, double h) : w(w), h(h) {}
    double area() const override { return w * h; }
};

struct Circle : Shape {
    double r;
    explicit Circle(double r) : r(r) {}
    double area() const override { return 3.14159 * r * r; }
};

template <typename T, int N>
struct Stack {
    T items[N];
    int top = 0;
    __attribute__((noinline)) bool push(T v)
    {
        if (top == N)
            return false;
        items[top++] = v;
        return true;
    }
    T sum() const
    {
        T s{};
        for (int i = 0; i < top; i++)
            s += items[i];
        return s;
    }
};

template <typename T>
__attribute__((noinline)) T largest(const T *v, int n)
{
    T best = v[0];
    for (int i = 1; i < n; i++)
        if (v[i] > best)
            best = v[i];
    return best;
}

inline int clamp8(int v)
{
    return v < 0 ? 0 : v > 255 ? 255 : v;
}

inline int mix(int a, int b)
{
    int s = 0;
    for (int i = 0; i < a; i++)
        s += clamp8(b * i - a);
    return s;
}

struct Vec2 {
    int x, y;
};

inline Vec2 operator+(Vec2 a, Vec2 b)
{
    return Vec2{ a.x + b.x, a.y + b.y };
}

} // namespace geo

namespace {

__attribute__((noinline)) double total_area(geo::Shape *const *shapes, int n)
{
    double t = 0;
    for (int i = 0; i < n; i++)
        t += shapes[i]->area();
    return t;
}

} // namespace

static __attribute__((noinline)) int twice(int v)
{
    return v * 2;
}

// Three levels of inlining, with loops, inside a static function.
static __attribute__((noinline)) int blend(int n, int k)
{
    int t = 0;
    for (int j = 0; j < n; j++)
        t += geo::mix(j, k);
    return t;
}

__attribute__((noinline)) geo::Vec2 shift(geo::Vec2 v, int d)
{
    return v + geo::Vec2{ d, -d };
}

inline int add_one(int v)
{
    return v + 1;
}

int main(int argc, char **)
{
    geo::Rect r(2.0, argc);
    geo::Circle c(argc);
    geo::Shape *shapes[] = { &r, &c };
    geo::Stack<int, 8> st;
    for (int i = 0; i < argc + 3; i++)
        st.push(add_one(twice(i)));
    geo::Stack<double, 4> sd;
    sd.push(r.area());
    long vals[] = { argc, 5, 3, argc * 7L };
    auto pick = [argc](int k) { return k * argc + 1; };
    std::printf("%f %d %ld %f %d %d\n", total_area(shapes, 2), st.sum(),
                geo::largest(vals, 4), sd.sum(), geo::largest(&argc, 1), pick(argc));
    geo::Vec2 v = shift(geo::Vec2{ argc, 2 }, blend(argc * 4, argc + 9));
    return v.x + v.y;
}
