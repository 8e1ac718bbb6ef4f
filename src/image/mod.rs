//! Program-image side of element decoding: what the traced code's opcodes
//! mean for the trace.
//!
//! The element decoder walks the memory image from one waypoint to the next;
//! [`a64`] tells it, one opcode at a time, whether an instruction is a waypoint
//! (a branch, a barrier that the trace treats as one, ...) and where a direct
//! branch goes, classifying exactly as OpenCSD does so that instruction ranges
//! end where OpenCSD's end.

pub mod a64;
pub mod arm32;
pub mod branchmap;
pub mod elf;
pub mod instr;
pub mod memory;
#[cfg(test)]
pub(crate) mod walkcase;

use std::path::PathBuf;

/// Why a program image (an ELF file, a memory dump) could not be mapped.
/// Each variant keeps what was found as data; the text is what the user
/// reads.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// The file could not be opened or mapped (the message names it).
    #[error("{0}")]
    Input(#[from] crate::input::InputError),
    /// The `object` crate could not read the ELF headers.
    #[error("{0}")]
    Object(#[from] object::Error),
    /// The bytes are some other kind of object file.
    #[error("not an ELF file ({kind:?})")]
    NotElf { kind: object::FileKind },
    /// An error in `path` that does not name the file itself.
    #[error("{}: {source}", path.display())]
    InFile { path: PathBuf, source: Box<ImageError> },
    /// The ELF file maps nothing.
    #[error("{}: no loadable segment with contents", path.display())]
    NoSegments { path: PathBuf },
    /// A dump's `offset` is not inside the file.
    #[error("{}: offset 0x{offset:x} is past the end of the file ({file_len} bytes)", path.display())]
    OffsetPastEnd { path: PathBuf, offset: u64, file_len: u64 },
    /// A dump of no bytes.
    #[error("{}: empty memory range", path.display())]
    EmptyRange { path: PathBuf },
    /// `len` bytes at `start` would wrap past 2^64.
    #[error("{}: {len} bytes at 0x{start:x} reach past the top of the address space (0xffffffffffffffff)", path.display())]
    PastTop { path: PathBuf, start: u64, len: u64 },
    /// The range `start..=last` of `path` overlaps a region already mapped
    /// (OpenCSD refuses overlapping accessors too).
    #[error(
        "{}: range 0x{start:x}-0x{last:x} overlaps {} mapped at 0x{other_start:x}-0x{other_last:x}",
        path.display(),
        other.display()
    )]
    Overlap { path: PathBuf, start: u64, last: u64, other: PathBuf, other_start: u64, other_last: u64 },
    /// `PATH@ADDRESS` whose address is not hexadecimal.
    #[error("'{address}' is not a hexadecimal load address")]
    BadLoadAddress { address: String },
}

impl ImageError {
    /// This error as one of `path` (for errors that do not name it).
    pub fn in_file(self, path: &std::path::Path) -> ImageError {
        ImageError::InFile { path: path.to_path_buf(), source: Box::new(self) }
    }
}
