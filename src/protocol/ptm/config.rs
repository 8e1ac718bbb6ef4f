//! PTM (Program Flow Trace, PFT 1.0/1.1) configuration from the ETM-style
//! registers a capture records: ETMCR (control), ETMCCER (configuration code
//! extension), ETMIDR (ID) and ETMTRACEIDR (trace ID).
//!
//! Bit positions follow the PFT architecture specification (IHI 0035), as
//! OpenCSD reads them.

use crate::image::a64::ArchVersion;
use crate::protocol::etm4::config::core_arch_profile;
use crate::protocol::etm4::{ConfigError, CoreProfile};

// ETMCR bits.
const CR_BRANCH_BROADCAST: u32 = 1 << 8;
const CR_CYCLE_ACCURATE: u32 = 1 << 12;
const CR_TIMESTAMP: u32 = 1 << 28;
const CR_RETURN_STACK: u32 = 1 << 29;
const CR_VMID: u32 = 1 << 30;

// ETMCCER bits.
const CCER_TS_IMPL: u32 = 1 << 22;
const CCER_RETURN_STACK_IMPL: u32 = 1 << 23;
const CCER_DMB_DSB_WAYPOINT: u32 = 1 << 24;
const CCER_TS_ON_DMB_DSB: u32 = 1 << 25;
const CCER_VIRTUALIZATION: u32 = 1 << 26;
const CCER_TS_BINARY: u32 = 1 << 28;
const CCER_TS_64BIT: u32 = 1 << 29;

/// Raw register values of one PTM and the settings derived from them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtmConfig {
    pub etmcr: u32,
    pub etmccer: u32,
    pub etmidr: u32,
    pub etmtraceidr: u32,
    pub profile: CoreProfile,
    /// Architecture version of the traced core, from its name.
    pub arch: ArchVersion,
}

impl PtmConfig {
    /// Build a configuration from a register lookup (names without their
    /// snapshot suffixes, e.g. `ETMCR`). All four registers are required, as
    /// OpenCSD requires them to create a PTM decoder.
    pub fn from_registers(
        reg: impl Fn(&str) -> Option<u64>,
        core_name: Option<&str>,
    ) -> Result<PtmConfig, ConfigError> {
        let need = |name: &'static str| reg(name).map(|v| v as u32).ok_or(ConfigError::MissingRegister(name));
        let (arch, profile) = match core_name {
            Some(n) => core_arch_profile(n),
            None => (ArchVersion::V7, CoreProfile::Application),
        };
        Ok(PtmConfig {
            etmcr: need("ETMCR")?,
            etmccer: need("ETMCCER")?,
            etmidr: need("ETMIDR")?,
            etmtraceidr: need("ETMTRACEIDR")?,
            profile,
            arch,
        })
    }

    /// The CoreSight trace ID (ETMTRACEIDR bits 6:0).
    pub fn trace_id(&self) -> u8 {
        (self.etmtraceidr & 0x7f) as u8
    }

    /// Minor architecture revision (ETMIDR bits 7:4): 0 for PFT 1.0, 1 for PFT 1.1.
    pub fn minor_version(&self) -> u8 {
        ((self.etmidr >> 4) & 0xf) as u8
    }

    /// Branch broadcasting: every taken branch is traced with its address.
    pub fn branch_broadcast(&self) -> bool {
        self.etmcr & CR_BRANCH_BROADCAST != 0
    }

    /// Cycle-accurate tracing: atoms, branches, I-syncs and timestamps carry cycle counts.
    pub fn cycle_accurate(&self) -> bool {
        self.etmcr & CR_CYCLE_ACCURATE != 0
    }

    /// Timestamps enabled (ETMCR bit 28).
    pub fn timestamps(&self) -> bool {
        self.etmcr & CR_TIMESTAMP != 0
    }

    /// Timestamping implemented (ETMCCER bit 22).
    pub fn has_timestamps(&self) -> bool {
        self.etmccer & CCER_TS_IMPL != 0
    }

    /// Return stack enabled (ETMCR bit 29): returns are traced as E atoms.
    pub fn return_stack(&self) -> bool {
        self.etmcr & CR_RETURN_STACK != 0
    }

    /// Return stack implemented (ETMCCER bit 23).
    pub fn has_return_stack(&self) -> bool {
        self.etmccer & CCER_RETURN_STACK_IMPL != 0
    }

    /// The decoder keeps a return stack: implemented and enabled.
    pub fn return_stack_active(&self) -> bool {
        self.has_return_stack() && self.return_stack()
    }

    /// VMID tracing enabled (ETMCR bit 30).
    pub fn vmid_tracing(&self) -> bool {
        self.etmcr & CR_VMID != 0
    }

    /// Virtualization extensions implemented (ETMCCER bit 26).
    pub fn has_virtualization(&self) -> bool {
        self.etmccer & CCER_VIRTUALIZATION != 0
    }

    /// Bytes of context ID in I-sync and context ID packets (ETMCR bits 15:14).
    pub fn context_id_bytes(&self) -> u8 {
        [0, 1, 2, 4][((self.etmcr >> 14) & 3) as usize]
    }

    /// DMB and DSB are waypoints (ETMCCER bit 24).
    pub fn dmb_dsb_waypoints(&self) -> bool {
        self.etmccer & CCER_DMB_DSB_WAYPOINT != 0
    }

    /// DMB and DSB generate timestamps (ETMCCER bit 25).
    pub fn dmb_dsb_timestamps(&self) -> bool {
        self.etmccer & CCER_TS_ON_DMB_DSB != 0
    }

    /// Timestamps are 64 bits wide in packets (PFT 1.1 with ETMCCER bit 29);
    /// otherwise 48 bits.
    pub fn timestamp_64bit(&self) -> bool {
        self.minor_version() != 0 && self.etmccer & CCER_TS_64BIT != 0
    }

    /// ETMCCER reports natural-binary timestamps (PFT 1.1, bit 28); otherwise
    /// the trace unit may Gray-code them. Informational: OpenCSD 1.8.0, and so
    /// the parser, read every timestamp as binary.
    pub fn timestamp_binary(&self) -> bool {
        self.minor_version() != 0 && self.etmccer & CCER_TS_BINARY != 0
    }

    /// Protocol name as trc_pkt_lister prints it.
    pub fn protocol_name(&self) -> &'static str {
        "PTM"
    }

    /// Human-readable settings, for `info`-style listings.
    pub fn describe(&self) -> Vec<(&'static str, String)> {
        let yn = |b: bool| if b { "yes" } else { "no" }.to_string();
        vec![
            ("protocol", format!("PFT 1.{}", self.minor_version())),
            ("trace ID", format!("0x{:x}", self.trace_id())),
            ("cycle accurate", yn(self.cycle_accurate())),
            ("branch broadcast", yn(self.branch_broadcast())),
            (
                "timestamps",
                format!(
                    "{} ({} bit, {})",
                    yn(self.timestamps()),
                    if self.timestamp_64bit() { 64 } else { 48 },
                    if self.timestamp_binary() { "binary" } else { "Gray code per ETMCCER" }
                ),
            ),
            ("return stack", format!("{} (implemented: {})", yn(self.return_stack()), yn(self.has_return_stack()))),
            ("context ID bytes", self.context_id_bytes().to_string()),
            ("VMID tracing", yn(self.vmid_tracing())),
            ("DMB/DSB waypoints", yn(self.dmb_dsb_waypoints())),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(cr: u32, ccer: u32, idr: u32, id: u32) -> PtmConfig {
        PtmConfig::from_registers(
            |r| match r {
                "ETMCR" => Some(cr as u64),
                "ETMCCER" => Some(ccer as u64),
                "ETMIDR" => Some(idr as u64),
                "ETMTRACEIDR" => Some(id as u64),
                _ => None,
            },
            Some("Cortex-A15"),
        )
        .unwrap()
    }

    #[test]
    fn fixture_register_sets() {
        // Snowball PTM 1.0: cycle accurate, 48-bit timestamps.
        let c = cfg(0x1000_1000, 0x0000_08ea, 0x411c_f301, 0x10);
        assert_eq!(c.trace_id(), 0x10);
        assert!(c.cycle_accurate() && c.timestamps());
        assert!(!c.timestamp_64bit() && !c.timestamp_binary());
        assert_eq!(c.context_id_bytes(), 0);
        assert!(!c.return_stack_active());
        // tc2-ptm-rstk-t32 PTM 1.1: return stack, 64-bit binary timestamps.
        let c = cfg(0x2000_0400, 0x34c0_1ac2, 0x411c_f312, 0x2);
        assert!(c.return_stack_active() && !c.cycle_accurate());
        assert!(c.timestamp_64bit() && c.timestamp_binary());
        assert!(!c.dmb_dsb_waypoints());
        assert_eq!(c.arch, ArchVersion::V7);
    }

    #[test]
    fn missing_register() {
        let r = PtmConfig::from_registers(|r| (r != "ETMCCER").then_some(0), None);
        assert_eq!(r, Err(ConfigError::MissingRegister("ETMCCER")));
    }
}
