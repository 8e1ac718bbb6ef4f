//! Make a large capture for index and viewer benchmarks: a copy of a snapshot
//! directory whose default trace buffer is the original repeated until it
//! reaches the requested size (whole copies, as
//! ../shared/fixtures/opencsd/BASELINE.md built its large inputs: each copy of
//! a raw ETE buffer starts at an A-sync and Trace Info, and formatted buffers
//! stay frame-aligned when the original is a multiple of 16 bytes).
//!
//! ```sh
//! cargo run --release --example big_trace -- ../shared/fixtures/opencsd/001-ack_test /tmp/big/ack-1g 1024
//! ```
//! The size is in MiB. The output directory must not exist; it is made
//! outside the repository by the caller's choice of path.

use std::fs;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use tracesight::input::Snapshot;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        eprintln!("usage: big_trace SNAPSHOT_DIR OUT_DIR SIZE_MIB");
        std::process::exit(2);
    }
    if let Err(e) = make(Path::new(&args[1]), Path::new(&args[2]), &args[3]) {
        eprintln!("big_trace: {e}");
        std::process::exit(1);
    }
}

fn make(src: &Path, out: &Path, size: &str) -> Result<(), String> {
    let mib: u64 = size.parse().map_err(|_| format!("'{size}' is not a size in MiB"))?;
    if out.exists() {
        return Err(format!("{}: already exists", out.display()));
    }
    let snap = Snapshot::open(src).map_err(|e| e.to_string())?;
    let buffer = snap.default_buffer().ok_or("the snapshot has no trace buffer")?;
    let one = fs::read(&buffer.path).map_err(|e| format!("{}: {e}", buffer.path.display()))?;
    if one.is_empty() {
        return Err("the trace buffer is empty".into());
    }
    if buffer.format.is_formatted() && one.len() % 16 != 0 {
        return Err("a formatted buffer whose size is not a multiple of 16 cannot be repeated".into());
    }
    copy_tree(src, out, &buffer.path)?;
    let copies = (mib << 20).div_ceil(one.len() as u64).max(1);
    let dest = out.join(buffer.path.file_name().unwrap());
    let mut w = BufWriter::with_capacity(8 << 20, fs::File::create(&dest).map_err(|e| e.to_string())?);
    for _ in 0..copies {
        w.write_all(&one).map_err(|e| format!("{}: {e}", dest.display()))?;
    }
    w.flush().map_err(|e| e.to_string())?;
    println!("{}: {} copies of {} ({} bytes)", out.display(), copies, buffer.path.display(), copies * one.len() as u64);
    Ok(())
}

/// Copy a snapshot directory (memory images in subdirectories included),
/// leaving out the trace buffer, the goldens and any index files.
fn copy_tree(src: &Path, out: &Path, skip: &Path) -> Result<(), String> {
    fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    for e in fs::read_dir(src).map_err(|e| format!("{}: {e}", src.display()))? {
        let e = e.map_err(|e| e.to_string())?;
        let p: PathBuf = e.path();
        let name = e.file_name();
        if p == skip || name == "expected" || p.extension().is_some_and(|x| x == "tsidx") {
            continue;
        }
        if p.is_dir() {
            copy_tree(&p, &out.join(&name), skip)?;
        } else {
            fs::copy(&p, out.join(&name)).map_err(|e| format!("{}: {e}", p.display()))?;
        }
    }
    Ok(())
}
