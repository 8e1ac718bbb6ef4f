//! Our C++ demangler against binutils on every C++ symbol of real programs:
//! libstdc++ (AArch64 and host), the ELF files among the fixtures, and two
//! programs compiled here with aarch64-linux-gnu-g++ -O2 (templates,
//! lambdas, containers, virtual inheritance, clones). Verbose names must
//! equal `c++filt`'s, short ones `nm -C`'s.
//!
//! A missing tool or library skips with a message, unless the environment
//! variable CI is set (CI installs binutils and g++-aarch64-linux-gnu), where
//! it fails.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use object::{Object, ObjectSymbol};
use tracesight::symbols::demangle::{demangle_or_raw, demangle_with, CppStyle};
use tracesight::symbols::elfsyms::ElfSymbols;

const AARCH64_LIBSTDCXX: &str = "/usr/aarch64-linux-gnu/lib/libstdc++.so.6";
const HOST_LIBSTDCXX: &str = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6";

fn skip_or_fail(what: &str) {
    if std::env::var_os("CI").is_some() {
        panic!("{what} (required when CI is set)");
    }
    eprintln!("skipped: {what}");
}

fn have(tool: &str) -> bool {
    Command::new(tool).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok()
}

/// Every `_Z` name of the static and dynamic symbol tables: the static one
/// through the crate's reader, the dynamic one (which the reader skips when a
/// static table exists) through `object`.
fn cpp_symbols(path: &Path, out: &mut BTreeSet<String>) {
    let data = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    // Some fixtures are memory images cut out of a program (no section
    // headers): they have no symbols to read.
    match ElfSymbols::parse(&data) {
        Ok(elf) => {
            for s in &elf.symbols {
                if s.raw_name.starts_with("_Z") {
                    out.insert(s.raw_name.to_string());
                }
            }
        }
        Err(e) => eprintln!("{}: no symbols ({e})", path.display()),
    }
    if let Ok(f) = object::File::parse(&*data) {
        for s in f.dynamic_symbols() {
            if let Ok(n) = s.name() {
                if n.starts_with("_Z") {
                    out.insert(n.to_string());
                }
            }
        }
    }
}

/// ELF files under `dir` (recursively), by their magic.
fn elf_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        let Ok(ft) = e.file_type() else { continue };
        if ft.is_dir() {
            elf_files(&p, out);
        } else if ft.is_file() {
            let mut magic = [0u8; 4];
            if let Ok(mut f) = std::fs::File::open(&p) {
                use std::io::Read;
                if f.read_exact(&mut magic).is_ok() && magic == *b"\x7fELF" {
                    out.push(p);
                }
            }
        }
    }
}

/// `c++filt` over all names at once, one a line.
fn cfilt(names: &[&str]) -> Vec<String> {
    let mut child = Command::new("c++filt")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("c++filt runs");
    let mut stdin = child.stdin.take().unwrap();
    let input: String = names.iter().map(|n| format!("{n}\n")).collect();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().expect("c++filt output");
    writer.join().unwrap().unwrap();
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect()
}

/// Compare and report: the first differences and their count.
fn check(label: &str, pairs: impl Iterator<Item = (String, String, String)>) -> usize {
    let mut bad = 0;
    let mut total = 0;
    for (raw, want, got) in pairs {
        total += 1;
        if want != got {
            if bad < 20 {
                eprintln!("{label}: {raw}\n  binutils: {want}\n  ours:     {got}");
            }
            bad += 1;
        }
    }
    eprintln!("{label}: {bad} of {total} names differ");
    bad
}

const PROGRAM_1: &str = r#"
#include <map>
#include <vector>
#include <string>
#include <memory>
#include <functional>
#include <algorithm>
#include <iostream>
#include <sstream>
#include <unordered_map>
namespace geo {
struct Shape { virtual ~Shape() {} virtual double area() const = 0; };
struct Named : virtual Shape { std::string name; explicit Named(std::string n) : name(std::move(n)) {} };
struct Sized : virtual Shape { int w = 1; };
struct Rect final : Named, Sized {
    Rect(std::string n, int h) : Named(std::move(n)), h(h) {}
    double area() const override { return w * h; }
    int h;
};
template <typename T, int N> struct Grid {
    T cells[N][N];
    template <typename F> void each(F&& f) { for (auto& r : cells) for (auto& c : r) f(c); }
    T& operator()(int i, int j) & { return cells[i][j]; }
    operator bool() const { return N > 0; }
};
}
namespace {
int hidden(int x) { static int calls = 0; return x + ++calls; }
}
template <typename... Ts> int count_all(Ts&&... ts) { return (0 + ... + sizeof(ts)); }
template <typename T> auto twice(T t) -> decltype(t + t) { return t + t; }
int apply(int (*fp)(int), int v) { return fp(v); }
int member_call(geo::Rect* r, double (geo::Shape::*m)() const) { return (int)(r->*m)(); }
thread_local std::vector<int> tls_values;
__attribute__((noinline)) static int by_const(int a, int b) { return a * 7 + b; }
int use_clone(int a) { return by_const(a, 3) + by_const(a + 1, 3); }
int main(int argc, char** argv) {
    std::map<std::string, std::vector<std::shared_ptr<geo::Shape>>> m;
    m["r"].push_back(std::make_shared<geo::Rect>("a", argc));
    std::unordered_map<int, std::function<int(int)>> fns;
    fns[1] = [argc](int x) { return x * argc; };
    auto gen = [](auto a, auto b) { return a < b; };
    std::vector<int> v(argv[0][0], 3);
    std::sort(v.begin(), v.end(), gen);
    geo::Grid<float, 3> g{};
    g.each([](float& c) { c += 1; });
    std::ostringstream os;
    os << g(1, 1) << hidden(argc) << count_all(1, 'c', 2.0) << twice(argc) << apply(hidden, 2);
    tls_values.push_back(use_clone(argc));
    std::cout << os.str() << member_call(nullptr, &geo::Shape::area) << bool(g) << std::endl;
    return (int)m.size() + fns[1](2);
}
"#;

const PROGRAM_2: &str = r#"
#include <array>
#include <tuple>
#include <string>
#include <vector>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <cstddef>
template <typename T> struct Box { T v; template <typename U> operator Box<U>() const { return {U(v)}; } };
template <std::size_t N> struct Fixed { char s[N]; };
template <typename T, typename = std::enable_if_t<std::is_integral<T>::value>> T clamp0(T t) { return t < 0 ? 0 : t; }
template <auto V> int value_of() { return static_cast<int>(V); }
struct Base { virtual ~Base() = default; virtual Base* clone() const { return new Base(*this); } };
struct Derived : Base { Derived* clone() const override { return new Derived(*this); } };
enum class Color : unsigned char { red = 1, green = 2 };
int arrays(int (&a)[4], const char (*p)[8], volatile int* const* q) { return a[0] + (*p)[0] + **q; }
template <typename... Args> std::tuple<Args...> pack(Args... a) { return std::tuple<Args...>(a...); }
template <int I> struct Fib { static constexpr long v = Fib<I - 1>::v + Fib<I - 2>::v; };
template <> struct Fib<0> { static constexpr long v = 0; };
template <> struct Fib<1> { static constexpr long v = 1; };
long fib10() { return Fib<10>::v; }
namespace outer { inline namespace v1 { struct [[gnu::abi_tag("tag")]] Tagged { int x; }; Tagged make(int x) { return {x}; } } }
int noex(int) noexcept;
int noex(int x) noexcept { return x; }
void takes_fn(void (*)(int, ...), int Base::*) {}
int local_statics(int x) {
    struct Local { static int f(int y) { return y * 2; } };
    static std::string cached = "x";
    return Local::f(x) + (int)cached.size();
}
int main() {
    Box<int> b{3};
    Box<long> bl = b;
    int a[4] = {1, 2, 3, 4};
    char s[8] = "abc";
    int z = 5; volatile int* vz = &z;
    Derived d;
    Base* c = d.clone();
    auto t = pack(1, 2.0, 'x', std::string("s"));
    std::vector<Fixed<16>> fv(2);
    try { if (a[0] == 7) throw std::runtime_error("no"); } catch (const std::exception& e) { return 1; }
    delete c;
    return clamp0(-3) + value_of<Color::green>() + value_of<'c'>() + arrays(a, &s, &vz) + (int)bl.v
        + (int)fib10() + outer::make(2).x + noex(1) + std::get<0>(t) + (int)fv.size() + local_statics(2);
}
"#;

/// Compile the test programs; their paths, or None when g++ is missing.
fn compiled_programs(dir: &Path) -> Option<Vec<PathBuf>> {
    if !have("aarch64-linux-gnu-g++") {
        return None;
    }
    let mut out = Vec::new();
    for (i, src) in [PROGRAM_1, PROGRAM_2].iter().enumerate() {
        let cpp = dir.join(format!("prog{i}.cpp"));
        let bin = dir.join(format!("prog{i}"));
        std::fs::write(&cpp, src).unwrap();
        let st = Command::new("aarch64-linux-gnu-g++")
            .args(["-std=c++17", "-O2", "-g0", "-o"])
            .arg(&bin)
            .arg(&cpp)
            .status()
            .expect("g++ runs");
        assert!(st.success(), "aarch64-linux-gnu-g++ failed on {}", cpp.display());
        out.push(bin);
    }
    Some(out)
}

#[test]
fn cpp_names_equal_cfilt() {
    if !have("c++filt") {
        return skip_or_fail("c++filt not found");
    }
    let mut files: Vec<PathBuf> = Vec::new();
    for lib in [AARCH64_LIBSTDCXX, HOST_LIBSTDCXX] {
        if Path::new(lib).is_file() {
            files.push(lib.into());
        } else if lib == AARCH64_LIBSTDCXX {
            skip_or_fail(&format!("{lib} not found (g++-aarch64-linux-gnu installs it)"));
        }
    }
    let shared = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures");
    elf_files(&shared.join("perf"), &mut files);
    elf_files(&shared.join("opencsd"), &mut files);
    let tmp = std::env::temp_dir().join(format!("tracesight-demangle-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    match compiled_programs(&tmp) {
        Some(p) => files.extend(p),
        None => skip_or_fail("aarch64-linux-gnu-g++ not found; the compiled programs are not checked"),
    }
    let mut names = BTreeSet::new();
    for f in &files {
        let before = names.len();
        cpp_symbols(f, &mut names);
        eprintln!("{}: {} new C++ names", f.display(), names.len() - before);
    }
    let _ = std::fs::remove_dir_all(&tmp);
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    assert!(names.len() > 1000 || std::env::var_os("CI").is_none(), "too few names: {}", names.len());
    let want = cfilt(&names);
    assert_eq!(want.len(), names.len(), "c++filt gave a line per name");
    let bad = check(
        "c++filt",
        names.iter().zip(want).map(|(n, w)| (n.to_string(), w, demangle_or_raw(n).into_owned())),
    );
    assert_eq!(bad, 0, "names demangled differently from c++filt (listed above)");
}

/// `nm -C` (bfd_demangle, not verbose) on libstdc++'s dynamic symbols, in
/// table order (-p) so raw and demangled lists line up.
#[test]
fn cpp_names_equal_nm_short_form() {
    let (nm, lib) = if have("aarch64-linux-gnu-nm") && Path::new(AARCH64_LIBSTDCXX).is_file() {
        ("aarch64-linux-gnu-nm", AARCH64_LIBSTDCXX)
    } else if have("nm") && Path::new(HOST_LIBSTDCXX).is_file() {
        ("nm", HOST_LIBSTDCXX)
    } else {
        return skip_or_fail("no nm with a libstdc++ to read");
    };
    let run = |demangle: bool| -> Vec<String> {
        let mut c = Command::new(nm);
        c.args(["-D", "-p", "-j"]);
        if demangle {
            c.arg("-C");
        }
        let out = c.arg(lib).output().expect("nm runs");
        assert!(out.status.success(), "{nm} failed");
        String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect()
    };
    let raw = run(false);
    let dem = run(true);
    assert_eq!(raw.len(), dem.len());
    assert!(raw.len() > 1000, "{lib}: only {} symbols", raw.len());
    let pairs = raw.into_iter().zip(dem).filter(|(r, _)| r.starts_with("_Z")).map(|(r, d)| {
        let ours = demangle_with(&r, CppStyle::Short).unwrap_or_else(|| r.clone());
        (r, d, ours)
    });
    let bad = check("nm -C", pairs);
    assert_eq!(bad, 0, "names demangled differently from nm -C (listed above)");
}
