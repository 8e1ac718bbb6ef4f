//! Output files written under a temporary name beside their destination and
//! renamed into place when complete (`decode -o`, `export -o`, the viewer's
//! exports).
//!
//! An interrupted run must not leave its temporary file behind (they reach
//! hundreds of megabytes; issue 15, finding 10): every temporary file is
//! registered while it exists, and [`remove_on_signals`] removes them all on
//! SIGINT or SIGTERM before the process dies of the signal. Whatever still
//! escapes (SIGKILL, a power cut) is removed by a later run writing into the
//! same directory ([`clean_stale`]): only names of our own pattern, only
//! files untouched for [`STALE_AGE`] whose process is gone.
//!
//! An output that names one of the run's own input files is refused
//! ([`refuse_inputs`]): renaming over the trace would destroy it.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, Once};
use std::time::{Duration, SystemTime};

/// A temporary file older than this whose process is gone is stale. A file
/// being written is touched far more often; the margin covers a writer on
/// another machine sharing the directory, whose PID means nothing here.
pub const STALE_AGE: Duration = Duration::from_secs(10 * 60);

/// Temporary files of this process that exist now.
static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Why an output file could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// Creating the temporary file failed.
    #[error("{}: {error}", path.display())]
    Io { path: PathBuf, #[source] error: io::Error },
    /// The destination has no file name (`/`, `..`).
    #[error("{}: not a file name", .0.display())]
    NotAFile(PathBuf),
    /// The destination is one of the run's input files.
    #[error(
        "{}: this is an input of the capture ({}); writing there would destroy it, choose another output file",
        dest.display(),
        input.display()
    )]
    IsInput { dest: PathBuf, input: PathBuf },
}

/// The temporary name for `dest`: `.NAME.tmp-PID-SERIAL` in the same
/// directory (so the final rename stays within one file system). The serial
/// keeps concurrent outputs of one process (the viewer's exports) apart.
fn temp_path(dest: &Path) -> Result<PathBuf, OutputError> {
    static SERIAL: AtomicU64 = AtomicU64::new(0);
    let name = dest.file_name().ok_or_else(|| OutputError::NotAFile(dest.to_path_buf()))?;
    Ok(dest.with_file_name(format!(
        ".{}.tmp-{}-{}",
        name.to_string_lossy(),
        std::process::id(),
        SERIAL.fetch_add(1, Ordering::Relaxed)
    )))
}

/// The PID in one of our temporary names: `.NAME.tmp-PID-SERIAL`, or
/// `.NAME.tmpPID` as `decode -o` named them before.
fn temp_owner(file_name: &str) -> Option<u32> {
    let rest = file_name.strip_prefix('.')?;
    let (name, tail) = rest.rsplit_once(".tmp")?;
    if name.is_empty() {
        return None;
    }
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    match tail.strip_prefix('-') {
        Some(t) => {
            let (pid, serial) = t.split_once('-')?;
            (digits(pid) && digits(serial)).then(|| pid.parse().ok())?
        }
        None => digits(tail).then(|| tail.parse().ok())?,
    }
}

/// Whether process `pid` exists, or `None` where that cannot be told (no
/// `/proc`), in which case nothing is treated as stale.
fn process_alive(pid: u32) -> Option<bool> {
    let proc = Path::new("/proc");
    if !proc.join("self").exists() {
        return None;
    }
    Some(proc.join(pid.to_string()).exists())
}

/// Remove our stale temporary files from `dir` (see the module comment);
/// returns the paths removed. Errors are ignored: this is housekeeping.
pub fn clean_stale(dir: &Path, min_age: Duration) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else { return removed };
    let now = SystemTime::now();
    // A directory of millions of files is not ours to walk completely.
    for e in entries.flatten().take(100_000) {
        let name = e.file_name();
        let Some(pid) = name.to_str().and_then(temp_owner) else { continue };
        if pid == std::process::id() || process_alive(pid) != Some(false) {
            continue;
        }
        // Not following links: only a regular file of ours is removed.
        let Ok(meta) = fs::symlink_metadata(e.path()) else { continue };
        let old = meta.modified().ok().and_then(|m| now.duration_since(m).ok()).is_some_and(|age| age >= min_age);
        if meta.is_file() && old && fs::remove_file(e.path()).is_ok() {
            removed.push(e.path());
        }
    }
    removed
}

/// Create the temporary file for `dest` (after removing stale ones beside
/// it) and register it for removal on a signal. Pair with [`commit`] or
/// [`discard`].
pub fn create_temp(dest: &Path) -> Result<(PathBuf, File), OutputError> {
    let tmp = temp_path(dest)?;
    let dir = match dest.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    clean_stale(dir, STALE_AGE);
    // Registered before it exists, so a signal in between cannot miss it.
    lock().push(tmp.clone());
    match OpenOptions::new().write(true).create_new(true).open(&tmp) {
        Ok(f) => Ok((tmp, f)),
        Err(error) => {
            forget(&tmp);
            Err(OutputError::Io { path: tmp, error })
        }
    }
}

/// Rename a finished temporary file into place.
pub fn commit(tmp: &Path, dest: &Path) -> io::Result<()> {
    let r = fs::rename(tmp, dest);
    if r.is_ok() {
        forget(tmp);
    }
    r
}

/// Remove an unfinished temporary file.
pub fn discard(tmp: &Path) {
    let _ = fs::remove_file(tmp);
    forget(tmp);
}

fn forget(tmp: &Path) {
    lock().retain(|p| p != tmp);
}

fn lock() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    // A panic elsewhere while holding the lock leaves the list usable.
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// From now on, SIGINT and SIGTERM remove every registered temporary file,
/// then end the process as the signal would have. Call once output files
/// are in play; later calls do nothing.
pub fn remove_on_signals() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        use signal_hook::consts::{SIGINT, SIGTERM};
        die_on_signals(&[SIGINT, SIGTERM], || {});
    });
}

/// On the first of `signals`: run `first` (the viewer gives the terminal
/// back), remove every registered temporary file, then die of the signal so
/// the parent sees what ended the process (a shell reports 128 + signal).
/// One owner per process: the viewer installs this instead of
/// [`remove_on_signals`], whose work it includes.
pub fn die_on_signals(signals: &[i32], first: fn()) {
    let Ok(mut signals) = signal_hook::iterator::Signals::new(signals) else { return };
    let _ = std::thread::Builder::new().name("fatal-signals".into()).spawn(move || {
        if let Some(sig) = signals.forever().next() {
            first();
            for p in lock().drain(..) {
                let _ = fs::remove_file(p);
            }
            let _ = signal_hook::low_level::emulate_default_handler(sig);
            std::process::exit(128 + sig);
        }
    });
}

/// Refuse `dest` when it is the same file as one of `inputs` (compared by
/// device and inode, so other names and hard links are caught).
pub fn refuse_inputs(dest: &Path, inputs: &[PathBuf]) -> Result<(), OutputError> {
    use std::os::unix::fs::MetadataExt;
    let Ok(d) = fs::metadata(dest) else { return Ok(()) };
    for input in inputs {
        if let Ok(m) = fs::metadata(input) {
            if m.dev() == d.dev() && m.ino() == d.ino() {
                return Err(OutputError::IsInput { dest: dest.to_path_buf(), input: input.clone() });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_names_only() {
        assert_eq!(temp_owner(".out.txt.tmp-123-4"), Some(123));
        assert_eq!(temp_owner(".out.txt.tmp77"), Some(77));
        assert_eq!(temp_owner(".a.tmp-1-2.tmp-9-0"), Some(9));
        for n in ["out.txt.tmp-1-2", ".out.txt", ".tmp-1-2", ".x.tmp-", ".x.tmp-1", ".x.tmp-1-", ".x.tmp-a-1", ".x.tmpz", ".x.tmp"] {
            assert_eq!(temp_owner(n), None, "{n}");
        }
    }
}
