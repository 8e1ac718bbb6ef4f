//! `tracesight export` and the export library: each format agrees with
//! `decode` (the OpenCSD lines are the same lines, the JSON objects the same
//! objects), CSV and Perfetto files are well formed, and a failed or cancelled
//! export leaves nothing behind and no existing file changed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tracesight::capture::{Capture, CaptureOptions};
use tracesight::export::{export, ExportError, ExportFormat, ExportRequest};
use tracesight::index::{self, format, IndexOptions, Seeker, TraceIdentity};

#[path = "support/files.rs"]
mod files;
use files::{copy_tree, run_tracesight as tracesight};

fn demo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("assets/demo/snapshot")
}

/// A copy of a fixture capture, when ../shared is there: an export writes
/// the capture's index beside its trace, which must not land in the shared
/// fixtures.
fn fixture(name: &str, tag: &str) -> Option<PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/opencsd").join(name);
    if !src.is_dir() {
        return None;
    }
    let dst = scratch(tag).join(name);
    copy_tree(&src, &dst);
    Some(dst)
}

/// The scratch directory of one test (tests run in parallel).
fn scratch(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("tracesight-export-{tag}-{}", std::process::id()))
}

/// The demo and the fixtures that are present: ETE with timestamps, ETE
/// without, ETMv4 with several trace IDs and decoder messages, PTM, ETMv3.
fn captures(tag: &str) -> Vec<PathBuf> {
    let mut v = vec![demo()];
    let names = ["001-ack_test", "texit-poe2", "juno-ret-stck", "juno_r1_1", "tc2-ptm-rstk-t32", "TC2", "ts_bit64_set"];
    let found: Vec<PathBuf> = names.iter().filter_map(|n| fixture(n, tag)).collect();
    if found.is_empty() {
        eprintln!("../shared/fixtures not found; only the demo is exported");
    }
    v.extend(found);
    v
}

/// An empty directory for a test's output (beside its fixture copies).
fn tmpdir(tag: &str) -> PathBuf {
    let d = scratch(tag).join("out");
    let _ = std::fs::remove_dir_all(scratch(tag));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Export `snap` with `args`; the file's text.
fn export_cli(snap: &Path, out: &Path, args: &[&str]) -> String {
    let mut all = vec!["export", snap.to_str().unwrap(), "-o", out.to_str().unwrap()];
    all.extend_from_slice(args);
    let (ok, _, err) = tracesight(&all);
    assert!(ok, "export {args:?} of {}: {err}", snap.display());
    std::fs::read_to_string(out).unwrap()
}

/// The element lines of `decode --elements-only`: lines with an `Idx:`,
/// without a decoder message glued in front (trc_pkt_lister prints those
/// unterminated).
fn decoded_elements(snap: &Path) -> Vec<String> {
    let (ok, out, err) = tracesight(&["decode", snap.to_str().unwrap(), "--elements-only"]);
    assert!(ok || !out.is_empty(), "{err}");
    out.lines().filter_map(|l| l.rfind("Idx:").map(|i| l[i..].to_string())).collect()
}

/// Files in `dir` (names), to see that nothing was left behind.
fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

#[test]
fn opencsd_export_is_the_same_lines_as_decode() {
    let work = tmpdir("opencsd");
    let out = work.join("out.txt");
    for snap in captures("opencsd") {
        let want = decoded_elements(&snap);
        let n = want.len();
        assert!(n > 10, "{}", snap.display());
        let all: Vec<String> = export_cli(&snap, &out, &[]).lines().map(str::to_string).collect();
        assert_eq!(all, want, "{}: whole trace", snap.display());
        for (from, to) in [(0, 1), (n / 3, n / 3 + 1000), (n / 2, n), (n - 1, n), (n / 4, n / 4)] {
            let to = to.min(n);
            let got = export_cli(&snap, &out, &["--from", &from.to_string(), "--to", &to.to_string(), "--format", "opencsd"]);
            let got: Vec<&str> = got.lines().collect();
            assert_eq!(got, want[from..to], "{}: {from}..{to}", snap.display());
        }
        let got = export_cli(&snap, &out, &["--from", &(n / 5).to_string(), "--count", "77"]);
        assert_eq!(got.lines().collect::<Vec<_>>(), want[n / 5..(n / 5 + 77).min(n)], "{}: --count", snap.display());
    }
    assert_eq!(entries(&work), ["out.txt"], "no temporary file is left");
    let _ = std::fs::remove_dir_all(scratch("opencsd"));
}

#[test]
fn jsonl_export_is_what_decode_seek_prints() {
    let work = tmpdir("jsonl");
    let out = work.join("out.jsonl");
    for snap in captures("jsonl") {
        let from = 5u64;
        let text = export_cli(&snap, &out, &["--from", "5", "--count", "3000"]);
        let mut expect = from;
        for line in text.lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
            assert_eq!(v["number"].as_u64(), Some(expect), "{}: {line}", snap.display());
            assert!(v["type"].is_string() && v["index"].is_u64(), "{line}");
            expect += 1;
        }
        assert!(expect > from, "{}: nothing exported", snap.display());
        // Byte for byte what `decode --seek` prints, symbols included.
        let elf = snap.join("demo");
        let mut seek = vec!["decode", snap.to_str().unwrap(), "--seek", "5", "--count", "3000", "--format", "jsonl"];
        if elf.is_file() {
            seek.extend(["--image", elf.to_str().unwrap()]);
            let with_image = export_cli(&snap, &out, &["--from", "5", "--count", "3000", "--image", elf.to_str().unwrap()]);
            assert!(with_image.contains("\"function\":\""), "the demo's ranges are named");
            let (ok, printed, err) = tracesight(&seek);
            assert!(ok, "{err}");
            assert_eq!(with_image, printed, "{}", snap.display());
        } else {
            let (ok, printed, err) = tracesight(&seek);
            assert!(ok, "{err}");
            assert_eq!(text, printed, "{}", snap.display());
        }
    }
    let _ = std::fs::remove_dir_all(scratch("jsonl"));
}

/// RFC 4180 rows: fields separated by commas, quoted fields may hold commas,
/// doubled quotes and line breaks.
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') => {
                assert!(field.is_empty(), "a quote inside an unquoted field");
                quoted = true;
            }
            (false, ',') => row.push(std::mem::take(&mut field)),
            (false, '\n') => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
            }
            (false, c) => field.push(c),
        }
    }
    assert!(!quoted && field.is_empty() && row.is_empty(), "the file ends with a complete row");
    rows
}

#[test]
fn csv_export_has_a_header_and_one_row_per_element() {
    let work = tmpdir("csv");
    for snap in captures("csv") {
        let want = decoded_elements(&snap);
        let from = want.len() / 3;
        let count = 2500.min(want.len() - from);
        let text = export_cli(&snap, &work.join("out.csv"), &["--from", &from.to_string(), "--count", &count.to_string()]);
        let rows = parse_csv(&text);
        assert_eq!(rows.len(), count + 1, "{}", snap.display());
        let header = &rows[0];
        assert_eq!(header.join(","), tracesight::export::csv::HEADER.trim_end());
        let col = |name: &str| header.iter().position(|h| h == name).unwrap();
        for (i, r) in rows[1..].iter().enumerate() {
            assert_eq!(r.len(), header.len(), "{}: row {i}: {r:?}", snap.display());
            assert_eq!(r[col("number")], (from + i).to_string());
            // The text column is the element part of the OpenCSD line.
            let line = &want[from + i];
            let text = &line[line.find("OCSD_GEN").unwrap()..];
            assert_eq!(r[col("text")], text, "{}", snap.display());
            assert_eq!(format!("Idx:{}; ID:{:x}", r[col("offset")], u64::from_str_radix(&r[col("trace_id")][2..], 16).unwrap()), line[..line.find("; OCSD").unwrap()]);
        }
        if snap == demo() {
            let f = col("function");
            assert!(rows.iter().any(|r| !r[f].is_empty()), "the demo's ELF names functions");
        }
    }
    // Quoting: a field with commas and quotes survives the round trip.
    let mut s = String::new();
    tracesight::export::csv::write_field(&mut s, "f(a, \"b\")");
    s.push('\n');
    assert_eq!(parse_csv(&s), vec![vec!["f(a, \"b\")".to_string()]]);
    let _ = std::fs::remove_dir_all(scratch("csv"));
}

/// Checks a Chrome trace-event file: B/E balanced and nested per track,
/// time never going back on a track, every track named. The names of the
/// slices begun and the time base.
fn check_perfetto(text: &str, what: &str) -> (Vec<String>, String) {
    let v: serde_json::Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{what}: not JSON: {e}"));
    let events = v["traceEvents"].as_array().unwrap_or_else(|| panic!("{what}: no traceEvents"));
    let mut open: HashMap<u64, Vec<(String, f64)>> = HashMap::new();
    let mut last_ts: HashMap<u64, f64> = HashMap::new();
    let mut named = Vec::new();
    let mut names = Vec::new();
    let (mut slices, mut zero_length) = (0usize, 0usize);
    for e in events {
        let tid = e["tid"].as_u64().unwrap();
        assert_eq!(e["pid"], 1, "{what}: {e}");
        let ts = e["ts"].as_f64().unwrap_or_else(|| panic!("{what}: ts: {e}"));
        match e["ph"].as_str().unwrap() {
            "M" => {
                if e["name"] == "thread_name" {
                    named.push(tid);
                }
                continue;
            }
            "B" => {
                assert!(named.contains(&tid), "{what}: track {tid} used before it is named");
                let name = e["name"].as_str().unwrap().to_string();
                names.push(name.clone());
                open.entry(tid).or_default().push((name, ts));
            }
            "E" => {
                let (name, began) = open.get_mut(&tid).and_then(|s| s.pop()).unwrap_or_else(|| panic!("{what}: E without B: {e}"));
                assert!(ts >= began, "{what}: {name} ends before it begins");
                zero_length += (ts == began) as usize;
                slices += 1;
            }
            ph => panic!("{what}: unexpected phase {ph}"),
        }
        let l = last_ts.entry(tid).or_insert(0.0);
        assert!(ts >= *l, "{what}: time goes back on track {tid}: {e}");
        *l = ts;
    }
    for (tid, s) in &open {
        assert!(s.is_empty(), "{what}: {} slices left open on track {tid}", s.len());
    }
    let base = v["otherData"]["time_base"].as_str().unwrap().to_string();
    assert!(v["otherData"]["time_unit"].as_str().is_some_and(|u| u.starts_with("1 ts = 1 ")), "{what}: no time unit");
    // Coarse time used to make nearly every slice zero-length (98% on the
    // demo); events are now spread by instructions between time points.
    if base != "element" && slices >= 100 {
        assert!(zero_length * 20 < slices, "{what}: {zero_length} of {slices} slices have no length");
    }
    (names, base)
}

#[test]
fn perfetto_export_is_balanced_nested_and_monotonic() {
    let work = tmpdir("perfetto");
    let out = work.join("trace.json");
    for snap in captures("perfetto") {
        let what = snap.display().to_string();
        let (names, base) = check_perfetto(&export_cli(&snap, &out, &[]), &what);
        assert!(!names.is_empty(), "{what}: no slices");
        let n = decoded_elements(&snap).len();
        // A range starting inside calls closes what it does not see end.
        let part = export_cli(&snap, &out, &["--from", &(n / 2).to_string(), "--count", "3000"]);
        check_perfetto(&part, &format!("{what} from the middle"));
        let want = match snap.file_name().unwrap().to_str().unwrap() {
            // Cycle counts are preferred to timestamps where both exist.
            "ts_bit64_set" => "timestamp",
            "snapshot" | "TC2" | "texit-poe2" => "cycles",
            _ => "element",
        };
        assert_eq!(base, want, "{what}");
        if snap == demo() {
            for f in ["main", "by_count", "exception 0x02"] {
                assert!(names.iter().any(|n| n == f), "{what}: no slice {f}");
            }
        }
    }
    let _ = std::fs::remove_dir_all(scratch("perfetto"));
}

#[test]
fn failed_exports_leave_nothing_and_keep_existing_files() {
    let snap = demo();
    let work = tmpdir("fail");
    let s = snap.to_str().unwrap();
    // A missing directory: the error names the file, nothing is created.
    let missing = work.join("no/such/dir/out.csv");
    let (ok, _, err) = tracesight(&["export", s, "-o", missing.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains(missing.to_str().unwrap()), "{err}");
    assert!(!work.join("no").exists());
    // An existing file survives exports that fail.
    let keep = work.join("keep.csv");
    std::fs::write(&keep, "precious\n").unwrap();
    for bad in [
        vec!["--from", "999999999999"],
        vec!["--from", "100", "--to", "50"],
        vec!["--from", "bogus:1"],
    ] {
        let mut args = vec!["export", s, "-o", keep.to_str().unwrap()];
        args.extend(bad.iter());
        let out = Command::new(env!("CARGO_BIN_EXE_tracesight")).args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{bad:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(!out.stderr.is_empty(), "{bad:?}: no message");
        assert_eq!(std::fs::read_to_string(&keep).unwrap(), "precious\n", "{bad:?}");
    }
    // Without --format, the extension must say it.
    let (ok, _, err) = tracesight(&["export", s, "-o", work.join("out.bin").to_str().unwrap()]);
    assert!(!ok && err.contains("--format"), "{err}");
    assert_eq!(entries(&work), ["keep.csv"]);
    let _ = std::fs::remove_dir_all(scratch("fail"));
}

/// The demo capture with an index of 1 KiB checkpoints in `dir` (so an export
/// restarts its decode many times), and the seeker over it.
fn demo_with_small_index(dir: &Path) -> (Capture, index::IndexFile) {
    let cap = Capture::open(&demo(), &CaptureOptions::default()).unwrap();
    let data = cap.file.bytes();
    let built = index::build(&cap.plan, data, &cap.opts, &IndexOptions { interval: 1024, ..Default::default() }, &index::BuildProgress::new(), None);
    let ident = TraceIdentity::of(&cap.plan.buffer.path, data);
    let path = dir.join("demo.tsidx");
    format::write(&path, &built, &ident, 7).unwrap();
    let file = index::IndexFile::open(&path, &ident, 7).unwrap();
    (cap, file)
}

#[test]
fn library_export_across_many_checkpoints_and_cancel() {
    let work = tmpdir("lib");
    let (cap, idx) = demo_with_small_index(&work);
    assert!(idx.len() > 1000, "{} checkpoints", idx.len());
    let seeker = Seeker::over_file(&cap.plan, &cap.file, &cap.opts, &idx);
    let total = idx.totals().elements;
    let want = decoded_elements(&demo());
    assert_eq!(want.len() as u64, total);

    // Whole and partial exports, each through many restarts.
    let out = work.join("all.txt");
    let progress = AtomicU64::new(0);
    let never = AtomicBool::new(false);
    for (from, to) in [(0, u64::MAX), (total / 3, total / 3 + 200_000), (total - 10, total + 10)] {
        let req = ExportRequest { from, to, format: ExportFormat::Opencsd, path: out.clone(), speculation: false, keep: None };
        let s = export(&cap, &seeker, &req, &progress, &never).unwrap();
        let text = std::fs::read_to_string(&out).unwrap();
        let end = to.min(total) as usize;
        assert_eq!(s.elements, (end - from as usize) as u64);
        assert_eq!(s.bytes, text.len() as u64);
        assert_eq!(progress.load(Ordering::Relaxed), s.elements);
        assert!(text.lines().eq(want[from as usize..end].iter().map(String::as_str)), "{from}..{to}");
    }
    std::fs::remove_file(&out).unwrap();

    // Cancelled before it starts, and from another thread while it runs:
    // the error says so, no temporary file stays, an existing file is kept.
    let dest = work.join("trace.json");
    std::fs::write(&dest, "old").unwrap();
    for format in ExportFormat::ALL {
        let req = ExportRequest { from: 0, to: total, format, path: dest.clone(), speculation: false, keep: None };
        let cancel = AtomicBool::new(true);
        assert!(matches!(export(&cap, &seeker, &req, &progress, &cancel), Err(ExportError::Cancelled)), "{format}");
        let cancel = AtomicBool::new(false);
        let progress = AtomicU64::new(0);
        let done = AtomicBool::new(false);
        // A capture holds symbol caches that are not shared between threads,
        // so the export runs here and the watcher (a viewer's UI) elsewhere.
        let r = std::thread::scope(|sc| {
            sc.spawn(|| {
                while progress.load(Ordering::Relaxed) == 0 && !done.load(Ordering::Relaxed) {
                    std::thread::yield_now();
                }
                cancel.store(true, Ordering::Relaxed);
            });
            let r = export(&cap, &seeker, &req, &progress, &cancel);
            done.store(true, Ordering::Relaxed);
            r
        });
        assert!(matches!(r, Err(ExportError::Cancelled)), "{format}: {r:?}");
        let p = progress.load(Ordering::Relaxed);
        assert!(p > 0 && p < total, "{format}: progress {p}");
        assert_eq!(std::fs::read_to_string(&dest).unwrap(), "old", "{format}");
        assert_eq!(entries(&work), ["demo.tsidx", "trace.json"], "{format}");
    }

    // A destination whose directory is missing: an I/O error naming it.
    let req = ExportRequest { from: 0, to: 10, format: ExportFormat::Csv, path: work.join("gone/x.csv"), speculation: false, keep: None };
    let e = export(&cap, &seeker, &req, &progress, &never).unwrap_err();
    assert!(matches!(e, ExportError::Io { .. }) && e.to_string().contains("gone/x.csv"), "{e}");
    let req = ExportRequest { from: 10, to: 5, format: ExportFormat::Csv, path: work.join("x.csv"), speculation: false, keep: None };
    assert!(matches!(export(&cap, &seeker, &req, &progress, &never), Err(ExportError::BadRange { .. })));
    assert_eq!(entries(&work), ["demo.tsidx", "trace.json"]);
    let _ = std::fs::remove_dir_all(scratch("lib"));
}

#[test]
fn formats_have_names_and_extensions() {
    for f in ExportFormat::ALL {
        assert_eq!(f.name().parse::<ExportFormat>().unwrap(), f);
        assert_eq!(ExportFormat::from_path(Path::new(&format!("x.{}", f.extension()))), Some(f));
    }
    assert!("xml".parse::<ExportFormat>().is_err());
}

/// `export --speculation` (and an export from the viewer's speculation view)
/// keeps the view's records: every record `decode --speculation` prints that
/// is not a plain commit, in its place among the elements; in the middle of
/// the trace only those before the range's elements, none after it.
#[test]
fn speculation_exports_keep_the_views_records() {
    let work = tmpdir("spec");
    let snap = demo();
    let (ok, out, err) = tracesight(&["decode", snap.to_str().unwrap(), "--elements-only", "--speculation"]);
    assert!(ok, "{err}");
    let want: Vec<String> = out
        .lines()
        // A record names two offsets: it starts at the first.
        .filter_map(|l| if l.contains("SPECULATION(") { l.find("Idx:") } else { l.rfind("Idx:") }.map(|i| l[i..].to_string()))
        .filter(|l| !(l.contains("SPECULATION(") && (l.contains(" committed at ") || l.ends_with(" committed)"))))
        .collect();
    let spec = want.iter().filter(|l| l.contains("SPECULATION(")).count();
    assert!(spec > 100, "the demo has {spec} speculation records that did not commit");
    let got = export_cli(&snap, &work.join("all.txt"), &["--speculation"]);
    let got: Vec<&str> = got.lines().collect();
    assert_eq!(got.len(), want.len(), "records and elements of the whole trace");
    assert!(got.iter().zip(&want).all(|(a, b)| a == b), "first difference: {:?}", got.iter().zip(&want).find(|(a, b)| a != b));
    // Without the flag: elements only.
    let plain = export_cli(&snap, &work.join("plain.txt"), &[]);
    assert!(!plain.contains("SPECULATION("));
    // A range: the records before its elements, as JSON lines.
    let part = export_cli(&snap, &work.join("part.jsonl"), &["--speculation", "--from", "1000", "--count", "2000"]);
    let lines: Vec<serde_json::Value> = part.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let elements = lines.iter().filter(|v| v["type"] != "speculation").count();
    assert_eq!(elements, 2000);
    assert!(lines.iter().any(|v| v["type"] == "speculation"));
    assert_ne!(lines.last().unwrap()["type"], "speculation", "a record after the range's last element");
    let _ = std::fs::remove_dir_all(scratch("spec"));
}
