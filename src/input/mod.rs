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
use std::path::{Path, PathBuf};

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
    /// A path names a device, FIFO, socket or directory: reading one could
    /// block forever or never end, so only regular files are read.
    NotRegular { path: PathBuf, kind: &'static str },
    /// A text file larger than any real one (the limit bounds memory).
    TooLarge { path: PathBuf, size: u64, limit: u64 },
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
            InputError::NotRegular { path, kind } => {
                write!(f, "{}: is a {kind}, not a regular file; only regular files are read", path.display())
            }
            InputError::TooLarge { path, size, limit } => {
                write!(f, "{}: {size} bytes, more than the {limit} bytes a snapshot text file may have", path.display())
            }
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

/// Largest snapshot text file (ini) read: real ones are a few KiB; the limit
/// bounds the memory a hostile one can take.
pub const MAX_TEXT_FILE: u64 = 16 << 20;

/// What a path that is not a regular file is, for the message.
fn kind_of(t: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "directory"
    } else if t.is_fifo() {
        "FIFO"
    } else if t.is_socket() {
        "socket"
    } else if t.is_char_device() || t.is_block_device() {
        "device"
    } else {
        "special file"
    }
}

/// Bytes of a newly mapped input the kernel is asked to read ahead.
const READ_AHEAD: usize = 64 << 20;

/// Ask the kernel to start reading the first [`READ_AHEAD`] bytes of a
/// mapped input now. A mapping is otherwise read a fault at a time, each
/// waiting on the disk for the pages around it when they are not cached;
/// asked ahead, the reads run while the decode starts. Measured on 16 MiB
/// inputs dropped from the page cache (medians of 10 alternating runs):
/// `decode --summary` of 001-ack_test 130 -> 124 ms, of juno_r1_1 125 ->
/// 112 ms, of texit-poe2 111 -> 97 ms.
/// Bounded, so that opening a capture of many gigabytes reads no more than
/// that; cached pages cost a lookup each. Advice only: errors are ignored.
pub(crate) fn read_ahead(map: &memmap2::Mmap) {
    let _ = map.advise_range(memmap2::Advice::WillNeed, 0, map.len().min(READ_AHEAD));
}

/// Open `path` for reading if it is a regular file (after following
/// symbolic links). The type is checked before opening, since opening a FIFO
/// blocks until a writer appears, and again on the opened file, in case the
/// path was replaced in between.
pub(crate) fn open_regular(path: &Path, needed_by: &str) -> Result<(std::fs::File, u64), InputError> {
    let io_err = |source: io::Error| {
        if source.kind() == io::ErrorKind::NotFound {
            InputError::MissingFile { path: path.to_path_buf(), needed_by: needed_by.to_string() }
        } else {
            InputError::Io { path: path.to_path_buf(), source }
        }
    };
    let meta = std::fs::metadata(path).map_err(io_err)?;
    if !meta.is_file() {
        return Err(InputError::NotRegular { path: path.to_path_buf(), kind: kind_of(meta.file_type()) });
    }
    let file = std::fs::File::open(path).map_err(io_err)?;
    let meta = file.metadata().map_err(io_err)?;
    if !meta.is_file() {
        return Err(InputError::NotRegular { path: path.to_path_buf(), kind: kind_of(meta.file_type()) });
    }
    Ok((file, meta.len()))
}

/// Read a whole (small) text file such as an ini file: a regular file of at
/// most [`MAX_TEXT_FILE`] bytes.
pub(crate) fn read_small_file(path: PathBuf, needed_by: &str) -> Result<Vec<u8>, InputError> {
    use std::io::Read;
    let (file, size) = open_regular(&path, needed_by)?;
    if size > MAX_TEXT_FILE {
        return Err(InputError::TooLarge { path, size, limit: MAX_TEXT_FILE });
    }
    // The file may grow after the size was read: never read past the limit.
    let mut bytes = Vec::with_capacity(size as usize);
    match file.take(MAX_TEXT_FILE + 1).read_to_end(&mut bytes) {
        Ok(_) if bytes.len() as u64 > MAX_TEXT_FILE => {
            Err(InputError::TooLarge { path, size: bytes.len() as u64, limit: MAX_TEXT_FILE })
        }
        Ok(_) => Ok(bytes),
        Err(source) => Err(InputError::Io { path, source }),
    }
}
