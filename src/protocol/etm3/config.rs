//! ETMv3 trace unit configuration, read from the registers a snapshot records:
//! ETMCR (main control), ETMIDR (ID), ETMCCER (configuration code extension)
//! and ETMTRACEIDR (CoreSight trace ID). Bit positions are those of the ETM
//! architecture specification v3.x (IHI 0014) register descriptions.

use std::fmt;

use crate::image::a64::ArchVersion;
use crate::protocol::etm4::config::{core_arch_profile, ConfigError, CoreProfile};

// ETMCR fields.
const CR_DATA_VALUE: u32 = 1 << 2;
const CR_DATA_ADDRESS: u32 = 1 << 3;
const CR_BRANCH_OUTPUT: u32 = 1 << 8;
const CR_CYCLE_ACCURATE: u32 = 1 << 12;
const CR_CONTEXT_ID_SHIFT: u32 = 14;
const CR_DATA_ONLY: u32 = 1 << 20;
const CR_TIMESTAMP: u32 = 1 << 28;
const CR_VMID: u32 = 1 << 30;
// ETMCCER fields.
const CCER_TIMESTAMP: u32 = 1 << 22;
const CCER_VIRTUALIZATION: u32 = 1 << 26;
const CCER_TIMESTAMP_64: u32 = 1 << 29;
// ETMIDR fields.
const IDR_ALT_BRANCH: u32 = 1 << 20;

/// ETMIDR value OpenCSD assumes when a capture does not record it (ETMv3.4).
const DEFAULT_ETMIDR: u32 = 0x4100_F240;

/// What the trace stream carries (instruction trace, data trace or both).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceMode {
    InstrOnly,
    InstrDataValue,
    InstrDataAddress,
    InstrDataValueAddress,
    DataOnlyValue,
    DataOnlyAddress,
    DataOnlyValueAddress,
}

/// Register values of one ETMv3 trace unit and the settings derived from them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Etm3Config {
    pub etmcr: u32,
    pub etmidr: u32,
    pub etmccer: u32,
    pub etmtraceidr: u32,
    /// Architecture of the traced core (from its snapshot name).
    pub arch: ArchVersion,
    pub profile: CoreProfile,
}

impl Etm3Config {
    /// Build a configuration from a register lookup (names without their
    /// snapshot suffixes, e.g. `ETMCR`). ETMCR and ETMTRACEIDR are required;
    /// a missing ETMIDR reads as an ETMv3.4 unit and a missing ETMCCER as 0.
    /// Without a core name the core is taken to be an Armv7-A, as OpenCSD does.
    pub fn from_registers(reg: impl Fn(&str) -> Option<u64>, core_name: Option<&str>) -> Result<Etm3Config, ConfigError> {
        let need = |name: &'static str| reg(name).map(|v| v as u32).ok_or(ConfigError::MissingRegister(name));
        let (arch, profile) = match core_name {
            Some(n) => core_arch_profile(n),
            None => (ArchVersion::V7, CoreProfile::Application),
        };
        Ok(Etm3Config {
            etmcr: need("ETMCR")?,
            etmidr: reg("ETMIDR").map(|v| v as u32).unwrap_or(DEFAULT_ETMIDR),
            etmccer: reg("ETMCCER").map(|v| v as u32).unwrap_or(0),
            etmtraceidr: need("ETMTRACEIDR")?,
            arch,
            profile,
        })
    }

    /// A configuration with every register zero, replaced before use (the
    /// placeholder a restored decoder holds until its configuration is
    /// supplied again).
    pub fn unset() -> Etm3Config {
        Etm3Config {
            etmcr: 0,
            etmidr: 0,
            etmccer: 0,
            etmtraceidr: 0,
            arch: ArchVersion::Unknown,
            profile: CoreProfile::Application,
        }
    }

    /// The CoreSight trace ID (ETMTRACEIDR\[6:0\]).
    pub fn trace_id(&self) -> u8 {
        (self.etmtraceidr & 0x7f) as u8
    }

    /// ETMCR.CycleAccurate: P-headers carry wait (W) cycles.
    pub fn cycle_accurate(&self) -> bool {
        self.etmcr & CR_CYCLE_ACCURATE != 0
    }
    /// ETMCR.BranchOutput: every branch address is traced (branch broadcast).
    pub fn branch_broadcast(&self) -> bool {
        self.etmcr & CR_BRANCH_OUTPUT != 0
    }
    /// ETMCR.ContextIDSize as a byte count (0, 1, 2 or 4).
    pub fn context_id_bytes(&self) -> u8 {
        [0, 1, 2, 4][((self.etmcr >> CR_CONTEXT_ID_SHIFT) & 0x3) as usize]
    }
    /// ETMCR.DataOnly clear: instruction trace is present.
    pub fn instruction_trace(&self) -> bool {
        self.etmcr & CR_DATA_ONLY == 0
    }
    /// ETMCR.DataAccess bit 2: data values are traced.
    pub fn data_value_trace(&self) -> bool {
        self.etmcr & CR_DATA_VALUE != 0
    }
    /// ETMCR.DataAccess bit 3: data addresses are traced.
    pub fn data_address_trace(&self) -> bool {
        self.etmcr & CR_DATA_ADDRESS != 0
    }
    /// Any data tracing.
    pub fn data_trace(&self) -> bool {
        self.etmcr & (CR_DATA_VALUE | CR_DATA_ADDRESS) != 0
    }
    /// ETMCR.TimestampEnable.
    pub fn timestamps_enabled(&self) -> bool {
        self.etmcr & CR_TIMESTAMP != 0
    }
    /// ETMCR.VMIDEnable.
    pub fn vmid_trace(&self) -> bool {
        self.etmcr & CR_VMID != 0
    }
    /// ETMIDR major architecture number (3 for every ETMv3 unit).
    pub fn major_version(&self) -> u8 {
        (((self.etmidr >> 8) & 0xf) + 1) as u8
    }
    /// ETMIDR minor architecture number: the x in ETMv3.x.
    pub fn minor_version(&self) -> u8 {
        ((self.etmidr >> 4) & 0xf) as u8
    }
    /// The alternative branch address encoding (ETMIDR bit 20, ETMv3.4 and later).
    pub fn alt_branch(&self) -> bool {
        self.etmidr & IDR_ALT_BRANCH != 0 && self.minor_version() >= 4
    }
    /// ETMCCER: the processor implements the Virtualization Extensions (Hyp mode).
    pub fn has_virtualization(&self) -> bool {
        self.etmccer & CCER_VIRTUALIZATION != 0
    }
    /// ETMCCER: timestamps are implemented.
    pub fn has_timestamps(&self) -> bool {
        self.etmccer & CCER_TIMESTAMP != 0
    }
    /// ETMCCER: timestamp packets carry 64 bits (else 48).
    pub fn timestamp_64bit(&self) -> bool {
        self.etmccer & CCER_TIMESTAMP_64 != 0
    }
    /// The source is an Armv7-M core (exception numbering of branch packets).
    pub fn v7m(&self) -> bool {
        self.arch == ArchVersion::V7 && self.profile == CoreProfile::Microcontroller
    }

    /// The combination of instruction and data trace in the stream.
    pub fn trace_mode(&self) -> TraceMode {
        let mode = self.data_value_trace() as u8 + 2 * self.data_address_trace() as u8 + if self.instruction_trace() { 0 } else { 3 };
        match mode {
            0 => TraceMode::InstrOnly,
            1 => TraceMode::InstrDataValue,
            2 => TraceMode::InstrDataAddress,
            3 => TraceMode::InstrDataValueAddress,
            4 => TraceMode::DataOnlyValue,
            5 => TraceMode::DataOnlyAddress,
            _ => TraceMode::DataOnlyValueAddress,
        }
    }

    /// OpenCSD's element decoder only follows instruction trace; for any other
    /// mode it logs this message when it is configured (and decodes on).
    pub fn decoder_config_message(&self) -> Option<String> {
        (self.trace_mode() != TraceMode::InstrOnly).then(|| {
            format!(
                "DCD_ETMV3_{:04} : 0x0017 (OCSD_ERR_HW_CFG_UNSUPP) [Programmed trace configuration not supported by decodUer.]; ETMv3 trace decoder : data trace decode not yet supported",
                self.trace_id()
            )
        })
    }

    /// Short protocol name as trc_pkt_lister prints it.
    pub fn protocol_name(&self) -> &'static str {
        "ETMV3"
    }

    /// One line per derived setting, for `tracesight info` and error reports.
    pub fn describe(&self) -> Vec<(&'static str, String)> {
        let yn = |b: bool| if b { "yes".to_string() } else { "no".to_string() };
        vec![
            ("protocol", format!("ETMv{}.{}", self.major_version(), self.minor_version())),
            ("trace ID", format!("0x{:02x}", self.trace_id())),
            ("core profile", format!("{:?}", self.profile)),
            ("trace mode", format!("{:?}", self.trace_mode())),
            ("cycle accurate", yn(self.cycle_accurate())),
            ("branch broadcast", yn(self.branch_broadcast())),
            ("context ID size", format!("{} bytes", self.context_id_bytes())),
            ("VMID tracing", yn(self.vmid_trace())),
            (
                "timestamps",
                format!(
                    "{} (implemented: {}, {} bits)",
                    yn(self.timestamps_enabled()),
                    yn(self.has_timestamps()),
                    if self.timestamp_64bit() { 64 } else { 48 }
                ),
            ),
            ("alternative branch encoding", yn(self.alt_branch())),
            ("virtualization extensions", yn(self.has_virtualization())),
        ]
    }
}

impl fmt::Display for TraceMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn regs(pairs: &'static [(&'static str, u64)]) -> impl Fn(&str) -> Option<u64> {
        move |n| pairs.iter().find(|(k, _)| *k == n).map(|(_, v)| *v)
    }

    #[test]
    fn tc2_etm_registers() {
        // TC2 device_5.ini: a Cortex-A7 ETMv3.5.
        let c = Etm3Config::from_registers(
            regs(&[("ETMCR", 0x10001860), ("ETMIDR", 0x410CF250), ("ETMCCER", 0x344008F2), ("ETMTRACEIDR", 0x10)]),
            Some("Cortex-A7"),
        )
        .unwrap();
        assert_eq!(c.trace_id(), 0x10);
        assert!(c.cycle_accurate());
        assert!(c.timestamps_enabled() && c.has_timestamps() && c.timestamp_64bit());
        // ETMIDR bit 20 clear: the original branch address encoding.
        assert!(!c.alt_branch());
        assert!(c.has_virtualization());
        assert_eq!(c.context_id_bytes(), 0);
        assert_eq!(c.minor_version(), 5);
        assert_eq!(c.major_version(), 3);
        assert_eq!(c.trace_mode(), TraceMode::InstrOnly);
        assert!(!c.v7m());
        assert!(c.decoder_config_message().is_none());
    }

    #[test]
    fn missing_registers_and_defaults() {
        assert_eq!(
            Etm3Config::from_registers(regs(&[("ETMTRACEIDR", 0x10)]), None),
            Err(ConfigError::MissingRegister("ETMCR"))
        );
        let c = Etm3Config::from_registers(regs(&[("ETMCR", 0x0000_c00c), ("ETMTRACEIDR", 0x12)]), Some("Cortex-M3")).unwrap();
        assert_eq!(c.etmidr, DEFAULT_ETMIDR);
        assert_eq!(c.context_id_bytes(), 4);
        assert!(c.data_trace() && c.data_value_trace() && c.data_address_trace());
        assert_eq!(c.trace_mode(), TraceMode::InstrDataValueAddress);
        assert!(c.v7m());
        assert!(!c.alt_branch());
        assert!(c.decoder_config_message().unwrap().contains("data trace decode not yet supported"));
    }
}
