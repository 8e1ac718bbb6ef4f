//! A32 and T32 opcode classification, matching OpenCSD 1.8.0's
//! `TrcIDecode::DecodeA32` and `TrcIDecode::DecodeT32`.
//!
//! Like the A64 side, OpenCSD does not fully decode AArch32 instructions: it
//! runs a fixed sequence of mask-and-compare tests and stops at the first that
//! matches. Those masks are looser than the architecture in places (any
//! data-processing instruction whose bits \[15:12\] name the PC is an indirect
//! branch, even where those bits are not a destination register) and miss some
//! architectural branches (A32 `ERET`); the element decoder must see the same
//! waypoints as OpenCSD, so the approximations are reproduced, not repaired.
//!
//! # A32 (`classify_a32`)
//!
//! Tested in this order; the first match decides the type.
//!
//! 1. **Indirect branch.** Condition field `0b1111`: only RFE. Otherwise, in
//!    order: BX and BLX (register); BXJ; LDM of any addressing mode with the
//!    PC in the list; LDR (immediate and literal, word, not byte) to the PC;
//!    LDR (register) to the PC; MOV to the PC, register and register-shifted
//!    forms, any S bit. Then three groups are *not* branches even if bits
//!    \[15:12\] are 0b1111: the "miscellaneous" space (bits \[27:23\] = 0b00010,
//!    bit 20 = 0, bit 7 = 0, which is where ERET, MRS, MSR (register), CLZ,
//!    BKPT, HVC, SMC live), bits \[27:23\] = 0b00011 with bit 20 = 0 and bits
//!    \[7:4\] = 0b1001 (store-exclusives), and MSR (immediate) and the hints.
//!    Finally any other data-processing immediate instruction with bits
//!    \[15:12\] = 0b1111 is an indirect branch except TST, TEQ, CMP, CMN (so
//!    MOVW and MOVT to the PC count), and anything at all in bits \[27:25\] =
//!    0b000 with bits \[15:12\] = 0b1111 is one too (so multiplies whose
//!    accumulator field is 15, and the halfword, doubleword and exclusive
//!    loads to the PC, count).
//! 2. **Direct branch.** B and BL (bits \[27:25\] = 0b101, any condition but
//!    0b1111) and BLX (immediate) (bits \[31:25\] = 0b1111101). The target is
//!    `pc + 8 + SignExtend(imm24:'00')`; for BLX the H bit (bit 24) is ORed in
//!    as bit 1 and the next instruction set becomes T32. All arithmetic is
//!    32-bit: the address wraps at 4 GiB as in OpenCSD.
//! 3. **Barriers.** DSB, DMB and ISB (`0xf57xxxxx` with bits \[7:4\] = 4, 5, 6)
//!    and their CP15 forms (MCR/MCR2 p15, 0, Rt, c7, c10, 4 / c7, c10, 5 /
//!    c7, c5, 4, any condition). ISB is always a waypoint; DSB and DMB only
//!    with [`ArmOptions::dsb_dmb_waypoints`]. A barrier that is not a waypoint
//!    is [`InstrType::Other`] and stops the search (it is not then tested as
//!    WFI/WFE, which it cannot be anyway).
//! 4. **WFI, WFE** (any condition but 0b1111), only with
//!    [`ArmOptions::wfi_wfe_branch`].
//!
//! Link: BL, BLX (immediate), BLX (register); their subtype is
//! [`InstrSubtype::BranchLink`]. Implied return ([`InstrSubtype::ImpliedReturn`])
//! marks exactly: `BX LR` (bits \[7:0\] = 0x1e; `BLX LR` is a link instead),
//! `LDMIA SP!, {..., pc}` without SP in the list, `LDR PC, [SP], #imm`
//! (post-indexed, added offset), and `MOV PC, LR` (S = 0, no shift). No
//! AArch32 instruction gets the exception-return subtype: `SUBS PC, LR, #imm`
//! is a plain indirect branch and A32 `ERET` is not a waypoint at all.
//!
//! Conditional: the condition field is neither 0b1110 (AL) nor 0b1111,
//! whatever the instruction is.
//!
//! # T32 (`classify_t32`)
//!
//! A halfword starts a 32-bit instruction when its top five bits are 0b11101,
//! 0b11110 or 0b11111 ([`t32_is_32bit`]). The order of the tests:
//!
//! 1. **Direct branch.** B<c> (T1; condition 0b1110 is UDF and 0b1111 SVC),
//!    B (T2), B<c>.W (T3; conditions 0b111x are the miscellaneous-control
//!    space), B.W (T4), BL, BLX (immediate) (with H, bit 0, clear), CBZ and
//!    CBNZ, and the Armv8.1-M low-overhead-loop branches: LE (with and without
//!    the loop count), LETP, WLS and WLSTP. Targets are `pc + 4 + offset`,
//!    except BLX, which is `Align(pc, 4) + 4 + offset` and switches to A32, and
//!    LE/LETP, which branch backwards by their zero-extended offset. The other
//!    Armv8.1-M branch instructions, BF, BFX, BFL, BFLX and BFCSEL, and DLS,
//!    DLSTP, LCTP, are not recognised: they are [`InstrType::Other`]
//!    (OpenCSD 1.8.0 has no pattern for them).
//! 2. **Indirect branch.** BX and BLX (register), which include the Armv8-M
//!    BXNS and BLXNS; BXJ; POP (T1) with the PC; ADD (register, T2) and MOV
//!    (register, T1) to the PC; TBB, TBH; RFE (both encodings); SUBS PC, LR,
//!    #imm, which includes ERET; LDR (immediate, T3 and T4), LDR (literal) and
//!    LDR (register) to the PC; LDM and LDMDB (and so POP.W) with the PC in the
//!    list.
//! 3. **Barriers**: DSB, DMB, ISB, and the CP15 MCR forms, as for A32.
//! 4. **WFI, WFE** (16-bit and 32-bit), only with
//!    [`ArmOptions::wfi_wfe_branch`].
//!
//! Link: BL, BLX (immediate), BLX (register) and BLXNS. Implied return: `BX LR`
//! (and `BXNS LR`), any 16-bit `POP {..., pc}`, `MOV PC, LR` (16-bit), `LDR
//! PC, [SP], #imm` (T4, post-indexed, added offset) and `LDMIA SP!, {..., pc}`.
//!
//! Conditional: B<c> (T1 and T3), CBZ and CBNZ; with
//! [`ArmOptions::track_it_block`], also every instruction inside an IT block.
//!
//! # IT blocks
//!
//! With [`ArmOptions::track_it_block`] (OpenCSD's ETMv4/ETE decoder sets it;
//! its PTM and ETMv3 decoders do not), [`ItState`] counts the instructions an IT
//! instruction makes conditional, as OpenCSD keeps `thumb_it_conditions` in its
//! per-decoder instruction record:
//!
//! * while the count is non-zero, each T32 instruction, whatever its type and
//!   even another IT, is marked conditional and decrements the count;
//! * when the count is zero, an instruction of type [`InstrType::Other`] that
//!   is an IT sets the count to the length of its block (1 to 4, from the
//!   position of the lowest set bit of the mask). IT itself is not marked
//!   conditional.
//!
//! OpenCSD clears the count whenever it decodes an A32 or A64 instruction;
//! [`classify_a32`] takes no `ItState`, so the caller does that with
//! [`ItState::clear`]. The state is otherwise kept across instruction ranges
//! and trace packets.

use crate::element::{InstrSubtype, InstrType, Isa};

/// Decoder configuration affecting AArch32 classification (input fields of
/// OpenCSD's `ocsd_instr_info`). `Default` is everything off.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ArmOptions {
    /// DSB and DMB are waypoints (`dsb_dmb_waypoints`). OpenCSD's ETMv4/ETE
    /// decoder leaves this off.
    pub dsb_dmb_waypoints: bool,
    /// WFI and WFE are traced as branches (`wfi_wfe_branch`).
    pub wfi_wfe_branch: bool,
    /// Instructions inside T32 IT blocks are conditional (`track_it_block`).
    pub track_it_block: bool,
}

/// The classification of one A32 or T32 instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ArmInfo {
    /// Waypoint class.
    pub itype: InstrType,
    /// Branch detail: [`InstrSubtype::BranchLink`],
    /// [`InstrSubtype::ImpliedReturn`] or [`InstrSubtype::None`].
    pub subtype: InstrSubtype,
    /// OpenCSD's `is_conditional` (see the module documentation).
    pub conditional: bool,
    /// Direct branch target (32-bit arithmetic, bit 0 clear); `None` unless
    /// [`InstrType::Branch`].
    pub target: Option<u64>,
    /// Branch with link.
    pub link: bool,
    /// Instruction size in bytes: 4 for A32, 2 or 4 for T32.
    pub size: u8,
    /// Instruction set at the branch target if the branch is taken. Differs
    /// from the current one only for BLX (immediate); for indirect branches
    /// OpenCSD keeps the current instruction set (the trace supplies the real
    /// one with the target address).
    pub next_isa: Isa,
}

impl ArmInfo {
    #[inline]
    const fn other(isa: Isa, size: u8) -> ArmInfo {
        ArmInfo {
            itype: InstrType::Other,
            subtype: InstrSubtype::None,
            conditional: false,
            target: None,
            link: false,
            size,
            next_isa: isa,
        }
    }

    /// True for the instruction types that end an instruction range
    /// (everything but [`InstrType::Other`]).
    #[inline]
    pub fn is_waypoint(&self) -> bool {
        self.itype != InstrType::Other
    }
}

/// IT-block tracking state carried from one T32 instruction to the next
/// (OpenCSD's `thumb_it_conditions`). `Default` is outside any IT block.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ItState {
    remaining: u8,
}

impl ItState {
    /// Outside any IT block.
    pub const fn new() -> ItState {
        ItState { remaining: 0 }
    }

    /// Leave any IT block (OpenCSD does so on every A32 or A64 decode).
    #[inline]
    pub fn clear(&mut self) {
        self.remaining = 0;
    }

    /// How many of the following T32 instructions are still inside the block.
    #[inline]
    pub fn remaining(&self) -> u8 {
        self.remaining
    }

    /// Inside a block with `n` more instructions (at most four) to come.
    #[cfg(test)]
    pub(crate) fn inside(n: u8) -> ItState {
        ItState { remaining: n.min(4) }
    }
}

/// A DSB, DMB or ISB as OpenCSD recognises them.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Barrier {
    DsbDmb,
    Isb,
}

/// Result of a barrier test: the barrier type, or `Other` for a DSB/DMB that is
/// not a waypoint.
#[inline]
fn barrier_type(barrier: Barrier, opts: ArmOptions) -> InstrType {
    match barrier {
        Barrier::Isb => InstrType::Isb,
        Barrier::DsbDmb if opts.dsb_dmb_waypoints => InstrType::DsbDmb,
        Barrier::DsbDmb => InstrType::Other,
    }
}

/// Where one instruction set encodes the barriers OpenCSD recognises, as
/// (mask, value) pairs: the architectural DSB, DMB, ISB, and the CP15 c7
/// operations written with MCR.
struct BarrierEncodings {
    architectural: (u32, u32),
    cp15: (u32, u32),
}

const A32_BARRIERS: BarrierEncodings = BarrierEncodings {
    architectural: (0xfff0_0000, 0xf570_0000),
    cp15: (0x0fff_0f00, 0x0e07_0f00),
};

const T32_BARRIERS: BarrierEncodings = BarrierEncodings {
    architectural: (0xffff_ff00, 0xf3bf_8f00),
    cp15: (0xffff_0f00, 0xee07_0f00),
};

#[inline]
fn barrier(op: u32, enc: &BarrierEncodings) -> Option<Barrier> {
    if op & enc.architectural.0 == enc.architectural.1 {
        // Bits [7:4] pick DSB (4), DMB (5) or ISB (6); bits [3:0] are the option.
        match (op >> 4) & 0xf {
            0x4 | 0x5 => Some(Barrier::DsbDmb),
            0x6 => Some(Barrier::Isb),
            _ => None,
        }
    } else if op & enc.cp15.0 == enc.cp15.1 {
        // opc2, bit 4 and CRm: c7, c10, 4 (DSB); c7, c10, 5 (DMB); c7, c5, 4 (ISB).
        match op & 0xff {
            0x9a | 0xba => Some(Barrier::DsbDmb),
            0x95 => Some(Barrier::Isb),
            _ => None,
        }
    } else {
        None
    }
}

// ---------------------------------------------------------------------------
// A32
// ---------------------------------------------------------------------------

/// Classify the A32 `opcode` at address `pc`, as OpenCSD 1.8.0's `DecodeA32`.
#[inline]
pub fn classify_a32(opcode: u32, pc: u64, opts: ArmOptions) -> ArmInfo {
    let mut info = ArmInfo::other(Isa::A32, 4);
    // Condition AL (0b1110) and the unconditional space (0b1111) are the two
    // values with bits [31:29] all set.
    info.conditional = opcode >> 29 != 0b111;

    if let Some(subtype) = a32_indirect(opcode) {
        info.itype = InstrType::IndirectBranch;
        // BLX (register): bits [7:4] = 0b0011 in the BX/BLX group.
        info.link = opcode & 0x0ff0_00f0 == 0x0120_0030;
        info.subtype = if info.link {
            InstrSubtype::BranchLink
        } else {
            subtype
        };
    } else if let Some((target, link)) = a32_direct(opcode, pc) {
        info.itype = InstrType::Branch;
        if target & 1 != 0 {
            info.next_isa = Isa::T32;
        }
        info.target = Some((target & !1) as u64);
        info.link = link;
        if link {
            info.subtype = InstrSubtype::BranchLink;
        }
    } else if let Some(found) = barrier(opcode, &A32_BARRIERS) {
        info.itype = barrier_type(found, opts);
    } else if opts.wfi_wfe_branch && opcode >> 28 != 0xf && opcode & 0x0fff_fffe == 0x0320_f002 {
        // WFE (op2 = 2) and WFI (op2 = 3) in the hint space.
        info.itype = InstrType::WfiWfe;
    }
    info
}

/// OpenCSD's A32 indirect-branch test. `Some(subtype)` for a branch, with the
/// implied-return subtype where OpenCSD assigns it.
#[inline]
fn a32_indirect(op: u32) -> Option<InstrSubtype> {
    use InstrSubtype::{ImpliedReturn, None as Plain};
    let ret_if = |cond: bool| Some(if cond { ImpliedReturn } else { Plain });

    if op >> 28 == 0xf {
        // Unconditional space: RFE{DA,IA,DB,IB} only (bits [27:25] = 0b100,
        // bit 22 = 0, bit 20 = 1).
        return if op & 0xfe50_0000 == 0xf810_0000 {
            Some(Plain)
        } else {
            None
        };
    }
    // BX (bits [7:4] = 0b0001) and BLX (register) (0b0011).
    if op & 0x0ff0_00d0 == 0x0120_0010 {
        return ret_if(op & 0xff == 0x1e);
    }
    // BXJ.
    if op & 0x0ff0_00f0 == 0x0120_0020 {
        return Some(Plain);
    }
    // LDM (any mode, with or without writeback or ^) loading the PC.
    if op & 0x0e10_8000 == 0x0810_8000 {
        // POP: LDMIA SP! with the PC in the list and SP not.
        return ret_if(op & 0x0fff_a000 == 0x08bd_8000);
    }
    // LDR (immediate, literal; word) with Rt = PC, any indexing.
    if op & 0x0e50_f000 == 0x0410_f000 {
        // LDR PC, [SP], #+imm: P = 0, U = 1, W = 0, Rn = SP.
        return ret_if(op & 0x01ff_0000 == 0x009d_0000);
    }
    // LDR (register; word) with Rt = PC.
    if op & 0x0e50_f010 == 0x0610_f000 {
        return Some(Plain);
    }
    // MOV (register, register-shifted register) to the PC, S either way.
    if op & 0x0fe0_f000 == 0x01a0_f000 {
        // MOV PC, LR: S = 0, LSL #0, Rm = 14.
        return ret_if(op & 0x0010_0fff == 0x0000_000e);
    }
    // Groups that are never branches, whatever bits [15:12] hold.
    if op & 0x0f90_0080 == 0x0100_0000 {
        // Miscellaneous instructions (MRS, MSR reg, ERET, CLZ, BKPT, ...).
        return None;
    }
    if op & 0x0f90_00f0 == 0x0180_0090 {
        // Store-exclusive forms.
        return None;
    }
    if op & 0x0fb0_f000 == 0x0320_f000 {
        // MSR (immediate) and hints.
        return None;
    }
    // Data-processing (immediate) with bits [15:12] = PC, except the
    // flag-setting compares and tests.
    if op & 0x0e00_f000 == 0x0200_f000 {
        return if op & 0x0f90_f000 == 0x0310_f000 {
            None
        } else {
            Some(Plain)
        };
    }
    // Anything in bits [27:25] = 0b000 with bits [15:12] = PC.
    if op & 0x0e00_f000 == 0x0000_f000 {
        return Some(Plain);
    }
    None
}

/// OpenCSD's A32 direct-branch test and target: `(target, link)`, the target
/// with bit 0 set when the branch switches to T32.
#[inline]
fn a32_direct(op: u32, pc: u64) -> Option<(u32, bool)> {
    let unconditional = op >> 28 == 0xf;
    let is_branch = if unconditional {
        // BLX (immediate).
        op & 0xfe00_0000 == 0xfa00_0000
    } else {
        // B, BL.
        op & 0x0e00_0000 == 0x0a00_0000
    };
    if !is_branch {
        return None;
    }
    let offset = (((op & 0x00ff_ffff) << 8) as i32 >> 6) as u32;
    let mut target = (pc as u32).wrapping_add(8).wrapping_add(offset);
    let link = if unconditional {
        // Thumb target, with H (bit 24) supplying bit 1.
        target |= 1 | ((op >> 23) & 2);
        true
    } else {
        op & 0x0100_0000 != 0
    };
    Some((target, link))
}

// ---------------------------------------------------------------------------
// T32
// ---------------------------------------------------------------------------

/// True if `first` is the first halfword of a 32-bit T32 instruction.
#[inline]
pub fn t32_is_32bit(first: u16) -> bool {
    first >= 0xe800
}

/// Classify the T32 instruction whose first halfword is `first` (and second,
/// for a 32-bit encoding, `second`; ignored otherwise) at address `pc`, as
/// OpenCSD 1.8.0's `DecodeT32`, updating the IT-block state `it` when
/// [`ArmOptions::track_it_block`] is set.
#[inline]
pub fn classify_t32(
    first: u16,
    second: u16,
    pc: u64,
    it: &mut ItState,
    opts: ArmOptions,
) -> ArmInfo {
    let wide = t32_is_32bit(first);
    // First halfword in the top half, as the masks are written.
    let op = ((first as u32) << 16) | if wide { second as u32 } else { 0 };
    let mut info = ArmInfo::other(Isa::T32, if wide { 4 } else { 2 });

    if let Some(d) = t32_direct(op, pc) {
        info.itype = InstrType::Branch;
        info.conditional = d.conditional;
        info.link = d.link;
        if d.link {
            info.subtype = InstrSubtype::BranchLink;
        }
        if d.target & 1 == 0 {
            info.next_isa = Isa::A32;
        }
        info.target = Some((d.target & !1) as u64);
    } else if let Some((subtype, link)) = t32_indirect(op) {
        info.itype = InstrType::IndirectBranch;
        info.subtype = subtype;
        info.link = link;
    } else if let Some(found) = barrier(op, &T32_BARRIERS) {
        info.itype = barrier_type(found, opts);
    } else if opts.wfi_wfe_branch && t32_wfi_wfe(op) {
        info.itype = InstrType::WfiWfe;
    }

    if opts.track_it_block {
        if it.remaining != 0 {
            info.conditional = true;
            it.remaining -= 1;
        } else if info.itype == InstrType::Other {
            it.remaining = t32_it_length(first);
        }
    }
    info
}

struct T32Direct {
    /// Target, bit 0 set unless the branch switches to A32.
    target: u32,
    link: bool,
    conditional: bool,
}

/// OpenCSD's T32 direct-branch test, in its order.
#[inline]
fn t32_direct(op: u32, pc: u64) -> Option<T32Direct> {
    let pc = pc as u32;
    let hw1 = op >> 16;
    let thumb = |offset: u32, link: bool, conditional: bool| {
        Some(T32Direct {
            target: pc.wrapping_add(4).wrapping_add(offset) | 1,
            link,
            conditional,
        })
    };

    // B<c> (T1): 1101 cond imm8, cond not 111x.
    if hw1 >> 12 == 0xd && (hw1 >> 9) & 0x7 != 0x7 {
        let offset = ((hw1 << 24) as i32 >> 23) as u32;
        return thumb(offset, false, true);
    }
    // B (T2): 11100 imm11.
    if hw1 >> 11 == 0b11100 {
        let offset = ((hw1 << 21) as i32 >> 20) as u32;
        return thumb(offset, false, false);
    }
    // B<c>.W (T3): 11110 S cond imm6 | 10 J1 0 J2 imm11, cond not 111x.
    if op & 0xf800_d000 == 0xf000_8000 && op & 0x0380_0000 != 0x0380_0000 {
        return thumb(t3_offset(op), false, true);
    }
    // B.W (T4, bit 14 = 0) and BL (bit 14 = 1): 11110 S imm10 | 1 x J1 1 J2 imm11.
    if op & 0xf800_9000 == 0xf000_9000 {
        return thumb(t4_offset(op), op & 0x4000 != 0, false);
    }
    // BLX (immediate) (T2): 11110 S imm10H | 11 J1 0 J2 imm10L H, H = 0. Goes
    // to A32 from the word-aligned PC, so bit 0 of the target stays clear.
    if op & 0xf800_d001 == 0xf000_c000 {
        let target = (pc & !3).wrapping_add(4).wrapping_add(t4_offset(op));
        return Some(T32Direct {
            target,
            link: true,
            conditional: false,
        });
    }
    // CBZ, CBNZ: 1011 x0i1 imm5 Rn; forward only.
    if hw1 & 0xf500 == 0xb100 {
        let offset = ((hw1 >> 2) & 0x3e) | ((hw1 >> 3) & 0x40);
        return thumb(offset, false, true);
    }
    // Armv8.1-M low-overhead loops, all with hw2 = 110 x imm10 1 (x = immL).
    let lob_offset = ((op & 0x7fe) << 1) | ((op >> 10) & 2);
    // LE LR (T1), LE (T2), LETP (T3): backwards.
    if matches!(op & 0xffff_f001, 0xf00f_c001 | 0xf02f_c001 | 0xf01f_c001) {
        return thumb(lob_offset.wrapping_neg(), false, false);
    }
    // WLS (T1) and WLSTP (T3): forwards.
    if op & 0xfff0_f001 == 0xf040_c001 || op & 0xffc0_f001 == 0xf000_c001 {
        return thumb(lob_offset, false, false);
    }
    None
}

/// Offset of B<c>.W (T3): SignExtend(S:J2:J1:imm6:imm11:'0').
#[inline]
fn t3_offset(op: u32) -> u32 {
    let s = (op >> 26) & 1;
    let imm6 = (op >> 16) & 0x3f;
    let j1 = (op >> 13) & 1;
    let j2 = (op >> 11) & 1;
    let imm11 = op & 0x7ff;
    let raw = (s << 20) | (j2 << 19) | (j1 << 18) | (imm6 << 12) | (imm11 << 1);
    ((raw << 11) as i32 >> 11) as u32
}

/// Offset of B.W (T4), BL and BLX (immediate):
/// SignExtend(S:I1:I2:imm10:imm11:'0') with I1 = NOT(J1 XOR S), I2 = NOT(J2 XOR S).
#[inline]
fn t4_offset(op: u32) -> u32 {
    let s = (op >> 26) & 1;
    let imm10 = (op >> 16) & 0x3ff;
    let i1 = !((op >> 13) ^ s) & 1;
    let i2 = !((op >> 11) ^ s) & 1;
    let imm11 = op & 0x7ff;
    let raw = (s << 24) | (i1 << 23) | (i2 << 22) | (imm10 << 12) | (imm11 << 1);
    ((raw << 7) as i32 >> 7) as u32
}

/// OpenCSD's T32 indirect-branch test, in its order: `(subtype, link)`.
#[inline]
fn t32_indirect(op: u32) -> Option<(InstrSubtype, bool)> {
    use InstrSubtype::{BranchLink, ImpliedReturn, None as Plain};
    let plain = Some((Plain, false));
    let ret_if = |cond: bool| Some((if cond { ImpliedReturn } else { Plain }, false));
    let hw1 = op >> 16;

    // BX, BLX (register), BXNS, BLXNS: 0100 0111 L Rm xxx.
    if hw1 >> 8 == 0x47 {
        if hw1 & 0x80 != 0 {
            return Some((BranchLink, true));
        }
        return ret_if((hw1 >> 3) & 0xf == 14);
    }
    // BXJ.
    if op & 0xfff0_d000 == 0xf3c0_8000 {
        return plain;
    }
    // POP (T1) with the PC.
    if hw1 >> 8 == 0xbd {
        return ret_if(true);
    }
    // ADD (register, T2) and MOV (register, T1) with Rd = PC (DN:Rdn = 1111).
    if hw1 & 0xfd87 == 0x4487 {
        // MOV PC, LR.
        return ret_if(hw1 == 0x46f7);
    }
    // TBB, TBH.
    if op & 0xfff0_ffe0 == 0xe8d0_f000 {
        return plain;
    }
    // RFEDB (T1), RFEIA (T2).
    if op & 0xffd0_0000 == 0xe810_0000 || op & 0xffd0_0000 == 0xe990_0000 {
        return plain;
    }
    // SUBS PC, LR, #imm8 (ERET is imm8 = 0).
    if op & 0xfff0_d000 == 0xf3d0_8000 {
        return plain;
    }
    // LDR PC, [Rn, #imm12] (T3).
    if op & 0xfff0_f000 == 0xf8d0_f000 {
        return plain;
    }
    // LDR PC, <label> (literal).
    if op & 0xff7f_f000 == 0xf85f_f000 {
        return plain;
    }
    // LDR PC, [Rn, #+/-imm8] with indexing options (T4).
    if op & 0xfff0_f800 == 0xf850_f800 {
        // LDR PC, [SP], #+imm8: Rn = SP, P = 0, U = 1, W = 1.
        return ret_if(op & 0x000f_0f00 == 0x000d_0b00);
    }
    // LDR PC, [Rn, Rm, LSL #n] (register).
    if op & 0xfff0_ffc0 == 0xf850_f000 {
        return plain;
    }
    // LDM, LDMDB with the PC in the list.
    if op & 0xfe50_8000 == 0xe810_8000 {
        // LDMIA SP!, i.e. POP.W.
        return ret_if(hw1 & 0x0fff == 0x08bd);
    }
    None
}

#[inline]
fn t32_wfi_wfe(op: u32) -> bool {
    // WFE.W, WFI.W (T2), WFE, WFI (T1).
    op & 0xffff_fffe == 0xf3af_8002 || op & 0xffef_0000 == 0xbf20_0000
}

/// Number of instructions an IT instruction covers, 0 if `hw` is not an IT.
#[inline]
fn t32_it_length(hw: u16) -> u8 {
    if hw >> 8 != 0xbf || hw & 0xf == 0 {
        return 0;
    }
    // The lowest set bit of the mask ends the block: bit 0 -> 4 instructions,
    // bit 3 -> 1.
    4 - (hw & 0xf).trailing_zeros() as u8
}
