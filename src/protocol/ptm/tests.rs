//! Unit tests of the PTM parser and decoder on hand-written packets (expected
//! text as trc_pkt_lister 1.8.0 prints it, most lines taken from the PTM
//! goldens), plus property tests on random and mutated input.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;

use super::config::PtmConfig;
use super::decoder::PtmDecoder;
use super::display;
use super::packet::{PtmPacket, PtmPacketType, PARSE_MESSAGES};
use super::parser::PtmParser;
use crate::element::{self, MemSpace};
use crate::frame::{Deformatter, FrameMode};
use crate::image::memory::MemoryImage;
use crate::protocol::Decoder;
use crate::input::{BufferFormat, Snapshot};
use crate::protocol::etm4::decoder::DecoderOutput;
use crate::session::{BufferPlan, Event, RunOptions, Runner};

/// ETMCR/ETMCCER/ETMIDR values of the fixtures' trace units.
const CR_PLAIN: u32 = 0x0000_0000;
const CR_CYCLE_ACC: u32 = 0x1000_1000;
const CR_RET_STACK: u32 = 0x2000_0400;
const CCER_PTM11: u32 = 0x34c0_1ac2;
const IDR_PTM10: u32 = 0x411c_f301;
const IDR_PTM11: u32 = 0x411c_f312;

const ASYNC: [u8; 6] = [0x00, 0x00, 0x00, 0x00, 0x00, 0x80];

fn cfg(cr: u32, ccer: u32, idr: u32) -> PtmConfig {
    PtmConfig::from_registers(
        |r| match r {
            "ETMCR" => Some(cr as u64),
            "ETMCCER" => Some(ccer as u64),
            "ETMIDR" => Some(idr as u64),
            "ETMTRACEIDR" => Some(0x10),
            _ => None,
        },
        Some("Cortex-A15"),
    )
    .unwrap()
}

/// Parse `data` in one block (then end of trace); the packet lines.
fn lines(c: &PtmConfig, data: &[u8]) -> Vec<String> {
    let mut p = PtmParser::new(c);
    let mut out = Vec::new();
    let mut f = |k: &PtmPacket, r: &[u8]| {
        let mut s = String::new();
        display::write_parser_error(&mut s, c.trace_id(), k);
        display::write_opencsd_line(&mut s, 0x10, k, r);
        out.push(s.trim_end_matches('\n').to_string());
    };
    p.push(0, data, &mut f);
    p.finish(&mut f);
    out
}

/// The line of the packet after an A-sync.
fn after_async(c: &PtmConfig, pkt: &[u8]) -> Vec<String> {
    let mut data = ASYNC.to_vec();
    data.extend_from_slice(pkt);
    let l = lines(c, &data);
    assert!(l[0].ends_with("ASYNC : Alignment Synchronisation Packet; "), "{}", l[0]);
    l[1..].to_vec()
}

#[test]
fn async_at_start_and_with_extra_zeros() {
    let c = cfg(CR_PLAIN, 0, IDR_PTM10);
    assert_eq!(
        lines(&c, &ASYNC),
        ["Idx:0; ID:10; [0x00 0x00 0x00 0x00 0x00 0x80 ];\tASYNC : Alignment Synchronisation Packet; "]
    );
    // Seven zeros then 0x80: one A-sync packet of eight bytes.
    let l = lines(&c, &[0, 0, 0, 0, 0, 0, 0, 0x80]);
    assert_eq!(l.len(), 1);
    assert!(l[0].starts_with("Idx:0; ID:10; [0x00 0x00 0x00 0x00 0x00 0x00 0x00 0x80 ];\tASYNC"));
}

#[test]
fn unsynchronised_bytes_listed_in_chunks_of_16() {
    let c = cfg(CR_PLAIN, 0, IDR_PTM10);
    let mut data = vec![0x11u8; 20];
    data.extend_from_slice(&ASYNC);
    let mut p = PtmParser::new(&c);
    let mut got = Vec::new();
    p.push(100, &data, &mut |k: &PtmPacket, r: &[u8]| got.push((k.index, k.ptype, r.len(), k.first_not_sync)));
    assert_eq!(
        got,
        [
            (100, PtmPacketType::NotSync, 16, true),
            (116, PtmPacketType::NotSync, 4, false),
            (120, PtmPacketType::ASync, 6, false)
        ]
    );
    let l = lines(&c, &[0x11, 0x22]);
    assert_eq!(l, ["Idx:0; ID:10; [0x11 0x22 ];\tNOTSYNC : PTM Not Synchronised; "]);
}

#[test]
fn candidate_async_across_blocks_lists_zeros_and_reads_past_the_block() {
    // A zero at the end of one block starts a possible A-sync; when the next
    // block shows it is not one, OpenCSD lists the zero again and then as many
    // bytes from the new block, reading one past its end.
    let c = cfg(CR_PLAIN, 0, IDR_PTM10);
    let mut p = PtmParser::new(&c);
    let mut got: Vec<(u64, Vec<u8>, bool)> = Vec::new();
    let mut f = |k: &PtmPacket, r: &[u8]| {
        got.push((k.index, r.to_vec(), k.first_not_sync));
        true
    };
    p.push_with_overread(0, &[0x11, 0x00], &[], &mut f);
    p.push_with_overread(2, &[0x22, 0x33], &[0xaa], &mut f);
    assert_eq!(got, [(0, vec![0x11], true), (1, vec![0x00], false), (2, vec![0x22, 0x33, 0xaa], false)]);
}

#[test]
fn isync_packets() {
    // trace_cov_a15: I-sync on debug exit, A32, secure.
    let c = cfg(CR_PLAIN, 0, IDR_PTM10);
    assert_eq!(
        after_async(&c, &[0x08, 0x58, 0x05, 0x00, 0x80, 0x61]),
        ["Idx:6; ID:10; [0x08 0x58 0x05 0x00 0x80 0x61 ];\tISYNC : Instruction Synchronisation packet; (Debug Exit); Addr=0x80000558; S;  ISA=ARM(32); "]
    );
    // TC2: cycle-accurate trace adds a cycle count (0xcc 0x03 = 51) after the info byte.
    let c = cfg(CR_CYCLE_ACC, CCER_PTM11, IDR_PTM11);
    let l = after_async(&c, &[0x08, 0xdf, 0x8d, 0x01, 0xc0, 0x21, 0xcc, 0x03]);
    assert!(
        l[0].ends_with(
            "ISYNC : Instruction Synchronisation packet; (Trace Enable); Addr=0xc0018dde; S;  ISA=Thumb2; Cycles=51; "
        ),
        "{}",
        l[0]
    );
    // Periodic I-syncs carry no cycle count.
    let l = after_async(&c, &[0x08, 0x83, 0x8d, 0x01, 0xc0, 0x01]);
    assert!(l[0].ends_with("(Periodic); Addr=0xc0018d82; S;  ISA=Thumb2; "), "{}", l[0]);
    // Four context ID bytes (ETMCR bits 15:14 = 3), non-secure, Hyp.
    let c = cfg(0xc000, 0, IDR_PTM10);
    let l = after_async(&c, &[0x08, 0x00, 0x10, 0x00, 0x80, 0x2a, 0x78, 0x56, 0x34, 0x12]);
    assert!(l[0].ends_with("(Trace Enable); Addr=0x80001000; NS; Hyp; CtxtID=12345678; ISA=ARM(32); "), "{}", l[0]);
}

#[test]
fn atom_packets() {
    let c = cfg(CR_PLAIN, 0, IDR_PTM10);
    // 0xd0: five atoms; a 0 bit is E, listed from bit 5 down to bit 1.
    assert!(after_async(&c, &[0xd0])[0].ends_with("[0xd0 ];\tATOM : Atom packet; ENEEE; "));
    // 0x84: one E atom. 0x8a: two atoms, bit 1 set = N.
    assert!(after_async(&c, &[0x84])[0].ends_with("ATOM : Atom packet; E; "));
    assert!(after_async(&c, &[0x8a])[0].ends_with("ATOM : Atom packet; EN; "));
    // Cycle accurate: one atom plus a cycle count (0xe8 0x20 = 10 + 512).
    let c = cfg(CR_CYCLE_ACC, CCER_PTM11, IDR_PTM11);
    assert!(after_async(&c, &[0xe8, 0x20])[0].ends_with("[0xe8 0x20 ];\tATOM : Atom packet; E; Cycles=522; "));
    assert!(after_async(&c, &[0xde, 0x01])[0].ends_with("ATOM : Atom packet; N; Cycles=23; "));
}

#[test]
fn branch_address_packets() {
    let c = cfg(CR_PLAIN, 0, IDR_PTM10);
    let isync = [0x08, 0x58, 0x05, 0x00, 0x80, 0x61];
    // One byte: address bits 7:2 of an A32 target.
    let l = after_async(&c, &[&isync[..], &[0x2f]].concat());
    assert!(l[1].ends_with("[0x2f ];\tBRANCH_ADDRESS : Branch address packet; Addr=0x8000055C ~[0x5C]; "), "{}", l[1]);
    // Five address bytes and an exception byte (debug halt, secure).
    let l = after_async(&c, &[&isync[..], &[0x81, 0x80, 0x80, 0x80, 0x48, 0x02]].concat());
    assert!(l[1].ends_with("Addr=0x00000000 ~[0x0]; S; Excep=Debug Halt [01]; "), "{}", l[1]);
    // Before any I-sync only 13 address bits are known (Thumb target here).
    let l = after_async(&c, &[0xff, 0x26]);
    assert!(l[0].ends_with("Addr=0x????137E (12:0) ~[0x137E]; "), "{}", l[0]);
    // Snowball, cycle accurate: IRQ exception, non-secure, cycle count 15.
    let c = cfg(CR_CYCLE_ACC, 0, IDR_PTM10);
    let l = after_async(&c, &[0x8d, 0x80, 0xfe, 0xff, 0x4f, 0x1d, 0x3c]);
    assert!(l[0].ends_with("Addr=0xFFFF0018 ~[0xFFFF0018]; ISA=ARM(32); NS; Excep=IRQ [0e]; Cycles=15; "), "{}", l[0]);
    // A change of instruction set is listed: a Thumb fifth byte (bits 5:4 = 01).
    let c = cfg(CR_PLAIN, 0, IDR_PTM10);
    let l = after_async(&c, &[&isync[..], &[0x81, 0x80, 0x80, 0x80, 0x18]].concat());
    assert!(l[1].ends_with("Addr=0x80000000 ~[0x80000000]; ISA=Thumb2; "), "{}", l[1]);
}

#[test]
fn waypoint_update_packet() {
    // Snowball: after an I-sync, one address byte.
    let c = cfg(CR_CYCLE_ACC, 0, IDR_PTM10);
    let isync = [0x08, 0xfc, 0x26, 0x05, 0xc0, 0x09];
    let l = after_async(&c, &[&isync[..], &[0x72, 0x79]].concat());
    assert!(l[1].ends_with("[0x72 0x79 ];\tWP_UPDATE : Waypoint update packet; Addr=0xC00526F0 ~[0xF0]; "), "{}", l[1]);
}

#[test]
fn timestamp_packets() {
    // PTM 1.0 (48-bit), cycle accurate: Snowball.
    let c = cfg(CR_CYCLE_ACC, 0, IDR_PTM10);
    let l = after_async(&c, &[0x42, 0xe7, 0xf0, 0xae, 0xc8, 0x8e, 0x8b, 0x00, 0x0c]);
    assert!(
        l[0].ends_with("TIMESTAMP : Timestamp packet; TS=0x00000058E90BB867 ~[0x58E90BB867](381866981479); Cycles=3; "),
        "{}",
        l[0]
    );
    // PTM 1.1 with 64-bit timestamps: TC2.
    let c = cfg(CR_CYCLE_ACC, CCER_PTM11, IDR_PTM11);
    let l = after_async(&c, &[0x42, 0xcc, 0x97, 0xc6, 0xce, 0xaf, 0x90, 0x80, 0x80, 0x00, 0x00]);
    assert!(l[0].ends_with("TS=0x00000082F9D18BCC ~[0x82F9D18BCC](562537008076); Cycles=0; "), "{}", l[0]);
    // A short timestamp updates the low bits only (second packet: 7 bits).
    let c = cfg(CR_PLAIN, CCER_PTM11, IDR_PTM11);
    let l = after_async(&c, &[0x46, 0x81, 0x01, 0x42, 0x05]);
    assert!(l[0].ends_with("TS=0x0000000000000081 ~[0x81](129); "), "{}", l[0]);
    assert!(l[1].ends_with("TS=0x0000000000000085 ~[0x5](133); "), "{}", l[1]);
}

#[test]
fn context_vmid_and_single_byte_packets() {
    // One context ID byte (ETMCR bits 15:14 = 1).
    let c = cfg(0x4000, 0, IDR_PTM10);
    assert!(
        after_async(&c, &[0x6e, 0x42])[0].ends_with("[0x6e 0x42 ];\tCTXTID : Context ID packet; CtxtID=0x00000042; ")
    );
    assert!(after_async(&c, &[0x3c, 0x07])[0].ends_with("[0x3c 0x07 ];\tVMID : VM ID packet; VMID=0x07; "));
    assert!(after_async(&c, &[0x0c])[0].ends_with("[0x0c ];\tTRIGGER : Trigger Event packet; "));
    assert!(after_async(&c, &[0x66])[0].ends_with("[0x66 ];\tIGNORE : Ignore packet; "));
    assert!(after_async(&c, &[0x76])[0].ends_with("[0x76 ];\tERET : Exception return packet; "));
    // Even headers not assigned to a packet are reserved.
    assert!(after_async(&c, &[0x02])[0].ends_with("[0x02 ];\tRESERVED : Reserved Packet Header; "));
}

#[test]
fn bad_async_and_incomplete_packets() {
    let c = cfg(CR_PLAIN, 0, IDR_PTM10);
    // In a synchronised stream, zeros not followed by 0x80 are a bad A-sync;
    // OpenCSD logs the error (unterminated) before the packet line.
    let l = after_async(&c, &[0x00, 0x00, 0x08]);
    assert_eq!(
        l[0],
        "PKTP_PTM_0016 : 0x0013 (OCSD_ERR_BAD_PACKET_SEQ) [Bad packet sequence]; TrcIdx=6; CS ID=10; Bad Async packetIdx:6; ID:10; [0x00 0x00 0x08 ];\tBAD_SEQUENCE : Invalid sequence in packet; [ASYNC]; "
    );
    // End of trace inside an I-sync.
    let l = after_async(&c, &[0x08, 0x58]);
    assert_eq!(l, ["Idx:6; ID:10; [0x08 0x58 ];\tINCOMPLETE_EOT : Incomplete packet flushed at end of trace; "]);
}

#[test]
fn packets_split_across_blocks() {
    let c = cfg(CR_CYCLE_ACC, CCER_PTM11, IDR_PTM11);
    let mut data = ASYNC.to_vec();
    data.extend_from_slice(&[0x08, 0xdf, 0x8d, 0x01, 0xc0, 0x21, 0xcc, 0x03, 0xe8, 0x20]);
    data.extend_from_slice(&[0x42, 0xcc, 0x97, 0xc6, 0xce, 0xaf, 0x90, 0x80, 0x80, 0x00, 0x00]);
    data.extend_from_slice(&[0x8d, 0x80, 0xfe, 0xff, 0x4f, 0x1d, 0x3c]);
    let whole = lines(&c, &data);
    let mut p = PtmParser::new(&c);
    let mut split = Vec::new();
    for (i, b) in data.iter().enumerate() {
        p.push(i as u64, std::slice::from_ref(b), &mut |k: &PtmPacket, r: &[u8]| {
            let mut s = String::new();
            display::write_opencsd_line(&mut s, 0x10, k, r);
            split.push(s.trim_end().to_string());
        });
    }
    let whole: Vec<String> = whole.iter().map(|s| s.trim_end().to_string()).collect();
    assert_eq!(whole, split);
    assert_eq!(whole.len(), 5);
}

// ---- decoder -------------------------------------------------------------

/// A32 program at 0x1000:
///   1000 mov r0, r0
///   1004 bl 1010
///   1008 mov r0, r0
///   100c b 1000
///   1010 bx lr
fn program() -> Arc<MemoryImage> {
    let words: [u32; 5] = [0xe1a0_0000, 0xeb00_0001, 0xe1a0_0000, 0xeaff_fffb, 0xe12f_ff1e];
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let mut m = MemoryImage::new();
    m.add_bytes(0x1000, bytes, MemSpace::S);
    Arc::new(m)
}

/// I-sync to 0x1000, A32, secure, trace enable.
const ISYNC_1000: [u8; 6] = [0x08, 0x00, 0x10, 0x00, 0x00, 0x20];

fn decode(c: &PtmConfig, data: &[u8]) -> Vec<String> {
    let mut p = PtmParser::new(c);
    let mut d = PtmDecoder::new(c, program());
    let mut out = Vec::new();
    let emit = |o: DecoderOutput<'_>, out: &mut Vec<String>| match o {
        DecoderOutput::Element(e) => {
            let mut s = String::new();
            element::write_opencsd_line(&mut s, e);
            out.push(s.trim_end().to_string());
        }
        DecoderOutput::Message(m) => out.push(m.to_string()),
        _ => {}
    };
    p.push(0, data, &mut |k: &PtmPacket, _r: &[u8]| d.packet(k, &mut |o| emit(o, &mut out)));
    p.finish(&mut |k: &PtmPacket, _r: &[u8]| d.packet(k, &mut |o| emit(o, &mut out)));
    if !d.is_fatal() {
        d.finish(&mut |o| emit(o, &mut out));
    }
    out
}

#[test]
fn decoder_walks_atoms_and_return_stack() {
    let c = cfg(CR_RET_STACK, CCER_PTM11, IDR_PTM11);
    // E: the BL is taken. E: BX LR is taken, the return stack gives 0x1008.
    // E: the B back to 0x1000 is taken.
    let data = [&ASYNC[..], &ISYNC_1000, &[0x84, 0x84, 0x84]].concat();
    let got = decode(&c, &data);
    let want = [
        "Idx:0; ID:10; OCSD_GEN_TRC_ELEM_NO_SYNC( [init-decoder])",
        "Idx:6; ID:10; OCSD_GEN_TRC_ELEM_TRACE_ON( [begin or filter])",
        "Idx:6; ID:10; OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=A32) S; 32-bit; )",
        "Idx:12; ID:10; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1000:[0x1008] num_i(2) last_sz(4) (ISA=A32) E BR  b+link )",
        "Idx:13; ID:10; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1010:[0x1014] num_i(1) last_sz(4) (ISA=A32) E iBR V7:impl ret)",
        "Idx:14; ID:10; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1008:[0x1010] num_i(2) last_sz(4) (ISA=A32) E BR  )",
        "Idx:14; ID:10; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])",
    ];
    assert_eq!(got, want);
}

#[test]
fn decoder_without_return_stack_needs_branch_address() {
    let c = cfg(CR_PLAIN, 0, IDR_PTM10);
    // After BX LR no address is known: the next atom is ignored until a
    // branch address packet. 0x05 carries A32 address bits 7:2 = 0b000010,
    // replacing the low byte of the last address: 0x1008.
    let data = [&ASYNC[..], &ISYNC_1000, &[0x84, 0x84, 0x84, 0x05, 0x84]].concat();
    let got = decode(&c, &data);
    assert_eq!(got.len(), 7, "{got:#?}");
    assert!(got[4].contains("exec range=0x1010:[0x1014]") && got[4].contains("iBR V7:impl ret"));
    assert!(got[5].starts_with("Idx:16;") && got[5].contains("exec range=0x1008:[0x1010]"), "{}", got[5]);
}

#[test]
fn decoder_exception_and_inaccessible_memory() {
    let c = cfg(CR_PLAIN, 0, IDR_PTM10);
    // Exception (IRQ; the exception byte says non-secure) from 0x1000 to the
    // vector 0x18, which is not in the image. The security state used for
    // memory accesses comes from I-syncs only: still secure.
    let data = [&ASYNC[..], &ISYNC_1000, &[0x8d, 0x80, 0x80, 0x80, 0x40, 0x1d, 0x84]].concat();
    let got = decode(&c, &data);
    assert_eq!(got[3], "Idx:12; ID:10; OCSD_GEN_TRC_ELEM_EXCEPTION(pref ret addr:0x1000; excep num (0x0e) )");
    assert_eq!(got[4], "Idx:18; ID:10; OCSD_GEN_TRC_ELEM_ADDR_NACC( 0x18; Memspace [0x19:Any S] )");
    assert_eq!(got[5], "Idx:18; ID:10; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])");
    // Non-secure I-sync (info byte bit 3): the space is Any NS.
    let data = [&ASYNC[..], &[0x08, 0x00, 0x20, 0x00, 0x00, 0x28, 0x84]].concat();
    let got = decode(&c, &data);
    assert_eq!(got[3], "Idx:12; ID:10; OCSD_GEN_TRC_ELEM_ADDR_NACC( 0x2000; Memspace [0x6:Any NS] )");
}

#[test]
fn decoder_return_stack_underflow_is_fatal() {
    let c = cfg(CR_RET_STACK, CCER_PTM11, IDR_PTM11);
    // I-sync at the BX LR (0x1010; the I-sync empties the return stack),
    // then E: nothing to pop.
    let data = [&ASYNC[..], &[0x08, 0x10, 0x10, 0x00, 0x00, 0x20, 0x84, 0x84]].concat();
    let got = decode(&c, &data);
    assert_eq!(
        got.last().unwrap(),
        "DCD_PTM_0016 : 0x001c (OCSD_ERR_RET_STACK_OVERFLOW) [Internal return stack overflow checks failed - popped more than we pushed.]; TrcIdx=12; CS ID=10; Return stack error processing atom packet."
    );
    assert_eq!(got.len(), 4, "{got:#?}");
}

#[test]
fn decoder_bad_packet_resynchronises() {
    let c = cfg(CR_PLAIN, 0, IDR_PTM10);
    // A reserved header drops sync until the next A-sync and I-sync.
    let data = [&ASYNC[..], &ISYNC_1000, &[0x02, 0x84], &ASYNC[..], &ISYNC_1000, &[0x84]].concat();
    let got = decode(&c, &data);
    assert!(got[3].starts_with("Idx:12; ID:10; OCSD_GEN_TRC_ELEM_NO_SYNC("), "{got:#?}");
    assert_eq!(got[4], "Idx:20; ID:10; OCSD_GEN_TRC_ELEM_TRACE_ON( [begin or filter])");
    assert!(got[5].contains("exec range=0x1000:[0x1008]"));
}

// ---- properties ---------------------------------------------------------

fn configs() -> Vec<PtmConfig> {
    vec![
        cfg(CR_PLAIN, 0, IDR_PTM10),
        cfg(CR_CYCLE_ACC | 0xc000, 0, IDR_PTM10),
        cfg(CR_RET_STACK | 0x4000, CCER_PTM11, IDR_PTM11),
        cfg(CR_CYCLE_ACC, CCER_PTM11, IDR_PTM11),
    ]
}

fn packets_of(c: &PtmConfig, data: &[u8], splits: &[usize]) -> Vec<(u64, PtmPacketType, Vec<u8>)> {
    let mut cuts: Vec<usize> = splits.iter().map(|s| s % (data.len() + 1)).collect();
    cuts.push(0);
    cuts.push(data.len());
    cuts.sort_unstable();
    cuts.dedup();
    let mut p = PtmParser::new(c);
    let mut v = Vec::new();
    for w in cuts.windows(2) {
        p.push(w[0] as u64, &data[w[0]..w[1]], &mut |k: &PtmPacket, r: &[u8]| v.push((k.index, k.ptype, r.to_vec())));
    }
    p.finish(&mut |k: &PtmPacket, r: &[u8]| v.push((k.index, k.ptype, r.to_vec())));
    v
}

/// The packets of `body` after an A-sync, cut at `splits` into blocks that
/// lie 100 bytes apart in the buffer (as one trace ID's blocks do among other
/// IDs' frames): pushed block by block, or the blocks joined in one push of
/// stretches (`joined`).
fn packets_in_blocks(c: &PtmConfig, body: &[u8], splits: &[usize], joined: bool) -> Vec<(u64, PtmPacketType, Vec<u8>)> {
    let mut cuts: Vec<usize> = splits.iter().map(|s| s % (body.len() + 1)).collect();
    cuts.extend([0, body.len()]);
    cuts.sort_unstable();
    cuts.dedup();
    let mut p = PtmParser::new(c);
    let mut v = Vec::new();
    let mut sink = |k: &PtmPacket, r: &[u8]| {
        v.push((k.index, k.ptype, r.to_vec()));
        true
    };
    p.push_until(0, &ASYNC, &mut sink);
    let at = |i: usize, start: usize| (ASYNC.len() + 100 * (i + 1) + start) as u64;
    if joined {
        let spans: Vec<(usize, u64)> = cuts.windows(2).enumerate().map(|(i, w)| (w[0], at(i, w[0]))).collect();
        assert_eq!(p.push_spans_until(&spans, body, &mut sink), body.len());
    } else {
        for (i, w) in cuts.windows(2).enumerate() {
            p.push_until(at(i, w[0]), &body[w[0]..w[1]], &mut sink);
        }
    }
    p.finish(&mut |k: &PtmPacket, r: &[u8]| {
        sink(k, r);
    });
    v
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    /// Once synchronised, a trace ID's blocks joined in one push give the
    /// packets, indices and bytes of the blocks pushed one by one.
    #[test]
    fn joined_blocks_give_the_packets_of_the_blocks(body in proptest::collection::vec(any::<u8>(), 0..1024),
                                                    splits in proptest::collection::vec(any::<usize>(), 0..24),
                                                    which in 0usize..4) {
        let c = &configs()[which];
        let blocks = packets_in_blocks(c, &body, &splits, false);
        prop_assert_eq!(&packets_in_blocks(c, &body, &splits, true), &blocks);
    }

    /// Random bytes in one block: no panic, and every byte is listed once, in order.
    #[test]
    fn random_bytes_every_byte_listed(data in proptest::collection::vec(any::<u8>(), 0..1024), which in 0usize..4) {
        let c = &configs()[which];
        let pk = packets_of(c, &data, &[]);
        let total: usize = pk.iter().map(|p| p.2.len()).sum();
        prop_assert_eq!(total, data.len());
        let mut next = 0u64;
        for (index, _, raw) in &pk {
            prop_assert_eq!(*index, next);
            next += raw.len() as u64;
        }
    }

    /// Once synchronised, packets do not depend on how the input is split,
    /// and their bytes cover the input exactly.
    #[test]
    fn synced_stream_any_split(body in proptest::collection::vec(any::<u8>(), 0..1024),
                               splits in proptest::collection::vec(any::<usize>(), 0..16),
                               which in 0usize..4) {
        let c = &configs()[which];
        let data = [&ASYNC[..], &body].concat();
        let whole = packets_of(c, &data, &[]);
        prop_assert_eq!(&whole, &packets_of(c, &data, &splits));
        let cat: Vec<u8> = whole.iter().flat_map(|p| p.2.iter().copied()).collect();
        prop_assert_eq!(cat, data);
    }

    /// Mutated valid trace (bytes flipped, dropped or inserted) through parser
    /// and decoder: no panic, and the decoder ends the trace unless it stopped.
    #[test]
    fn mutated_trace_decodes(muts in proptest::collection::vec((any::<u16>(), any::<u8>(), 0u8..3), 0..8),
                             which in 0usize..4) {
        let c = &configs()[which];
        let mut data = [&ASYNC[..], &ISYNC_1000, &[0x84, 0x84, 0x05, 0xd0, 0x42, 0x81, 0x01, 0x72, 0x05, 0x76, 0x0c, 0x66, 0x3c, 0x01, 0x6e, 0x05],
            &ASYNC[..], &[0x99, 0x80, 0x80, 0x80, 0x40, 0x1d, 0x84, 0x88]].concat();
        for (pos, b, op) in muts {
            let i = pos as usize % (data.len() + 1);
            match op {
                0 if i < data.len() => data[i] = b,
                1 if i < data.len() => { data.remove(i); }
                _ => data.insert(i, b),
            }
        }
        let got = decode(c, &data);
        let ended = got.last().is_some_and(|l| l.contains("EO_TRACE"));
        let fatal = got.iter().any(|l| l.starts_with("DCD_PTM") && l.contains("RET_STACK"));
        prop_assert!(ended || fatal, "{:#?}", got);
    }
}

#[test]
fn trigger_is_an_event_element_of_type_trigger() {
    // After sync, a trigger packet is OpenCSD's EVENT element of the trigger
    // type, printed as such (not as a numbered event).
    let c = cfg(CR_RET_STACK, CCER_PTM11, IDR_PTM11);
    let data = [&ASYNC[..], &ISYNC_1000, &[0x0c]].concat();
    let out = decode(&c, &data);
    assert!(out.iter().any(|l| l == "Idx:12; ID:10; OCSD_GEN_TRC_ELEM_EVENT( Trigger; )"), "{out:#?}");
}

// ---- resuming from a saved state ------------------------------------------

/// A PTM capture of the OpenCSD fixtures, cut into the blocks the parsers get.
struct Capture {
    name: &'static str,
    image: Arc<MemoryImage>,
    cfgs: BTreeMap<u8, PtmConfig>,
    /// (trace ID, buffer index, bytes) in push order.
    blocks: Vec<(u8, u64, Vec<u8>)>,
}

fn ptm_captures() -> Vec<Capture> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/opencsd");
    let mut found = Vec::new();
    for name in ["TC2", "Snowball", "tc2-ptm-rstk-t32", "trace_cov_a15"] {
        let Ok(snap) = Snapshot::open(&root.join(name)) else { continue };
        let buffer = snap.default_buffer().unwrap().clone();
        let mut image = MemoryImage::new();
        for dev in snap.devices.iter().filter(|d| d.is_core()) {
            image.add_device_dumps(&snap.dir, dev);
        }
        let mut cfgs = BTreeMap::new();
        for dev in snap.sources_for_buffer(&buffer.name) {
            let kind = dev.type_base().to_ascii_uppercase();
            if kind.starts_with("PTM") || kind.starts_with("PFT") {
                let core = snap.core_for_source(&dev.name).map(|c| c.type_name.clone());
                let c = PtmConfig::from_registers(|r| dev.reg(r), core.as_deref()).unwrap();
                cfgs.insert(c.trace_id(), c);
            }
        }
        let data = std::fs::read(&buffer.path).unwrap();
        let mut blocks = Vec::new();
        if buffer.format == BufferFormat::SourceData {
            let id = *cfgs.keys().next().unwrap();
            blocks.extend(data.chunks(1024).enumerate().map(|(i, b)| (id, i as u64 * 1024, b.to_vec())));
        } else {
            let mut demux = Deformatter::new(FrameMode::MemAligned);
            let mut sink = |id: u8, index: u64, bytes: &[u8]| {
                if cfgs.contains_key(&id) {
                    blocks.push((id, index, bytes.to_vec()));
                }
            };
            let whole = FrameMode::MemAligned.lister_accepted_len(data.len() as u64) as usize;
            demux.push(0, &data[..whole], &mut sink).unwrap();
            demux.finish(&mut sink).unwrap();
        }
        found.push(Capture { name, image: Arc::new(image), cfgs, blocks });
    }
    found
}

/// Packets, elements and messages of a whole capture. At each offset in
/// `cuts` (bytes pushed so far, all IDs together; ascending) a block is split
/// in two pushes, and with `reload` every parser and decoder is swapped there
/// for one loaded from its saved state.
fn cut_listing(cap: &Capture, cuts: &[usize], reload: bool) -> String {
    let mut chains: BTreeMap<u8, (PtmParser, PtmDecoder)> =
        cap.cfgs.iter().map(|(&id, c)| (id, (PtmParser::new(c), PtmDecoder::new(c, cap.image.clone())))).collect();
    let at_cut = |chains: &mut BTreeMap<u8, (PtmParser, PtmDecoder)>| {
        if !reload {
            return;
        }
        for (id, (p, d)) in chains.iter_mut() {
            let c = &cap.cfgs[id];
            *p = PtmParser::load_state(c, &p.save_state()).unwrap();
            *d = PtmDecoder::load_state(c, cap.image.clone(), &d.save_state()).unwrap();
        }
    };
    let mut out = String::new();
    let mut cuts = cuts.iter().copied().peekable();
    let mut at = 0usize;
    for (id, index, bytes) in &cap.blocks {
        let mut done = 0;
        loop {
            while cuts.next_if(|&c| c <= at + done).is_some() {
                at_cut(&mut chains);
            }
            let end = cuts.peek().map_or(bytes.len(), |&c| (c - at).min(bytes.len()));
            let (p, d) = chains.get_mut(id).unwrap();
            p.push_until(index + done as u64, &bytes[done..end], &mut |k: &PtmPacket, r: &[u8]| {
                display::write_parser_error(&mut out, *id, k);
                packet_lines(&mut out, *id, k, r);
                d.packet(k, &mut |o| listing_line(&mut out, o));
                !d.is_fatal()
            });
            if d.is_fatal() {
                return out;
            }
            done = end;
            if done == bytes.len() {
                break;
            }
        }
        at += bytes.len();
    }
    if cuts.next().is_some() {
        at_cut(&mut chains);
    }
    for (id, (p, d)) in chains.iter_mut() {
        p.finish(&mut |k: &PtmPacket, r: &[u8]| {
            packet_lines(&mut out, *id, k, r);
            d.packet(k, &mut |o| listing_line(&mut out, o));
        });
        if !d.is_fatal() {
            d.finish(&mut |o| listing_line(&mut out, o));
        }
    }
    out
}

/// The lister's line plus every field, since the lister leaves some out
/// (carried state such as timestamps and cycle totals among them).
fn packet_lines(out: &mut String, id: u8, k: &PtmPacket, raw: &[u8]) {
    display::write_opencsd_line(out, id, k, raw);
    let _ = writeln!(out, "{k:?}");
}

fn listing_line(out: &mut String, o: DecoderOutput<'_>) {
    match o {
        DecoderOutput::Element(e) => {
            element::write_opencsd_line(out, e);
            let _ = writeln!(out, "{e:?}");
        }
        DecoderOutput::Message(m) => {
            out.push_str(m);
            out.push('\n');
        }
        _ => {}
    }
}

#[test]
fn resumed_raw_session_keeps_the_previous_block() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/opencsd/tc2-ptm-rstk-t32");
    let Ok(snap) = Snapshot::open(&dir) else { return };
    let plan = BufferPlan::new(&snap, snap.default_buffer().unwrap()).unwrap();
    let opts = RunOptions { elements: true, ..RunOptions::default() };
    // A block ending in what may begin an A-sync, then a shorter block that
    // ends it: the NOTSYNC chunk reads bytes past the short block, where
    // OpenCSD's buffer still holds the first block.
    let mut first: Vec<u8> = (1..=40).collect();
    first[38..].fill(0);
    let second = [0x00, 0x42, 0x11];
    let listing = |resume: bool| {
        let mut out = String::new();
        let mut on = |ev: Event<'_>| {
            if let Event::Packet { source, stream_id, packet, raw } = ev {
                packet.write_opencsd(&mut out, source, stream_id, raw, true);
            }
        };
        let mut r = Runner::new(&plan, &opts);
        r.feed(&first, &mut on);
        if resume {
            r = Runner::resume(&plan, &opts, &r.save_state().unwrap()).unwrap();
        }
        r.feed(&second, &mut on);
        r.finish(&mut on);
        out
    };
    let whole = listing(false);
    assert!(whole.contains("[0x00 0x42 0x11 0x04 0x05 ]"), "{whole}");
    assert_eq!(listing(true), whole);
}

#[test]
fn packet_error_messages_survive_saved_states() {
    // At rest the parser holds no message, so only a packet shows this path.
    let mut k = PtmPacket::start_state();
    for m in PARSE_MESSAGES {
        k.error_message = Some(m);
        let back: PtmPacket = bincode::deserialize(&bincode::serialize(&k).unwrap()).unwrap();
        assert_eq!(back, k);
    }
    k.error_message = Some("a message the table does not list");
    assert!(bincode::serialize(&k).is_err());
}

/// The first line where two listings differ, for a readable failure.
fn first_difference(a: &str, b: &str) -> Option<(usize, String, String)> {
    let (mut la, mut lb) = (a.lines(), b.lines());
    for n in 0.. {
        match (la.next(), lb.next()) {
            (None, None) => return None,
            (x, y) if x == y => {}
            (x, y) => return Some((n, x.unwrap_or("<end>").to_string(), y.unwrap_or("<end>").to_string())),
        }
    }
    None
}

#[test]
fn saved_state_resumes_every_ptm_capture_exactly() {
    let captures = ptm_captures();
    if captures.is_empty() {
        eprintln!("fixtures not found; skipped");
        return;
    }
    assert_eq!(captures.len(), 4, "expected the four PTM captures");
    for cap in &captures {
        let total: usize = cap.blocks.iter().map(|b| b.2.len()).sum();
        let whole = cut_listing(cap, &[], false);
        assert!(whole.contains("INSTR_RANGE"), "{}: nothing decoded", cap.name);
        // Between blocks, where an index resumes, reloads must not show at all.
        let mut starts = vec![0usize];
        for b in &cap.blocks {
            starts.push(starts.last().unwrap() + b.2.len());
        }
        let diff = first_difference(&whole, &cut_listing(cap, &starts, true));
        assert_eq!(diff, None, "{}: reloaded between blocks", cap.name);
        // Inside a block, unsynchronised bytes are listed in chunks cut at
        // each push, so there the same pushes without reloads are the
        // reference: a reload after every byte, in every packet state.
        let every: Vec<usize> = (0..=total).collect();
        let diff = first_difference(&cut_listing(cap, &every, false), &cut_listing(cap, &every, true));
        assert_eq!(diff, None, "{}: reloaded after every byte", cap.name);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    /// Random and damaged streams reach states the captures do not (bad
    /// packets, ThumbEE, several NOTSYNC runs); a reload after any byte
    /// changes nothing.
    #[test]
    fn saved_state_resumes_random_streams(body in proptest::collection::vec(any::<u8>(), 0..600),
                                          lead in proptest::collection::vec(any::<u8>(), 0..40),
                                          which in 0usize..4) {
        let c = configs()[which].clone();
        let data = [&lead[..], &ASYNC, &ISYNC_1000, &body, &ASYNC, &body].concat();
        let every: Vec<usize> = (0..=data.len()).collect();
        let cap = Capture {
            name: "random",
            image: program(),
            cfgs: BTreeMap::from([(c.trace_id(), c.clone())]),
            blocks: vec![(c.trace_id(), 0, data)],
        };
        let diff = first_difference(&cut_listing(&cap, &every, false), &cut_listing(&cap, &every, true));
        prop_assert_eq!(diff, None);
    }
}

/// Every packet with all its fields, as the parser gives them when pushed
/// in blocks cut at `cuts`.
/// Every field of every packet of `data` pushed in pieces cut at `cuts`,
/// then the state the parser would save before its end.
fn packet_fields(c: &PtmConfig, data: &[u8], cuts: &[usize]) -> Vec<String> {
    let mut p = PtmParser::new(c);
    let mut v = Vec::new();
    let mut start = 0;
    for &cut in cuts.iter().chain(std::iter::once(&data.len())) {
        if cut > start {
            p.push(start as u64, &data[start..cut], &mut |k: &PtmPacket, r: &[u8]| v.push(format!("{k:?} {r:?}")));
            start = cut;
        }
    }
    v.push(format!("state {:?}", p.save_state()));
    p.finish(&mut |k: &PtmPacket, r: &[u8]| v.push(format!("{k:?} {r:?}")));
    v
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    /// Pushed whole, atom packets are taken straight from the block; pushed
    /// a byte at a time, through the byte-wise machine: every field of
    /// every packet is the same. The body is mostly atom headers (and
    /// cycle count bytes), with other bytes between them.
    #[test]
    fn atoms_whole_as_byte_by_byte(body in proptest::collection::vec(prop_oneof![3 => 0x80u8..=0xff, 1 => any::<u8>()], 0..512),
                                   which in 0usize..4) {
        let c = &configs()[which];
        let data = [&ASYNC[..], &body].concat();
        let every: Vec<usize> = (1..data.len()).collect();
        // The last byte pushed alone in both, so both states are saved after
        // a push at the same index.
        prop_assert_eq!(packet_fields(c, &data, &[data.len() - 1]), packet_fields(c, &data, &every));
    }

    /// The same for branch address packets and I-syncs, also taken whole
    /// from the block: bodies of branch headers (odd bytes), I-sync headers,
    /// address, exception, information, cycle count and context ID bytes
    /// with and without their continuation bits, and bytes of any kind
    /// between them.
    #[test]
    fn branches_and_isyncs_whole_as_byte_by_byte(body in proptest::collection::vec(prop_oneof![
                                          2 => (0u8..=0x7f).prop_map(|b| (b << 1) | 1),
                                          1 => Just(0x08u8),
                                          3 => 0x80u8..=0xff,
                                          2 => 0u8..=0x7f,
                                          1 => any::<u8>()], 0..512),
                                      which in 0usize..4) {
        let c = &configs()[which];
        let data = [&ASYNC[..], &body].concat();
        let every: Vec<usize> = (1..data.len()).collect();
        prop_assert_eq!(packet_fields(c, &data, &[data.len() - 1]), packet_fields(c, &data, &every));
    }
}
