//! `tracesight profile` on the demo capture, the AutoFDO writer against
//! simpleperf's own output, and `profile merge`.
//!
//! - stats: self instructions sum to the capture's instruction total (from
//!   the index); folded weights and the call graph's total too;
//! - bolt: branch counts equal the taken branches of a full decode;
//! - autofdo: `perf_inject.data` (simpleperf's test data) rebuilt byte for
//!   byte from its range and branch counts at run-time addresses, through
//!   the binary's mapping and segments, build ID and recorded path;
//! - merge: a profile merged with itself doubles every count; counts
//!   saturate with a warning;
//! - perf.data: `profile perf_etm.data --format autofdo` equals
//!   `perf_inject.data` byte for byte.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use tracesight::element::{Element, ElementKind, InstrSubtype, InstrType, Isa, Time};
use tracesight::image::elf::Segment;
use tracesight::profile::autofdo::{AutofdoProfile, Binary, BinaryMap, BranchCounts, Mapping, SPLIT_NOTE};
use tracesight::session::{run, BufferPlan, Event, RunOptions};

#[path = "support/files.rs"]
mod files;
use files::copy_tree;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_tracesight")
}

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tracesight-profile-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A copy of the demo capture (the index is written beside the trace).
fn demo_copy(tag: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo/snapshot");
    let dst = scratch(tag).join("snapshot");
    copy_tree(&src, &dst);
    dst
}

fn tracesight(args: &[&str]) -> (String, String) {
    let out = Command::new(bin()).args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "tracesight {args:?} failed: {stderr}");
    (String::from_utf8(out.stdout).unwrap(), stderr)
}

/// Instructions and taken branches of a full decode of the demo.
fn full_decode(dir: &Path) -> (u64, u64) {
    let snap = tracesight::input::Snapshot::open(dir).unwrap();
    let plan = BufferPlan::new(&snap, snap.default_buffer().unwrap()).unwrap();
    let file = plan.open().unwrap();
    let opts = RunOptions { elements: true, ..Default::default() };
    let (mut instr, mut taken) = (0, 0);
    // A taken branch counts once its target (the next range) is seen.
    let mut pending = false;
    run(&plan, file.bytes(), &opts, |ev| {
        if let Event::Element { element, .. } = ev {
            match element.kind {
                ElementKind::InstrRange { count, executed, last_type, last_subtype, .. } => {
                    instr += count as u64;
                    if pending {
                        taken += 1;
                    }
                    pending = executed
                        && matches!(last_type, InstrType::Branch | InstrType::IndirectBranch)
                        && last_subtype != InstrSubtype::ExceptionReturn;
                }
                ElementKind::Exception { .. }
                | ElementKind::NoSync(_)
                | ElementKind::TraceOn(_)
                | ElementKind::EndOfTrace(_)
                | ElementKind::ExceptionReturn => pending = false,
                _ => {}
            }
        }
    })
    .unwrap();
    (instr, taken)
}

fn index_instructions(dir: &Path) -> u64 {
    let (out, _) = tracesight(&["index", dir.to_str().unwrap()]);
    let line = out.lines().find(|l| l.starts_with("buffer ")).unwrap();
    let n = line.split(", ").find(|f| f.ends_with(" instructions")).unwrap();
    n.trim_end_matches(" instructions").parse().unwrap()
}

#[test]
fn demo_stats_folded_and_callgraph_sum_to_the_instruction_total() {
    let dir = demo_copy("sums");
    let d = dir.to_str().unwrap();
    let total = index_instructions(&dir);
    assert!(total > 1_000_000);

    let (json, _) = tracesight(&["profile", d, "--format", "stats", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let funcs = v["functions"].as_array().unwrap();
    let self_sum: u64 = funcs.iter().map(|f| f["self_instructions"].as_u64().unwrap()).sum();
    assert_eq!(self_sum, total, "stats self instructions");
    let main = funcs.iter().find(|f| f["name"] == "main").expect("main");
    assert_eq!(main["calls"], 1);
    assert!(main["total_instructions"].as_u64().unwrap() > total / 2);
    // A leaf function's own cycles and time are all of its cycles and time:
    // cycle counts reported after its return still count in its frame.
    let strcmp = funcs.iter().find(|f| f["name"] == "strcmp").expect("strcmp");
    assert!(strcmp["self_cycles"].as_u64().unwrap() > 0);
    assert_eq!(strcmp["self_cycles"], strcmp["total_cycles"]);
    assert_eq!(strcmp["self_time"], strcmp["total_time"]);
    // Sorted by self instructions, largest first.
    let selfs: Vec<u64> = funcs.iter().map(|f| f["self_instructions"].as_u64().unwrap()).collect();
    assert!(selfs.windows(2).all(|w| w[0] >= w[1]));
    // Every caller->callee pair's calls add up to the callee's calls.
    let mut by_callee: BTreeMap<String, u64> = BTreeMap::new();
    for p in v["calls"].as_array().unwrap() {
        *by_callee.entry(p["callee"].as_str().unwrap().to_string()).or_default() += p["calls"].as_u64().unwrap();
    }
    for f in funcs {
        let name = f["name"].as_str().unwrap();
        assert_eq!(by_callee.get(name).copied().unwrap_or(0), f["calls"].as_u64().unwrap(), "{name}");
    }

    let (text, _) = tracesight(&["profile", d, "--sort", "calls"]);
    let header = text.lines().next().unwrap();
    assert!(header.starts_with("function") && header.contains("self_instr") && header.contains("avg_call"));
    let calls: Vec<u64> =
        text.lines().skip(1).map(|l| l.split_whitespace().rev().nth(9).unwrap().parse().unwrap()).collect();
    assert!(calls.windows(2).all(|w| w[0] >= w[1]), "sorted by calls");

    let (folded, _) = tracesight(&["profile", d, "--format", "folded"]);
    let weights: u64 = folded.lines().map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap()).sum();
    assert_eq!(weights, total, "folded weights");
    assert!(folded.lines().any(|l| l.contains(";main;") && l.starts_with("_start;")));

    let (graph, _) = tracesight(&["profile", d, "--format", "callgraph"]);
    let g: serde_json::Value = serde_json::from_str(&graph).unwrap();
    assert_eq!(g["total_instructions"].as_u64().unwrap(), total, "call graph total");

    // Per stream: the demo has one trace ID.
    let (by, _) = tracesight(&["profile", d, "--by", "stream"]);
    assert!(by.starts_with("# stream 0x10\n"));
}

#[test]
fn demo_bolt_branch_counts_equal_the_taken_branches_of_a_full_decode() {
    let dir = demo_copy("bolt");
    let (instr, taken) = full_decode(&dir);
    assert!(instr > 0 && taken > 100_000);
    let (bolt, _) = tracesight(&["profile", dir.to_str().unwrap(), "--format", "bolt"]);
    let mut b = 0;
    let mut f_lines = 0;
    for l in bolt.lines() {
        let f: Vec<&str> = l.split(' ').collect();
        match f[0] {
            "B" => {
                assert_eq!(f.len(), 5, "{l}");
                b += f[3].parse::<u64>().unwrap();
                assert_eq!(f[4], "0");
            }
            "F" => {
                assert_eq!(f.len(), 4, "{l}");
                f_lines += 1;
            }
            _ => panic!("unexpected line {l}"),
        }
    }
    assert_eq!(b, taken, "B counts");
    assert!(f_lines > 0);
}

#[test]
fn demo_autofdo_is_well_formed_and_restricted_by_binary() {
    let dir = demo_copy("afdo");
    let d = dir.to_str().unwrap();
    let (text, _) = tracesight(&["profile", d, "--format", "autofdo"]);
    let p = AutofdoProfile::parse(Path::new("demo"), &text).unwrap();
    assert_eq!(p.binaries.len(), 1);
    let b = p.binaries.values().next().unwrap();
    assert!(b.path.ends_with("demo"));
    assert_eq!(b.build_id.len(), 42);
    // Range counts: every instruction range of the trace once.
    assert!(b.ranges.values().sum::<u64>() > 100_000);
    assert_eq!(p.write(), text, "what is read is written back the same");
    let (none, _) = tracesight(&["profile", d, "--format", "autofdo", "--binary", "^no-such-binary$"]);
    assert_eq!(none, "");
}

/// perf_inject.data's counts at the run-time addresses of the recording
/// (the program mapped at 0x582b2b0000, its executable segment from file
/// offset 0x1000).
fn inject_counts(map_base: u64) -> BranchCounts {
    let text = std::fs::read_to_string(fixture_dir().join("perf_inject.data")).unwrap();
    let p = AutofdoProfile::parse(Path::new("perf_inject.data"), &text).unwrap();
    let b = p.binaries.values().next().unwrap();
    let mut c = BranchCounts::default();
    for (&(s, e), &n) in &b.ranges {
        c.ranges.insert((map_base + s, map_base + e), n);
    }
    for (&(f, t), &n) in &b.branches {
        c.branches.insert((map_base + f, if t == 0 { 0 } else { map_base + t }), n);
    }
    c
}

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/perf/simpleperf")
}

#[test]
fn autofdo_writer_reproduces_simpleperf_inject_output() {
    let dir = fixture_dir();
    if !dir.is_dir() {
        eprintln!("note: ../shared/fixtures/perf missing; skipped");
        return;
    }
    let elf = std::fs::read(dir.join("etm_test_loop")).unwrap();
    let mut map = BinaryMap::default();
    let b = map.add_binary(Binary::from_elf("/data/local/tmp/etm_test_loop", &elf).unwrap());
    // As perf's mmap record gives it: the executable segment only.
    map.add_mapping(Mapping { start: 0x582b2b1000, end: 0x582b2b2000, pgoff: 0x1000, binary: b });
    let counts = inject_counts(0x582b2b0000);
    let got = AutofdoProfile::from_counts(&counts, &map, &|_| true).write();
    let want = std::fs::read_to_string(dir.join("perf_inject.data")).unwrap().replace('\r', "");
    assert_eq!(got, want);

    // Two binaries: the split note first, blocks sorted by path, each in
    // its own offsets. The second binary's first segment is at 0x400000
    // and its code at file offset 0x10000 is mapped at 0x7000000000.
    let second = Binary {
        path: "/a/lib.so".into(),
        build_id: Some(vec![0xab; 8]),
        segments: vec![
            Segment { vaddr: 0x400000, file_offset: 0, file_size: 0x1000, executable: false },
            Segment { vaddr: 0x411000, file_offset: 0x10000, file_size: 0x2000, executable: true },
        ],
    };
    let s = map.add_binary(second);
    map.add_mapping(Mapping { start: 0x7000000000, end: 0x7000002000, pgoff: 0x10000, binary: s });
    let mut counts = inject_counts(0x582b2b0000);
    counts.ranges.insert((0x7000000010, 0x7000000020), 3);
    counts.branches.insert((0x7000000020, 0x7000000100), 2);
    counts.branches.insert((0x7000000024, 0), 1);
    // Outside every mapping: left out.
    counts.ranges.insert((0x10, 0x20), 9);
    let got = AutofdoProfile::from_counts(&counts, &map, &|_| true).write();
    let lib = "1\n11010-11020:3\n0\n2\n11020->11100:2\n11024->0:1\n// build_id: 0xabababababababab000000000000000000000000\n// /a/lib.so\n\n";
    assert_eq!(got, format!("{SPLIT_NOTE}\n{lib}{want}"));
    // --binary keeps one.
    let only = AutofdoProfile::from_counts(&counts, &map, &|p| p.ends_with("lib.so")).write();
    assert_eq!(only, lib);
}

fn range(start: u64, end: u64, last_type: InstrType, subtype: InstrSubtype, executed: bool) -> Element {
    Element {
        index: 0,
        trace_id: 0x10,
        kind: ElementKind::InstrRange {
            start,
            end,
            count: ((end - start) / 4) as u32,
            last_type,
            last_subtype: subtype,
            last_size: 4,
            executed,
            conditional: false,
        },
        isa: Isa::A64,
        cycle_count: None,
        time: Time::default(),
    }
}

#[test]
fn branch_counts_from_elements() {
    use InstrSubtype as S;
    use InstrType as T;
    let mut c = BranchCounts::default();
    c.target_of = Some(Box::new(|addr, _| (addr == 0x1044).then_some(0x2000)));
    let seq = [
        range(0x1000, 0x1010, T::Branch, S::None, true),         // B 0x1020
        range(0x1020, 0x1030, T::Branch, S::None, false),        // B.cond not taken
        range(0x1030, 0x1040, T::IndirectBranch, S::BranchLink, true), // BLR 0x1100
        range(0x1100, 0x1108, T::IndirectBranch, S::Return, true), // RET
        range(0x1040, 0x1048, T::Branch, S::None, true),         // B, the trace ends
    ];
    for e in &seq {
        c.feed(0x10, e);
    }
    c.finish();
    let ranges: BTreeMap<_, _> = c.ranges.iter().map(|(k, v)| (*k, *v)).collect();
    let want: BTreeMap<(u64, u64), u64> =
        [((0x1000, 0x100c), 1), ((0x1020, 0x102c), 1), ((0x1030, 0x103c), 1), ((0x1100, 0x1104), 1), ((0x1040, 0x1044), 1)]
            .into();
    assert_eq!(ranges, want);
    let branches: BTreeMap<_, _> = c.branches.iter().map(|(k, v)| (*k, *v)).collect();
    let want: BTreeMap<(u64, u64), u64> =
        [((0x100c, 0x1020), 1), ((0x103c, 0), 1), ((0x1104, 0), 1), ((0x1044, 0x2000), 1)].into();
    assert_eq!(branches, want);
    // BOLT: traced targets; runs from a target to the next taken branch
    // (through the branch not taken).
    let taken: BTreeMap<_, _> = c.taken.iter().map(|(k, v)| (*k, *v)).collect();
    assert_eq!(taken, [((0x100c, 0x1020), 1), ((0x103c, 0x1100), 1), ((0x1104, 0x1040), 1)].into());
    let ft: BTreeMap<_, _> = c.fallthroughs.iter().map(|(k, v)| (*k, *v)).collect();
    assert_eq!(ft, [((0x1000, 0x100c), 1), ((0x1020, 0x103c), 1), ((0x1100, 0x1104), 1), ((0x1040, 0x1044), 1)].into());
}

#[test]
fn merge_of_a_profile_with_itself_doubles_every_count() {
    let dir = demo_copy("merge");
    let d = dir.to_str().unwrap();
    let work = scratch("merge-out");
    for (fmt, ext) in [("autofdo", "afdo"), ("bolt", "bolt"), ("folded", "folded")] {
        let one = work.join(format!("one.{ext}"));
        let two = work.join(format!("two.{ext}"));
        tracesight(&["profile", d, "--format", fmt, "-o", one.to_str().unwrap()]);
        tracesight(&["profile", "merge", one.to_str().unwrap(), one.to_str().unwrap(), "-o", two.to_str().unwrap()]);
        let a = std::fs::read_to_string(&one).unwrap();
        let b = std::fs::read_to_string(&two).unwrap();
        assert!(!a.is_empty());
        // The same lines, each number after the first ':' or last field doubled.
        let a_lines: Vec<&str> = a.lines().collect();
        let b_lines: Vec<&str> = b.lines().collect();
        assert_eq!(a_lines.len(), b_lines.len(), "{fmt}");
        for (x, y) in a_lines.iter().zip(&b_lines) {
            if fmt == "autofdo" && (x.starts_with("//") || !x.contains(':')) {
                assert_eq!(x, y, "{fmt}");
                continue;
            }
            let count = |l: &str| -> (String, u64) {
                if fmt == "autofdo" {
                    let (k, n) = l.rsplit_once(':').unwrap();
                    (k.to_string(), n.parse().unwrap())
                } else if fmt == "bolt" {
                    let f: Vec<&str> = l.split(' ').collect();
                    (format!("{} {} {}", f[0], f[1], f[2]), f[3].parse().unwrap())
                } else {
                    let (k, n) = l.rsplit_once(' ').unwrap();
                    (k.to_string(), n.parse().unwrap())
                }
            };
            let (kx, nx) = count(x);
            let (ky, ny) = count(y);
            assert_eq!(kx, ky, "{fmt}");
            assert_eq!(ny, 2 * nx, "{fmt}: {x} -> {y}");
        }
    }
}

#[test]
fn merge_saturates_with_a_warning_and_rejects_mixed_formats() {
    let work = scratch("saturate");
    let a = work.join("a.folded");
    std::fs::write(&a, format!("main;f {}\nmain 5\n", u64::MAX - 1)).unwrap();
    let out = work.join("sum.folded");
    let (_, err) = tracesight(&["profile", "merge", a.to_str().unwrap(), a.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert!(err.contains("saturated"), "{err}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), format!("main 10\nmain;f {}\n", u64::MAX));

    let afdo = work.join("a.afdo");
    std::fs::write(&afdo, format!("1\n10-20:{}\n0\n0\n// build_id: 0x00\n// /x\n\n", u64::MAX)).unwrap();
    let out2 = work.join("sum.afdo");
    let (_, err) = tracesight(&["profile", "merge", afdo.to_str().unwrap(), afdo.to_str().unwrap(), "-o", out2.to_str().unwrap()]);
    assert!(err.contains("saturated"), "{err}");
    assert!(std::fs::read_to_string(&out2).unwrap().contains(&format!("10-20:{}", u64::MAX)));

    let o = Command::new(bin())
        .args(["profile", "merge", a.to_str().unwrap(), afdo.to_str().unwrap(), "-o", work.join("x").to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--format"));

    // A truncated AutoFDO file says where.
    let bad = work.join("bad.afdo");
    std::fs::write(&bad, "3\n10-20:1\n").unwrap();
    let o = Command::new(bin())
        .args(["profile", "merge", bad.to_str().unwrap(), "-o", work.join("y").to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("bad.afdo:1"), "{}", String::from_utf8_lossy(&o.stderr));
}

/// The acceptance test of the perf.data capture: simpleperf's inject output
/// byte for byte. The fixture is copied first: the index is written beside
/// the capture.
#[test]
fn perf_etm_autofdo_equals_simpleperf_inject() {
    let src = fixture_dir();
    if !src.is_dir() {
        eprintln!("note: ../shared/fixtures/perf missing; skipped");
        return;
    }
    let dir = scratch("perf-etm");
    for f in ["perf_etm.data", "etm_test_loop", "perf_inject.data"] {
        std::fs::copy(src.join(f), dir.join(f)).unwrap();
    }
    let (out, _) = tracesight(&[
        "profile",
        dir.join("perf_etm.data").to_str().unwrap(),
        "--format",
        "autofdo",
        "--symdir",
        dir.to_str().unwrap(),
    ]);
    let want = std::fs::read_to_string(dir.join("perf_inject.data")).unwrap().replace('\r', "");
    assert_eq!(out, want);
    // The same binary only, by --binary; none for a pattern nothing matches.
    let (only, _) = tracesight(&[
        "profile",
        dir.join("perf_etm.data").to_str().unwrap(),
        "--format",
        "autofdo",
        "--symdir",
        dir.to_str().unwrap(),
        "--binary",
        "etm_test_loop$",
    ]);
    assert_eq!(only, want);
    // Statistics of the same capture: 944 instructions, as perf script
    // counts them (../shared/fixtures/perf/README.md).
    let (json, _) = tracesight(&[
        "profile",
        dir.join("perf_etm.data").to_str().unwrap(),
        "--json",
        "--symdir",
        dir.to_str().unwrap(),
    ]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let sum: u64 = v["functions"].as_array().unwrap().iter().map(|f| f["self_instructions"].as_u64().unwrap()).sum();
    assert_eq!(sum, 944);
}

/// A function's totals include its self counts: instructions, cycles and
/// time given to a function outside any frame of its own (a cycle count
/// that arrives after a gap closed its frames) count in its total too. On
/// TC2 (cycle counts after trace-off gaps) 151 of 390 functions had fewer
/// total than self cycles.
#[test]
fn totals_are_never_below_self_counts() {
    for name in ["TC2", "juno_r1_1", "texit-poe2", "001-ack_test"] {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/opencsd").join(name);
        if !src.is_dir() {
            eprintln!("note: {} missing; skipped", src.display());
            continue;
        }
        let dst = scratch(&format!("totals-{name}")).join(name);
        copy_tree(&src, &dst);
        let (out, _) = tracesight(&["profile", dst.to_str().unwrap(), "--format", "stats", "--json"]);
        let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
        let funcs = doc["functions"].as_array().unwrap();
        assert!(!funcs.is_empty(), "{name}: no functions");
        for f in funcs {
            for what in ["instructions", "cycles", "time"] {
                let s = f[format!("self_{what}")].as_u64().unwrap();
                let t = f[format!("total_{what}")].as_u64().unwrap();
                assert!(t >= s, "{name} {}: total {what} {t} below self {s}", f["name"]);
            }
        }
        let _ = std::fs::remove_dir_all(dst.parent().unwrap());
    }
}
