//! Output files of `decode -o` and `export -o` (issue 15, finding 10): an
//! interrupted run leaves no temporary file, stale temporaries of ours are
//! removed by the next run, and an output naming an input is refused.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

fn fixtures() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/opencsd");
    p.is_dir().then_some(p)
}

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tracesight-outfile-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A writable copy of the files of a fixture snapshot.
fn copy_fixture(name: &str, tag: &str) -> Option<PathBuf> {
    let src = fixtures()?.join(name);
    let dst = scratch(tag);
    for e in std::fs::read_dir(&src).unwrap().flatten() {
        if e.file_type().unwrap().is_file() {
            std::fs::write(dst.join(e.file_name()), std::fs::read(e.path()).unwrap()).unwrap();
        }
    }
    Some(dst)
}

/// An unformatted ETMv4 snapshot of `zeros` zero bytes: every surplus zero
/// is one listing line, so decoding it takes long enough to interrupt.
fn slow_snapshot(tag: &str, zeros: usize) -> Option<PathBuf> {
    let dir = copy_fixture("juno_r1_1", tag)?;
    std::fs::write(
        dir.join("trace.ini"),
        "[trace_buffers]\nbuffers=buffer0\n\n[buffer0]\nname=ETB_0\nfile=cstrace.bin\nformat=source_data\n\n\
         [source_buffers]\nETM_0=ETB_0\n\n[core_trace_sources]\ncpu_0=ETM_0\n",
    )
    .unwrap();
    std::fs::write(dir.join("cstrace.bin"), vec![0u8; zeros]).unwrap();
    Some(dir)
}

fn temporaries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.') && n.contains(".tmp"))
        .collect()
}

fn tracesight(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tracesight")).args(args).output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Start `args`, wait for its temporary file in `dir`, send `signal`, and
/// check that the process died and left neither a temporary nor an output.
fn interrupt(args: &[&str], dir: &Path, out_name: &str, signal: &str) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tracesight"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while temporaries(dir).is_empty() {
        if let Some(st) = child.try_wait().unwrap() {
            panic!("{args:?} ended ({st}) before its temporary file was seen");
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "no temporary file after 60 s");
        std::thread::sleep(Duration::from_millis(5));
    }
    // Let it write some of the output first.
    std::thread::sleep(Duration::from_millis(300));
    assert!(child.try_wait().unwrap().is_none(), "{args:?} finished before the {signal}");
    let ok = Command::new("kill").args([&format!("-{signal}"), &child.id().to_string()]).status().unwrap().success();
    assert!(ok);
    let st = child.wait().unwrap();
    assert!(!st.success(), "{signal}: the run should end unsuccessfully");
    assert_eq!(temporaries(dir), Vec::<String>::new(), "{signal} left a temporary file");
    assert!(!dir.join(out_name).exists(), "{signal}: an incomplete output was renamed into place");
}

#[test]
fn sigint_and_sigterm_during_decode_leave_no_temporary() {
    let Some(snap) = slow_snapshot("dec", 64 << 20) else { return };
    let s = snap.to_str().unwrap();
    for signal in ["INT", "TERM"] {
        let out = scratch(&format!("dec-out-{signal}"));
        let o = out.join("listing.txt");
        interrupt(&["decode", s, "-o", o.to_str().unwrap()], &out, "listing.txt", signal);
        let _ = std::fs::remove_dir_all(&out);
    }
    let _ = std::fs::remove_dir_all(&snap);
}

#[test]
fn sigint_and_sigterm_during_export_leave_no_temporary() {
    let Some(snap) = copy_fixture("juno_r1_1", "exp") else { return };
    // 300 copies of the formatted trace: enough elements to be interrupted.
    let one = std::fs::read(snap.join("cstrace.bin")).unwrap();
    assert_eq!(one.len() % 16, 0, "whole frames");
    std::fs::write(snap.join("cstrace.bin"), one.repeat(300)).unwrap();
    let s = snap.to_str().unwrap();
    let (code, err) = tracesight(&["index", s]);
    assert_eq!(code, 0, "{err}");
    for signal in ["INT", "TERM"] {
        let out = scratch(&format!("exp-out-{signal}"));
        let o = out.join("all.jsonl");
        interrupt(&["export", s, "-o", o.to_str().unwrap()], &out, "all.jsonl", signal);
        let _ = std::fs::remove_dir_all(&out);
    }
    let _ = std::fs::remove_dir_all(&snap);
}

/// Set a file's modification time `age` in the past.
fn age(p: &Path, age: Duration) {
    let f = std::fs::File::options().write(true).open(p).unwrap();
    f.set_modified(SystemTime::now() - age).unwrap();
}

/// A PID that no process has now: a child that has been reaped.
fn dead_pid() -> u32 {
    let mut c = Command::new("true").spawn().unwrap();
    let pid = c.id();
    c.wait().unwrap();
    pid
}

#[test]
fn stale_temporaries_of_ours_are_removed_by_the_next_run() {
    let Some(fix) = fixtures() else { return };
    let snap = fix.join("juno_r1_1");
    let out = scratch("stale");
    let dead = dead_pid();
    let live = std::process::id();
    let hour = Duration::from_secs(3600);
    let files = [
        (format!(".old.txt.tmp-{dead}-0"), hour, false),   // ours, old, process gone: removed
        (format!(".older.txt.tmp{dead}"), hour, false),    // the former decode naming
        (format!(".fresh.txt.tmp-{dead}-1"), Duration::ZERO, true), // too recent
        (format!(".busy.txt.tmp-{live}-0"), hour, true),   // its process runs
        (format!("x.txt.tmp-{dead}-0"), hour, true),       // not our pattern
        (format!(".x.txt.tmp-{dead}-z"), hour, true),      // not our pattern
    ];
    for (name, a, _) in &files {
        std::fs::write(out.join(name), b"partial").unwrap();
        age(&out.join(name), *a);
    }
    let o = out.join("listing.txt");
    let (code, err) = tracesight(&["decode", snap.to_str().unwrap(), "--packets", "-o", o.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(o.is_file());
    for (name, _, kept) in &files {
        assert_eq!(out.join(name).exists(), *kept, "{name}");
    }
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn output_naming_an_input_is_refused() {
    let Some(snap) = copy_fixture("juno_r1_1", "refuse") else { return };
    let s = snap.to_str().unwrap();
    let trace = snap.join("cstrace.bin");
    let before = std::fs::read(&trace).unwrap();
    // The trace under another name (a hard link) counts as the trace.
    let other = std::env::temp_dir().join(format!("tracesight-outfile-link-{}", std::process::id()));
    let _ = std::fs::remove_file(&other);
    std::fs::hard_link(&trace, &other).unwrap();
    for target in [trace.clone(), snap.join("trace.ini"), snap.join("kernel_dump.bin"), other.clone()] {
        let t = target.to_str().unwrap();
        let (code, err) = tracesight(&["decode", s, "-o", t]);
        assert_ne!(code, 0, "decode -o {t}");
        assert!(err.contains("input of the capture"), "{err}");
        let (code, err) = tracesight(&["export", s, "--count", "10", "--format", "jsonl", "-o", t]);
        assert_ne!(code, 0, "export -o {t}");
        assert!(err.contains("input of the capture"), "{err}");
    }
    assert_eq!(std::fs::read(&trace).unwrap(), before, "the trace was changed");
    assert_eq!(temporaries(&snap), Vec::<String>::new());
    let _ = std::fs::remove_file(&other);
    let _ = std::fs::remove_dir_all(&snap);
}
