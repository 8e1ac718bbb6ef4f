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
pub mod elf;
pub mod instr;
pub mod memory;
