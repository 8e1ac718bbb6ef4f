//! PTM instruction trace (Program Flow Trace, PFT 1.0 and 1.1; Arm IHI 0035),
//! the waypoint trace of Cortex-A9/A15-class cores.

pub mod config;
pub mod decoder;
pub mod display;
pub mod packet;
pub mod parser;

pub use config::PtmConfig;
pub use decoder::PtmDecoder;
pub use packet::{PtmPacket, PtmPacketType};
pub use parser::PtmParser;

#[cfg(test)]
mod tests;
