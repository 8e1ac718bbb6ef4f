//! Bounds-checked reads of perf.data bytes in the file's byte order, shared
//! by the container reader and the CS_ETM header parser.

use std::ops::Range;

/// Little- or big-endian reads at checked offsets: every read of the file
/// goes through this, so nothing indexes out of bounds.
#[derive(Clone, Copy)]
pub(crate) struct Buf<'a> {
    b: &'a [u8],
    pub(super) big: bool,
}

impl<'a> Buf<'a> {
    pub(crate) fn new(b: &'a [u8], big: bool) -> Buf<'a> {
        Buf { b, big }
    }
    pub(crate) fn len(&self) -> usize {
        self.b.len()
    }
    pub(super) fn bytes(&self, off: usize, n: usize) -> Option<&'a [u8]> {
        self.b.get(off..off.checked_add(n)?)
    }
    pub(super) fn arr<const N: usize>(&self, off: usize) -> Option<[u8; N]> {
        self.bytes(off, N)?.try_into().ok()
    }
    pub(crate) fn u16(&self, off: usize) -> Option<u16> {
        let a = self.arr::<2>(off)?;
        Some(if self.big { u16::from_be_bytes(a) } else { u16::from_le_bytes(a) })
    }
    pub(crate) fn u32(&self, off: usize) -> Option<u32> {
        let a = self.arr::<4>(off)?;
        Some(if self.big { u32::from_be_bytes(a) } else { u32::from_le_bytes(a) })
    }
    pub(crate) fn u64(&self, off: usize) -> Option<u64> {
        let a = self.arr::<8>(off)?;
        Some(if self.big { u64::from_be_bytes(a) } else { u64::from_le_bytes(a) })
    }
    /// The bytes `range`, or `None` when they are not all present.
    pub(super) fn sub(&self, range: Range<usize>) -> Option<Buf<'a>> {
        Some(Buf { b: self.b.get(range)?, big: self.big })
    }
    /// A NUL-terminated (or -padded) string starting at `off`, up to the end.
    pub(super) fn cstr(&self, off: usize) -> String {
        let s = self.b.get(off..).unwrap_or(&[]);
        let s = &s[..s.iter().position(|&c| c == 0).unwrap_or(s.len())];
        String::from_utf8_lossy(s).into_owned()
    }
}
