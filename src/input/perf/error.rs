//! Errors (the file cannot be read as a perf.data at all) and warnings (a
//! part of it was damaged or unexpected and was skipped).

use std::fmt;
use std::io;
use std::path::PathBuf;

/// Why a file cannot be read as a perf.data.
#[derive(Debug)]
pub enum PerfError {
    /// The file could not be opened, inspected or mapped.
    Io { path: PathBuf, source: io::Error },
    /// The path is a directory, a device or a pipe: only regular files are read.
    NotAFile { path: PathBuf },
    /// The first 8 bytes are not `PERFILE2` (or its byte-swapped form).
    BadMagic { path: PathBuf, found: Vec<u8> },
    /// A perf.data written to a pipe (`perf record -o -`), which this reader
    /// does not take.
    PipeMode { path: PathBuf },
    /// The file header is damaged: `expected` says what the bytes at
    /// `offset` should have been.
    BadHeader { path: PathBuf, offset: u64, expected: String },
}

impl fmt::Display for PerfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PerfError::Io { path, source } => write!(f, "{}: {source}", path.display()),
            PerfError::NotAFile { path } => write!(f, "{}: not a regular file", path.display()),
            PerfError::BadMagic { path, found } => write!(
                f,
                "{}: offset 0x0: not a perf.data file (expected magic PERFILE2, found {})",
                path.display(),
                String::from_utf8_lossy(found).escape_debug()
            ),
            PerfError::PipeMode { path } => write!(
                f,
                "{}: offset 0x8: a pipe-mode perf.data (header size 16); record to a file (perf record -o FILE) instead",
                path.display()
            ),
            PerfError::BadHeader { path, offset, expected } => {
                write!(f, "{}: offset 0x{offset:x}: damaged perf.data header: expected {expected}", path.display())
            }
        }
    }
}

impl std::error::Error for PerfError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PerfError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// A problem found while reading: the part named was skipped (or cut short)
/// and the rest of the file was read. Every variant names its file offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PerfWarning {
    /// A section or record runs past the end of the file (a truncated file):
    /// `needed` bytes from `offset`, `available` present.
    Truncated { offset: u64, what: &'static str, needed: u64, available: u64 },
    /// A record whose size does not fit its type; skipped.
    BadRecord { offset: u64, record_type: u32, size: u64, expected: String },
    /// The record stream broke at `offset` (`reason`); reading went on at
    /// `resumed_at` (found through the AUXTRACE index) or stopped (`None`).
    RecordsLost { offset: u64, reason: String, resumed_at: Option<u64> },
    /// The CS_ETM AUXTRACE_INFO record is not as expected; what could be read
    /// of it was kept.
    AuxtraceInfo { offset: u64, expected: String },
    /// An AUX record whose range is not (or only partly) inside any AUXTRACE
    /// buffer of its CPU or thread.
    AuxWithoutData { offset: u64, aux_offset: u64, aux_size: u64, found: u64 },
    /// A trace ID record that cannot be used (unknown version, no CPU, an ID
    /// that a formatted buffer cannot carry, or a second different ID).
    TraceId { offset: u64, expected: String },
    /// A feature section that does not parse; skipped.
    BadFeature { offset: u64, feature: u32, expected: String },
    /// Something this reader does not take (compressed records, an
    /// AUXTRACE_INFO of another PMU, ...); skipped.
    Unsupported { offset: u64, what: String },
}

impl PerfWarning {
    /// The file offset the warning is about.
    pub fn offset(&self) -> u64 {
        match self {
            PerfWarning::Truncated { offset, .. }
            | PerfWarning::BadRecord { offset, .. }
            | PerfWarning::RecordsLost { offset, .. }
            | PerfWarning::AuxtraceInfo { offset, .. }
            | PerfWarning::AuxWithoutData { offset, .. }
            | PerfWarning::TraceId { offset, .. }
            | PerfWarning::BadFeature { offset, .. }
            | PerfWarning::Unsupported { offset, .. } => *offset,
        }
    }
}

impl fmt::Display for PerfWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "offset 0x{:x}: ", self.offset())?;
        match self {
            PerfWarning::Truncated { what, needed, available, .. } => {
                write!(f, "{what} needs {needed} bytes, the file has {available}: file truncated")
            }
            PerfWarning::BadRecord { record_type, size, expected, .. } => {
                write!(f, "record type {record_type} of {size} bytes skipped: expected {expected}")
            }
            PerfWarning::RecordsLost { reason, resumed_at, .. } => match resumed_at {
                Some(at) => write!(f, "{reason}; records skipped up to 0x{at:x} (next AUXTRACE in the index)"),
                None => write!(f, "{reason}; the rest of the records are not read"),
            },
            PerfWarning::AuxtraceInfo { expected, .. } => write!(f, "CS_ETM AUXTRACE_INFO: expected {expected}"),
            PerfWarning::AuxWithoutData { aux_offset, aux_size, found, .. } => write!(
                f,
                "AUX record for 0x{aux_size:x} bytes at AUX offset 0x{aux_offset:x}: only {found} bytes of it are in the AUXTRACE data"
            ),
            PerfWarning::TraceId { expected, .. } => write!(f, "AUX_OUTPUT_HW_ID ignored: expected {expected}"),
            PerfWarning::BadFeature { feature, expected, .. } => {
                write!(f, "feature section {feature} skipped: expected {expected}")
            }
            PerfWarning::Unsupported { what, .. } => write!(f, "{what}"),
        }
    }
}
