//! ETMv3 instruction trace (ETM Architecture Specification v3.x, Arm IHI 0014):
//! the packet parser, the OpenCSD-compatible packet listing and the element
//! decoder that walks the program image along the traced atoms.

pub mod config;
pub mod decoder;
pub mod display;
pub mod packet;
pub mod parser;
#[cfg(test)]
mod tests;

pub use config::Etm3Config;
pub use decoder::Etm3Decoder;
pub use packet::{Etm3Packet, PacketType};
pub use parser::Etm3Parser;
