//! The index: a seek from any checkpoint gives exactly what a decode from the
//! start gives, on every fixture capture (all protocols), and a stale,
//! truncated, corrupt or foreign index file is detected and rebuilt.

use std::path::{Path, PathBuf};
use std::process::Command;

use tracesight::element::{Element, ElementKind};
use tracesight::index::{self, format, IndexOptions, SeekTarget, Seeker, TraceIdentity};
use tracesight::input::Snapshot;
use tracesight::session::{run, BufferPlan, RunOptions};

fn fixtures() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/opencsd");
    p.is_dir().then_some(p)
}

/// xorshift64*: reproducible positions without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

fn full_decode(plan: &BufferPlan, data: &[u8], opts: &RunOptions) -> Vec<Element> {
    let mut v = Vec::new();
    run(plan, data, opts, |ev| {
        if let tracesight::session::Event::Element { element, .. } = ev {
            v.push(*element);
        }
    })
    .unwrap();
    v
}

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tracesight-index-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn random_seeks_equal_the_full_decode_on_every_fixture() {
    let Some(root) = fixtures() else {
        eprintln!("fixtures not found; skipped");
        return;
    };
    let work = tmpdir("seek");
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root).unwrap().filter_map(|e| Some(e.ok()?.path())).collect();
    dirs.sort();
    let (mut captures, mut seeks, mut multi_checkpoint) = (0, 0, 0);
    for dir in dirs {
        let Ok(snap) = Snapshot::open(&dir) else { continue };
        let Some(buffer) = snap.default_buffer().cloned() else { continue };
        let Ok(plan) = BufferPlan::new(&snap, &buffer) else { continue };
        if !plan.sources.iter().any(|s| s.kind.is_decoded()) {
            continue;
        }
        let Ok(file) = plan.open() else { continue };
        let data = file.bytes();
        let opts = index::index_run_options(&RunOptions::default());
        let full = full_decode(&plan, data, &opts);
        // Small checkpoint spacing so that even the small captures have many.
        let built = index::build(&plan, data, &opts, &IndexOptions { interval: 1024, ..IndexOptions::default() }, &index::BuildProgress::new(), None);
        assert_eq!(built.totals.elements, full.len() as u64, "{}: element count", dir.display());
        let ident = TraceIdentity::of(&buffer.path, data);
        let path = work.join(format!("{}.tsidx", dir.file_name().unwrap().to_string_lossy()));
        format::write(&path, &built, &ident, 7).unwrap();
        let f = index::IndexFile::open(&path, &ident, 7).unwrap();
        if f.len() > 1 {
            multi_checkpoint += 1;
        }
        let seeker = Seeker::new(&plan, data, &opts, &f);
        let n = full.len() as u64;
        let mut starts: Vec<u64> = (0..12).map(|_| rng.below(n)).collect();
        starts.extend([0, n.saturating_sub(1)]);
        // Exactly at each checkpoint, where a restart is most delicate.
        for k in 0..f.len().min(40) {
            starts.push(f.checkpoint(k).elements_before.min(n.saturating_sub(1)));
        }
        for &s in &starts {
            let got: Vec<Element> = seeker.window(s, 25).unwrap().into_iter().map(|(_, e)| e).collect();
            let want = &full[(s as usize).min(full.len())..(s as usize + 25).min(full.len())];
            assert_eq!(got, want, "{}: window at element {s}", dir.display());
            seeks += 1;
        }
        // Searches agree with a scan of the full decode.
        let first = |p: &dyn Fn(&Element) -> bool| full.iter().position(p).map(|i| i as u64);
        let mut targets = Vec::new();
        for _ in 0..4 {
            let e = full[rng.below(n) as usize];
            if let Some(t) = e.time.timestamp {
                targets.push(SeekTarget::Timestamp(t));
            }
            if e.time.total_cycles > 0 {
                targets.push(SeekTarget::Cycles(e.time.total_cycles));
            }
            targets.push(SeekTarget::Offset(e.index));
            targets.push(SeekTarget::Offset(e.index + 1));
            if let ElementKind::InstrRange { start, end, .. } = e.kind {
                targets.push(SeekTarget::Address(start + (end - start) / 2));
                targets.push(SeekTarget::Entry(vec![start]));
            }
            targets.push(SeekTarget::Instruction(rng.below(built.totals.instructions + 1)));
        }
        for t in &targets {
            let want = match t {
                SeekTarget::Timestamp(v) => first(&|e| e.time.timestamp.is_some_and(|x| x >= *v)),
                SeekTarget::Cycles(v) => first(&|e| e.time.total_cycles >= *v),
                SeekTarget::Offset(v) => first(&|e| e.index >= *v),
                SeekTarget::Address(a) => {
                    first(&|e| matches!(e.kind, ElementKind::InstrRange { start, end, .. } if start <= *a && *a < end))
                }
                SeekTarget::Entry(s) => first(&|e| matches!(e.kind, ElementKind::InstrRange { start, .. } if s.contains(&start))),
                SeekTarget::Instruction(i) => {
                    let mut acc = 0u64;
                    full.iter()
                        .position(|e| {
                            acc += match e.kind {
                                ElementKind::InstrRange { count, .. } | ElementKind::RangeNoPath { count, .. } => {
                                    count as u64
                                }
                                _ => 0,
                            };
                            acc > *i
                        })
                        .map(|p| p as u64)
                }
                SeekTarget::Element(_) => unreachable!(),
            };
            assert_eq!(seeker.find(t).unwrap(), want, "{}: find {t:?}", dir.display());
        }
        captures += 1;
    }
    println!("{captures} captures, {seeks} windows compared, {multi_checkpoint} with several checkpoints");
    assert!(captures >= 30, "only {captures} fixture captures were decodable");
    assert!(multi_checkpoint >= 10, "only {multi_checkpoint} captures had more than one checkpoint");
    let _ = std::fs::remove_dir_all(&work);
}

/// A copy of a fixture snapshot in a scratch directory (indexes are written
/// beside the trace, never into ../shared).
fn scratch_snapshot(name: &str, tag: &str) -> Option<PathBuf> {
    let src = fixtures()?.join(name);
    let dst = tmpdir(tag).join(name);
    std::fs::create_dir_all(&dst).unwrap();
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        // An index someone built beside the fixture is not copied: the
        // tests look for the one their own run writes.
        let index = e.path().extension().is_some_and(|x| x == "tsidx");
        if e.file_type().unwrap().is_file() && !index {
            std::fs::copy(e.path(), dst.join(e.file_name())).unwrap();
        }
    }
    Some(dst)
}

fn tracesight(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tracesight")).args(args).output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn cli_seek_prints_the_same_lines_as_the_full_listing() {
    let Some(snap) = scratch_snapshot("juno_r1_1", "cli") else { return };
    let s = snap.to_str().unwrap();
    let (ok, full, err) = tracesight(&["decode", s, "--elements-only"]);
    assert!(ok, "{err}");
    let lines: Vec<&str> = full.lines().filter(|l| l.contains("OCSD_GEN_TRC_ELEM_")).collect();
    assert!(lines.len() > 10_000);
    for (n, k) in [(0usize, 5usize), (1, 50), (4321, 100), (lines.len() - 3, 3)] {
        let (ok, got, err) = tracesight(&["decode", s, "--seek", &n.to_string(), "--count", &k.to_string()]);
        assert!(ok, "{err}");
        let want = lines[n..n + k].join("\n") + "\n";
        assert_eq!(got, want, "--seek {n} --count {k}");
    }
    // Byte offsets and addresses, against the listing itself.
    let idx_of = |l: &str| l.strip_prefix("Idx:").and_then(|r| r.split(';').next()).unwrap().parse::<u64>().unwrap();
    let target = idx_of(lines[9000]);
    let (ok, got, _) = tracesight(&["decode", s, "--seek", &format!("off:{target}"), "--count", "1"]);
    let want = lines.iter().find(|l| idx_of(l) >= target).unwrap();
    assert!(ok);
    assert_eq!(got.trim_end(), *want);
    // The next execution of an address in the middle of a range seen late in
    // the trace: the first range (from the start) that covers it.
    let range_of = |l: &str| -> Option<(u64, u64)> {
        let r = l.split("exec range=0x").nth(1)?;
        let (a, rest) = r.split_once(":[0x")?;
        let b = rest.split(']').next()?;
        Some((u64::from_str_radix(a, 16).ok()?, u64::from_str_radix(b, 16).ok()?))
    };
    let (a, b) = lines[12000..].iter().find_map(|l| range_of(l).filter(|(a, b)| b - a >= 8)).unwrap();
    let addr = a + (b - a) / 2;
    let want = lines.iter().find(|l| range_of(l).is_some_and(|(x, y)| x <= addr && addr < y)).unwrap();
    let (ok, got, err) = tracesight(&["decode", s, "--seek", &format!("addr:{addr:x}"), "--count", "1"]);
    assert!(ok, "{err}");
    assert_eq!(got.trim_end(), *want);
    let (ok, _, err) = tracesight(&["decode", s, "--seek", "addr:0x4", "--count", "1"]);
    assert!(!ok && err.contains("no element there"), "{err}");
    let (ok, _, err) = tracesight(&["decode", s, "--seek", "fn:main"]);
    assert!(!ok && err.contains("--image"), "{err}");
    let (ok, _, err) = tracesight(&["decode", s, "--seek", "bogus:1"]);
    assert!(!ok && err.contains("expected an element number"), "{err}");
    let _ = std::fs::remove_dir_all(snap.parent().unwrap());
}

fn index_file(snap: &Path) -> PathBuf {
    std::fs::read_dir(snap)
        .unwrap()
        .filter_map(|e| Some(e.ok()?.path()))
        .find(|p| p.extension().is_some_and(|x| x == "tsidx"))
        .expect("an index file beside the trace")
}

#[test]
fn stale_truncated_corrupt_and_foreign_indexes_are_rebuilt() {
    let Some(snap) = scratch_snapshot("juno_r1_1", "stale") else { return };
    let s = snap.to_str().unwrap();
    let (ok, out, err) = tracesight(&["index", s, "--interval-kib", "4"]);
    assert!(ok && out.contains("built in") && out.contains("16 checkpoints"), "{out}{err}");
    let (ok, out, _) = tracesight(&["index", s, "--interval-kib", "4"]);
    assert!(ok && out.contains("up to date"), "{out}");
    let (_, reference, _) = tracesight(&["decode", s, "--seek", "7000", "--count", "40"]);
    let idx = index_file(&snap);
    let good = std::fs::read(&idx).unwrap();

    let check = |what: &str, expect: &str| {
        let (ok, out, err) = tracesight(&["index", s, "--interval-kib", "4"]);
        assert!(ok, "{what}: {err}");
        assert!(out.contains("rejected") && out.contains(expect) && out.contains("built in"), "{what}: {out}");
        let (_, again, _) = tracesight(&["decode", s, "--seek", "7000", "--count", "40"]);
        assert_eq!(again, reference, "{what}: seek after the rebuild");
    };
    // Truncated.
    std::fs::write(&idx, &good[..good.len() - 100]).unwrap();
    check("truncated", "truncated");
    // A flipped byte in the records.
    let mut bad = good.clone();
    bad[200] ^= 0x40;
    std::fs::write(&idx, &bad).unwrap();
    check("corrupt records", "corrupt");
    // A foreign file under the index's name.
    std::fs::write(&idx, "not an index at all, only text long enough to fill a header. ".repeat(4)).unwrap();
    check("foreign", "bad magic");
    // The trace changed (same size, other bytes): the index is stale.
    let trace = snap.join("cstrace.bin");
    let mut t = std::fs::read(&trace).unwrap();
    std::fs::write(&idx, &good).unwrap();
    let (ok, out, _) = tracesight(&["index", s, "--interval-kib", "4"]);
    assert!(ok && out.contains("up to date"), "{out}");
    t[10] ^= 0xff;
    std::fs::write(&trace, &t).unwrap();
    let (ok, out, err) = tracesight(&["index", s, "--interval-kib", "4"]);
    assert!(ok && out.contains("trace file changed") && out.contains("built in"), "{out}{err}");
    // A corrupt saved state is caught when a seek uses it: the seek fails
    // with a message naming the checkpoint, never with wrong output.
    let good = std::fs::read(&idx).unwrap();
    let mut bad = good.clone();
    let last = bad.len() - 10;
    bad[last] ^= 0x01;
    std::fs::write(&idx, &bad).unwrap();
    let (ok, _, err) = tracesight(&["decode", s, "--seek", "15000", "--count", "1"]);
    assert!(!ok && err.contains("checkpoint"), "{err}");
    let (ok, out, _) = tracesight(&["index", s, "--rebuild", "--interval-kib", "4"]);
    assert!(ok && out.contains("built in"), "{out}");
    let _ = std::fs::remove_dir_all(snap.parent().unwrap());
}

/// perf.data captures: a seek over the AUX fragments (each decoded from
/// fresh decoders) gives what decoding them one after the other gives, and
/// `decode --seek` on a perf.data prints the same elements as the listing.
#[test]
fn random_seeks_equal_the_full_decode_on_perf_data() {
    use tracesight::capture::{Capture, CaptureOptions};
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/perf");
    if !root.is_dir() {
        eprintln!("perf fixtures not found; skipped");
        return;
    }
    let work = tmpdir("perf");
    let mut rng = Rng(0x5e_ed0f_9e37);
    let mut files = Vec::new();
    for d in std::fs::read_dir(&root).unwrap().flatten() {
        if d.path().is_dir() {
            files.extend(std::fs::read_dir(d.path()).unwrap().flatten().map(|e| e.path()));
        }
    }
    files.sort();
    let mut captures = 0;
    for path in files.iter().filter(|p| tracesight::capture::perf::is_perf_data(p)) {
        let copts = CaptureOptions { symdirs: vec![path.parent().unwrap().to_path_buf()], ..CaptureOptions::default() };
        let cap = Capture::open(path, &copts).unwrap();
        let data = cap.file.bytes();
        let opts = index::index_run_options(&cap.opts);
        let mut full = Vec::new();
        tracesight::session::run_fragments(&cap.plan, data, &cap.fragments, &opts, |ev| {
            if let tracesight::session::Event::Element { element, .. } = ev {
                full.push(*element);
            }
        });
        if full.is_empty() {
            // perf_with_missing_aux_data.data: nothing recorded to seek in.
            assert!(cap.fragments.is_empty(), "{}: fragments but no elements", path.display());
            continue;
        }
        for threads in [1, 2] {
            let iopts = IndexOptions { interval: 1024, threads, part: 0, ..Default::default() };
            let built = index::build_fragments(&cap.plan, data, &cap.fragments, &opts, &iopts, &index::BuildProgress::new(), None);
            assert_eq!(built.totals.elements, full.len() as u64, "{}: element count", path.display());
            let ident = TraceIdentity::of(path, data);
            let ipath = work.join(format!("{captures}-{threads}.tsidx"));
            format::write(&ipath, &built, &ident, 7).unwrap();
            let f = index::IndexFile::open(&ipath, &ident, 7).unwrap();
            assert!(f.len() >= cap.fragments.len(), "a restart point per fragment at least");
            let seeker = Seeker::with_fragments(&cap.plan, data, &cap.fragments, &opts, &f);
            let n = full.len() as u64;
            let mut starts: Vec<u64> = (0..20).map(|_| rng.below(n)).collect();
            starts.extend((0..f.len()).map(|k| f.checkpoint(k).elements_before.min(n - 1)));
            starts.extend([0, n - 1]);
            for &s in &starts {
                let got: Vec<Element> = seeker.window(s, 25).unwrap().into_iter().map(|(_, e)| e).collect();
                assert_eq!(got, full[s as usize..(s as usize + 25).min(full.len())], "{}: window at {s}", path.display());
            }
            let first = |p: &dyn Fn(&Element) -> bool| full.iter().position(p).map(|i| i as u64);
            for _ in 0..10 {
                let e = full[rng.below(n) as usize];
                assert_eq!(seeker.find(&SeekTarget::Offset(e.index)).unwrap(), first(&|x| x.index >= e.index));
                if let ElementKind::InstrRange { start, end, .. } = e.kind {
                    let a = start + (end - start) / 2;
                    let want = first(&|x| matches!(x.kind, ElementKind::InstrRange { start, end, .. } if start <= a && a < end));
                    assert_eq!(seeker.find(&SeekTarget::Address(a)).unwrap(), want);
                }
                if let Some(t) = e.time.timestamp {
                    let want = first(&|x| x.time.timestamp.is_some_and(|v| v >= t));
                    assert_eq!(seeker.find(&SeekTarget::Timestamp(t)).unwrap(), want);
                }
            }
        }
        // The command line's seek prints the listing's lines from there.
        let symdir = path.parent().unwrap().to_str().unwrap();
        let p = path.to_str().unwrap();
        let copy = work.join(path.file_name().unwrap());
        std::fs::copy(path, &copy).unwrap();
        let c = copy.to_str().unwrap();
        let (ok, all, _) = tracesight(&["decode", p, "--symdir", symdir, "--elements-only"]);
        assert!(ok);
        let listed: Vec<&str> = all.lines().filter(|l| l.starts_with("CPU:")).collect();
        let at = (listed.len() / 2) as u64;
        let (ok, sought, err) = tracesight(&["decode", c, "--symdir", symdir, "--seek", &at.to_string(), "--count", "5"]);
        assert!(ok, "{err}");
        let sought: Vec<&str> = sought.lines().collect();
        assert_eq!(sought, listed[at as usize..at as usize + 5], "{}: decode --seek {at}", path.display());
        captures += 1;
    }
    assert!(captures >= 1, "no perf.data with trace data");
}

/// Issue 15, finding 5: a trace that keeps speculation open (TRCIDR8.MAXSPEC
/// 2^32 - 1, 60,000 atoms between commits) made every checkpoint save the
/// whole speculation window: 128 MiB of it built a 555 MB index with 1.8 GB
/// resident. The states of the index now add up to at most a quarter of the
/// trace (plus 64 KiB per checkpoint), and seeks still give exactly the
/// decode from the start.
#[test]
fn open_speculation_keeps_the_saved_states_bounded() {
    let dir = tmpdir("openspec");
    let ini = |name: &str, text: &str| std::fs::write(dir.join(name), text).unwrap();
    ini("snapshot.ini", "[snapshot]\nversion=1.0\n\n[device_list]\ndevice0=cpu_0.ini\ndevice1=ETE_0.ini\n\n[trace]\nmetadata=trace.ini\n");
    ini(
        "trace.ini",
        "[trace_buffers]\nbuffers=buffer0\n\n[buffer0]\nname=ETB_0\nfile=trace.bin\nformat=source_data\n\n\
         [source_buffers]\nETE_0=ETB_0\n\n[core_trace_sources]\ncpu_0=ETE_0\n",
    );
    ini(
        "ETE_0.ini",
        "[device]\nname=ETE_0\nclass=trace_source\ntype=ETE\n\n[regs]\nTRCCONFIGR=0x1\nTRCTRACEIDR=0x10\n\
         TRCDEVARCH=0x47715a13\nTRCIDR0=0x28000ea1\nTRCIDR1=0x4100fff0\nTRCIDR2=0x10001088\nTRCIDR8=0xFFFFFFFF\n",
    );
    ini("cpu_0.ini", "[device]\nname=cpu_0\nclass=core\ntype=ARM-AA64\n\n[dump1]\nfile=code.bin\naddress=0x1000\nlength=0x4\n");
    // `b .` at 0x1000: every E atom is one instruction.
    std::fs::write(dir.join("code.bin"), 0x1400_0000u32.to_le_bytes()).unwrap();
    // A-sync, Trace Info, address 0x1000, AArch64 EL0 context, 60,000 E
    // atoms, then one Commit of all of them; again and again.
    let mut unit = vec![0u8; 11];
    unit.extend_from_slice(&[0x80, 0x01, 0x00, 0x9d, 0x00, 0x08, 0, 0, 0, 0, 0, 0, 0x81, 0x10]);
    unit.extend(std::iter::repeat_n(0xf7, 60_000));
    unit.extend_from_slice(&[0x2d, 0xe0, 0xd4, 0x03]);
    let trace: Vec<u8> = unit.repeat((3 << 20) / unit.len() + 1);
    std::fs::write(dir.join("trace.bin"), &trace).unwrap();

    let snap = Snapshot::open(&dir).unwrap();
    let buffer = snap.default_buffer().unwrap().clone();
    let plan = BufferPlan::new(&snap, &buffer).unwrap();
    let file = plan.open().unwrap();
    let data = file.bytes();
    let opts = index::index_run_options(&RunOptions::default());
    let work = tmpdir("openspec-idx");
    let mut reference: Option<format::IndexData> = None;
    for (threads, interval, part) in [(1, 64 << 10, 0), (2, 64 << 10, 1 << 20), (1, 256 << 10, 0)] {
        let iopts = IndexOptions { interval, threads, part, ..IndexOptions::default() };
        let built = index::build(&plan, data, &opts, &iopts, &index::BuildProgress::new(), None);
        let states = built.states.total_len();
        let bound = data.len() as u64 / 4 + built.checkpoints.len() as u64 * (64 << 10);
        assert!(states <= bound, "{threads} threads, interval {interval}: {states} bytes of states > {bound}");
        assert!(built.totals.elements >= 3_000_000, "only {} elements decoded", built.totals.elements);
        if interval == 64 << 10 {
            match &reference {
                None => reference = Some(built),
                Some(r) => {
                    assert_eq!(r.checkpoints, built.checkpoints, "parallel build: checkpoints");
                    assert!(r.states == built.states, "parallel build: states");
                }
            }
            continue;
        }
        // Seeks at every checkpoint and in between equal the decode from the
        // start, which is streamed (millions of elements) and kept only at
        // the positions compared.
        let ident = TraceIdentity::of(&buffer.path, data);
        let path = work.join("openspec.tsidx");
        format::write(&path, &built, &ident, 3).unwrap();
        let f = index::IndexFile::open(&path, &ident, 3).unwrap();
        let n = built.totals.elements;
        let mut rng = Rng(0x5eed);
        let mut starts: Vec<u64> = (0..f.len()).map(|k| f.checkpoint(k).elements_before.min(n - 1)).collect();
        starts.extend((0..8).map(|_| rng.below(n)));
        let wanted: std::collections::BTreeSet<u64> = starts.iter().flat_map(|&s| s..(s + 5).min(n)).collect();
        let mut kept = std::collections::BTreeMap::new();
        let mut i = 0u64;
        run(&plan, data, &opts, |ev| {
            if let tracesight::session::Event::Element { element, .. } = ev {
                if wanted.contains(&i) {
                    kept.insert(i, *element);
                }
                i += 1;
            }
        })
        .unwrap();
        assert_eq!(i, n, "element count of the full decode");
        let seeker = Seeker::new(&plan, data, &opts, &f);
        for &s in &starts {
            let got: Vec<Element> = seeker.window(s, 5).unwrap().into_iter().map(|(_, e)| e).collect();
            let want: Vec<Element> = (s..(s + 5).min(n)).map(|k| kept[&k]).collect();
            assert_eq!(got, want, "window at element {s}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&work);
}

/// Issue 14: the same capture opened by another spelling of its path rebuilt
/// its index (the fingerprint hashed the memory dumps' path text).
#[test]
fn another_spelling_of_the_capture_path_reuses_its_index() {
    let Some(snap) = scratch_snapshot("juno_r1_1", "spelling") else { return };
    let parent = snap.parent().unwrap();
    let name = snap.file_name().unwrap().to_string_lossy().into_owned();
    let link = parent.join("link");
    std::os::unix::fs::symlink(&snap, &link).unwrap();
    let (ok, out, err) = tracesight(&["index", snap.to_str().unwrap()]);
    assert!(ok && out.contains("built in"), "{out}{err}");
    let dotted = parent.join(".").join("..").join(parent.file_name().unwrap()).join(&name);
    for other in [dotted, link] {
        let (ok, out, err) = tracesight(&["index", other.to_str().unwrap()]);
        assert!(ok && out.contains("up to date"), "{}: {out}{err}", other.display());
    }
    let _ = std::fs::remove_dir_all(parent);
}
