//! `profile` on all cores gives what the one-core pass gives, for every
//! format, with the index cut into parts of one checkpoint each (checkpoints
//! every KiB of trace) so that many part boundaries are crossed: snapshot
//! captures of the OpenCSD fixtures (ETE, ETMv4, PTM), simpleperf's
//! perf.data, the checked-in synthesized programs and, when qemu-aarch64 and
//! the cross compiler are there, the live programs of `profile_synth`
//! (recursion, longjmp, C++ exceptions, tail calls, threads).

use std::path::{Path, PathBuf};
use std::process::Command;

use clap::Parser;
use tracesight::capture::{Capture, CaptureOptions};
use tracesight::index::{BuildProgress, IndexOptions, SeekTarget};
use tracesight::profile::pass::{parts, profile_capture_with, Parallel, ProfileOptions};
use tracesight::synth::qemu::{self, QemuRun};
use tracesight::synth::{self, Output, SynthConfig};

#[path = "support/files.rs"]
mod files;
use files::copy_tree;

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    command: Sub,
}

#[derive(clap::Subcommand)]
enum Sub {
    Profile(ProfileArgs),
}

/// `tracesight profile`'s capture and options, as the command reads them.
#[derive(clap::Args)]
struct ProfileArgs {
    #[allow(dead_code)]
    capture: PathBuf,
    #[command(flatten)]
    options: ProfileOptions,
}

fn args(words: &[&str]) -> ProfileOptions {
    let Sub::Profile(a) = Cli::parse_from(["tracesight", "profile"].iter().chain(words)).command;
    a.options
}

/// Every format, with the options that change what is collected.
const FORMATS: &[&[&str]] = &[
    &["--format", "stats"],
    &["--format", "stats", "--json", "--by", "thread"],
    &["--format", "stats", "--by", "stream", "--sort", "total-cycles"],
    &["--format", "autofdo"],
    &["--format", "bolt"],
    &["--format", "folded"],
    &["--format", "folded", "--weight", "cycles"],
    &["--format", "callgraph"],
];

fn small_index() -> IndexOptions {
    IndexOptions { interval: 1024, ..IndexOptions::default() }
}

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tracesight-profpar-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// How many parts of one checkpoint the capture's index has (built small
/// by the first pass).
fn part_count(capture: &Path, extra: &[&str]) -> usize {
    let symdirs: Vec<PathBuf> = extra.windows(2).filter(|w| w[0] == "--symdir").map(|w| PathBuf::from(w[1])).collect();
    let perf = tracesight::capture::perf::is_perf_data(capture);
    let copts = CaptureOptions { symdirs: if perf { symdirs } else { Vec::new() }, ..CaptureOptions::default() };
    let cap = Capture::open(capture, &copts).unwrap();
    let idx = cap.open_index(&small_index(), false, &BuildProgress::new()).unwrap();
    let seeker = cap.seeker(&idx.file);
    let first = seeker.checkpoint_for(&SeekTarget::Element(0));
    parts(&idx.file, first, 0, idx.file.totals().elements, 1).len()
}

/// Compare the serial and the parallel pass on `capture` for every format;
/// returns the number of parts the parallel pass used.
fn same_both_ways(name: &str, capture: &Path, extra: &[&str]) -> usize {
    let path = capture.to_str().unwrap();
    let serial = Parallel { threads: 1, part_checkpoints: 1 };
    let parallel = Parallel { threads: 3, part_checkpoints: 1 };
    let mut compared = 0;
    for f in FORMATS {
        let words: Vec<&str> = [path].iter().chain(f.iter()).chain(extra).copied().collect();
        let a = args(&words);
        let one = profile_capture_with(capture, &a, &small_index(), serial);
        let all = profile_capture_with(capture, &a, &small_index(), parallel);
        match (&one, &all) {
            (Ok(x), Ok(y)) => {
                assert!(x == y, "{name} {f:?}: the parallel output differs from the serial one");
                compared += 1;
            }
            (Err(x), Err(y)) => assert_eq!(x.to_string(), y.to_string(), "{name} {f:?}: different errors"),
            _ => panic!("{name} {f:?}: serial {:?} but parallel {:?}", one.map(|_| "ok"), all.map(|_| "ok")),
        }
    }
    assert!(compared >= 5, "{name}: the formats that need no binaries were compared");
    part_count(capture, extra)
}

fn fixture(name: &str, extra: &[&str], min_parts: usize) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/opencsd").join(name);
    if !src.is_dir() {
        eprintln!("note: {} missing; skipped", src.display());
        return;
    }
    let dst = scratch(name).join(name);
    copy_tree(&src, &dst);
    let extra: Vec<String> = extra.iter().map(|e| if e.starts_with("--") { e.to_string() } else { dst.join(e).display().to_string() }).collect();
    let extra: Vec<&str> = extra.iter().map(|s| s.as_str()).collect();
    let n = same_both_ways(name, &dst, &extra);
    assert!(n >= min_parts, "{name}: {n} parts, expected at least {min_parts}");
    let _ = std::fs::remove_dir_all(dst.parent().unwrap());
}

#[test]
fn ete_fixtures_parallel_equals_serial() {
    fixture("001-ack_test", &["--symdir", "bindir"], 8);
    fixture("ete_spec_1", &["--symdir", "bindir_64"], 1);
}

#[test]
fn etmv4_fixtures_parallel_equals_serial() {
    fixture("juno_r1_1", &[], 8);
    fixture("juno-uname-001", &[], 2);
    fixture("test-file-mem-offsets", &[], 2);
    fixture("a57_single_step", &[], 1);
}

#[test]
fn ptm_fixtures_parallel_equals_serial() {
    fixture("tc2-ptm-rstk-t32", &[], 8);
    fixture("trace_cov_a15", &[], 1);
}

#[test]
fn perf_data_parallel_equals_serial() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/perf/simpleperf");
    let dir = scratch("perf");
    let data = dir.join("perf_etm.data");
    std::fs::copy(src.join("perf_etm.data"), &data).unwrap();
    let symdir = src.display().to_string();
    let n = same_both_ways("perf_etm.data", &data, &["--symdir", &symdir]);
    assert!(n >= 2, "perf_etm.data: {n} parts");
    let _ = std::fs::remove_dir_all(&dir);
}

fn synth_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/synth")
}

#[test]
fn checked_in_synthesized_programs_parallel_equal_serial() {
    // mini_dispatch's trace is under a KiB: one part, compared all the same.
    for (name, min_parts) in [("mini_recursion", 2), ("mini_dispatch", 1)] {
        let dst = scratch(name).join(name);
        copy_tree(&synth_dir().join("snapshots").join(name), &dst);
        let elf = dst.join(name).display().to_string();
        let n = same_both_ways(name, &dst, &["--image", &elf]);
        assert!(n >= min_parts, "{name}: {n} parts");
        let _ = std::fs::remove_dir_all(dst.parent().unwrap());
    }
}

fn tool_works(cmd: &str) -> bool {
    Command::new(cmd).arg("--version").output().is_ok_and(|o| o.status.success())
}

#[test]
fn live_synthesized_programs_parallel_equal_serial() {
    if !["qemu-aarch64", "aarch64-linux-gnu-gcc"].iter().all(|t| tool_works(t)) {
        eprintln!("note: live programs skipped: qemu-aarch64 or aarch64-linux-gnu-gcc missing");
        return;
    }
    let progs = Path::new(env!("CARGO_TARGET_TMPDIR")).join("profpar-programs");
    let st = Command::new("sh").arg(synth_dir().join("build.sh")).arg(&progs).status().expect("sh");
    assert!(st.success(), "building the test programs failed");
    for prog in ["recursion", "longjmp", "exceptions", "dispatch", "threads"] {
        let program = progs.join(prog);
        if !program.exists() {
            eprintln!("note: {prog} was not built; skipped");
            continue;
        }
        let q = QemuRun { qemu: "qemu-aarch64".into(), sysroot: None, program: program.clone(), args: vec![], keep_log: None };
        let r = qemu::run(&q).unwrap();
        assert!(r.status.success(), "{prog} failed under qemu");
        let out = scratch(prog).join("snapshot");
        synth::synthesize(&r.exec, &program, None, &SynthConfig::default(), &Output::new(&out)).unwrap();
        let elf = program.display().to_string();
        let n = same_both_ways(prog, &out, &["--image", &elf]);
        assert!(n >= 4, "{prog}: {n} parts");
        let _ = std::fs::remove_dir_all(out.parent().unwrap());
    }
}
