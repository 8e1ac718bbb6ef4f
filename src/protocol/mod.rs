//! Per-protocol packet parsers (and, in later layers, element decoders).
//!
//! Each protocol module offers a streaming parser with the same shape:
//! `push(index, bytes, sink)` feeds a block of one trace ID's byte stream whose
//! first byte sits at `index` in the captured buffer, and `finish(sink)` marks the
//! end of the trace. Packets are handed to the sink by reference, together with
//! their raw bytes, so no packet is ever allocated.

pub mod decoder;
pub mod output;
pub mod etm3;
pub mod etm4;
pub mod ptm;

pub use decoder::{Decoder, DecoderCore};

/// Where the bytes of a push are in the captured buffer: one block, or the
/// stretches of a run of one trace ID's blocks as
/// [`FrameSink::run`](crate::frame::FrameSink::run) gives them (where each
/// starts in the push, and its index in the buffer).
pub(crate) struct Stretches<'a> {
    spans: &'a [(usize, u64)],
    /// The stretch holding the last byte asked for.
    k: usize,
    /// Where the stretch after it starts in the push.
    next: usize,
    /// The buffer index of the push's first byte, were the push all that
    /// stretch (wrapping).
    pub(crate) base: u64,
}

impl<'a> Stretches<'a> {
    pub(crate) fn one(index: u64) -> Stretches<'a> {
        Stretches { spans: &[], k: 0, next: usize::MAX, base: index }
    }

    pub(crate) fn of(spans: &'a [(usize, u64)]) -> Stretches<'a> {
        let mut s = Stretches { spans, k: 0, next: 0, base: 0 };
        s.enter(0);
        s
    }

    /// Make stretch `k` the current one.
    fn enter(&mut self, k: usize) {
        self.k = k;
        let (start, index) = self.spans.get(k).copied().unwrap_or((0, 0));
        self.base = index.wrapping_sub(start as u64);
        self.next = self.spans.get(k + 1).map_or(usize::MAX, |s| s.0);
    }

    /// The buffer index of byte `pos` of the push; `pos` never goes back.
    #[inline(always)]
    pub(crate) fn index(&mut self, pos: usize) -> u64 {
        while pos >= self.next {
            self.enter(self.k + 1);
        }
        self.base.wrapping_add(pos as u64)
    }

    /// Where the stretch holding byte `pos` ends in the push (`usize::MAX`
    /// for the last), `pos` as for [`Stretches::index`].
    #[inline(always)]
    pub(crate) fn end(&mut self, pos: usize) -> usize {
        self.index(pos);
        self.next
    }

    /// The buffer index of the start of the block holding byte `pos`, which
    /// is not before the last byte asked for.
    pub(crate) fn block(&mut self, pos: usize) -> u64 {
        self.index(pos);
        self.spans.get(self.k).map_or(self.base, |s| s.1)
    }
}


/// Bounds a saved parser or decoder state must meet before it is used: index
/// files are read from disk and may have been edited with their checksums
/// recomputed, so every index, queue length and counter that the code relies
/// on is checked on load. Each `(holds, what)` pair names the field; the
/// error names the first that does not hold.
pub(crate) fn check_state(proto: &'static str, checks: &[(bool, &'static str)]) -> Result<(), ProtocolError> {
    match checks.iter().find(|(ok, _)| !ok) {
        None => Ok(()),
        Some(&(_, field)) => Err(ProtocolError::StateOutOfRange { proto, field }),
    }
}

/// Why a saved parser or decoder state cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    /// The bytes do not deserialize as the state of `what` (`ETMv3
    /// parser`, `run`).
    #[error("{what} state: {source}")]
    StateUnreadable { what: &'static str, source: bincode::Error },
    /// A field of a deserialized state is outside what the code relies on
    /// (see [`check_state`]).
    #[error("{proto} state: {field} is out of range")]
    StateOutOfRange { proto: &'static str, field: &'static str },
}

/// Deserialize a saved state of `what`, naming it in the error.
pub(crate) fn read_state<'a, T: serde::Deserialize<'a>>(what: &'static str, bytes: &'a [u8]) -> Result<T, ProtocolError> {
    bincode::deserialize(bytes).map_err(|source| ProtocolError::StateUnreadable { what, source })
}

/// The decoder message of recovery mode (`DecoderOptions::recover`), given
/// where OpenCSD would stop the data path: what the decoder dropped and from
/// where it goes on. `tag` is the decoder's message prefix (`DCD_ETMV4`).
pub(crate) fn recovery_message(tag: &str, trace_id: u8, index: u64, dropped: Option<usize>, sync: &str) -> String {
    let dropped = match dropped {
        Some(n) => format!("{n} unresolved trace elements dropped"),
        None => "held-back elements dropped".to_string(),
    };
    format!(
        "{tag}_{trace_id:04} : recovery: fatal error at TrcIdx={index} (OpenCSD stops the data path here); \
         {dropped}; no elements until the next {sync}."
    )
}
