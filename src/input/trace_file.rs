//! Trace buffer files, memory-mapped read-only.

use std::io;
use std::ops::Deref;
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use super::InputError;

/// A trace buffer file mapped into memory (never read into a heap buffer).
#[derive(Debug)]
pub struct TraceFile {
    path: PathBuf,
    /// `None` for an empty file: mapping 0 bytes fails on some platforms.
    map: Option<Mmap>,
}

impl TraceFile {
    /// Map `path` read-only.  `needed_by` names what refers to the file, for
    /// the error message when it is missing.
    pub fn open_for(path: &Path, needed_by: &str) -> Result<TraceFile, InputError> {
        let io_err = |source: io::Error| InputError::Io { path: path.to_path_buf(), source };
        // Only regular files: a device (/dev/zero) has no end and a FIFO
        // blocks every command that opens it.
        let (file, len) = super::open_regular(path, needed_by)?;
        let map = if len == 0 {
            None
        } else {
            // SAFETY: the mapping is read-only.  Trace files are treated as
            // immutable inputs: if another process modified or truncated the
            // file while it is mapped, the bytes seen could change or reading
            // them could fault (SIGBUS); nothing in this crate writes to it.
            Some(unsafe { Mmap::map(&file) }.map_err(io_err)?)
        };
        if let Some(m) = &map {
            super::read_ahead(m);
        }
        Ok(TraceFile {
            path: path.to_path_buf(),
            map,
        })
    }

    /// Map `path` read-only.
    pub fn open(path: &Path) -> Result<TraceFile, InputError> {
        TraceFile::open_for(path, "the trace buffer")
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }

    pub fn len(&self) -> usize {
        self.bytes().len()
    }

    /// Tell the kernel the bytes `start..end` will not be read soon, so a
    /// one-pass scan of a multi-gigabyte file does not keep it all resident.
    /// The bytes stay readable (they are read from the file again when
    /// touched). Best effort: errors are ignored.
    pub fn release(&self, start: usize, end: usize) {
        const PAGE: usize = 4096;
        let Some(map) = &self.map else { return };
        // Whole pages inside the range only: a neighbouring block may still
        // be in use.
        let first = start.div_ceil(PAGE) * PAGE;
        let last = (end.min(map.len()) / PAGE) * PAGE;
        if last > first {
            // SAFETY: the mapping is a read-only shared mapping of a file
            // (Mmap::map on a file opened for reading). Dropping its pages
            // loses nothing: the next access reads the same bytes from the
            // file again, so slices into it stay valid and unchanged.
            let _ = unsafe { map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, first, last - first) };
        }
    }

    pub fn is_empty(&self) -> bool {
        self.bytes().is_empty()
    }
}

impl Deref for TraceFile {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.bytes()
    }
}

impl AsRef<[u8]> for TraceFile {
    fn as_ref(&self) -> &[u8] {
        self.bytes()
    }
}
