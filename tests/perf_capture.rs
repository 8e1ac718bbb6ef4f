//! A capture made of fragments (the AUX fragments of a perf.data): each
//! fragment decodes from fresh decoders, element numbers run on across them,
//! and the index and seeks over fragments give exactly what decoding the
//! fragments one by one gives.

use std::path::{Path, PathBuf};

use tracesight::element::{Element, ElementKind};
use tracesight::frame::FrameMode;
use tracesight::index::{self, format, IndexOptions, SeekTarget, Seeker, TraceIdentity};
use tracesight::input::Snapshot;
use tracesight::session::{run, run_fragments, BufferPlan, Event, Fragment, RunOptions};

fn opencsd_fixtures() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/opencsd");
    p.is_dir().then_some(p)
}

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tracesight-perfcap-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Cut `len` bytes into up to five fragments with gaps between them (as
/// AUXTRACE record headers sit between perf's trace buffers); cuts are
/// multiples of `unit`.
fn cut(len: usize, unit: usize, seed: u64) -> Vec<Fragment> {
    let units = len / unit;
    let mut v = Vec::new();
    let mut at = 0usize;
    let mut x = seed | 1;
    for _ in 0..5 {
        if at >= units {
            break;
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let n = 1 + (x as usize % (units / 3 + 1));
        let end = (at + n).min(units);
        v.push(Fragment { start: (at * unit) as u64, end: (end * unit) as u64, raw_source: None });
        // Skip a unit now and then: bytes that belong to no fragment.
        at = end + (x >> 32) as usize % 2;
    }
    v
}

/// What decoding each fragment on its own gives, offsets moved to the file's.
fn one_by_one(plan: &BufferPlan, data: &[u8], frags: &[Fragment], opts: &RunOptions) -> Vec<Element> {
    let mut v = Vec::new();
    for f in frags {
        let copy = data[f.start as usize..f.end as usize].to_vec();
        run(plan, &copy, opts, |ev| {
            if let Event::Element { element, .. } = ev {
                let mut e = *element;
                // A decoder that saw no data ends at the fragment's start.
                e.index += f.start;
                v.push(e);
            }
        })
        .unwrap();
    }
    v
}

/// Equal element lists, or the first difference.
fn same(got: &[Element], want: &[Element], what: &str) {
    if let Some(i) = (0..got.len().min(want.len())).find(|&i| got[i] != want[i]) {
        panic!("{what}: element {i} differs:\n got  {:?}\n want {:?}", got[i], want[i]);
    }
    assert_eq!(got.len(), want.len(), "{what}: element count");
}

#[test]
fn fragments_decode_and_seek_as_separate_buffers() {
    let Some(root) = opencsd_fixtures() else {
        eprintln!("fixtures not found; skipped");
        return;
    };
    let work = tmpdir("frag");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root).unwrap().filter_map(|e| Some(e.ok()?.path())).collect();
    dirs.sort();
    let (mut captures, mut windows) = (0, 0);
    for (di, dir) in dirs.iter().enumerate() {
        let Ok(snap) = Snapshot::open(dir) else { continue };
        let Some(buffer) = snap.default_buffer().cloned() else { continue };
        let Ok(plan) = BufferPlan::new(&snap, &buffer) else { continue };
        if !plan.sources.iter().any(|s| s.kind.is_decoded()) {
            continue;
        }
        // perf.data trace is memory-aligned frames or raw data only.
        let unit = match plan.frame_mode(false) {
            None => 1,
            Some(FrameMode::MemAligned) => 16,
            Some(_) => continue,
        };
        let Ok(file) = plan.open() else { continue };
        let data = file.bytes();
        if data.len() < 64 {
            continue;
        }
        let opts = index::index_run_options(&RunOptions::default());
        let frags = cut(data.len(), unit, 0x1234_5678 + di as u64);
        let want = one_by_one(&plan, data, &frags, &opts);
        let mut got = Vec::new();
        run_fragments(&plan, data, &frags, &opts, |ev| {
            if let Event::Element { element, .. } = ev {
                got.push(*element);
            }
        });
        same(&got, &want, &format!("{}: run_fragments over {frags:?}", dir.display()));
        for threads in [1, 2] {
            let iopts = IndexOptions { interval: 1024, threads, part: 0, ..Default::default() };
            let built = index::build_fragments(&plan, data, &frags, &opts, &iopts, &index::BuildProgress::new(), None);
            assert_eq!(built.totals.elements, want.len() as u64, "{}: element count", dir.display());
            let ident = TraceIdentity::of(&buffer.path, data);
            let path = work.join(format!("{di}-{threads}.tsidx"));
            format::write(&path, &built, &ident, 7).unwrap();
            let f = index::IndexFile::open(&path, &ident, 7).unwrap();
            // A restart point at every fragment's start.
            for fr in &frags {
                assert!((0..f.len()).any(|k| f.checkpoint(k).offset == fr.start), "{}: no checkpoint at {}", dir.display(), fr.start);
            }
            let seeker = Seeker::with_fragments(&plan, data, &frags, &opts, &f);
            let n = want.len() as u64;
            let mut starts: Vec<u64> = (0..f.len().min(60)).map(|k| f.checkpoint(k).elements_before.min(n.saturating_sub(1))).collect();
            starts.extend([0, n / 3, n / 2, n.saturating_sub(1)]);
            for &s in &starts {
                let got: Vec<Element> = seeker.window(s, 20).unwrap().into_iter().map(|(_, e)| e).collect();
                let w = &want[(s as usize).min(want.len())..(s as usize + 20).min(want.len())];
                same(&got, w, &format!("{}: window at element {s}", dir.display()));
                windows += 1;
            }
            // Offsets and addresses are found as a scan finds them.
            for e in want.iter().step_by((want.len() / 5).max(1)) {
                let first = |p: &dyn Fn(&Element) -> bool| want.iter().position(p).map(|i| i as u64);
                assert_eq!(seeker.find(&SeekTarget::Offset(e.index)).unwrap(), first(&|x| x.index >= e.index));
                if let ElementKind::InstrRange { start, .. } = e.kind {
                    let at = first(&|x| matches!(x.kind, ElementKind::InstrRange { start: s, .. } if s == start));
                    assert_eq!(seeker.find(&SeekTarget::Entry(vec![start])).unwrap(), at);
                }
            }
        }
        captures += 1;
    }
    println!("{captures} captures cut into fragments, {windows} windows compared");
    assert!(captures >= 20, "only {captures} captures");
}

fn simpleperf() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/perf/simpleperf");
    p.is_dir().then_some(p)
}

/// The ranges of simpleperf's AutoFDO text: `(start, last)` file offsets
/// and how often each ran.
fn autofdo_ranges(text: &str) -> std::collections::BTreeMap<(u64, u64), u64> {
    let mut lines = text.lines();
    let n: usize = lines.next().unwrap().trim().parse().unwrap();
    lines
        .take(n)
        .map(|l| {
            let (range, count) = l.split_once(':').unwrap();
            let (a, b) = range.split_once('-').unwrap();
            let hex = |s: &str| u64::from_str_radix(s, 16).unwrap();
            ((hex(a), hex(b)), count.parse().unwrap())
        })
        .collect()
}

#[test]
fn simpleperf_etm_decode_executes_what_simpleperf_inject_reports() {
    use tracesight::capture::{Capture, CaptureOptions};
    let Some(dir) = simpleperf() else {
        eprintln!("perf fixtures not found; skipped");
        return;
    };
    let copts = CaptureOptions { symdirs: vec![dir.clone()], ..CaptureOptions::default() };
    let cap = Capture::open(&dir.join("perf_etm.data"), &copts).unwrap();
    let perf = cap.perf.as_ref().unwrap();
    let bin = perf.binaries.iter().find(|b| b.filename.ends_with("/etm_test_loop")).unwrap();
    assert!(bin.found.is_some(), "etm_test_loop found through --symdir");
    let mut opts = cap.opts.clone();
    opts.elements = true;
    let mut got = std::collections::BTreeMap::new();
    let (mut instructions, mut cpus) = (0u64, std::collections::BTreeSet::new());
    run_fragments(&cap.plan, cap.file.bytes(), &cap.fragments, &opts, |ev| {
        if let Event::Element { source, element } = ev {
            if let ElementKind::InstrRange { start, end, count, last_size, .. } = element.kind {
                cpus.insert(source.cpu);
                instructions += count as u64;
                // AutoFDO names a range by the file offsets of its first and last instruction.
                let off = |va: u64| va - bin.addr + bin.pgoff;
                *got.entry((off(start), off(end - last_size as u64))).or_insert(0u64) += 1;
            }
        }
    });
    let want = autofdo_ranges(&std::fs::read_to_string(dir.join("perf_inject.data")).unwrap());
    let want_instr: u64 = want.iter().map(|((a, b), n)| ((b - a) / 4 + 1) * n).sum();
    assert_eq!(want_instr, 944);
    assert_eq!(got, want, "instruction ranges and counts");
    assert_eq!(instructions, 944);
    assert_eq!(cpus.into_iter().collect::<Vec<_>>(), vec![Some(7)]);
}

#[test]
fn perf_data_without_aux_data_opens_with_nothing_to_decode() {
    let Some(dir) = simpleperf() else { return };
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tracesight"))
        .args(["decode", dir.join("perf_with_missing_aux_data.data").to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "exit status {:?}", out.status);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no trace data"), "stderr: {err}");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tracesight"))
        .args(["info", dir.join("perf_with_missing_aux_data.data").to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("no trace data"));
}

#[test]
fn decode_of_perf_etm_lists_cpu_7_with_function_names() {
    let Some(dir) = simpleperf() else { return };
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tracesight"))
        .args(["decode", dir.join("perf_etm.data").to_str().unwrap(), "--symdir", dir.to_str().unwrap(), "--elements-only"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let ranges: Vec<&str> = text.lines().filter(|l| l.contains("INSTR_RANGE")).collect();
    assert!(!ranges.is_empty());
    assert!(ranges.iter().all(|l| l.starts_with("CPU:7; ")), "every range is CPU 7's");
    // JSON lines carry the CPU and the binary of each range.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tracesight"))
        .args(["decode", dir.join("perf_etm.data").to_str().unwrap(), "--symdir", dir.to_str().unwrap(), "--elements-only", "--format", "jsonl", "--cpu", "7"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let range = text.lines().find(|l| l.contains("\"instr_range\"") || l.contains("InstrRange") || l.contains("\"start\"")).unwrap();
    assert!(range.contains("\"cpu\":7"), "{range}");
    // etm_test_loop has no function symbols at all: the binary names the code.
    assert!(range.contains("\"binary\":\"/data/local/tmp/etm_test_loop\""), "{range}");
    let bad = std::process::Command::new(env!("CARGO_BIN_EXE_tracesight"))
        .args(["decode", dir.join("perf_etm.data").to_str().unwrap(), "--cpu", "9"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
}

/// The index of a perf.data starts at its first AUX fragment, not at file
/// offset 0: it must be written, then found valid and reused (it once was
/// refused as "checkpoint 0 is not at the start of the trace", so every
/// seek and the viewer's timeline failed on perf.data).
#[test]
fn index_of_perf_etm_is_written_and_reused() {
    let Some(dir) = simpleperf() else { return };
    let tmp = tmpdir("index-reuse");
    for f in ["perf_etm.data", "etm_test_loop"] {
        std::fs::copy(dir.join(f), tmp.join(f)).unwrap();
    }
    let index = |extra: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_tracesight"))
            .args(["index", tmp.join("perf_etm.data").to_str().unwrap(), "--symdir", tmp.to_str().unwrap()])
            .args(extra)
            .env("XDG_CACHE_HOME", tmp.join("cache"))
            .output()
            .unwrap();
        let (o, e) = (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
        assert!(out.status.success(), "index {extra:?} failed\nstdout:\n{o}\nstderr:\n{e}");
        (o, e)
    };
    let (built, _) = index(&["--rebuild"]);
    assert!(built.contains("944 instructions"), "{built}");
    assert!(built.contains("4 AUX fragments"), "{built}");
    let (again, err) = index(&[]);
    assert!(again.contains("up to date"), "the index was not reused:\n{again}\n{err}");
    assert!(!err.contains("rebuil"), "the index was rebuilt: {err}");
    // A seek goes through the index: element 9 is the first range.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tracesight"))
        .args(["decode", tmp.join("perf_etm.data").to_str().unwrap(), "--symdir", tmp.to_str().unwrap(), "--seek", "9", "--count", "1"])
        .env("XDG_CACHE_HOME", tmp.join("cache"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("exec range=0x582b2b1000:[0x582b2b1008] num_i(2)"), "{text}");
    let _ = std::fs::remove_dir_all(&tmp);
}

/// The files a recording maps but that are not found are named in one
/// warning (simpleperf's recording maps nine; a real one, dozens), the
/// found binary is not among them, and a recording without trace data does
/// not warn about binaries at all.
#[test]
fn missing_binaries_are_one_warning() {
    let Some(dir) = simpleperf() else { return };
    let stderr = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_tracesight")).args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let etm = dir.join("perf_etm.data");
    let etm = etm.to_str().unwrap();
    let without = stderr(&["decode", etm, "--elements-only"]);
    let lines: Vec<&str> = without.lines().filter(|l| l.contains("not found")).collect();
    assert_eq!(lines.len(), 1, "{without}");
    assert!(lines[0].contains("9 mapped files not found") && lines[0].contains("/data/local/tmp/etm_test_loop"), "{}", lines[0]);
    assert!(lines[0].contains("--symdir"), "{}", lines[0]);
    let with = stderr(&["decode", etm, "--elements-only", "--symdir", dir.to_str().unwrap()]);
    let lines: Vec<&str> = with.lines().filter(|l| l.contains("not found")).collect();
    assert_eq!(lines.len(), 1, "{with}");
    assert!(lines[0].contains("8 mapped files not found") && !lines[0].contains("etm_test_loop"), "{}", lines[0]);
    let empty = stderr(&["decode", dir.join("perf_with_missing_aux_data.data").to_str().unwrap()]);
    assert!(!empty.contains("not found"), "{empty}");
}
