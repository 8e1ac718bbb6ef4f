//! Reading trace captures: OpenCSD/DS-5 snapshot directories and trace
//! buffer files.
//!
//! * [`ini`]: the ini dialect of snapshot files.
//! * [`snapshot`]: `snapshot.ini`, device files and `trace.ini` as a model.
//! * [`trace_file`]: memory-mapped trace buffers.
//! * [`perf`]: perf.data files recorded with the `cs_etm` PMU.

pub mod ini;
pub mod perf;
pub mod snapshot;
pub mod trace_file;

use std::fmt;
use std::io;
use std::path::PathBuf;

pub use snapshot::{
    BufferFormat, Device, DumpRegion, Register, SetupWarning, Snapshot, TraceBuffer,
};
pub use trace_file::TraceFile;

/// Everything that can go wrong reading a capture.
#[derive(Debug)]
pub enum InputError {
    /// A file that is required does not exist.
    MissingFile { path: PathBuf, needed_by: String },
    /// A file exists but could not be read or mapped.
    Io { path: PathBuf, source: io::Error },
    /// A file is not usable ini (`line` is 1-based, 0 when not tied to a line).
    BadIni {
        path: PathBuf,
        line: usize,
        msg: String,
    },
    /// A required key is absent.
    MissingKey {
        path: PathBuf,
        section: String,
        key: String,
    },
    /// A trace buffer name that the snapshot does not define.
    UnknownBuffer { name: String, known: Vec<String> },
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InputError::MissingFile { path, needed_by } => {
                write!(
                    f,
                    "{}: file not found (needed by {needed_by})",
                    path.display()
                )
            }
            InputError::Io { path, source } => write!(f, "{}: {source}", path.display()),
            InputError::BadIni { path, line, msg } => {
                if *line > 0 {
                    write!(f, "{}:{line}: {msg}", path.display())
                } else {
                    write!(f, "{}: {msg}", path.display())
                }
            }
            InputError::MissingKey { path, section, key } => write!(
                f,
                "{}: section [{section}] has no '{key}=' entry",
                path.display()
            ),
            InputError::UnknownBuffer { name, known } => {
                write!(f, "unknown trace buffer '{name}'; ")?;
                if known.is_empty() {
                    write!(f, "the snapshot defines no trace buffers")
                } else {
                    write!(f, "expected one of: {}", known.join(", "))
                }
            }
        }
    }
}

impl std::error::Error for InputError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            InputError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Read a whole (small) text file such as an ini file.
pub(crate) fn read_small_file(path: PathBuf, needed_by: &str) -> Result<Vec<u8>, InputError> {
    match std::fs::read(&path) {
        Ok(bytes) => Ok(bytes),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(InputError::MissingFile {
            path,
            needed_by: needed_by.to_string(),
        }),
        Err(source) => Err(InputError::Io { path, source }),
    }
}
