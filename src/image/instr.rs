//! One instruction-classification interface over the instruction sets: what the
//! element decoder needs to know about an instruction to walk the program image
//! (its size, whether it ends a range, where a direct branch goes).

use crate::element::{InstrSubtype, InstrType, Isa};

use super::{a64, arm32};

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
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
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
    /// Instructions inside a T32 IT block are conditional (ETMv4/ETE decode).
    pub track_it_block: bool,
}

pub use super::arm32::{t32_is_32bit, ItState};

/// Classify the instruction at `addr`. For A64 and A32 `op` is the 32-bit word;
/// for T32 `op` is the first halfword and `second` the second one of a 32-bit
/// encoding.
#[inline]
pub fn decode(
    isa: Isa,
    op: u32,
    second: u16,
    addr: u64,
    opts: &DecodeOptions,
    it: &mut ItState,
) -> Result<InstrInfo, InstrError> {
    let arm = arm32::ArmOptions {
        dsb_dmb_waypoints: opts.dsb_dmb_waypoints,
        wfi_wfe_branch: opts.wfi_wfe_branch,
        track_it_block: opts.track_it_block,
    };
    let from_arm = |i: arm32::ArmInfo| InstrInfo {
        itype: i.itype,
        subtype: i.subtype,
        conditional: i.conditional,
        link: i.link,
        target: i.target.unwrap_or(0),
        size: i.size,
        next_isa: i.next_isa,
    };
    match isa {
        Isa::T32 => Ok(from_arm(arm32::classify_t32(op as u16, second, addr, it, arm))),
        Isa::A32 => {
            // OpenCSD ends any IT block outside T32.
            it.clear();
            Ok(from_arm(arm32::classify_a32(op, addr, arm)))
        }
        Isa::A64 => {
            it.clear();
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
