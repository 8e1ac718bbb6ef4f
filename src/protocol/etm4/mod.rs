//! ETMv4 and ETE instruction trace (Arm IHI 0064 ETMv4 architecture, Arm ARM
//! chapter D4 "The Embedded Trace Extension").
//!
//! ETE shares the ETMv4 packet encoding; the differences (transactions, ITE,
//! source addresses, PE reset, no exception-return packet) are selected by the
//! configuration's architecture version, exactly as a hardware trace unit reports it.

pub mod config;
pub mod decoder;
pub mod display;
pub mod packet;
pub mod parser;
mod ring;

pub use config::{ConfigError, CoreProfile, Etm4Config};
pub use packet::{Packet, PacketType};
pub use parser::{Etm4Parser, PacketSink};
