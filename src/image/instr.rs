//! One instruction-classification interface over the instruction sets: what the
//! element decoder needs to know about an instruction to walk the program image
//! (its size, whether it ends a range, where a direct branch goes).

use crate::element::{InstrSubtype, InstrType, Isa};

use super::a64;

pub use super::a64::ArchVersion;

/// Why an instruction could not be classified.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InstrError {
    /// The instruction set is not decoded (Jazelle, ThumbEE, ...), or not yet.
    UnsupportedIsa,
    /// The opcode is invalid (with the A64 opcode check enabled).
    InvalidOpcode,
}

/// What the walk learns from one instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InstrInfo {
    pub itype: InstrType,
    pub subtype: InstrSubtype,
    pub conditional: bool,
    /// Branch with link (a call): the return address goes on the return stack.
    pub link: bool,
    /// Target of a direct branch.
    pub target: u64,
    /// Size in bytes.
    pub size: u8,
    /// Instruction set after the instruction when it is taken.
    pub next_isa: Isa,
}

impl Default for InstrInfo {
    fn default() -> Self {
        InstrInfo {
            itype: InstrType::Other,
            subtype: InstrSubtype::None,
            conditional: false,
            link: false,
            target: 0,
            size: 4,
            next_isa: Isa::A64,
        }
    }
}

/// Settings that change classification (OpenCSD's `ocsd_instr_info` inputs).
#[derive(Clone, Copy, Debug, Default)]
pub struct DecodeOptions {
    pub arch: ArchVersion,
    pub m_profile: bool,
    /// WFI/WFE end ranges (TRCIDR2.WFXMODE).
    pub wfi_wfe_branch: bool,
    /// DSB/DMB end ranges.
    pub dsb_dmb_waypoints: bool,
    /// A64 opcodes with the top halfword clear are invalid.
    pub aa64_opcode_check: bool,
}

/// T32 IT-block state carried from one instruction to the next.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ItState {
    /// Remaining IT condition bits (0 = not in an IT block).
    pub mask: u8,
}

/// True when a T32 halfword is the first half of a 32-bit instruction.
#[inline]
pub fn t32_is_32bit(first: u16) -> bool {
    (first & 0xf800) >= 0xe800
}

/// Classify the instruction at `addr`. For A64 and A32 `op` is the 32-bit word;
/// for T32 `op` is the first halfword and `second` the second one of a 32-bit
/// encoding.
#[inline]
pub fn decode(
    isa: Isa,
    op: u32,
    _second: u16,
    addr: u64,
    opts: &DecodeOptions,
    _it: &mut ItState,
) -> Result<InstrInfo, InstrError> {
    match isa {
        Isa::A64 => {
            let o = a64::A64Options {
                arch: opts.arch,
                wfi_wfe_branch: opts.wfi_wfe_branch,
                dsb_dmb_waypoints: opts.dsb_dmb_waypoints,
                aa64_opcode_chk: opts.aa64_opcode_check,
            };
            let i = a64::classify(op, addr, o);
            if i.bad_opcode {
                return Err(InstrError::InvalidOpcode);
            }
            Ok(InstrInfo {
                itype: i.itype,
                subtype: i.subtype,
                conditional: i.conditional,
                link: i.link,
                target: i.target.unwrap_or(0),
                size: 4,
                next_isa: Isa::A64,
            })
        }
        _ => Err(InstrError::UnsupportedIsa),
    }
}
