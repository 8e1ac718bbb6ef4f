//! Per-protocol packet parsers (and, in later layers, element decoders).
//!
//! Each protocol module offers a streaming parser with the same shape:
//! `push(index, bytes, sink)` feeds a block of one trace ID's byte stream whose
//! first byte sits at `index` in the captured buffer, and `finish(sink)` marks the
//! end of the trace. Packets are handed to the sink by reference, together with
//! their raw bytes, so no packet is ever allocated.

pub mod etm3;
pub mod etm4;
pub mod ptm;

/// Bounds a saved parser or decoder state must meet before it is used: index
/// files are read from disk and may have been edited with their checksums
/// recomputed, so every index, queue length and counter that the code relies
/// on is checked on load. Each `(holds, what)` pair names the field; the
/// error names the first that does not hold.
pub(crate) fn check_state(proto: &str, checks: &[(bool, &str)]) -> Result<(), String> {
    match checks.iter().find(|(ok, _)| !ok) {
        None => Ok(()),
        Some((_, what)) => Err(format!("{proto} state: {what} is out of range")),
    }
}
