//! tracesight: decode Arm CoreSight trace captures (ETE, ETMv4) into packets and,
//! in later layers, into what the core executed.
//!
//! Data flows one way: [`input`] (snapshot directories, trace files) feeds
//! [`frame`] (CoreSight formatter demultiplexing), which feeds the per-protocol
//! parsers under [`protocol`]. [`session`] wires the three together for one
//! trace buffer.

pub mod capture;
pub mod element;
pub mod export;
pub mod frame;
pub mod image;
pub mod index;
pub mod input;
pub mod outfile;
pub mod profile;
pub mod protocol;
pub mod session;
pub mod symbols;
pub mod synth;
pub mod textout;
pub mod tui;
