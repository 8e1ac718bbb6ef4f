//! The `symbolize` subcommand, end to end: its output is diffable with
//! `aarch64-linux-gnu-addr2line -a -f -i -C` (the checked-in expected files
//! were made by it, see tests/data/symbols/build.sh), addresses can come from
//! standard input, and --show-source prints the source line or says why not.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn data() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/symbols")
}

fn tracesight() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tracesight"))
}

/// The addresses of an addr2line listing (lines starting with 0x).
fn addresses(listing: &str) -> Vec<String> {
    listing.lines().filter(|l| l.starts_with("0x")).map(str::to_string).collect()
}

#[test]
fn symbolize_matches_addr2line_for_every_text_address() {
    for name in ["prog", "shapes", "prog-stripped", "prog-nodebug"] {
        let expected = std::fs::read_to_string(data().join("expected").join(format!("{name}.txt"))).unwrap();
        let addrs = addresses(&expected);
        assert!(addrs.len() > 50, "{name}: expected file lists {} addresses", addrs.len());
        let out = tracesight()
            .arg("symbolize")
            .arg("--image")
            .arg(data().join("bin").join(name))
            .args(&addrs)
            .output()
            .unwrap();
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        let ours = String::from_utf8(out.stdout).unwrap();
        if ours != expected {
            let diff = ours.lines().zip(expected.lines()).enumerate().find(|(_, (a, b))| a != b);
            panic!("{name}: output differs from addr2line's; first difference {diff:?}");
        }
    }
}

#[test]
fn symbolize_reads_addresses_from_stdin() {
    let mut child = tracesight()
        .arg("symbolize")
        .arg("--image")
        .arg(data().join("bin/prog"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"4007e8\n0x4008b0\n").unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success());
    assert_eq!(addresses(&text), ["0x00000000004007e8", "0x00000000004008b0"]);
    assert!(text.contains("\ndot\n") && text.contains("\nchecksum\n"), "{text}");
}

#[test]
fn show_source_prints_the_line_or_why_not() {
    let run = |extra: &[&str]| {
        let out = tracesight()
            .arg("symbolize")
            .arg("--image")
            .arg(data().join("bin/prog"))
            .arg("--show-source")
            .args(extra)
            .arg("0x4007e8")
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()
    };
    let sub = format!("--substitute-path=/tracesight/symbols={}", data().display());
    let found = run(&[&sub]);
    let src = std::fs::read_to_string(data().join("src/prog.c")).unwrap();
    let loc = found.lines().nth(2).unwrap();
    let line: usize = loc.rsplit_once(':').unwrap().1.split_whitespace().next().unwrap().parse().unwrap();
    let shown = found.lines().nth(3).unwrap();
    assert_eq!(shown.trim(), src.lines().nth(line - 1).unwrap().trim(), "{found}");
    let missing = run(&[]);
    assert!(missing.contains("source not shown") && missing.contains("--source-root"), "{missing}");
}

#[test]
fn bad_arguments_are_named() {
    let out = tracesight().arg("symbolize").arg("--image").arg(data().join("bin/prog")).arg("zz12").output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("'zz12' is not a hexadecimal address"));
    let out = tracesight().arg("symbolize").arg("--image").arg(data().join("src/prog.c")).arg("0").output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("prog.c"), "{err}");
}

/// The bundled demo: a synthesized trace of a program whose ELF has DWARF.
fn demo() -> (PathBuf, PathBuf) {
    let snap = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("assets/demo/snapshot");
    (snap.clone(), snap.join("demo"))
}

#[test]
fn jsonl_ranges_name_function_file_and_line() {
    let (snap, elf) = demo();
    let out = tracesight()
        .arg("decode")
        .arg(&snap)
        .args(["--seek", "fn:main", "--count", "1", "--format", "jsonl", "--image"])
        .arg(&elf)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let line = String::from_utf8(out.stdout).unwrap();
    let v: serde_json::Value = serde_json::from_str(line.trim()).unwrap();
    assert_eq!(v["type"], "instr_range");
    assert_eq!(v["function"], "main");
    assert_eq!(v["offset"], 0, "fn:main seeks to an entry of main");
    assert!(v["file"].as_str().unwrap().ends_with("demo.c"), "{v}");
    // addr2line agrees on the line of main's first instruction.
    let start = u64::from_str_radix(v["start"].as_str().unwrap().trim_start_matches("0x"), 16).unwrap();
    let sym = tracesight().arg("symbolize").arg("--image").arg(&elf).arg(format!("{start:x}")).output().unwrap();
    let text = String::from_utf8(sym.stdout).unwrap();
    let want = format!(":{}", v["line"]);
    assert!(text.lines().nth(2).is_some_and(|l| l.ends_with(&want) || l.contains(&format!("{want} "))), "{text} vs {v}");
}

#[test]
fn info_lists_images_and_the_functions_the_trace_enters() {
    let (snap, elf) = demo();
    let out = tracesight().arg("info").arg(&snap).arg("--image").arg(&elf).args(["--functions", "0"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("source lines (DWARF)"), "{text}");
    let entries = |name: &str| -> Option<u64> {
        text.lines().find(|l| l.split_whitespace().nth(2) == Some(name))?.split_whitespace().next()?.parse().ok()
    };
    // main is entered once; the hash functions are called through a pointer
    // for every word, so they are entered many times.
    assert_eq!(entries("main"), Some(1), "{text}");
    assert!(entries("hash_fnv").is_some_and(|n| n > 100), "{text}");
}
