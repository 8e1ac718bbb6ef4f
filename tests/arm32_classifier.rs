//! Tests of the A32/T32 classifier (`src/image/arm32.rs`).
//!
//! * Hand-written tables, one entry per instruction form OpenCSD 1.8.0
//!   distinguishes (and the near misses it does not), with the expected
//!   classification worked out from the encoding by hand.
//! * IT-block tracking and the configuration switches.
//! * A walk over every A32/T32 instruction range in the OpenCSD golden outputs
//!   (`../shared/fixtures/opencsd/*/expected/*.ppl`, skipped when absent):
//!   classifying the snapshot's memory image from each range's start must end
//!   the range exactly where OpenCSD did, with its instruction count, last
//!   instruction size, type, subtype and condition flag.
//! * A differential test against yaxpeax-arm 0.5's ARMv7 decoder over one
//!   million random A32 words, every 16-bit T32 encoding and one million random
//!   32-bit T32 encodings; `differential::a32_known_difference` and
//!   `differential::t32_known_difference` list where OpenCSD's patterns
//!   knowingly differ from the architecture. Each exclusion is a predicate on
//!   the encoding and on both verdicts, so it cannot hide anything else.

// The classifier is compiled straight from its source file, so this test does
// not depend on how the library exposes it; it refers to `crate::element`.
#[allow(dead_code)]
#[path = "../src/image/arm32.rs"]
mod arm32;
mod element {
    pub use tracesight::element::*;
}

use arm32::{classify_a32, classify_t32, t32_is_32bit, ArmInfo, ArmOptions, ItState};
use element::{InstrSubtype, InstrType, Isa};

const NONE: ArmOptions = ArmOptions {
    dsb_dmb_waypoints: false,
    wfi_wfe_branch: false,
    track_it_block: false,
};
const ALL: ArmOptions = ArmOptions {
    dsb_dmb_waypoints: true,
    wfi_wfe_branch: true,
    track_it_block: true,
};

// ---------------------------------------------------------------------------
// Expected-value helpers
// ---------------------------------------------------------------------------

#[derive(Clone, Copy)]
struct Exp {
    itype: InstrType,
    subtype: InstrSubtype,
    conditional: bool,
    target: Option<u64>,
    link: bool,
    /// `None`: the current instruction set.
    next_isa: Option<Isa>,
}

fn other() -> Exp {
    Exp {
        itype: InstrType::Other,
        subtype: InstrSubtype::None,
        conditional: false,
        target: None,
        link: false,
        next_isa: None,
    }
}

fn ty(itype: InstrType) -> Exp {
    Exp { itype, ..other() }
}

fn br(target: u64) -> Exp {
    Exp {
        itype: InstrType::Branch,
        target: Some(target),
        ..other()
    }
}

fn ind() -> Exp {
    ty(InstrType::IndirectBranch)
}

impl Exp {
    fn cond(self) -> Exp {
        Exp {
            conditional: true,
            ..self
        }
    }
    fn link(self) -> Exp {
        Exp {
            link: true,
            subtype: InstrSubtype::BranchLink,
            ..self
        }
    }
    fn ret(self) -> Exp {
        Exp {
            subtype: InstrSubtype::ImpliedReturn,
            ..self
        }
    }
    fn to(self, isa: Isa) -> Exp {
        Exp {
            next_isa: Some(isa),
            ..self
        }
    }
    fn check(&self, got: &ArmInfo, isa: Isa, size: u8, what: &str) {
        let want = ArmInfo {
            itype: self.itype,
            subtype: self.subtype,
            conditional: self.conditional,
            target: self.target,
            link: self.link,
            size,
            next_isa: self.next_isa.unwrap_or(isa),
        };
        assert_eq!(*got, want, "{what}");
    }
}

// ---------------------------------------------------------------------------
// A32 table
// ---------------------------------------------------------------------------

const PC: u64 = 0x8000;

/// (opcode, expected with every option on at `PC`, instruction).
fn a32_table() -> Vec<(u32, Exp, &'static str)> {
    use InstrType as T;
    vec![
        // Direct branches: target = PC + 8 + imm24 * 4.
        (0xea00_0000, br(0x8008), "b .+8"),
        (0xeaff_fffe, br(0x8000), "b ."),
        (0xea7f_ffff, br(0x8008 + 0x1ff_fffc), "b (largest forward)"),
        (
            0xea80_0000,
            br((0x8008u32.wrapping_sub(0x200_0000)) as u64),
            "b (largest backward, wraps)",
        ),
        (0x0a00_0010, br(0x8048).cond(), "beq .+0x48"),
        (0xdaff_fffd, br(0x7ffc).cond(), "ble .-4"),
        (0xeb00_0004, br(0x8018).link(), "bl .+0x18"),
        (0x1bff_fffd, br(0x7ffc).link().cond(), "blne .-4"),
        // BLX (immediate): to T32, H (bit 24) gives bit 1; never conditional.
        (0xfa00_0000, br(0x8008).link().to(Isa::T32), "blx .+8"),
        (
            0xfb00_0000,
            br(0x800a).link().to(Isa::T32),
            "blx .+10 (H set)",
        ),
        (0xfaff_fffe, br(0x8000).link().to(Isa::T32), "blx ."),
        // BX, BLX (register), BXJ.
        (0xe12f_ff1e, ind().ret(), "bx lr"),
        (0x012f_ff1e, ind().ret().cond(), "bxeq lr"),
        (0xe12f_ff13, ind(), "bx r3"),
        (0xe12f_ff33, ind().link(), "blx r3"),
        (
            0xe12f_ff3e,
            ind().link(),
            "blx lr (link wins over implied return)",
        ),
        (0xe12f_ff23, ind(), "bxj r3"),
        // LDM with the PC.
        (0xe8bd_8010, ind().ret(), "pop {r4, pc}"),
        (0xe8bd_8000, ind().ret(), "pop {pc} (ldmia sp!, {pc})"),
        (
            0xe8bd_a000,
            ind(),
            "ldmia sp!, {sp, pc}: SP in the list, no implied return",
        ),
        (0xe89d_8000, ind(), "ldmia sp, {pc}: no writeback"),
        (0xe930_8000, ind(), "ldmdb r0!, {pc}"),
        (0xe9bd_8000, ind(), "ldmib sp!, {pc}"),
        (0xe8d0_8000, ind(), "ldmia r0, {pc}^"),
        (0xe8bd_0010, other(), "pop {r4}"),
        // LDR to the PC.
        (0xe49d_f004, ind().ret(), "ldr pc, [sp], #4"),
        (0xe41d_f004, ind(), "ldr pc, [sp], #-4"),
        (0xe59d_f000, ind(), "ldr pc, [sp]"),
        (0xe5bd_f004, ind(), "ldr pc, [sp, #4]!"),
        (0xe59f_f000, ind(), "ldr pc, [pc] (literal)"),
        (0xe51f_f004, ind(), "ldr pc, [pc, #-4]"),
        (0xe79f_f100, ind(), "ldr pc, [pc, r0, lsl #2]"),
        (
            0xe4bd_f004,
            ind(),
            "ldrt pc, [sp], #4 (unprivileged form matches the immediate pattern)",
        ),
        (
            0xe5d0_f000,
            other(),
            "ldrb pc, [r0]: byte loads are not recognised",
        ),
        (0xe590_0000, other(), "ldr r0, [r0]"),
        // MOV to the PC.
        (0xe1a0_f00e, ind().ret(), "mov pc, lr"),
        (0xe1b0_f00e, ind(), "movs pc, lr"),
        (0xe1a0_f10e, ind(), "mov pc, lr, lsl #2"),
        (0xe1a0_f003, ind(), "mov pc, r3"),
        (0xe1a0_f31e, ind(), "mov pc, lr, lsl r3"),
        (0x11a0_f00e, ind().ret().cond(), "movne pc, lr"),
        // Other data processing to the PC.
        (0xe08f_f100, ind(), "add pc, pc, r0, lsl #2"),
        (0xe28f_f004, ind(), "add pc, pc, #4"),
        (
            0xe25e_f004,
            ind(),
            "subs pc, lr, #4 (no exception-return subtype)",
        ),
        (0xe3a0_f000, ind(), "mov pc, #0"),
        (0xe300_f000, ind(), "movw pc, #0"),
        (0xe340_f000, ind(), "movt pc, #0"),
        (0xe3e0_f000, ind(), "mvn pc, #0"),
        (0xe310_f000, other(), "tst r0, #0 with bits [15:12] = 1111"),
        (0xe35f_f000, other(), "cmp pc, #0 with bits [15:12] = 1111"),
        (
            0xe150_f000,
            ind(),
            "cmp r0, r0 with bits [15:12] = 1111 (register form is caught)",
        ),
        (
            0xe020_f291,
            ind(),
            "mla r0, r1, r2, pc (accumulator field is 15)",
        ),
        (0xe1d0_f0b0, ind(), "ldrh pc, [r0]"),
        (0xe1c0_f0b0, ind(), "strh pc, [r0] (a store, still caught)"),
        (
            0xe00f_0091,
            other(),
            "mul pc, r1, r0 (destination is bits [19:16])",
        ),
        (0xe190_ff9f, ind(), "ldrex pc, [r0]"),
        (
            0xe180_ff91,
            other(),
            "strex pc, r1, [r0] (store-exclusive group)",
        ),
        (0xe16f_ff10, other(), "clz pc, r0 (miscellaneous space)"),
        (0xe10f_f000, other(), "mrs pc, apsr (miscellaneous space)"),
        (
            0xe160_006e,
            other(),
            "eret (miscellaneous space: not a branch to OpenCSD)",
        ),
        (0xe32f_f000, other(), "msr cpsr_fsxc, #0 (MSR immediate)"),
        (0xe320_f000, other(), "nop"),
        (0xe1a0_0000, other(), "mov r0, r0"),
        (0x03a0_0001, other().cond(), "moveq r0, #1"),
        // RFE, the only indirect branch in the unconditional space.
        (0xf890_0a00, ind(), "rfeia r0"),
        (0xf93d_0a00, ind(), "rfedb sp!"),
        (0xf84d_0513, other(), "srsda sp, #19"),
        (0xf12f_ff1e, other(), "bx lr pattern with condition 0b1111"),
        // Barriers.
        (0xf57f_f04f, ty(T::DsbDmb), "dsb sy"),
        (0xf57f_f05f, ty(T::DsbDmb), "dmb sy"),
        (0xf57f_f06f, ty(T::Isb), "isb sy"),
        (0xf57f_f01f, other(), "clrex"),
        (0xf57f_f070, other(), "sb"),
        (
            0xee07_0f9a,
            ty(T::DsbDmb),
            "mcr p15, 0, r0, c7, c10, 4 (CP15 DSB)",
        ),
        (
            0xee07_0fba,
            ty(T::DsbDmb),
            "mcr p15, 0, r0, c7, c10, 5 (CP15 DMB)",
        ),
        (
            0xee07_0f95,
            ty(T::Isb),
            "mcr p15, 0, r0, c7, c5, 4 (CP15 ISB)",
        ),
        (
            0x0e07_0f95,
            ty(T::Isb).cond(),
            "mcreq p15, 0, r0, c7, c5, 4",
        ),
        (0xee07_0f9b, other(), "mcr p15, 0, r0, c7, c11, 4"),
        // WFI, WFE.
        (0xe320_f003, ty(T::WfiWfe), "wfi"),
        (0xe320_f002, ty(T::WfiWfe), "wfe"),
        (0x0320_f003, ty(T::WfiWfe).cond(), "wfieq"),
        (0xe320_f004, other(), "sev"),
        // Everything else.
        (0xef00_0000, other(), "svc #0"),
        (0xe120_0070, other(), "bkpt #0"),
        (0xe7f0_00f0, other(), "udf #0"),
        (0xe160_0070, other(), "smc #0"),
        (0xe140_0070, other(), "hvc #0"),
    ]
}

#[test]
fn a32_table_all_options() {
    for (op, exp, what) in a32_table() {
        let got = classify_a32(op, PC, ALL);
        exp.check(&got, Isa::A32, 4, &format!("{op:08x} {what}"));
    }
}

#[test]
fn a32_table_no_options() {
    for (op, exp, what) in a32_table() {
        let exp = match exp.itype {
            InstrType::DsbDmb | InstrType::WfiWfe => Exp {
                itype: InstrType::Other,
                ..exp
            },
            _ => exp,
        };
        let got = classify_a32(op, PC, NONE);
        exp.check(&got, Isa::A32, 4, &format!("{op:08x} {what} (no options)"));
    }
}

#[test]
fn a32_targets_are_32_bit() {
    // b .+0x10 at 0xfffffff0 wraps to 0.
    let got = classify_a32(0xea00_0002, 0xffff_fff0, NONE);
    assert_eq!(got.target, Some(0));
    // OpenCSD truncates the address to 32 bits before adding.
    let got = classify_a32(0xea00_0000, 0x1_0000_8000, NONE);
    assert_eq!(got.target, Some(0x8008));
    // BLX ORs H in as bit 1 (equal to adding on word-aligned addresses).
    let got = classify_a32(0xfb00_0000, 0x8000, NONE);
    assert_eq!((got.target, got.next_isa), (Some(0x800a), Isa::T32));
}

#[test]
fn a32_conditional_is_the_condition_field() {
    for cond in 0..16u32 {
        let op = (cond << 28) | 0x01a0_0000; // mov<c> r0, r0 (NV space for 0b1111)
        let got = classify_a32(op, PC, NONE);
        assert_eq!(got.conditional, cond < 0xe, "cond {cond:x}");
    }
}

// ---------------------------------------------------------------------------
// T32 table
// ---------------------------------------------------------------------------

/// (first halfword, second halfword or 0, expected with every option on but IT
/// tracking off, instruction).
fn t32_table() -> Vec<(u16, u16, Exp, &'static str)> {
    use InstrType as T;
    vec![
        // 16-bit B<c> (T1) and B (T2): target = PC + 4 + offset.
        (0xd0fe, 0, br(0x8000).cond(), "beq ."),
        (0xd100, 0, br(0x8004).cond(), "bne .+4"),
        (0xdd7f, 0, br(0x8004 + 0xfe).cond(), "ble .+0x102"),
        (0xdc80, 0, br(0x8004 - 0x100).cond(), "bgt .-0xfc"),
        (0xde00, 0, other(), "udf #0 (B<c> with condition 0b1110)"),
        (0xdf00, 0, other(), "svc #0 (B<c> with condition 0b1111)"),
        (0xe7fe, 0, br(0x8000), "b ."),
        (0xe000, 0, br(0x8004), "b .+4"),
        (0xe3ff, 0, br(0x8004 + 0x7fe), "b (largest forward)"),
        (0xe400, 0, br(0x8004 - 0x800), "b (largest backward)"),
        // CBZ, CBNZ: forward only, offset i:imm5:'0'.
        (0xb108, 0, br(0x8006).cond(), "cbz r0, .+6"),
        (0xb9f8, 0, br(0x8004 + 0x3e).cond(), "cbnz r0, .+0x42"),
        (0xbbff, 0, br(0x8004 + 0x7e).cond(), "cbnz r7, .+0x82"),
        (
            0xb300,
            0,
            br(0x8004 + 0x40).cond(),
            "cbz r0, .+0x44 (i set)",
        ),
        // BX, BLX (register), BXNS, BLXNS.
        (0x4770, 0, ind().ret(), "bx lr"),
        (0x4718, 0, ind(), "bx r3"),
        (0x4798, 0, ind().link(), "blx r3"),
        (0x47f0, 0, ind().link(), "blx lr"),
        (0x4774, 0, ind().ret(), "bxns lr"),
        (0x4784, 0, ind().link(), "blxns r0"),
        // POP, MOV/ADD to the PC.
        (0xbd10, 0, ind().ret(), "pop {r4, pc}"),
        (0xbd00, 0, ind().ret(), "pop {pc} with an empty low list"),
        (0xbc10, 0, other(), "pop {r4}"),
        (0x46f7, 0, ind().ret(), "mov pc, lr"),
        (0x469f, 0, ind(), "mov pc, r3"),
        (0x4687, 0, ind(), "mov pc, r0"),
        (0x4487, 0, ind(), "add pc, r0"),
        (0x44f7, 0, ind(), "add pc, lr"),
        (0x4587, 0, other(), "cmp pc, r0"),
        (0x4686, 0, other(), "mov lr, r0"),
        // Hints and IT (IT tracking is off in this table).
        (0xbf30, 0, ty(T::WfiWfe), "wfi"),
        (0xbf20, 0, ty(T::WfiWfe), "wfe"),
        (0xbf10, 0, other(), "yield"),
        (0xbf40, 0, other(), "sev"),
        (0xbf00, 0, other(), "nop"),
        (0xbf08, 0, other(), "it eq"),
        (0xbe00, 0, other(), "bkpt #0"),
        (0xdf01, 0, other(), "svc #1"),
        (0x2000, 0, other(), "movs r0, #0"),
        // 32-bit B.W (T4), BL: target = PC + 4 + SignExtend(S:I1:I2:imm10:imm11:'0').
        (0xf000, 0xb800, br(0x8004), "b.w .+4"),
        (0xf7ff, 0xbffe, br(0x8000), "b.w ."),
        (0xf000, 0xf800, br(0x8004).link(), "bl .+4"),
        (0xf7ff, 0xfffe, br(0x8000).link(), "bl ."),
        (
            0xf3ff,
            0xd7ff,
            br(0x8004 + 0xff_fffe).link(),
            "bl (largest forward)",
        ),
        (
            0xf400,
            0xd000,
            br(0xff00_8004).link(),
            "bl (largest backward, wraps)",
        ),
        (
            0xf000,
            0x9000,
            br(0x8004 + 0xc0_0000),
            "b.w with J1 = J2 = 0, S = 0",
        ),
        // BLX (immediate): from Align(PC, 4), to A32.
        (0xf000, 0xe800, br(0x8004).link().to(Isa::A32), "blx .+4"),
        (0xf7ff, 0xeffe, br(0x8000).link().to(Isa::A32), "blx ."),
        (
            0xf000,
            0xe801,
            other(),
            "blx pattern with H set (Armv8.1-M BF space)",
        ),
        // B<c>.W (T3): target = PC + 4 + SignExtend(S:J2:J1:imm6:imm11:'0').
        (0xf000, 0x8000, br(0x8004).cond(), "beq.w .+4"),
        (0xf47f, 0xaffe, br(0x8000).cond(), "bne.w ."),
        (0xf43f, 0xaffe, br(0x8000).cond(), "beq.w ."),
        (0xf300, 0x8001, br(0x8006).cond(), "bgt.w .+6"),
        (
            0xf3af,
            0x8000,
            other(),
            "nop.w (condition 0b1110: miscellaneous control)",
        ),
        (0xf380, 0x8800, other(), "msr apsr_nzcvq, r0"),
        // TBB, TBH.
        (0xe8d0, 0xf001, ind(), "tbb [r0, r1]"),
        (0xe8df, 0xf011, ind(), "tbh [pc, r1, lsl #1]"),
        (0xe8d0, 0xae01, other(), "tbb with non-conforming SBO bits"),
        // LDR to the PC.
        (0xf85d, 0xfb04, ind().ret(), "ldr pc, [sp], #4"),
        (0xf85d, 0xf904, ind(), "ldr pc, [sp], #-4"),
        (0xf85d, 0xfd04, ind(), "ldr pc, [sp, #-4]!"),
        (0xf850, 0xfb04, ind(), "ldr pc, [r0], #4"),
        (0xf850, 0xfe04, ind(), "ldrt pc, [r0, #4]"),
        (0xf8d0, 0xf004, ind(), "ldr.w pc, [r0, #4]"),
        (0xf8dd, 0xf000, ind(), "ldr.w pc, [sp]"),
        (0xf8df, 0xf008, ind(), "ldr.w pc, [pc, #8]"),
        (0xf85f, 0xf008, ind(), "ldr.w pc, [pc, #-8]"),
        (0xf850, 0xf021, ind(), "ldr.w pc, [r0, r1, lsl #2]"),
        (0xf890, 0xf000, other(), "ldrb.w pc, [r0] (PLD)"),
        (
            0xe9d0,
            0xf100,
            other(),
            "ldrd pc, r1, [r0] (not recognised)",
        ),
        // LDM, POP.W with the PC.
        (0xe8bd, 0x8010, ind().ret(), "pop.w {r4, pc}"),
        (0xe890, 0x8010, ind(), "ldmia r0, {r4, pc}"),
        (0xe8b0, 0x8010, ind(), "ldmia r0!, {r4, pc}"),
        (0xe930, 0x8000, ind(), "ldmdb r0!, {pc}"),
        (0xe93d, 0x8000, ind(), "ldmdb sp!, {pc}"),
        (0xe8bd, 0x0010, other(), "pop.w {r4}"),
        // RFE, ERET, SUBS PC, LR, BXJ.
        (0xe990, 0xc000, ind(), "rfeia r0"),
        (0xe810, 0xc000, ind(), "rfedb r0"),
        (0xe9b0, 0xc000, ind(), "rfeia r0!"),
        (0xf3de, 0x8f00, ind(), "eret (no exception-return subtype)"),
        (0xf3de, 0x8f04, ind(), "subs pc, lr, #4"),
        (0xf3c0, 0x8f00, ind(), "bxj r0"),
        // Data processing to the PC is not recognised in 32-bit T32.
        (0xeb00, 0x0f01, other(), "add.w pc, r0, r1"),
        (0xea4f, 0x0f0e, other(), "mov.w pc, lr"),
        // Barriers.
        (0xf3bf, 0x8f4f, ty(T::DsbDmb), "dsb sy"),
        (0xf3bf, 0x8f5f, ty(T::DsbDmb), "dmb sy"),
        (0xf3bf, 0x8f6f, ty(T::Isb), "isb sy"),
        (0xf3bf, 0x8f2f, other(), "clrex"),
        (0xee07, 0x0f9a, ty(T::DsbDmb), "mcr p15, 0, r0, c7, c10, 4"),
        (0xee07, 0x0fba, ty(T::DsbDmb), "mcr p15, 0, r0, c7, c10, 5"),
        (0xee07, 0x0f95, ty(T::Isb), "mcr p15, 0, r0, c7, c5, 4"),
        // WFI.W, WFE.W.
        (0xf3af, 0x8003, ty(T::WfiWfe), "wfi.w"),
        (0xf3af, 0x8002, ty(T::WfiWfe), "wfe.w"),
        (0xf3af, 0x8004, other(), "sev.w"),
        // Armv8.1-M low-overhead loops: LE/LETP back, WLS/WLSTP forward,
        // offset imm10:immL:'0'.
        (0xf00f, 0xc005, br(0x8004 - 8), "le lr, .-4"),
        (0xf02f, 0xc005, br(0x8004 - 8), "le .-4"),
        (0xf01f, 0xc005, br(0x8004 - 8), "letp lr, .-4"),
        (0xf00f, 0xc801, br(0x8004 - 2), "le lr, .+2 (immL)"),
        (0xf00f, 0xcfff, br(0x8004 - 0xffe), "le lr, (largest)"),
        (0xf040, 0xc005, br(0x8004 + 8), "wls lr, r0, .+12"),
        (0xf043, 0xc801, br(0x8004 + 2), "wls lr, r3, .+6 (immL)"),
        (0xf000, 0xc005, br(0x8004 + 8), "wlstp.8 lr, r0, .+12"),
        (0xf031, 0xc005, br(0x8004 + 8), "wlstp.64 lr, r1, .+12"),
        (0xf040, 0xe001, other(), "dls lr, r0"),
        (0xf010, 0xe001, other(), "dlstp.16 lr, r0"),
        (0xf00f, 0xe001, other(), "lctp"),
        // Branch future: not recognised by OpenCSD 1.8.0.
        (0xf080, 0xe001, other(), "bf"),
        (0xf061, 0xe001, other(), "bfx r1"),
        (0xf080, 0xc001, other(), "bfl"),
        (0xf071, 0xe001, other(), "bflx r1"),
        (0xf000, 0xe003, other(), "bfcsel"),
        // Other 32-bit.
        (0xf7f0, 0xa000, other(), "udf.w #0"),
        (0xe92d, 0x4010, other(), "push.w {r4, lr}"),
    ]
}

#[test]
fn t32_table_all_options() {
    let opts = ArmOptions {
        track_it_block: false,
        ..ALL
    };
    for (first, second, exp, what) in t32_table() {
        let size = if t32_is_32bit(first) { 4 } else { 2 };
        let mut it = ItState::new();
        let got = classify_t32(first, second, PC, &mut it, opts);
        exp.check(
            &got,
            Isa::T32,
            size,
            &format!("{first:04x} {second:04x} {what}"),
        );
        assert_eq!(it.remaining(), 0);
    }
}

#[test]
fn t32_table_no_options() {
    for (first, second, exp, what) in t32_table() {
        let exp = match exp.itype {
            InstrType::DsbDmb | InstrType::WfiWfe => Exp {
                itype: InstrType::Other,
                ..exp
            },
            _ => exp,
        };
        let size = if t32_is_32bit(first) { 4 } else { 2 };
        let mut it = ItState::new();
        let got = classify_t32(first, second, PC, &mut it, NONE);
        exp.check(
            &got,
            Isa::T32,
            size,
            &format!("{first:04x} {second:04x} {what} (no options)"),
        );
    }
}

#[test]
fn t32_blx_aligns_the_pc() {
    let mut it = ItState::new();
    for pc in [0x8000u64, 0x8002] {
        let got = classify_t32(0xf000, 0xe800, pc, &mut it, NONE);
        assert_eq!(got.target, Some(0x8004), "blx .+4 at {pc:x}");
        assert_eq!(got.next_isa, Isa::A32);
    }
    // Other direct branches are not aligned and stay in T32.
    let got = classify_t32(0xf000, 0xf800, 0x8002, &mut it, NONE);
    assert_eq!((got.target, got.next_isa), (Some(0x8006), Isa::T32));
    // 32-bit wrap.
    let got = classify_t32(0xe000, 0, 0xffff_fffe, &mut it, NONE);
    assert_eq!(got.target, Some(2));
    let got = classify_t32(0xe000, 0, 0x1_0000_8000, &mut it, NONE);
    assert_eq!(got.target, Some(0x8004));
}

#[test]
fn t32_size() {
    for first in 0..=0xffffu16 {
        assert_eq!(t32_is_32bit(first), first >> 11 >= 0b11101, "{first:04x}");
    }
}

/// A 16-bit instruction's classification never depends on the halfword after
/// it (OpenCSD's opcode holds it, but no 16-bit pattern looks at it).
#[test]
fn t32_16bit_ignores_second() {
    for first in 0..0xe800u16 {
        let mut a = ItState::new();
        let base = classify_t32(first, 0, PC, &mut a, ALL);
        for second in [0xffffu16, 0xf000, 0x8f4f, 0x1234] {
            let mut b = ItState::new();
            let got = classify_t32(first, second, PC, &mut b, ALL);
            assert_eq!(got, base, "{first:04x} {second:04x}");
            assert_eq!(a, b);
        }
    }
}

// ---------------------------------------------------------------------------
// IT blocks
// ---------------------------------------------------------------------------

/// Classify a sequence of (first, second) at consecutive addresses; returns the
/// conditional flags and the IT count after each.
fn run_it(seq: &[(u16, u16)], opts: ArmOptions) -> Vec<(bool, u8)> {
    let mut it = ItState::new();
    let mut pc = PC;
    seq.iter()
        .map(|&(a, b)| {
            let info = classify_t32(a, b, pc, &mut it, opts);
            pc += info.size as u64;
            (info.conditional, it.remaining())
        })
        .collect()
}

#[test]
fn it_block_lengths() {
    // IT mask (low nibble) -> instructions covered.
    for (hw, n, what) in [
        (0xbf08u16, 1u8, "it eq"),
        (0xbf04, 2, "itt eq"),
        (0xbf0c, 2, "ite eq"),
        (0xbf02, 3, "ittt eq"),
        (0xbf0e, 3, "itee eq"),
        (0xbf01, 4, "itttt eq"),
        (0xbf0f, 4, "iteee eq"),
        (0xbfe8, 1, "it al"),
        (0xbf1f, 4, "iteee ne"),
    ] {
        let mut it = ItState::new();
        let info = classify_t32(hw, 0, PC, &mut it, ALL);
        assert_eq!(info.itype, InstrType::Other, "{what}");
        assert!(!info.conditional, "{what}: IT itself is not conditional");
        assert_eq!(it.remaining(), n, "{what}");
    }
    // Mask 0 is a hint (NOP, YIELD, WFE, WFI, SEV, ...), not an IT.
    for hw in [0xbf00u16, 0xbf10, 0xbf20, 0xbf30, 0xbf40, 0xbff0] {
        let mut it = ItState::new();
        classify_t32(hw, 0, PC, &mut it, ALL);
        assert_eq!(it.remaining(), 0, "{hw:04x}");
    }
}

#[test]
fn it_block_marks_following_instructions() {
    const MOVS: (u16, u16) = (0x2001, 0); // movs r0, #1 (mov inside a block)
    const ADDW: (u16, u16) = (0xf200, 0x0001); // addw r0, r0, #1
    const BX_LR: (u16, u16) = (0x4770, 0);
    // ite eq; moveq; movne; mov
    assert_eq!(
        run_it(&[(0xbf0c, 0), MOVS, MOVS, MOVS], ALL),
        vec![(false, 2), (true, 1), (true, 0), (false, 0)]
    );
    // itt ne; addwne (32-bit counts as one); bxne lr (a branch is marked too,
    // and still decrements); mov
    let seq = [(0xbf1c, 0), ADDW, BX_LR, MOVS];
    assert_eq!(
        run_it(&seq, ALL),
        vec![(false, 2), (true, 1), (true, 0), (false, 0)]
    );
    let mut it = ItState::new();
    classify_t32(0xbf08, 0, PC, &mut it, ALL);
    let bx = classify_t32(0x4770, 0, PC + 2, &mut it, ALL);
    assert_eq!(
        (bx.itype, bx.subtype, bx.conditional),
        (InstrType::IndirectBranch, InstrSubtype::ImpliedReturn, true)
    );
    // An IT inside a block is just another conditional instruction: it
    // decrements and does not start a new block.
    assert_eq!(
        run_it(&[(0xbf04, 0), (0xbf01, 0), MOVS, MOVS], ALL),
        vec![(false, 2), (true, 1), (true, 0), (false, 0)]
    );
    // Without IT tracking nothing is marked and no state is kept.
    let no_track = ArmOptions {
        track_it_block: false,
        ..ALL
    };
    assert_eq!(
        run_it(&[(0xbf0c, 0), MOVS, MOVS], no_track),
        vec![(false, 0), (false, 0), (false, 0)]
    );
    // A conditional branch inside a block stays conditional.
    assert_eq!(
        run_it(&[(0xbf08, 0), (0xd0fe, 0)], ALL),
        vec![(false, 1), (true, 0)]
    );
    // clear() leaves the block (OpenCSD does so on any A32/A64 decode).
    let mut it = ItState::new();
    classify_t32(0xbf01, 0, PC, &mut it, ALL);
    it.clear();
    assert!(!classify_t32(0x2001, 0, PC + 2, &mut it, ALL).conditional);
}

// ---------------------------------------------------------------------------
// OpenCSD golden outputs: every A32/T32 instruction range
// ---------------------------------------------------------------------------

mod golden {
    use super::*;
    use std::collections::HashMap;
    use std::path::{Path, PathBuf};
    use tracesight::input::Snapshot;

    struct Mem {
        regions: Vec<(u64, Vec<u8>)>,
    }

    impl Mem {
        fn load(dir: &Path) -> Mem {
            let snap = Snapshot::open(dir).expect("snapshot");
            let mut regions = Vec::new();
            for dev in snap.devices.iter().filter(|d| d.is_core()) {
                for d in &dev.dumps {
                    let Ok(bytes) = std::fs::read(dir.join(&d.file)) else {
                        continue;
                    };
                    let start = (d.offset.unwrap_or(0) as usize).min(bytes.len());
                    let end = match d.length {
                        Some(l) => (start + l as usize).min(bytes.len()),
                        None => bytes.len(),
                    };
                    regions.push((d.address, bytes[start..end].to_vec()));
                }
            }
            Mem { regions }
        }

        fn read<const N: usize>(&self, addr: u64) -> Option<[u8; N]> {
            self.regions.iter().find_map(|(base, bytes)| {
                let off = addr.checked_sub(*base)? as usize;
                bytes.get(off..off + N)?.try_into().ok()
            })
        }
    }

    /// One `OCSD_GEN_TRC_ELEM_INSTR_RANGE` line.
    struct Range {
        line: usize,
        id: u8,
        start: u64,
        end: u64,
        num: u32,
        last_sz: u8,
        isa: String,
        itype: String,
        subtype: InstrSubtype,
        cond: bool,
    }

    fn hex(s: &str) -> u64 {
        u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap()
    }

    fn between<'a>(s: &'a str, a: &str, b: &str) -> Option<&'a str> {
        let i = s.find(a)? + a.len();
        let j = s[i..].find(b)? + i;
        Some(&s[i..j])
    }

    fn parse_range(line: usize, text: &str) -> Option<Range> {
        const KEY: &str = "INSTR_RANGE(exec range=";
        let body = &text[text.find(KEY)? + KEY.len()..];
        let id = between(text, "ID:", ";")?;
        let isa = between(body, "(ISA=", ")")?.to_string();
        let tail = &body[body.find("(ISA=")? + 6 + isa.len()..];
        let mut words = tail.split_whitespace();
        words.next()?; // E or N
        let itype = words.next()?.to_string();
        let subtype = if tail.contains("b+link") {
            InstrSubtype::BranchLink
        } else if tail.contains("V7:impl ret") {
            InstrSubtype::ImpliedReturn
        } else if tail.contains("A64:ret") {
            InstrSubtype::Return
        } else if tail.contains("A64:eret") {
            InstrSubtype::ExceptionReturn
        } else {
            InstrSubtype::None
        };
        Some(Range {
            line,
            id: u8::from_str_radix(id, 16).ok()?,
            start: hex(between(body, "", ":[")?),
            end: hex(between(body, ":[", "]")?),
            num: between(body, "num_i(", ")")?.parse().ok()?,
            last_sz: between(body, "last_sz(", ")")?.parse().ok()?,
            isa,
            itype,
            subtype,
            cond: tail.contains("<cond>"),
        })
    }

    fn type_name(t: InstrType) -> &'static str {
        match t {
            InstrType::Other => "---",
            InstrType::Branch => "BR",
            InstrType::IndirectBranch => "iBR",
            InstrType::Isb => "ISB",
            InstrType::DsbDmb => "DSB.DMB",
            InstrType::WfiWfe => "WFI.WFE",
            InstrType::Tstart => "TSTART",
        }
    }

    /// Walk one range as the element decoder would: to the first waypoint, or
    /// with `to_end` (ranges an ETE source-address packet delimits, which
    /// OpenCSD does not stop at waypoints inside) to the range end. `Err`
    /// describes a mismatch, `Ok(false)` means memory was missing.
    fn walk(
        r: &Range,
        mem: &Mem,
        opts: ArmOptions,
        it: &mut ItState,
        to_end: bool,
    ) -> Result<bool, String> {
        let mut addr = r.start;
        let mut n = 0u32;
        loop {
            let info = if r.isa == "A32" {
                let Some(b) = mem.read::<4>(addr) else {
                    return Ok(false);
                };
                it.clear();
                classify_a32(u32::from_le_bytes(b), addr, opts)
            } else {
                let Some(b) = mem.read::<2>(addr) else {
                    return Ok(false);
                };
                let first = u16::from_le_bytes(b);
                let second = if t32_is_32bit(first) {
                    match mem.read::<2>(addr + 2) {
                        Some(b) => u16::from_le_bytes(b),
                        None => return Ok(false),
                    }
                } else {
                    0
                };
                classify_t32(first, second, addr, it, opts)
            };
            n += 1;
            addr += info.size as u64;
            if (info.is_waypoint() && !to_end) || addr >= r.end {
                let got = (
                    addr,
                    n,
                    info.size,
                    type_name(info.itype),
                    info.subtype,
                    info.conditional,
                );
                let want = (r.end, r.num, r.last_sz, r.itype.as_str(), r.subtype, r.cond);
                return if got == want {
                    Ok(true)
                } else {
                    Err(format!("got {got:x?}, OpenCSD {want:x?}"))
                };
            }
        }
    }

    fn fixtures() -> Option<PathBuf> {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/opencsd");
        p.is_dir().then_some(p)
    }

    #[test]
    fn golden_ranges() {
        let Some(root) = fixtures() else {
            eprintln!("note: OpenCSD fixtures not found; golden range walk skipped");
            return;
        };
        let mut dirs: Vec<_> = std::fs::read_dir(&root)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        dirs.sort();
        let (mut checked, mut src_addr_ranges, mut no_mem, mut failures) =
            (0usize, 0usize, 0usize, Vec::new());
        for dir in dirs {
            let Ok(list) = std::fs::read_dir(dir.join("expected")) else {
                continue;
            };
            let mut ppls: Vec<_> = list
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "ppl"))
                .collect();
            ppls.sort();
            let mut mem = None;
            for ppl in ppls {
                let text = std::fs::read_to_string(&ppl).unwrap();
                let ranges: Vec<Range> = text
                    .lines()
                    .enumerate()
                    .filter(|(_, l)| l.contains("OCSD_GEN_TRC_ELEM_INSTR_RANGE("))
                    .filter_map(|(i, l)| parse_range(i + 1, l))
                    .collect();
                if !ranges.iter().any(|r| r.isa == "A32" || r.isa == "T32") {
                    continue;
                }
                let mem = mem.get_or_insert_with(|| Mem::load(&dir));
                let src_addr = text.contains("I_SRC_ADDR");
                // Per trace ID: ETMv4/ETE track IT blocks, PTM/ETMv3 do not;
                // DSB/DMB and WFI/WFE are waypoints iff OpenCSD ended a range
                // on one for that ID.
                let mut opts: HashMap<u8, ArmOptions> = HashMap::new();
                for l in text.lines() {
                    if let Some(rest) = l.strip_prefix("Trace Packet Lister : Protocol printer ") {
                        let proto = rest.split_whitespace().next().unwrap_or("");
                        let id = rest
                            .rsplit("0x")
                            .next()
                            .and_then(|h| u8::from_str_radix(h.trim(), 16).ok());
                        if let Some(id) = id {
                            opts.entry(id).or_default().track_it_block =
                                matches!(proto, "ETMV4I" | "ETE");
                        }
                    }
                }
                for r in &ranges {
                    let o = opts.entry(r.id).or_default();
                    o.dsb_dmb_waypoints |= r.itype == "DSB.DMB";
                    o.wfi_wfe_branch |= r.itype == "WFI.WFE";
                }
                let mut its: HashMap<u8, ItState> = HashMap::new();
                for r in &ranges {
                    let it = its.entry(r.id).or_default();
                    if r.isa != "A32" && r.isa != "T32" {
                        it.clear();
                        continue;
                    }
                    let saved = *it;
                    match walk(r, mem, opts[&r.id], it, false) {
                        Ok(true) => checked += 1,
                        Ok(false) => no_mem += 1,
                        Err(e) => {
                            *it = saved;
                            if src_addr && walk(r, mem, opts[&r.id], it, true) == Ok(true) {
                                src_addr_ranges += 1;
                            } else {
                                failures.push(format!("{}:{}: {e}", ppl.display(), r.line));
                            }
                        }
                    }
                }
            }
        }
        eprintln!(
            "golden A32/T32 ranges: {checked} matched to the first waypoint, \
             {src_addr_ranges} source-address ranges matched to their end, {no_mem} without memory image"
        );
        assert!(
            failures.is_empty(),
            "{} ranges differ:\n{}",
            failures.len(),
            failures[..failures.len().min(30)].join("\n")
        );
    }
}

// ---------------------------------------------------------------------------
// Differential test against yaxpeax-arm
// ---------------------------------------------------------------------------

mod differential {
    use super::*;
    use yaxpeax_arch::{Decoder, U8Reader};
    use yaxpeax_arm::armv7::{ConditionCode, InstDecoder, Instruction, Opcode, Operand};

    /// Random words per instruction set: one million each in release builds;
    /// debug builds (unoptimised yaxpeax is slow) take a tenth.
    const RANDOM: u32 = if cfg!(debug_assertions) {
        100_000
    } else {
        1_000_000
    };

    /// SplitMix64.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
    }

    /// Waypoint class as compared here.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Class {
        Other,
        /// Direct branch: target, link, next instruction set.
        Direct(u32, bool, Isa),
        /// Indirect branch: link.
        Indirect(bool),
    }

    fn ours(info: &ArmInfo) -> Class {
        match info.itype {
            InstrType::Branch => {
                Class::Direct(info.target.unwrap() as u32, info.link, info.next_isa)
            }
            InstrType::IndirectBranch => Class::Indirect(info.link),
            _ => Class::Other,
        }
    }

    fn is_pc(o: &Operand) -> bool {
        matches!(o, Operand::Reg(r) | Operand::RegWBack(r, _) if r.number() == 15)
    }

    /// What the architecture says, from yaxpeax's decode: direct branches with
    /// their targets, and every instruction that writes the PC as an indirect
    /// branch. yaxpeax's branch offsets follow per-encoding conventions, which
    /// `target` undoes.
    fn reference(inst: &Instruction, pc: u32, thumb: bool) -> Class {
        use Opcode as O;
        let offset = inst.operands.iter().find_map(|o| match *o {
            Operand::BranchOffset(v) => Some((v, 4)),
            Operand::BranchThumbOffset(v) => Some((v, 2)),
            _ => None,
        });
        if let Some((v, scale)) = offset {
            let delta = (v as u32).wrapping_mul(scale);
            let link = matches!(inst.opcode, O::BL | O::BLX);
            if !thumb {
                return match inst.opcode {
                    // BLX: imm24:H in halfwords, from PC + 8.
                    O::BLX => Class::Direct(pc.wrapping_add(8).wrapping_add(delta), true, Isa::T32),
                    // B, BL: yaxpeax gives imm24 + 2 (words from the
                    // instruction itself), computed modulo 2^24 so that it
                    // overflows for imm24 = 0x7ffffe, 0x7fffff; take the 2
                    // back off and sign-extend again.
                    _ => {
                        let imm24 = (((v as u32).wrapping_sub(2) << 8) as i32 >> 8) as u32;
                        let target = pc.wrapping_add(8).wrapping_add(imm24.wrapping_mul(4));
                        Class::Direct(target, link, Isa::A32)
                    }
                };
            }
            // 16-bit B<c> and CBZ/CBNZ count from PC + 2, everything else
            // from PC + 4; BLX from Align(PC, 4) + 4 and to A32.
            let narrow_plus_one = !inst.wide()
                && (inst.condition != ConditionCode::AL || matches!(inst.opcode, O::CBZ | O::CBNZ));
            return match inst.opcode {
                O::BLX => Class::Direct(
                    (pc & !3).wrapping_add(4).wrapping_add(delta),
                    true,
                    Isa::A32,
                ),
                _ if narrow_plus_one => {
                    Class::Direct(pc.wrapping_add(2).wrapping_add(delta), false, Isa::T32)
                }
                _ => Class::Direct(pc.wrapping_add(4).wrapping_add(delta), link, Isa::T32),
            };
        }
        match inst.opcode {
            O::BLX => Class::Indirect(true),
            O::BX | O::BXJ | O::TBB | O::TBH | O::RFE(..) | O::ERET => Class::Indirect(false),
            O::LDM(..) | O::POP => {
                let pc_in_list = inst
                    .operands
                    .iter()
                    .any(|o| matches!(o, Operand::RegList(l) if l & 0x8000 != 0));
                if pc_in_list || (inst.opcode == O::POP && inst.operands.iter().any(is_pc)) {
                    Class::Indirect(false)
                } else {
                    Class::Other
                }
            }
            // First operand is not written (or, for MRC and MRRC, Rt = 15
            // means the flags; for the hints it is an address).
            O::STR
            | O::STRB
            | O::STRH
            | O::STRD
            | O::STRT
            | O::STRBT
            | O::STRHT
            | O::STL
            | O::STLB
            | O::STLH
            | O::TST
            | O::TEQ
            | O::CMP
            | O::CMN
            | O::MSR
            | O::MCR(..)
            | O::MCRR(..)
            | O::MRC(..)
            | O::MRRC(..)
            | O::STM(..)
            | O::PUSH
            | O::PLD
            | O::PLI
            | O::NOP
            | O::HINT
            | O::STC(..)
            | O::STCL(..)
            | O::LDC(..)
            | O::LDCL(..)
            | O::SRS(..)
            | O::CDP(..) => Class::Other,
            _ if is_pc(&inst.operands[0])
                || (is_pc(&inst.operands[1]) && long_multiply_or_pair(inst.opcode)) =>
            {
                Class::Indirect(false)
            }
            _ => Class::Other,
        }
    }

    /// Instructions whose second operand is also a destination.
    fn long_multiply_or_pair(op: Opcode) -> bool {
        use Opcode as O;
        matches!(
            op,
            O::UMULL
                | O::UMLAL
                | O::SMULL
                | O::SMLAL
                | O::UMAAL
                | O::SMLAL_halfword(..)
                | O::SMLALD(..)
                | O::SMLSLD(..)
                | O::LDRD
                | O::LDREXD
                | O::LDAEXD
        )
    }

    /// Where OpenCSD's A32 patterns knowingly differ from the architecture
    /// (all of these write the PC only in UNPREDICTABLE encodings, except
    /// ERET): a description of the rule, or `None` for no known difference.
    ///
    /// 1. OpenCSD takes any instruction with bits [27:25] = 0b000 and bits
    ///    [15:12] = 0b1111 outside the miscellaneous and store-exclusive groups
    ///    for an indirect branch, although in multiplies bits [15:12] are the
    ///    accumulator (or must be zero) and in STRH/STRD/STRHT they are the
    ///    register stored.
    /// 2. Conversely multiplies whose destination (bits [19:16]) is the PC are
    ///    not branches to OpenCSD unless bits [15:12] are also 0b1111.
    /// 3. The miscellaneous group (bits [27:23] = 0b00010, bit 20 = 0, bit 7 =
    ///    0: CLZ, MRS, QADD, QSUB, QDADD, QDSUB, ERET, ...) is never a branch.
    /// 4. The store-exclusive group (bits [27:23] = 0b00011, bit 20 = 0, bits
    ///    [7:4] = 0b1001) is never a branch, although its status register
    ///    (bits [15:12]) may be the PC.
    /// 5. LDRB and LDRBT to the PC are not recognised (only word loads).
    /// 6. LDRD (immediate, literal, register) with Rt = LR loads the PC as its
    ///    second register; OpenCSD looks only at Rt.
    fn a32_known_difference(op: u32, ours: Class, reference: Class) -> Option<&'static str> {
        let group000 = (op >> 25) & 7 == 0;
        let rd_15_12 = (op >> 12) & 0xf == 0xf;
        let rd_19_16 = (op >> 16) & 0xf == 0xf;
        let multiply = group000
            && ((op >> 24) & 0xf == 0 && (op >> 4) & 0xf == 0b1001
                || (op >> 23) & 0x1f == 0b00010 && op & 0x90 == 0x80);
        let misc = op & 0x0f90_0080 == 0x0100_0000;
        let store_excl = op & 0x0f90_00f0 == 0x0180_0090;
        let byte_load = (op >> 26) & 3 == 1 && op & (1 << 22) != 0 && op & (1 << 20) != 0;
        let ldrd_lr =
            group000 && op & (1 << 20) == 0 && (op >> 4) & 0xf == 0b1101 && (op >> 12) & 0xf == 14;
        match (ours, reference) {
            (Class::Indirect(false), Class::Other)
                if group000 && rd_15_12 && !misc && !store_excl =>
            {
                Some("bits [15:12] = PC in a multiply or store")
            }
            (Class::Other, Class::Indirect(false)) if multiply && rd_19_16 && !rd_15_12 => {
                Some("multiply to the PC")
            }
            (Class::Other, Class::Indirect(false)) if misc => Some("miscellaneous group"),
            (Class::Other, Class::Indirect(false)) if store_excl && rd_15_12 => {
                Some("store-exclusive status to the PC")
            }
            (Class::Other, Class::Indirect(false)) if byte_load && rd_15_12 => {
                Some("byte load to the PC")
            }
            (Class::Other, Class::Indirect(false)) if ldrd_lr => {
                Some("LDRD with the PC as second register")
            }
            _ => None,
        }
    }

    /// Where OpenCSD's T32 patterns knowingly differ from the architecture.
    ///
    /// 1. Of the 32-bit encodings that write the PC, OpenCSD recognises only
    ///    LDR (word), LDM/POP, TBB/TBH, RFE, SUBS PC, LR (and ERET) and BXJ.
    ///    Every other 32-bit instruction with the PC as destination
    ///    (data processing, multiplies, saturation, bit fields, extends,
    ///    LDRD, LDREX*, STREX* status, halfword and byte loads, MRS, ...) is
    ///    UNPREDICTABLE there, and not a branch to OpenCSD.
    /// 2. TBB and TBH need their should-be-one/zero bits (hw2 bits [15:5] =
    ///    0b11110000000) exactly; yaxpeax ignores them.
    fn t32_known_difference(
        first: u16,
        second: u16,
        inst: &Instruction,
        ours: Class,
        reference: Class,
    ) -> Option<&'static str> {
        use Opcode as O;
        let wide = t32_is_32bit(first);
        let recognised = matches!(
            inst.opcode,
            O::LDR
                | O::LDRT
                | O::LDM(..)
                | O::POP
                | O::TBB
                | O::TBH
                | O::RFE(..)
                | O::ERET
                | O::BXJ
                | O::BX
                | O::BLX
        );
        match (ours, reference) {
            (Class::Other, Class::Indirect(false)) if wide && !recognised => {
                Some("32-bit PC write OpenCSD does not recognise")
            }
            (Class::Other, Class::Indirect(false))
                if matches!(inst.opcode, O::TBB | O::TBH)
                    && first & 0xfff0 == 0xe8d0
                    && second & 0xffe0 != 0xf000 =>
            {
                Some("TBB/TBH with non-conforming fixed bits")
            }
            _ => None,
        }
    }

    struct Tally {
        compared: u64,
        undecodable: u64,
        excluded: std::collections::BTreeMap<&'static str, u64>,
        failures: Vec<String>,
    }

    impl Tally {
        fn new() -> Tally {
            Tally {
                compared: 0,
                undecodable: 0,
                excluded: Default::default(),
                failures: Vec::new(),
            }
        }
        fn finish(self, what: &str) {
            eprintln!(
                "{what}: {} compared, {} undecodable by yaxpeax, known differences {:?}",
                self.compared, self.undecodable, self.excluded
            );
            assert!(
                self.failures.is_empty(),
                "{what}: {} disagreements:\n{}",
                self.failures.len(),
                self.failures[..self.failures.len().min(40)].join("\n")
            );
        }
    }

    fn pc_from(r: u64, align: u64) -> u64 {
        // Mostly ordinary addresses; one in 16 near the top of the 32-bit
        // space so that targets wrap.
        let a = if r & 0xf0 == 0 {
            0xffff_ff00 | (r >> 8) & 0xff
        } else {
            (r >> 8) & 0xffff_ffff
        };
        a & !(align - 1)
    }

    #[test]
    fn a32_against_yaxpeax() {
        let dec = InstDecoder::armv7();
        let mut rng = Rng(0x0a32);
        let mut t = Tally::new();
        for _ in 0..RANDOM {
            let r = rng.next();
            let op = (r >> 32) as u32;
            let pc = pc_from(r, 4);
            let info = classify_a32(op, pc, NONE);
            let bytes = op.to_le_bytes();
            // A fresh instruction each time: yaxpeax leaves fields (the
            // condition) of the previous decode in place for some encodings.
            let mut inst = Instruction::default();
            if dec
                .decode_into(&mut inst, &mut U8Reader::new(&bytes))
                .is_err()
            {
                t.undecodable += 1;
                continue;
            }
            t.compared += 1;
            let (o, rf) = (ours(&info), reference(&inst, pc as u32, false));
            let cond_ok = info.conditional == (inst.condition != ConditionCode::AL);
            if o == rf && cond_ok {
                continue;
            }
            match a32_known_difference(op, o, rf) {
                Some(why) if cond_ok => *t.excluded.entry(why).or_default() += 1,
                _ => t.failures.push(format!(
                    "{op:08x} at {pc:08x} `{inst}`: ours {o:?} cond {}, yaxpeax {rf:?}",
                    info.conditional
                )),
            }
        }
        t.finish("A32");
    }

    fn t32_one(
        dec: &InstDecoder,
        first: u16,
        second: u16,
        pc: u64,
        t: &mut Tally,
        inst: &mut Instruction,
    ) {
        let mut it = ItState::new();
        let info = classify_t32(first, second, pc, &mut it, NONE);
        let mut bytes = [0u8; 4];
        bytes[..2].copy_from_slice(&first.to_le_bytes());
        bytes[2..].copy_from_slice(&second.to_le_bytes());
        let len = if t32_is_32bit(first) { 4 } else { 2 };
        // A fresh instruction each time: yaxpeax leaves fields (the condition)
        // of the previous decode in place for some encodings.
        *inst = Instruction::default();
        if dec
            .decode_into(inst, &mut U8Reader::new(&bytes[..len]))
            .is_err()
        {
            t.undecodable += 1;
            return;
        }
        t.compared += 1;
        let (o, rf) = (ours(&info), reference(inst, pc as u32, true));
        let arch_cond = matches!(inst.opcode, Opcode::B if inst.condition != ConditionCode::AL)
            || matches!(inst.opcode, Opcode::CBZ | Opcode::CBNZ);
        let cond_ok = info.conditional == arch_cond;
        if o == rf && cond_ok && inst.wide() == (len == 4) {
            return;
        }
        match t32_known_difference(first, second, inst, o, rf) {
            Some(why) if cond_ok => *t.excluded.entry(why).or_default() += 1,
            _ => t.failures.push(format!(
                "{first:04x} {second:04x} at {pc:08x} `{inst}`: ours {o:?} cond {}, yaxpeax {rf:?}",
                info.conditional
            )),
        }
    }

    #[test]
    fn t32_16bit_against_yaxpeax_exhaustive() {
        let dec = InstDecoder::armv7_thumb();
        let mut rng = Rng(0x7016);
        let mut t = Tally::new();
        let mut inst = Instruction::default();
        for first in 0..0xe800u16 {
            let pc = pc_from(rng.next(), 2);
            t32_one(&dec, first, 0, pc, &mut t, &mut inst);
        }
        t.finish("T32 16-bit");
    }

    #[test]
    fn t32_32bit_against_yaxpeax() {
        let dec = InstDecoder::armv7_thumb();
        let mut rng = Rng(0x7032);
        let mut t = Tally::new();
        let mut inst = Instruction::default();
        for _ in 0..RANDOM {
            let r = rng.next();
            let first = 0xe800 + ((r >> 48) as u16 % 0x1800);
            let second = (r >> 32) as u16;
            t32_one(&dec, first, second, pc_from(r, 2), &mut t, &mut inst);
        }
        t.finish("T32 32-bit");
    }
}
