//! The viewer's source pane and disassembly view, on the bundled demo (an
//! aarch64 ELF with DWARF and its ETE trace) and on the symbol test binaries
//! of tests/data/symbols.

use std::path::{Path, PathBuf};
use std::process::Command;

use tracesight::capture::{Capture, CaptureOptions};
use tracesight::element::{Isa, MemSpace};
use tracesight::image::memory::MemoryImage;
use tracesight::session::{run, Event, RunOptions};
use tracesight::symbols::{SourceResolver, Symbolizer};
use tracesight::tui::sourceview::{
    default_resolver, disassemble, instruction_addresses, source_view, DisasmLine, ExecutedRange, SourceStatus,
    SourceView,
};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn snapshot() -> PathBuf {
    root().join("assets/demo/snapshot")
}

fn demo_elf() -> PathBuf {
    snapshot().join("demo")
}

fn demo_symbols() -> Symbolizer {
    Symbolizer::from_images([(demo_elf(), None)]).unwrap()
}

fn demo_memory() -> MemoryImage {
    let mut m = MemoryImage::new();
    m.add_elf(&demo_elf(), None).unwrap();
    m
}

fn addr_of(sym: &Symbolizer, name: &str) -> u64 {
    sym.images()[0].symbols().iter().find(|s| s.name() == name).unwrap().address
}

/// The 1-based number of the first line of the demo's source containing `needle`.
fn demo_line(needle: &str) -> u32 {
    let text = std::fs::read_to_string(root().join("assets/demo/src/demo.c")).unwrap();
    text.lines().position(|l| l.contains(needle)).unwrap() as u32 + 1
}

fn view(
    sym: Option<&Symbolizer>,
    resolver: &mut SourceResolver,
    addr: u64,
    window: &[ExecutedRange],
    ctx: usize,
) -> SourceView {
    source_view(sym, resolver, &MemoryImage::new(), MemSpace::ANY, addr, window, ctx)
}

fn current_text(v: &SourceView) -> &str {
    &v.lines.iter().find(|l| l.current).expect("a current line").text
}

/// `n` instruction ranges of the demo trace from the first one at `from`.
fn demo_window(from: u64, n: usize) -> Vec<ExecutedRange> {
    let c = Capture::open(&snapshot(), &CaptureOptions::default()).unwrap();
    let opts = RunOptions { elements: true, ..c.opts.clone() };
    let mut out = Vec::new();
    run(&c.plan, c.file.bytes(), &opts, |e| {
        if let Event::Element { element, .. } = e {
            let r = ExecutedRange::from_element(element);
            if out.len() < n && (!out.is_empty() || r.is_some_and(|r| r.start == from)) {
                out.extend(r);
            }
        }
    })
    .unwrap();
    out
}

#[test]
fn main_shows_its_source_line_and_the_inline_chain() {
    let sym = demo_symbols();
    let mut resolver = default_resolver(&snapshot(), &[], &[]);
    let main = addr_of(&sym, "main");
    let v = view(Some(&sym), &mut resolver, main, &[], 5);
    assert_eq!(v.status, SourceStatus::Ok, "{v:?}");
    assert!(v.file.as_deref().unwrap().ends_with("demo.c"), "{v:?}");
    assert_eq!(v.function.as_deref(), Some("main"));
    // GCC puts the prologue on the opening brace, the line after the signature.
    let brace = demo_line("int main(int argc, char **argv)") + 1;
    assert_eq!(v.line, Some(brace));
    assert_eq!(current_text(&v), "{");
    let before = v.lines.iter().find(|l| l.number == brace - 1).unwrap();
    assert!(before.text.contains("int main(int argc, char **argv)") && !before.current, "{v:?}");
    assert_eq!(v.inline_chain.first().map(|f| f.function.as_str()), Some("main"));
    assert_eq!(v.lines.len(), 11, "five lines either side");
    assert_eq!(v.lines.iter().filter(|l| l.current).count(), 1);

    // make_corpus is inlined into main: the pane shows the inlined code's line
    // and the chain names both.
    let v = view(Some(&sym), &mut resolver, main + 0x30, &[], 2);
    assert_eq!(v.status, SourceStatus::Ok, "{v:?}");
    assert_eq!(v.function.as_deref(), Some("main+0x30"));
    let names: Vec<&str> = v.inline_chain.iter().map(|f| f.function.as_str()).collect();
    assert_eq!(names, ["make_corpus", "main"]);
    assert_eq!(v.line, Some(demo_line("while (*s && n + 2 < cap)")));
    assert!(current_text(&v).contains("while (*s && n + 2 < cap)"));
    assert_eq!(v.inline_chain[1].line, Some(demo_line("size_t len = make_corpus(")));

    // Context is clamped to the file.
    let v = view(Some(&sym), &mut resolver, main, &[], 100_000);
    assert_eq!(v.lines.first().unwrap().number, 1);
    let total = std::fs::read_to_string(root().join("assets/demo/src/demo.c")).unwrap().lines().count();
    assert_eq!(v.lines.len(), total);
}

#[test]
fn counts_are_the_window_instructions_on_each_line() {
    let sym = demo_symbols();
    let mut resolver = default_resolver(&snapshot(), &[], &[]);
    let main = addr_of(&sym, "main");
    let window = demo_window(main, 200);
    assert_eq!(window.len(), 200);
    let image = demo_memory();
    let v = source_view(Some(&sym), &mut resolver, &image, MemSpace::ANY, main, &window, 100_000);
    assert_eq!(v.status, SourceStatus::Ok);
    let file = v.file.clone().unwrap();
    // Counted independently: the innermost frame of every instruction.
    let (mut in_file, mut elsewhere) = (0u64, 0u64);
    for r in &window {
        for a in (r.start..r.end).step_by(4) {
            match sym.symbolize(a).frames.first().and_then(|f| f.file.clone()) {
                Some(f) if *f == *file => in_file += 1,
                _ => elsewhere += 1,
            }
        }
    }
    assert!(in_file > 0 && elsewhere > 0, "the window runs demo.c and library code: {in_file} {elsewhere}");
    assert_eq!(v.lines.iter().map(|l| l.count).sum::<u64>(), in_file);

    // A narrow view counts only what it shows.
    let v = source_view(
        Some(&sym),
        &mut resolver,
        &image,
        MemSpace::ANY,
        main,
        &[ExecutedRange { start: main, end: main + 8, isa: Isa::A64 }],
        0,
    );
    assert_eq!(v.lines.len(), 1);
    assert_eq!(v.lines[0].count, 2, "{v:?}");
}

#[test]
fn a_root_without_the_file_says_which_file_is_missing() {
    let sym = demo_symbols();
    let empty = std::env::temp_dir().join(format!("tracesight-sourceview-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    let mut resolver = SourceResolver::new();
    resolver.add_root(&empty);
    let main = addr_of(&sym, "main");
    let v = view(Some(&sym), &mut resolver, main, &[], 5);
    match &v.status {
        SourceStatus::SourceNotFound { file, tried } => {
            assert!(file.ends_with("src/demo.c"), "{file}");
            assert!(tried.iter().any(|p| p.starts_with(&empty)), "{tried:?}");
        }
        s => panic!("{s:?}"),
    }
    assert!(v.lines.is_empty());
    assert_eq!(v.function.as_deref(), Some("main"));
    assert!(v.line.is_some() && !v.inline_chain.is_empty());
}

#[test]
fn no_image_and_no_debug_information() {
    let sym = demo_symbols();
    let mut resolver = default_resolver(&snapshot(), &[], &[]);
    let v = view(Some(&sym), &mut resolver, 0x10, &[], 5);
    assert_eq!(v.status, SourceStatus::NoSymbols);
    assert!(v.function.is_none() && v.lines.is_empty());
    assert_eq!(view(None, &mut resolver, addr_of(&sym, "main"), &[], 5).status, SourceStatus::NoSymbols);

    let bin = |n: &str| root().join("tests/data/symbols/bin").join(n);
    let full = Symbolizer::from_images([(bin("prog"), None)]).unwrap();
    let main = addr_of(&full, "main");
    let nodebug = Symbolizer::from_images([(bin("prog-nodebug"), None)]).unwrap();
    let v = view(Some(&nodebug), &mut resolver, main + 8, &[], 5);
    assert_eq!(v.status, SourceStatus::NoDebugInfo);
    assert_eq!(v.function.as_deref(), Some("main+0x8"));
    assert!(v.file.is_none() && v.lines.is_empty() && v.inline_chain.is_empty());
    let stripped = Symbolizer::from_images([(bin("prog-stripped"), None)]).unwrap();
    let v = view(Some(&stripped), &mut resolver, main + 8, &[], 5);
    assert_eq!(v.status, SourceStatus::NoDebugInfo);
    assert!(v.function.is_none());
}

/// `(address, mnemonic)` of every instruction objdump lists in `[from, to)`;
/// `None` when objdump is not installed.
fn objdump(elf: &Path, from: u64, to: u64) -> Option<Vec<(u64, String)>> {
    let out = Command::new("aarch64-linux-gnu-objdump")
        .arg("-d")
        .arg(format!("--start-address=0x{from:x}"))
        .arg(format!("--stop-address=0x{to:x}"))
        .arg(elf)
        .output()
        .ok()?;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let rows = text
        .lines()
        .filter_map(|l| {
            // "  400530:\td10283ff \tsub\tsp, sp, #0xa0"
            let mut cols = l.split('\t');
            let addr = u64::from_str_radix(cols.next()?.trim().strip_suffix(':')?, 16).ok()?;
            let _bytes = cols.next()?;
            Some((addr, cols.next()?.split_whitespace().next()?.to_string()))
        })
        .collect();
    Some(rows)
}

#[test]
fn a64_disassembly_agrees_with_objdump() {
    let sym = demo_symbols();
    let image = demo_memory();
    let main = addr_of(&sym, "main");
    let range = ExecutedRange { start: main, end: main + 0x100, isa: Isa::A64 };
    let lines = disassemble(&image, MemSpace::ANY, Some(&sym), &range, Some(main + 8), 1000);
    assert_eq!(lines.len(), 0x40);
    assert_eq!(lines[0].symbol.as_deref(), Some("main"));
    assert!(lines[1..].iter().all(|l| l.symbol.is_none()));
    assert_eq!(lines.iter().filter(|l| l.current).map(|l| l.addr).collect::<Vec<_>>(), [main + 8]);
    assert_eq!(lines[0].bytes.len(), 8);
    let Some(theirs) = objdump(&demo_elf(), main, main + 0x100) else {
        eprintln!("aarch64-linux-gnu-objdump not installed: comparison skipped");
        return;
    };
    assert_eq!(theirs.len(), lines.len());
    for (l, (a, m)) in lines.iter().zip(&theirs) {
        assert_eq!(l.addr, *a);
        assert_eq!(l.text.split_whitespace().next(), Some(m.as_str()), "at 0x{a:x}: {l:?}");
    }
    // objdump's "b.gt 400904 <main+0x3d4>" at main+0x14.
    let b = &lines[5];
    assert!(b.text.starts_with("b.gt"), "{b:?}");
    let target = main + 0x3d4;
    assert!(b.text.contains(&format!("0x{target:x} <main+0x3d4>")), "{b:?}");

    // Past the end of the image: one line says so.
    let end = image.regions().iter().map(|r| r.last).max().unwrap() + 1;
    let lines = disassemble(
        &image,
        MemSpace::ANY,
        Some(&sym),
        &ExecutedRange { start: end - 8, end: end + 8, isa: Isa::A64 },
        None,
        10,
    );
    assert_eq!(lines.len(), 3);
    assert!(lines[2].text.contains("not in the program image") && lines[2].bytes.is_empty(), "{lines:?}");
}

/// All of `bytes`, placed at `start`, disassembled without symbols.
fn disasm_bytes(start: u64, bytes: Vec<u8>, isa: Isa) -> Vec<DisasmLine> {
    let end = start + bytes.len() as u64;
    let mut image = MemoryImage::new();
    image.add_bytes(start, bytes, MemSpace::ANY);
    disassemble(&image, MemSpace::ANY, None, &ExecutedRange { start, end, isa }, None, 100)
}

#[test]
fn t32_and_a32_in_memory() {
    let mut image = MemoryImage::new();
    // bx lr; bl +0 (to 0x1006); nop; push.w {r4-r11, lr}
    let halfwords: [u16; 6] = [0x4770, 0xf000, 0xf800, 0xbf00, 0xe92d, 0x4ff0];
    image.add_bytes(0x1000, halfwords.iter().flat_map(|h| h.to_le_bytes()).collect(), MemSpace::ANY);
    let range = ExecutedRange { start: 0x1000, end: 0x100c, isa: Isa::T32 };
    assert_eq!(instruction_addresses(&image, MemSpace::ANY, &range, 100), [0x1000, 0x1002, 0x1006, 0x1008]);
    assert_eq!(instruction_addresses(&image, MemSpace::ANY, &range, 2), [0x1000, 0x1002]);
    // Unmapped T32 code: the sizes are unknown, so the walk stops.
    let beyond = ExecutedRange { start: 0x1008, end: 0x1010, isa: Isa::T32 };
    assert_eq!(instruction_addresses(&image, MemSpace::ANY, &beyond, 100), [0x1008, 0x100c]);

    let lines = disassemble(&image, MemSpace::ANY, None, &range, Some(0x1006), 100);
    let words: Vec<&str> = lines.iter().map(|l| l.text.split_whitespace().next().unwrap()).collect();
    assert_eq!(lines.iter().map(|l| l.addr).collect::<Vec<_>>(), [0x1000, 0x1002, 0x1006, 0x1008], "{lines:?}");
    // yaxpeax names the 32-bit encoding "bl.w" where objdump says "bl".
    assert_eq!([words[0], words[1].trim_end_matches(".w"), words[2]], ["bx", "bl", "nop"], "{lines:?}");
    assert!(words[3].starts_with("push"), "{lines:?}");
    assert_eq!(lines[1].bytes, "f000 f800");
    assert_eq!(lines[0].bytes, "4770");
    assert!(lines[1].text.contains("0x1006"), "{lines:?}");
    assert!(lines[2].current && !lines[1].current);

    // A32: b . and udf.
    let words: [u32; 2] = [0xeafffffe, 0xe7f000f0];
    let lines = disasm_bytes(0x2000, words.iter().flat_map(|w| w.to_le_bytes()).collect(), Isa::A32);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].text.starts_with('b') && lines[0].text.contains("0x2000"), "{lines:?}");
    assert_eq!(lines[0].bytes, "eafffffe");
}

#[test]
fn undecodable_a64_words_show_as_data() {
    let lines = disasm_bytes(0x3000, 0xffff_ffffu32.to_le_bytes().to_vec(), Isa::A64);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0].text, ".word 0xffffffff", "{lines:?}");
}
