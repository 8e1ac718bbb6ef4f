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
