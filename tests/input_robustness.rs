//! Hostile snapshot files (issue 15, findings 6, 7 and 8): devices, FIFOs,
//! huge text files, memory dumps that wrap or are shorter than stated. Each
//! ends with a clear message in bounded time and memory, never a hang.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn fixtures() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/opencsd");
    p.is_dir().then_some(p)
}

/// A writable copy of juno_r1_1 (formatted ETMv4 with a kernel dump).
fn scratch(tag: &str) -> Option<PathBuf> {
    let src = fixtures()?.join("juno_r1_1");
    let dst = std::env::temp_dir().join(format!("tracesight-inrob-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dst);
    std::fs::create_dir_all(&dst).unwrap();
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), dst.join(e.file_name())).unwrap();
            let mut perm = std::fs::metadata(dst.join(e.file_name())).unwrap().permissions();
            #[allow(clippy::permissions_set_readonly_false)]
            perm.set_readonly(false);
            std::fs::set_permissions(dst.join(e.file_name()), perm).unwrap();
        }
    }
    Some(dst)
}

/// Run tracesight with a time limit; a run that does not end in time is
/// killed and reported as `None`.
fn run_limited(args: &[&str], limit: Duration) -> Option<(i32, String, String)> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tracesight"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read both pipes while the child runs (a full pipe would block it).
    let drain = |mut r: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = r.read_to_end(&mut s);
            String::from_utf8_lossy(&s).into_owned()
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let t0 = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some((status.code().unwrap_or(-1), out.join().unwrap(), err.join().unwrap()));
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn mkfifo(p: &Path) {
    let _ = std::fs::remove_file(p);
    let ok = Command::new("mkfifo").arg(p).status().unwrap().success();
    assert!(ok, "mkfifo {}", p.display());
}

/// Finding 7: a FIFO as the trace buffer made every command wait forever for
/// a writer; a FIFO as a device file did the same.
#[test]
fn fifos_are_refused_not_waited_on() {
    let Some(dir) = scratch("fifo") else { return };
    let d = dir.to_str().unwrap();
    mkfifo(&dir.join("cstrace.bin"));
    let (code, _, err) = run_limited(&["decode", d], Duration::from_secs(20)).expect("decode of a FIFO trace hung");
    assert_ne!(code, 0);
    assert!(err.contains("FIFO") && err.contains("not a regular file"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);

    let Some(dir) = scratch("fifo-dev") else { return };
    let d = dir.to_str().unwrap();
    mkfifo(&dir.join("device_12.ini"));
    let (code, out, err) = run_limited(&["decode", d], Duration::from_secs(20)).expect("a FIFO device file hung");
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("OCSD_GEN_TRC_ELEM_"));
    assert!(err.contains("device_12.ini") && err.contains("FIFO"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Finding 7: `/dev/zero` as a memory dump was read with no size limit
/// (2 GB, then out of memory). Devices are refused with a warning and the
/// decode goes on without that image.
#[test]
fn a_device_as_memory_dump_is_refused() {
    let Some(dir) = scratch("devzero") else { return };
    let d = dir.to_str().unwrap();
    std::fs::remove_file(dir.join("kernel_dump.bin")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", dir.join("kernel_dump.bin")).unwrap();
    let (code, _, err) = run_limited(&["decode", d], Duration::from_secs(60)).expect("decode with /dev/zero as a dump hung");
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("kernel_dump.bin") && err.contains("device, not a regular file"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Finding 8: a snapshot.ini of 88 MB took 442 MB of memory; text files
/// past 16 MiB are refused with their size.
#[test]
fn huge_snapshot_text_files_are_refused() {
    let Some(dir) = scratch("hugeini") else { return };
    let d = dir.to_str().unwrap();
    let mut text = std::fs::read_to_string(dir.join("snapshot.ini")).unwrap();
    text.push_str(&"; padding comment line of a hostile snapshot file\n".repeat(400_000));
    std::fs::write(dir.join("snapshot.ini"), text).unwrap();
    let (code, _, err) = run_limited(&["decode", d], Duration::from_secs(30)).expect("hung");
    assert_ne!(code, 0);
    assert!(err.contains("snapshot.ini") && err.contains("more than the 16777216 bytes"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Finding 8: duplicate-register detection compared each register with all
/// before it (160,000 registers: 60 s). Now linear, with a limit per device.
#[test]
fn many_registers_parse_in_linear_time() {
    let Some(dir) = scratch("regs") else { return };
    let mut text = std::fs::read_to_string(dir.join("device_12.ini")).unwrap();
    for i in 0..160_000 {
        text.push_str(&format!("REG{i}(0x{i:x})=0x{i:x}\n"));
    }
    std::fs::write(dir.join("device_12.ini"), text).unwrap();
    let t0 = Instant::now();
    let snap = tracesight::input::Snapshot::open(&dir).unwrap();
    let took = t0.elapsed();
    assert!(took < Duration::from_secs(3), "{took:?}");
    let dev = snap.devices.iter().find(|d| d.name == "STM_12").unwrap();
    assert_eq!(dev.regs.len(), tracesight::input::snapshot::MAX_REGISTERS);
    assert!(snap.warnings.iter().any(|w| w.msg.contains("registers; the rest are ignored")));
    // Duplicates are still found (case-insensitively).
    let mut text = std::fs::read_to_string(dir.join("device_6.ini")).unwrap();
    text.push_str("trcidr0(0x078)=0x1\n");
    std::fs::write(dir.join("device_6.ini"), text).unwrap();
    let snap = tracesight::input::Snapshot::open(&dir).unwrap();
    assert!(snap.warnings.iter().any(|w| w.msg.contains("duplicate register trcidr0")), "{:?}", snap.warnings);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Finding 6: a dump whose range wraps past 2^64 was accepted (and read
/// from the wrong bytes); a dump shorter than its stated length was clipped
/// silently. The first is refused, the second mapped with a warning.
#[test]
fn wrapping_and_short_dumps_are_reported() {
    use tracesight::element::MemSpace;
    use tracesight::image::memory::MemoryImage;
    let Some(dir) = scratch("dumps") else { return };
    let dump = dir.join("kernel_dump.bin");
    let size = std::fs::metadata(&dump).unwrap().len();
    let mut m = MemoryImage::new();
    let err = m.add_file(&dump, u64::MAX - 0x1000, None, 0, MemSpace::ANY).unwrap_err().to_string();
    assert!(err.contains("past the top of the address space"), "{err}");
    assert!(m.is_empty());
    let note = m.add_file(&dump, 0x1000, Some(size + 0x100), 0, MemSpace::ANY).unwrap();
    assert!(note.is_some_and(|n| n.contains("fewer than the stated length")));
    let exact = MemoryImage::new().add_file(&dump, 0x1000_0000, Some(size), 0, MemSpace::ANY).unwrap();
    assert!(exact.is_none());

    // The same through a snapshot: both reach the user as warnings.
    let d = dir.to_str().unwrap();
    let cpu = std::fs::read_to_string(dir.join("cpu_0.ini")).unwrap();
    std::fs::write(dir.join("cpu_0.ini"), cpu.replace("length=0x00050000", "length=0x00060000")).unwrap();
    let (code, _, err) = run_limited(&["decode", d], Duration::from_secs(60)).unwrap();
    assert_eq!(code, 0);
    assert!(err.contains("fewer than the stated length"), "{err}");
    std::fs::write(dir.join("cpu_0.ini"), cpu.replace("address=0xFFFFFFC000081000", "address=0xFFFFFFFFFFFF0000")).unwrap();
    let (code, _, err) = run_limited(&["decode", d], Duration::from_secs(60)).unwrap();
    assert_eq!(code, 0);
    assert!(err.contains("past the top of the address space"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
