//! Symbols and source lines against GNU addr2line.
//!
//! The programs under tests/data/symbols/src are cross-compiled for aarch64
//! with `-g -O2` by tests/data/symbols/build.sh, which also writes
//! expected/NAME.txt: `aarch64-linux-gnu-addr2line -a -f -i -C -e bin/NAME`
//! over every instruction address of `.text`. The tests need no toolchain.

use std::path::{Path, PathBuf};

use object::{Object, ObjectSection};
use tracesight::symbols::{
    demangle_name, parse_address, symbolize_text, Detail, FunctionTable, FuzzyMatcher, IsaState, SkimMatcher,
    SourceLookup, SourceResolver, SymbolSource, Symbolizer,
};

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/symbols")
}

fn bin(name: &str) -> PathBuf {
    data().join("bin").join(name)
}

/// Every 4-byte instruction address of `.text`.
fn text_addresses(path: &Path) -> Vec<u64> {
    let bytes = std::fs::read(path).unwrap();
    let file = object::File::parse(&*bytes).unwrap();
    let text = file.section_by_name(".text").unwrap();
    (text.address()..text.address() + text.size()).step_by(4).collect()
}

fn expected(name: &str) -> String {
    std::fs::read_to_string(data().join("expected").join(format!("{name}.txt"))).unwrap()
}

/// The expected output with every address moved by `load`.
fn expected_moved(name: &str, load: u64) -> String {
    expected(name)
        .lines()
        .map(|l| match l.strip_prefix("0x") {
            Some(h) => format!("0x{:016x}\n", u64::from_str_radix(h, 16).unwrap() + load),
            None => format!("{l}\n"),
        })
        .collect()
}

/// Compare block by block, reporting the first differences readably.
fn assert_same_text(name: &str, ours: &str, theirs: &str) {
    if ours == theirs {
        return;
    }
    let split = |s: &str| -> Vec<String> {
        let mut blocks: Vec<String> = Vec::new();
        for l in s.lines() {
            if l.starts_with("0x") {
                blocks.push(String::new());
            }
            if let Some(b) = blocks.last_mut() {
                b.push_str(l);
                b.push('\n');
            }
        }
        blocks
    };
    let (a, b) = (split(ours), split(theirs));
    let mut report = String::new();
    let mut n = 0;
    for (x, y) in a.iter().zip(&b) {
        if x != y {
            n += 1;
            if n <= 8 {
                report.push_str(&format!("--- ours\n{x}--- addr2line\n{y}\n"));
            }
        }
    }
    panic!("{name}: {n} of {} addresses differ ({} vs {} blocks)\n{report}", b.len(), a.len(), b.len());
}

fn check_against_addr2line(name: &str) {
    let path = bin(name);
    let sym = Symbolizer::from_images([(&path, None)]).unwrap();
    let addrs = text_addresses(&path);
    let ours = symbolize_text(&sym, &addrs);
    assert_same_text(name, &ours, &expected(name));
}

#[test]
fn c_program_matches_addr2line() {
    check_against_addr2line("prog");
}

#[test]
fn cpp_program_matches_addr2line() {
    check_against_addr2line("shapes");
}

#[test]
fn pie_with_compressed_debug_sections_matches_addr2line() {
    check_against_addr2line("prog-pie");
}

#[test]
fn symbols_only_matches_addr2line() {
    check_against_addr2line("prog-nodebug");
}

#[test]
fn stripped_matches_addr2line() {
    check_against_addr2line("prog-stripped");
}

#[test]
fn split_dwarf_matches_the_unsplit_build() {
    // Same code as bin/prog; the functions come from the .dwo files.
    let path = bin("prog-split");
    let sym = Symbolizer::from_images([(&path, None)]).unwrap();
    let dw = sym.images()[0].dwarf().expect("DWARF");
    assert!(dw.split);
    assert_eq!(text_addresses(&path), text_addresses(&bin("prog")));
    let ours = symbolize_text(&sym, &text_addresses(&path));
    assert_same_text("prog-split", &ours, &expected("prog"));
    assert!(sym.images()[0].notes().is_empty(), "{:?}", sym.images()[0].notes());
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tracesight-symbols-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn split_dwarf_without_its_dwo_files_degrades_to_symbols() {
    let dir = temp_dir("nodwo");
    let path = dir.join("prog-split");
    std::fs::copy(bin("prog-split"), &path).unwrap();
    let sym = Symbolizer::from_images([(&path, None)]).unwrap();
    let main = sym.function(addr_of(&sym, "main")).unwrap().start;
    let s = sym.symbolize(main);
    // The line table is in the executable; the function names were in the .dwo.
    assert_eq!(s.detail, Detail::Source);
    assert_eq!(s.frames.len(), 1);
    assert_eq!(s.frames[0].function.as_deref(), Some("main"));
    assert!(s.frames[0].file.as_deref().unwrap().ends_with("src/prog.c"));
    let notes = sym.images()[0].notes();
    assert!(notes.iter().any(|n| n.contains("split-prog.dwo") && n.contains("not found")), "{notes:?}");
    std::fs::remove_dir_all(&dir).ok();
}

/// The address of a symbol, by raw name.
fn addr_of(sym: &Symbolizer, name: &str) -> u64 {
    for im in sym.images() {
        if let Some(s) = im.symbols().iter().find(|s| &*s.raw_name == name) {
            return s.address.wrapping_add(im.bias());
        }
    }
    panic!("no symbol {name}")
}

#[test]
fn pie_at_a_load_address_gives_the_same_answers() {
    let path = bin("prog-pie");
    let load = 0x5555_5555_0000u64;
    let plain = Symbolizer::from_images([(&path, None)]).unwrap();
    let loaded = Symbolizer::from_images([(&path, Some(load))]).unwrap();
    // The lowest PT_LOAD of this PIE is at 0, so the bias is the load address.
    assert_eq!(loaded.images()[0].bias(), load);
    let addrs = text_addresses(&path);
    for &a in &addrs {
        let (x, y) = (plain.symbolize(a), loaded.symbolize(load + a));
        assert_eq!(x.frames, y.frames, "{a:#x}");
        assert_eq!(x.detail, y.detail);
        let (sx, sy) = (x.symbol.unwrap(), y.symbol.unwrap());
        assert_eq!((sx.name.as_str(), sx.offset, sx.start + load), (sy.name.as_str(), sy.offset, sy.start));
        assert!(plain.symbolize(load + a).image.is_none());
    }
    // addr2line's layout too, with the addresses moved.
    let moved: Vec<u64> = addrs.iter().map(|a| a + load).collect();
    let shifted = expected_moved("prog-pie", load);
    assert_same_text("prog-pie@load", &symbolize_text(&loaded, &moved), &shifted);
}

#[test]
fn several_images_at_once() {
    // The C++ executable at its link address and the C PIE where it was loaded.
    let load = 0x7f00_0000_0000u64;
    let sym = Symbolizer::from_images([(bin("shapes"), None), (bin("prog-pie"), Some(load))]).unwrap();
    let mut addrs = text_addresses(&bin("shapes"));
    let pie: Vec<u64> = text_addresses(&bin("prog-pie")).iter().map(|a| a + load).collect();
    addrs.extend(&pie);
    let text = symbolize_text(&sym, &addrs);
    let shifted = expected_moved("prog-pie", load);
    assert_same_text("shapes+prog-pie", &text, &(expected("shapes") + &shifted));
    assert_eq!(sym.function(addr_of(&sym, "main")).unwrap().image, 0);
    assert_eq!(sym.function(pie[0]).unwrap().image, 1);
    assert_eq!(sym.symbolize(0x10).detail, Detail::Unmapped);
}

#[test]
fn missing_debug_information_degrades_to_symbols_then_addresses() {
    let full = Symbolizer::from_images([(bin("prog"), None)]).unwrap();
    let nodebug = Symbolizer::from_images([(bin("prog-nodebug"), None)]).unwrap();
    let stripped = Symbolizer::from_images([(bin("prog-stripped"), None)]).unwrap();
    assert_eq!(full.images()[0].detail(), Detail::Source);
    assert_eq!(nodebug.images()[0].detail(), Detail::Symbols);
    assert_eq!(stripped.images()[0].detail(), Detail::Address);
    assert!(nodebug.images()[0].notes().iter().any(|n| n.contains("no debug information")));
    assert!(stripped.images()[0].notes().iter().any(|n| n.contains("stripped")));
    assert_eq!(stripped.images()[0].symbol_source(), SymbolSource::Dynamic);

    let main = addr_of(&full, "main");
    let s = full.symbolize(main + 8);
    assert_eq!(s.detail, Detail::Source);
    assert_eq!(s.frames[0].function.as_deref(), Some("main"));

    let s = nodebug.symbolize(main + 8);
    assert_eq!(s.detail, Detail::Symbols);
    assert!(s.frames.is_empty());
    let si = s.symbol.unwrap();
    assert_eq!((si.name.as_str(), si.offset, si.inside), ("main", 8, true));
    let l = nodebug.locate(main + 8);
    assert_eq!((l.function.map(|f| f.name()), l.offset, l.file, l.detail()), (Some("main"), 8, None, Detail::Symbols));

    let s = stripped.symbolize(main + 8);
    assert_eq!(s.detail, Detail::Address);
    assert!(s.symbol.is_none() && s.frames.is_empty());
    assert_eq!(s.image, Some(0));
    assert_eq!(stripped.locate(main + 8).detail(), Detail::Address);
    assert_eq!(symbolize_text(&stripped, &[main]), format!("0x{main:016x}\n??\n??:0\n"));

    // Not in any section at all.
    assert_eq!(full.symbolize(0x10).detail, Detail::Unmapped);
    assert_eq!(symbolize_text(&full, &[0x10]), "0x0000000000000010\n??\n??:0\n");
}

#[test]
fn cpp_names_demangle_like_binutils() {
    let sym = Symbolizer::from_images([(bin("shapes"), None)]).unwrap();
    let table = std::fs::read_to_string(data().join("expected/shapes-demangled.txt")).unwrap();
    let mut n = 0;
    for line in table.lines() {
        let (mangled, demangled) = line.split_once('\t').unwrap();
        assert_eq!(demangle_name(mangled).as_deref(), Some(demangled), "{mangled}");
        if let Some(s) = sym.images()[0].symbols().iter().find(|s| &*s.raw_name == mangled) {
            assert_eq!(s.name(), demangled);
            n += 1;
        }
    }
    assert!(n >= 20, "{n}");
    for (m, d) in [
        ("_ZZ4mainENKUliE_clEi", "main::{lambda(int)#1}::operator()(int) const"),
        ("_ZN3geoplENS_4Vec2ES0_", "geo::operator+(geo::Vec2, geo::Vec2)"),
        ("_ZNSt6vectorIiSaIiEE9push_backERKi", "std::vector<int, std::allocator<int> >::push_back(int const&)"),
        ("_ZN5Outer5InnerIJidEE3runIcEEvT_", "void Outer::Inner<int, double>::run<char>(char)"),
        ("_ZN3foo3barEv.cold", "foo::bar() [clone .cold]"),
        ("_Z3fooi@plt", "foo(int)@plt"),
    ] {
        assert_eq!(demangle_name(m).as_deref(), Some(d), "{m}");
    }
    assert_eq!(demangle_name("main"), None);
    assert_eq!(demangle_name("_Zinvalid"), None);
}

#[test]
fn rust_names_demangle() {
    for (m, d) in [
        // Legacy mangling: the hash is left out, as addr2line -C does.
        ("_ZN4core3fmt9Formatter3pad17h0123456789abcdefE", "core::fmt::Formatter::pad"),
        (
            "_ZN3std2rt10lang_start28_$u7b$$u7b$closure$u7d$$u7d$17h93d0f5a2ed1b7c5aE",
            "std::rt::lang_start::{{closure}}",
        ),
        ("_ZN10tracesight7symbols10Symbolizer6locate17h00112233445566ffE", "tracesight::symbols::Symbolizer::locate"),
        // v0 mangling: crate disambiguators are left out.
        ("_RNvNtCs1234_7mycrate3foo3bar", "mycrate::foo::bar"),
        ("_RINvCs1234_7mycrate3fooNtCs5678_5other3BarE", "mycrate::foo::<other::Bar>"),
        ("_RNvMs_NtCs1234_7mycrate3mapINtB4_3MaphE6insertCs5678_5other", "<mycrate::map::Map<u8>>::insert"),
    ] {
        assert_eq!(demangle_name(m).as_deref(), Some(d), "{m}");
        assert_eq!(tracesight::symbols::demangle::mangling(m), Some(tracesight::symbols::Mangling::Rust), "{m}");
    }
    // A C++ name that merely looks like a path stays C++.
    assert_eq!(
        tracesight::symbols::demangle::mangling("_ZN3geo4Rect4areaEv"),
        Some(tracesight::symbols::Mangling::Cpp)
    );
}

#[test]
fn function_lookup_and_mapping_symbols_on_aarch64() {
    let sym = Symbolizer::from_images([(bin("shapes"), None)]).unwrap();
    let push = addr_of(&sym, "_ZN3geo5StackIiLi8EE4pushEi.isra.0");
    let f = sym.function(push + 4).unwrap();
    assert_eq!(f.name(), "geo::Stack<int, 8>::push(int) [clone .isra.0]");
    assert_eq!((f.start, f.offset, f.inside), (push, 4, true));
    assert_eq!(f.to_string(), "geo::Stack<int, 8>::push(int) [clone .isra.0]+0x4");
    assert_eq!(sym.isa_at(push), Some(IsaState::A64));
    // Every .text address a symbol covers gets that function (alignment
    // padding after a function, past its size, gets none), and the cursor
    // agrees with the uncached lookup and with the full symbolization.
    let mut cur = sym.cursor();
    for &a in &text_addresses(&bin("shapes")) {
        for _ in 0..2 {
            let (l, c) = (sym.locate(a), cur.locate(a));
            assert_eq!(l.function.map(|f| f.name()), c.function.map(|f| f.name()));
            assert_eq!((l.offset, l.file, l.line), (c.offset, c.file, c.line));
            let covered = sym.function(a).is_some_and(|f| f.inside || f.symbol.size == 0);
            assert_eq!(l.function.is_some(), covered, "{a:#x}");
            let s = sym.symbolize(a);
            assert_eq!(s.frames.first().map(|f| f.line).unwrap_or(0), l.line, "{a:#x}");
            assert_eq!(s.frames.first().and_then(|f| f.file.as_deref()), l.file, "{a:#x}");
        }
    }
    let (hits, misses) = cur.stats();
    assert!(hits >= misses, "{hits} {misses}");
}

#[test]
fn symbolize_gives_the_inline_chain_innermost_first() {
    let sym = Symbolizer::from_images([(bin("shapes"), None)]).unwrap();
    // Find an address with three frames: clamp8 in mix in blend.
    let addrs = text_addresses(&bin("shapes"));
    let s = addrs.iter().map(|&a| sym.symbolize(a)).find(|s| s.frames.len() == 3).expect("a 3-deep inline chain");
    let names: Vec<&str> = s.frames.iter().map(|f| f.function.as_deref().unwrap()).collect();
    assert_eq!(names, ["geo::clamp8(int)", "geo::mix(int, int)", "blend(int, int)"]);
    assert_eq!(s.frames.iter().map(|f| f.inlined).collect::<Vec<_>>(), [true, true, false]);
    assert_eq!((s.frames[1].line, s.frames[2].line), (63, 100));
    assert!(s.frames.iter().all(|f| f.file.as_deref() == Some("/tracesight/symbols/src/shapes.cpp")));
    assert!(s.frames[1].column > 0);
    assert_eq!(s.symbol.as_ref().unwrap().name, "blend(int, int)");
}

/// A little-endian ELF32 Arm executable with a `.text` of 0x40 bytes at
/// 0x8000: an Arm function, a Thumb function (odd symbol value) and literal
/// data, with their mapping symbols.
fn arm32_elf() -> Vec<u8> {
    fn u16le(b: &mut Vec<u8>, v: u16) {
        b.extend_from_slice(&v.to_le_bytes());
    }
    fn u32le(b: &mut Vec<u8>, v: u32) {
        b.extend_from_slice(&v.to_le_bytes());
    }
    let strtab = b"\0$a\0$t\0$d\0arm_func\0thumb_func\0";
    let shstrtab = b"\0.text\0.symtab\0.strtab\0.shstrtab\0";
    // (name offset, value, size, info, shndx)
    let syms: [(u32, u32, u32, u8, u16); 6] = [
        (0, 0, 0, 0, 0),
        (1, 0x8000, 0, 0x00, 1),     // $a: local notype
        (4, 0x8010, 0, 0x00, 1),     // $t
        (7, 0x8030, 0, 0x00, 1),     // $d
        (10, 0x8000, 0x10, 0x12, 1), // arm_func: global func
        (19, 0x8011, 0x20, 0x12, 1), // thumb_func: global func, Thumb bit
    ];
    let text_off = 52 + 32;
    let sym_off = text_off + 0x40;
    let str_off = sym_off + 16 * syms.len();
    let shs_off = str_off + strtab.len();
    let sh_off = (shs_off + shstrtab.len() + 3) & !3;
    let mut b = Vec::new();
    b.extend_from_slice(b"\x7fELF\x01\x01\x01\0\0\0\0\0\0\0\0\0");
    u16le(&mut b, 2); // ET_EXEC
    u16le(&mut b, 40); // EM_ARM
    u32le(&mut b, 1);
    u32le(&mut b, 0x8000); // entry
    u32le(&mut b, 52); // phoff
    u32le(&mut b, sh_off as u32);
    u32le(&mut b, 0x0500_0000); // flags: EABI5
    u16le(&mut b, 52);
    u16le(&mut b, 32);
    u16le(&mut b, 1);
    u16le(&mut b, 40);
    u16le(&mut b, 5);
    u16le(&mut b, 4);
    // PT_LOAD for .text
    for v in [1u32, text_off as u32, 0x8000, 0x8000, 0x40, 0x40, 5, 4] {
        u32le(&mut b, v);
    }
    b.extend(std::iter::repeat_n(0u8, 0x40));
    for (name, value, size, info, shndx) in syms {
        u32le(&mut b, name);
        u32le(&mut b, value);
        u32le(&mut b, size);
        b.push(info);
        b.push(0);
        u16le(&mut b, shndx);
    }
    b.extend_from_slice(strtab);
    b.extend_from_slice(shstrtab);
    b.resize(sh_off, 0);
    // Section headers: null, .text, .symtab, .strtab, .shstrtab
    let shdrs: [[u32; 10]; 5] = [
        [0; 10],
        [1, 1, 6, 0x8000, text_off as u32, 0x40, 0, 0, 4, 0],
        [7, 2, 0, 0, sym_off as u32, (16 * syms.len()) as u32, 3, 4, 4, 16],
        [15, 3, 0, 0, str_off as u32, strtab.len() as u32, 0, 0, 1, 0],
        [23, 3, 0, 0, shs_off as u32, shstrtab.len() as u32, 0, 0, 1, 0],
    ];
    for h in shdrs {
        for v in h {
            u32le(&mut b, v);
        }
    }
    b
}

#[test]
fn arm32_thumb_bit_and_mapping_symbols() {
    let dir = temp_dir("arm32");
    let path = dir.join("arm.elf");
    std::fs::write(&path, arm32_elf()).unwrap();
    let sym = Symbolizer::from_images([(&path, None)]).unwrap();
    let im = &sym.images()[0];
    assert!(!im.is_64());
    assert_eq!(im.detail(), Detail::Symbols);
    let thumb = im.symbols().iter().find(|s| &*s.raw_name == "thumb_func").unwrap();
    assert_eq!((thumb.address, thumb.thumb), (0x8010, true));
    let f = sym.function(0x8014).unwrap();
    assert_eq!((f.name(), f.start, f.offset), ("thumb_func", 0x8010, 4));
    assert_eq!(sym.function(0x8002).unwrap().name(), "arm_func");
    assert_eq!(sym.isa_at(0x8004), Some(IsaState::A32));
    assert_eq!(sym.isa_at(0x8012), Some(IsaState::T32));
    assert_eq!(sym.isa_at(0x8034), Some(IsaState::Data));
    // Mapping symbols never name functions.
    assert_eq!(sym.function(0x8030).unwrap().name(), "thumb_func");
    assert!(!sym.function(0x8034).unwrap().inside);
    assert_eq!(symbolize_text(&sym, &[0x8012, 0x9000]), "0x00008012\nthumb_func\n??:?\n0x00009000\n??\n??:0\n");
    // Loaded elsewhere (a position-independent image), the same.
    let moved = Symbolizer::from_images([(&path, Some(0x1_0000))]).unwrap();
    assert_eq!(moved.function(0x1_0014).unwrap().name(), "thumb_func");
    assert_eq!(moved.isa_at(0x1_0012), Some(IsaState::T32));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn function_table_search_and_entry_counts() {
    let sym = Symbolizer::from_images([(bin("shapes"), None)]).unwrap();
    let mut table: FunctionTable = sym.function_table();
    assert!(table.len() >= 15, "{}", table.len());
    let names: Vec<&str> = table.functions.iter().map(|f| f.name.as_str()).collect();
    for n in ["main", "blend(int, int)", "geo::Rect::area() const", "long geo::largest<long>(long const*, int)"] {
        assert!(names.contains(&n), "{n} not in {names:?}");
    }
    // Destructor aliases (D1/D2) are one function.
    let dtor = table.functions.iter().find(|f| f.name == "geo::Rect::~Rect()").unwrap();
    assert!(!dtor.ranges.is_empty());

    let m = SkimMatcher::new();
    let hits = table.search(&m, "stkpush");
    assert!(!hits.is_empty());
    let top = &table.functions[hits[0].index];
    assert!(top.name.contains("Stack") && top.name.contains("push"), "{}", top.name);
    let chars: Vec<char> = top.name.chars().collect();
    let picked: String = hits[0].positions.iter().map(|&i| chars[i].to_ascii_lowercase()).collect();
    assert_eq!(picked, "stkpush");
    assert!(table.search(&m, "zzzqqq").is_empty());
    let direct = m.fuzzy_match("geo::Circle::area() const", "circarea").unwrap();
    assert_eq!(direct.positions.len(), 8);

    // Entry counts, as the decoder will fill them.
    let blend = addr_of(&sym, "_ZL5blendii");
    let i = table.record_entry(blend).unwrap();
    table.record_entry(blend).unwrap();
    assert_eq!(table.functions[i].name, "blend(int, int)");
    assert_eq!(table.functions[i].entries, 2);
    assert_eq!(table.function_at(blend + 4), Some(i));
    assert!(table.function_at(0x10).is_none());
    // Same score: the most entered function first.
    let all = table.search(&m, "");
    assert_eq!(all[0].index, i);
}

#[test]
fn source_files_through_roots_and_substitutions() {
    let sym = Symbolizer::from_images([(bin("prog"), None)]).unwrap();
    let s = sym.symbolize(addr_of(&sym, "main"));
    let file = s.frames[0].file.clone().unwrap();
    assert_eq!(&*file, "/tracesight/symbols/src/prog.c");
    let line = s.frames[0].line;

    // Nothing configured: not found, and the answer says where it looked.
    let r = SourceResolver::new();
    match r.resolve(&file) {
        SourceLookup::NotFound { tried, .. } => assert_eq!(tried, [PathBuf::from(&*file)]),
        found => panic!("{found:?}"),
    }
    let msg = r.resolve(&file).to_string();
    assert!(msg.contains("not found") && msg.contains("/tracesight/symbols/src/prog.c"), "{msg}");

    // --substitute-path /tracesight/symbols=<data dir>
    let mut r = SourceResolver::new();
    r.add_substitution_arg(&format!("/tracesight/symbols={}", data().display())).unwrap();
    assert_eq!(r.resolve(&file), SourceLookup::Found(data().join("src/prog.c")));
    // Whole components only.
    assert_eq!(r.substitute("/tracesight/symbolsX/a.c"), None);
    assert!(r.add_substitution_arg("no-equals-sign").is_err());
    // main's first instruction is on the line of its opening brace.
    assert_eq!(r.line(&file, line).unwrap(), "{");
    assert_eq!(r.line(&file, line - 1).unwrap(), "int main(int argc, char **argv)");

    // --source-root: the trailing part of the path is found under it.
    let mut r = SourceResolver::new();
    r.add_root(data());
    assert_eq!(r.resolve(&file), SourceLookup::Found(data().join("src/prog.c")));
    let missing = r.resolve("/elsewhere/none.c");
    assert!(matches!(&missing, SourceLookup::NotFound { tried, .. } if tried.len() == 3), "{missing:?}");
    assert!(r.line("/elsewhere/none.c", 1).unwrap_err().to_string().contains("not found"));

    // Every file the line tables name is found with the substitution.
    let mut r = SourceResolver::new();
    r.add_substitution("/tracesight/symbols", &data().display().to_string());
    let files = sym.images()[0].source_files();
    let ours: Vec<_> = files.iter().filter(|f| f.starts_with("/tracesight/")).collect();
    assert!(ours.len() >= 3, "{files:?}");
    for f in ours {
        assert!(r.resolve(f).path().is_some(), "{f}");
    }
}

#[test]
fn images_report_their_state() {
    let sym = Symbolizer::from_images([(bin("prog-pie"), Some(0x1000_0000))]).unwrap();
    let im = &sym.images()[0];
    let dw = im.dwarf().unwrap();
    assert!(dw.compressed && !dw.split);
    let summary = im.summary();
    assert!(summary.contains("compressed") && summary.contains("0x10000000"), "{summary}");
    assert!(im.range().contains(&0x1000_0000u64.wrapping_add(text_addresses(&bin("prog-pie"))[0])));
    let mut s = Symbolizer::new();
    assert!(s.add_image_arg(&format!("{}@zz", bin("prog").display())).is_err());
    assert!(s.add_image(&data().join("src/prog.c"), None).is_err());
    assert!(s.add_image(&data().join("does-not-exist"), None).is_err());
    s.add_image_arg(&format!("{}@0x400000", bin("prog-pie").display())).unwrap();
    assert_eq!(s.images()[0].load_address(), Some(0x400000));
}

#[test]
fn cursor_agrees_with_uncached_lookups_in_any_order() {
    let load = 0x7f00_0000_0000u64;
    let sym = Symbolizer::from_images([(bin("shapes"), None), (bin("prog-pie"), Some(load))]).unwrap();
    let mut addrs: Vec<u64> = text_addresses(&bin("shapes"));
    addrs.extend(text_addresses(&bin("prog-pie")).iter().map(|a| a + load));
    // Odd addresses, section edges and unmapped addresses too.
    let extra: Vec<u64> = addrs.iter().flat_map(|&a| [a + 1, a + 2, a.wrapping_sub(4096)]).collect();
    addrs.extend(extra);
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut order: Vec<u64> = Vec::new();
    for _ in 0..4 {
        for i in (1..addrs.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            addrs.swap(i, (x % (i as u64 + 1)) as usize);
        }
        order.extend(&addrs);
        // Runs of consecutive instructions, as a trace has.
        order.extend(addrs.iter().take(200).flat_map(|&a| (0..6).map(move |k| a + 4 * k)));
    }
    let mut cur = sym.cursor();
    for &a in &order {
        let (l, c) = (sym.locate(a), cur.locate(a));
        assert_eq!(l.image, c.image, "{a:#x}");
        assert_eq!(l.function.map(|f| f as *const _), c.function.map(|f| f as *const _), "{a:#x}");
        assert_eq!((l.offset, l.file, l.line), (c.offset, c.file, c.line), "{a:#x}");
        if let Some(f) = l.function {
            assert_eq!(sym.function(a).unwrap().symbol as *const _, f as *const _);
        }
    }
    let (hits, misses) = cur.stats();
    assert!(hits > misses, "{hits} {misses}");
}

#[test]
fn command_line_helpers() {
    assert_eq!(parse_address("0x4005c0").ok(), Some(0x4005c0));
    assert_eq!(parse_address("4005C0").ok(), Some(0x4005c0));
    assert!(parse_address("main").is_err());
    let arg = format!("{}@0x10000", bin("prog-pie").display());
    let sym = Symbolizer::from_image_args(&[arg, bin("shapes").display().to_string()]).unwrap();
    assert_eq!(sym.images().len(), 2);
    assert_eq!(sym.images()[0].bias(), 0x10000);
    let r = SourceResolver::from_args(&[data()], &["/a=/b"]).unwrap();
    assert_eq!(r.substitute("/a/x.c").as_deref(), Some("/b/x.c"));
    assert!(SourceResolver::from_args(&[data()], &["nonsense"]).is_err());
    // A symbolizer can be built on one thread and used on another.
    fn send<T: Send>(_: &T) {}
    send(&sym);
}

/// Issue 14: in a stripped shared object only the exported functions keep a
/// symbol; code of a static function after one of them was shown as that
/// function plus a large offset. Symbol sizes are honoured: such code is
/// named by file and link-time address.
#[test]
fn code_past_a_sized_symbol_is_named_by_file_and_offset() {
    let cc = "aarch64-linux-gnu-gcc";
    if std::process::Command::new(cc).arg("--version").output().is_err() {
        assert!(std::env::var_os("CI").is_none(), "{cc} is needed in CI");
        eprintln!("{cc} not found; skipped");
        return;
    }
    let dir = temp_dir("sized");
    std::fs::write(
        dir.join("lib.c"),
        "int exported(int x) { return x * 3 + 1; }\n\
         __attribute__((noinline)) static int hidden(int x) { int s = 0; for (int i = 0; i < x; i++) s += i * x; return s; }\n\
         int (*keep)(int) = hidden;\n",
    )
    .unwrap();
    let full = dir.join("libfull.so");
    let run = |args: &[&std::ffi::OsStr], tool: &str| {
        let st = std::process::Command::new(tool).args(args).status().unwrap();
        assert!(st.success(), "{tool} {args:?}");
    };
    // In source order: the static function follows the exported one.
    run(&["-O1".as_ref(), "-fno-toplevel-reorder".as_ref(), "-shared".as_ref(), "-fPIC".as_ref(), "-o".as_ref(), full.as_os_str(), dir.join("lib.c").as_os_str()], cc);
    let stripped = dir.join("libt.so");
    run(&["-o".as_ref(), stripped.as_os_str(), full.as_os_str()], "aarch64-linux-gnu-strip");

    let sym_full = Symbolizer::from_images([(&full, None)]).unwrap();
    let (hidden, exported) = (addr_of(&sym_full, "hidden"), addr_of(&sym_full, "exported"));
    let size = sym_full.function(exported).unwrap().symbol.size;
    assert!(hidden >= exported + size, "hidden at {hidden:#x} should follow exported ({exported:#x}, {size} bytes)");

    let sym = Symbolizer::from_images([(&stripped, None)]).unwrap();
    let mut c = sym.cursor();
    let inside = c.locate(exported + 4);
    assert_eq!(inside.function.map(|f| f.name().to_string()).as_deref(), Some("exported"));
    assert_eq!(sym.stripped_label(&inside, exported + 4), None);
    let past = c.locate(hidden + 4);
    assert!(past.function.is_none(), "{:?}", past.function.map(|f| f.name().to_string()));
    assert_eq!(sym.stripped_label(&past, hidden + 4), Some(format!("libt.so+{:#x}", hidden + 4)));
    std::fs::remove_dir_all(&dir).ok();
}

/// Issue 14: the same ELF given twice (another path spelling) is one image,
/// so `/` does not list its functions twice; at another load address it is
/// another image.
#[test]
fn the_same_image_twice_is_one_image() {
    let mut sym = Symbolizer::new();
    let a = sym.add_image(&bin("shapes"), None).unwrap();
    let again = data().join("bin").join(".").join("shapes");
    assert_eq!(sym.add_image(&again, None).unwrap(), a);
    assert_eq!(sym.images().len(), 1);
    let n = sym.function_table().len();
    let b = sym.add_image(&bin("shapes"), Some(0x7f00_0000)).unwrap();
    assert_ne!(a, b);
    assert!(sym.function_table().len() > n);
}
