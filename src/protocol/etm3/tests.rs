//! Hand-written packet and element tests for the ETMv3 parser and decoder,
//! and property tests on random and mutated input.

use std::sync::Arc;

use proptest::prelude::*;

use super::config::Etm3Config;
use super::decoder::{DecoderOutput, Etm3Decoder};
use super::display;
use super::packet::{Etm3Packet, PacketType};
use super::parser::{Etm3Parser, Etm3Sink};
use crate::element::{self, MemSpace};
use crate::image::memory::MemoryImage;
use crate::protocol::decoder::ElementCounts;
use crate::protocol::Decoder;

const ASYNC: [u8; 6] = [0, 0, 0, 0, 0, 0x80];

fn config(etmcr: u64, etmidr: u64, ccer: u64, core: &str) -> Etm3Config {
    let regs = [("ETMCR", etmcr), ("ETMIDR", etmidr), ("ETMCCER", ccer), ("ETMTRACEIDR", 0x10)];
    Etm3Config::from_registers(|n| regs.iter().find(|(k, _)| *k == n).map(|(_, v)| *v), Some(core)).unwrap()
}

/// ETMv3.5, instruction trace only, not cycle accurate, original branch
/// encoding, no context ID, 48-bit timestamps.
fn plain() -> Etm3Config {
    config(0, 0x410CF250, 0, "Cortex-A7")
}

/// Cycle accurate (ETMCR bit 12), 4-byte context IDs (bits 15:14 = 3), data
/// value and address trace (bits 3:2), alternative branch encoding (ETMIDR bit
/// 20), virtualization and 64-bit timestamps (ETMCCER bits 26, 29, 22).
fn rich() -> Etm3Config {
    config(0xD00C, 0x411CF250, 0x2440_0000, "Cortex-A15")
}

/// Packet lines (without the `Idx:..; ID:10; ` prefix and newline) and the
/// parser errors, for `data` pushed in one block.
fn lines(cfg: &Etm3Config, data: &[u8]) -> Vec<String> {
    lines_split(cfg, &[data])
}

fn lines_split(cfg: &Etm3Config, blocks: &[&[u8]]) -> Vec<String> {
    let mut p = Etm3Parser::new(cfg);
    let mut out = Vec::new();
    let mut sink = |k: &Etm3Packet, r: &[u8]| {
        let mut s = String::new();
        display::write_parser_error(&mut s, 0x10, k);
        if !s.is_empty() {
            out.push(format!("ERR {s}"));
        }
        s.clear();
        display::write_opencsd_line(&mut s, 0x10, k, r);
        out.push(s.strip_suffix('\n').unwrap_or(&s).to_string());
    };
    let mut at = 0u64;
    for b in blocks {
        p.push(at, b, &mut sink);
        at += b.len() as u64;
    }
    p.finish(&mut sink);
    out
}

fn synced(rest: &[u8]) -> Vec<u8> {
    let mut v = ASYNC.to_vec();
    v.extend_from_slice(rest);
    v
}

/// The packet text after the raw bytes of the line at `i`.
fn text(l: &[String], i: usize) -> &str {
    l[i].split("];\t").nth(1).unwrap_or(&l[i])
}

#[test]
fn not_sync_chunks() {
    // Bytes before the first A-sync come in chunks of at most 16, cut before
    // every zero byte and at the end of every pushed block.
    let mut data: Vec<u8> = (1..=20).collect();
    data.extend_from_slice(&[0x33, 0x00, 0x44]);
    data.extend_from_slice(&ASYNC);
    let l = lines(&plain(), &data);
    assert_eq!(l[0], "Idx:0; ID:10; [0x01 0x02 0x03 0x04 0x05 0x06 0x07 0x08 0x09 0x0a 0x0b 0x0c 0x0d 0x0e 0x0f 0x10 ];\tNOTSYNC : Trace Stream not synchronised");
    assert_eq!(l[1], "Idx:16; ID:10; [0x11 0x12 0x13 0x14 0x33 ];\tNOTSYNC : Trace Stream not synchronised");
    // The zero opens a possible A-sync; the next byte ends that hope but the
    // chunk goes on.
    assert_eq!(l[2], "Idx:21; ID:10; [0x00 0x44 ];\tNOTSYNC : Trace Stream not synchronised");
    assert_eq!(l[3], "Idx:23; ID:10; [0x00 0x00 0x00 0x00 0x00 0x80 ];\tA_SYNC : Alignment Synchronisation.");

    // A block boundary ends a chunk.
    let l = lines_split(&plain(), &[&[0x11, 0x22, 0x33], &[0x44, 0x55], &ASYNC]);
    assert_eq!(text(&l, 0), "NOTSYNC : Trace Stream not synchronised");
    assert!(l[0].starts_with("Idx:0; ID:10; [0x11 0x22 0x33 ]"));
    assert!(l[1].starts_with("Idx:3; ID:10; [0x44 0x55 ]"));
    assert!(l[2].starts_with("Idx:5; ID:10; [0x00 0x00 0x00 0x00 0x00 0x80 ];\tA_SYNC"));
}

#[test]
fn zeros_before_first_sync() {
    // Thirteen zeros: eight are split off (with the packet type of the moment,
    // nothing yet: OpenCSD prints that as a reserved header), the rest waits.
    let mut data = vec![0u8; 13];
    data.extend_from_slice(&[0, 0x80]);
    let l = lines(&plain(), &data);
    assert_eq!(l[0], "Idx:0; ID:10; [0x00 0x00 0x00 0x00 0x00 0x00 0x00 0x00 ];\tI_RESERVED : Reserved Packet Header");
    // Five zeros are left; one more and 0x80 make one zero too many, which
    // goes first (now typed as unsynchronised data).
    assert_eq!(l[1], "Idx:8; ID:10; [0x00 ];\tNOTSYNC : Trace Stream not synchronised");
    assert_eq!(l[2], "Idx:9; ID:10; [0x00 0x00 0x00 0x00 0x00 0x80 ];\tA_SYNC : Alignment Synchronisation.");
}

#[test]
fn async_after_sync() {
    // Six zeros and 0x80: the extra zero is a bad sequence of its own.
    let l = lines(&plain(), &synced(&[0, 0, 0, 0, 0, 0, 0x80, 0, 0, 0x80]));
    assert_eq!(l[1], "ERR PKTP_ETMV3_0016 : 0x0013 (OCSD_ERR_BAD_PACKET_SEQ) [Bad packet sequence]; TrcIdx=6; CS ID=10; A-Sync ?: Extra 0x00 in sequence");
    assert_eq!(l[2], "Idx:6; ID:10; [0x00 ];\tBAD_SEQUENCE : Invalid sequence for packet type.[A_SYNC]");
    assert_eq!(l[3], "Idx:7; ID:10; [0x00 0x00 0x00 0x00 0x00 0x80 ];\tA_SYNC : Alignment Synchronisation.");
    // Two zeros and 0x80: the zeros are a bad sequence, 0x80 is read again as
    // a header (a P-header with no atoms).
    assert_eq!(l[5], "Idx:13; ID:10; [0x00 0x00 ];\tBAD_SEQUENCE : Invalid sequence for packet type.[A_SYNC]");
    assert_eq!(l[6], "Idx:15; ID:10; [0x80 ];\tP_HDR : Atom P-header.; ");
}

#[test]
fn branch_address_original_encoding() {
    let l = lines(
        &plain(),
        &synced(&[
            // One byte: address bits 7:2 (A32 alignment while the ISA is unknown).
            0x2b,
            // Five bytes, Thumb: 0xC0001234 >> 1 = 0x6000091A in 6+7+7+7 bits,
            // then byte 5 = 0b0001_xxxx (T32) with bits 30:27.
            0xb5, 0xa4, 0x80, 0x80, 0x1c,
            // Five bytes to A32 0x8000, byte 5 = 0b0100_1000 (A32, exception
            // follows); exception byte 0x3D = NS, IRQ (14), cancel.
            0x81, 0x80, 0x81, 0x80, 0x48, 0x3d,
            // Original fifth byte with bit 7 set: A32, deprecated exception 1.
            0x81, 0x80, 0x80, 0x80, 0x88,
            // Fifth byte naming no instruction set: malformed, sent as it stands.
            0x81, 0x80, 0x80, 0x80, 0x00,
        ]),
    );
    assert_eq!(text(&l, 1), "BRANCH_ADDRESS : Branch address.; Addr=0x??????54 (7:0) ~[0x54]; ");
    assert_eq!(text(&l, 2), "BRANCH_ADDRESS : Branch address.; Addr=0xC0001234 ~[0xC0001234]; ISA=Thumb2; ");
    assert_eq!(
        text(&l, 3),
        "BRANCH_ADDRESS : Branch address.; Addr=0x00008000 ~[0x8000]; ISA=ARM(32); NS; Exception=IRQ; ; Cancel prev instr"
    );
    assert_eq!(text(&l, 4), "BRANCH_ADDRESS : Branch address.; Addr=0x00000000 ~[0x0]; Exception=Debug Halt; ");
    assert!(l[5].ends_with("CS ID=10; Malformed Packet - Unknown ISA."));
    assert_eq!(l[6], "Idx:23; ID:10; [0x81 0x80 0x80 0x80 0x00 ];\tBRANCH_ADDRESS : Branch address.; Addr=0x00000000; ");
}

#[test]
fn branch_address_alternative_encoding_and_isync_context() {
    let l = lines(
        &rich(),
        &synced(&[
            // I-sync: context ID 0x12345678, info 0x28 (trace enable, NS),
            // address 0x80001001 (T32).
            0x08, 0x78, 0x56, 0x34, 0x12, 0x28, 0x01, 0x10, 0x00, 0x80,
            // Alternative encoding: byte 1 has no continuation and bit 6 set,
            // so exception bytes follow: 0x86 = Hyp exception (3), more;
            // 0x20 = Hyp mode.
            0x81, 0x41, 0x86, 0x20,
        ]),
    );
    assert_eq!(
        text(&l, 1),
        "I_SYNC : Instruction Packet synchronisation.; (Trace Enable); Addr=0x80001000; NS;  CtxtID=12345678; ISA=Thumb2; "
    );
    assert_eq!(text(&l, 2), "BRANCH_ADDRESS : Branch address.; Addr=0x80000080 ~[0x80]; S; Hyp; Exception=Hyp; ");
}

#[test]
fn isync_cycle_count_and_lsip() {
    let l = lines(
        &rich(),
        &synced(&[
            // Cycle count 0x85 0x01 = 133, context ID 0, info 0 (periodic),
            // address 0x1000 (A32).
            0x70, 0x85, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00,
        ]),
    );
    assert_eq!(
        text(&l, 1),
        "I_SYNC_CYCLE : Instruction Packet synchronisation with cycle count.; (Periodic); Addr=0x00001000; S;  CtxtID=0; ISA=ARM(32); Cycles=133; "
    );
    assert!(l[1].starts_with("Idx:6; ID:10; [0x70 0x85 0x01 0x00"));

    // Info bit 7: a load/store-in-progress address follows the main one. It
    // only ends on a byte without bit 7, and OpenCSD folds it into the address.
    let l = lines(&plain(), &synced(&[0x08, 0x80, 0x00, 0x20, 0x00, 0x80, 0x09, 0x84]));
    assert_eq!(l[1], "Idx:6; ID:10; [0x08 0x80 0x00 0x20 0x00 0x80 0x09 ];\tI_SYNC : Instruction Packet synchronisation.; (Periodic); Addr=0x80002010; S;  ISA=ARM(32); ");
    // When the last address byte has bit 7 clear the packet ends there and
    // reading the extra address runs off its end.
    let l = lines(&plain(), &synced(&[0x08, 0x80, 0x00, 0x20, 0x00, 0x00]));
    assert!(l[1].ends_with("Malformed Packet - oversized packet."));
    assert_eq!(text(&l, 2), "I_SYNC : Instruction Packet synchronisation.; (Periodic); Addr=0x00002000; S;  ISA=ARM(32); ");
}

#[test]
fn p_headers() {
    // Not cycle accurate: format 1 (E count in bits 5:2, N in bit 6) and
    // format 2 (two atoms, bit 3 then bit 2, 0 = E).
    let l = lines(&plain(), &synced(&[0x84, 0xc4, 0x80, 0x82, 0x8e, 0x8a, 0xbc]));
    let t: Vec<&str> = (1..8).map(|i| text(&l, i)).collect();
    assert_eq!(
        t,
        [
            "P_HDR : Atom P-header.; E",
            "P_HDR : Atom P-header.; EN",
            "P_HDR : Atom P-header.; ",
            "P_HDR : Atom P-header.; EE",
            "P_HDR : Atom P-header.; NN",
            "P_HDR : Atom P-header.; NE",
            "P_HDR : Atom P-header.; EEEEEEEEEEEEEEE",
        ]
    );
    // Cycle accurate: format 1 (a W per atom), 2 (W then two atoms), 3 (1-8 W
    // then an optional E), 4 (one atom, no W); 0x80 and 0xA2 are invalid.
    let l = lines(&rich(), &synced(&[0x84, 0xc8, 0x82, 0x92, 0xa0, 0xe0, 0xbc, 0x80, 0xa2]));
    let t: Vec<&str> = l[1..].iter().map(|s| s.as_str()).collect();
    assert_eq!(t[0], "Idx:6; ID:10; [0x84 ];\tP_HDR : Atom P-header.; WE; Cycles=1");
    assert_eq!(t[1], "Idx:7; ID:10; [0xc8 ];\tP_HDR : Atom P-header.; WEWEWN; Cycles=3");
    assert_eq!(t[2], "Idx:8; ID:10; [0x82 ];\tP_HDR : Atom P-header.; WEE; Cycles=1");
    assert_eq!(t[3], "Idx:9; ID:10; [0x92 ];\tP_HDR : Atom P-header.; E");
    assert_eq!(t[4], "Idx:10; ID:10; [0xa0 ];\tP_HDR : Atom P-header.; W; Cycles=1");
    assert_eq!(t[5], "Idx:11; ID:10; [0xe0 ];\tP_HDR : Atom P-header.; WE; Cycles=1");
    assert_eq!(t[6], "Idx:12; ID:10; [0xbc ];\tP_HDR : Atom P-header.; WWWWWWWW; Cycles=8");
    assert!(t[7].ends_with("TrcIdx=13; CS ID=10; Invalid P-Header."));
    assert_eq!(t[8], "Idx:13; ID:10; [0x80 ];\tP_HDR : Atom P-header.; ");
    assert!(t[9].contains("(OCSD_ERR_INVALID_PCKT_HDR) [Invalid packet header]"));
    assert_eq!(t[10], "Idx:14; ID:10; [0xa2 ];\tP_HDR : Atom P-header.; ");
}

#[test]
fn single_byte_and_short_packets() {
    let l = lines(
        &plain(),
        &synced(&[
            0x0c, // trigger
            0x66, // ignore
            0x7e, // exception entry
            0x76, // exception exit
            0x04, 0x85, 0x01, // cycle count 5 + (1 << 7)
            0x04, 0xff, 0xff, 0xff, 0xff, 0x0f, // cycle count, five bytes: 32 bits
            0x42, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f, // 48-bit timestamp, all ones
            0x46, 0x05, // timestamp (reason bit set), low 7 bits = 5
            0x3c, 0x41, // VMID 0x41
        ]),
    );
    let t: Vec<&str> = (1..l.len()).map(|i| text(&l, i)).collect();
    assert_eq!(
        t,
        [
            "TRIGGER : Trace Trigger Event.",
            "IGNORE : Packet ignored.",
            "EXCEPTION_ENTRY : Exception entry data marker.",
            "EXCEPTION_EXIT : Exception return.",
            "CYCLE_COUNT : Cycle Count.; Cycles=133",
            "CYCLE_COUNT : Cycle Count.; Cycles=4294967295",
            "TIMESTAMP : Timestamp Value.; TS=0xffffffffffff (281474976710655) ",
            "TIMESTAMP : Timestamp Value.; TS=0xffffffffff85 (281474976710533) ",
            // OpenCSD streams the 8-bit VMID as a character ("0xA"); a VMID of
            // 0x0a would then end the line. We print the number.
            "VMID : VMID change.; VMID=0x41",
        ]
    );
}

#[test]
fn context_id_and_timestamp_64() {
    let l = lines(
        &rich(),
        &synced(&[
            0x6e, 0x78, 0x56, 0x34, 0x12, // context ID, 4 bytes
            // 64-bit timestamp: eight 7-bit groups then a full 8-bit byte.
            0x42, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
        ]),
    );
    assert_eq!(text(&l, 1), "CONTEXT_ID : Context ID change.; CtxtID=0x12345678");
    assert_eq!(text(&l, 2), "TIMESTAMP : Timestamp Value.; TS=0x7fffffffffffffff (9223372036854775807) ");
    // No context ID configured: the byte after the header overruns the packet.
    let l = lines(&plain(), &synced(&[0x6e, 0x12]));
    assert!(l[1].ends_with("Malformed context id packet."));
    assert_eq!(l[2], "Idx:6; ID:10; [0x6e 0x12 ];\tCONTEXT_ID : Context ID change.; CtxtID=0x0");
}

#[test]
fn data_packets() {
    let l = lines(
        &rich(),
        &synced(&[
            0x06, 0xaa, // normal data, one byte
            0x26, 0x05, 0xbb, // normal data with address: one address byte, one data byte
            0x24, 0xcc, // out-of-order data, tag 1, one byte
            0x20, // out-of-order data, tag 1, no data
            0x50, // store failed
            0x54, // out-of-order placeholder, tag 1
            0x74, 0x03, // placeholder with address
            0x62, // data suppressed
            // Value not traced: OpenCSD tests bit 5 for an address, which
            // this header always has set.
            0x6a, 0x03,
        ]),
    );
    let t: Vec<&str> = (1..l.len()).map(|i| text(&l, i)).collect();
    // OpenCSD keeps data addresses in the instruction address and prints an
    // address field that never changes.
    assert_eq!(
        t,
        [
            "NORM_DATA : Data trace packet.; Val=0xaa",
            "NORM_DATA : Data trace packet.; Addr=0x????????0 (-1:0); Val=0xbb",
            "OOO_DATA : Out of Order data value packet.; Val=0xcc; OO_Tag=0x1",
            "OOO_DATA : Out of Order data value packet.; Val=0x0; OO_Tag=0x1",
            "STORE_FAIL : Data Store Failed.",
            "OOO_ADDR_PLC : Out of Order data address placeholder.; OO_Tag=0x1",
            "OOO_ADDR_PLC : Out of Order data address placeholder.; Addr=0x????????0 (-1:0); OO_Tag=0x1",
            "DATA_SUPPRESSED : Data trace suppressed.",
            "VAL_NOT_TRACED : Data trace value not traced.; Addr=0x????????0 (-1:0)",
        ]
    );
    // Without data trace the headers are errors naming the previous packet.
    let l = lines(&plain(), &synced(&[0x84, 0x02, 0x10]));
    assert!(l[2].contains("Invalid data trace header (normal data) - not tracing data."));
    assert_eq!(text(&l, 3), "BAD_TRACEMODE : Invalid packet type for this trace mode.[P_HDR]");
    assert!(l[4].ends_with("Packet header reserved encoding"));
    assert_eq!(text(&l, 5), "I_RESERVED : Reserved Packet Header");
}

#[test]
fn partial_packet_at_end_keeps_its_type() {
    let l = lines(&plain(), &synced(&[0x2b, 0x81, 0x80]));
    assert_eq!(l[2], "Idx:7; ID:10; [0x81 0x80 ];\tBRANCH_ADDRESS : Branch address.; Addr=0x??????54 (7:0); ");
}

// ---- decoder -------------------------------------------------------------

/// T32 code at 0x8000: movs r0,#1; b.n 0x8000; bx lr; then padding.
#[allow(clippy::arc_with_non_send_sync)]
fn image() -> Arc<MemoryImage> {
    let mut m = MemoryImage::new();
    m.add_bytes(0x8000, vec![0x01, 0x20, 0xfd, 0xe7, 0x70, 0x47, 0x00, 0x00, 0x00, 0x00], MemSpace::ANY);
    Arc::new(m)
}

/// The listing (packet lines, element lines and messages) of `data`.
fn decode(cfg: &Etm3Config, data: &[u8]) -> (Vec<String>, bool) {
    let mut p = Etm3Parser::new(cfg);
    let mut d = Etm3Decoder::new(cfg, image());
    let mut out = String::new();
    let on_pkt = |k: &Etm3Packet, r: &[u8], d: &mut Etm3Decoder, out: &mut String| {
        display::write_opencsd_line(out, 0x10, k, r);
        d.packet(k, &mut |o| match o {
            DecoderOutput::Element(e) => element::write_opencsd_line(out, e),
            DecoderOutput::Message(m) => {
                out.push_str(m);
                if !m.ends_with('\n') {
                    out.push('\n');
                }
            }
            _ => {}
        });
    };
    p.push(0, data, &mut |k: &Etm3Packet, r: &[u8]| on_pkt(k, r, &mut d, &mut out));
    p.finish(&mut |k: &Etm3Packet, r: &[u8]| on_pkt(k, r, &mut d, &mut out));
    d.finish(&mut |o| {
        if let DecoderOutput::Element(e) = o {
            element::write_opencsd_line(&mut out, e)
        }
    });
    (out.lines().filter(|l| !l.contains("; [")).map(|l| l.to_string()).collect(), d.is_fatal())
}

#[test]
fn decoder_follows_atoms_and_holds_back_single_ranges() {
    let (e, fatal) = decode(
        &plain(),
        &synced(&[
            0x08, 0x20, 0x01, 0x80, 0x00, 0x00, // I-sync, trace enable, 0x8000 T32 (Idx 6)
            0x88, // EE: movs, then b.n taken back to 0x8000 (Idx 12)
            0x84, // E: movs (held back until the next packet) (Idx 13)
            0xc0, // N: b.n not taken (Idx 14)
            0x84, // E: bx lr, indirect: the address is needed again (Idx 15)
            0x01, // branch address: low 7 bits 0 -> 0x8000 (Idx 16)
            0x84, // E: movs (Idx 17)
        ]),
    );
    assert!(!fatal);
    let expect = [
        "Idx:0; ID:10; OCSD_GEN_TRC_ELEM_NO_SYNC( [init-decoder])",
        "Idx:6; ID:10; OCSD_GEN_TRC_ELEM_TRACE_ON( [begin or filter])",
        "Idx:6; ID:10; OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=T32) S; 32-bit; )",
        "Idx:12; ID:10; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x8000:[0x8002] num_i(1) last_sz(2) (ISA=T32) E --- )",
        "Idx:12; ID:10; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x8002:[0x8004] num_i(1) last_sz(2) (ISA=T32) E BR  )",
        "Idx:13; ID:10; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x8000:[0x8002] num_i(1) last_sz(2) (ISA=T32) E --- )",
        "Idx:14; ID:10; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x8002:[0x8004] num_i(1) last_sz(2) (ISA=T32) N BR  )",
        "Idx:15; ID:10; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x8004:[0x8006] num_i(1) last_sz(2) (ISA=T32) E iBR V7:impl ret)",
        "Idx:17; ID:10; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x8000:[0x8002] num_i(1) last_sz(2) (ISA=T32) E --- )",
        "Idx:17; ID:10; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])",
    ];
    assert_eq!(e, expect);
}

#[test]
fn decoder_exception_cancels_held_back_range() {
    let (e, _) = decode(
        &plain(),
        &synced(&[
            0x08, 0x00, 0x01, 0x80, 0x00, 0x00, // I-sync, periodic, 0x8000 T32 (Idx 6)
            0x84, // E: movs, held back (Idx 12)
            // Branch to 0x8000 T32 with exception: NS, IRQ, cancel (Idx 13).
            0x81, 0x80, 0x82, 0x80, 0x50, 0x3d,
            0x76, // exception return (Idx 19)
            0x84, // (Idx 20)
        ]),
    );
    let kinds: Vec<&str> =
        e.iter().map(|l| l.split("OCSD_GEN_TRC_ELEM_").nth(1).unwrap().split('(').next().unwrap()).collect();
    // The held-back range is cancelled; the PE context goes out with the
    // branch, the exception (held back with it in OpenCSD's list) with the next
    // packet.
    assert_eq!(
        kinds,
        ["NO_SYNC", "TRACE_ON", "PE_CONTEXT", "PE_CONTEXT", "EXCEPTION", "EXCEPTION_RET", "INSTR_RANGE", "EO_TRACE"]
    );
    assert!(e[3].contains("N; 32-bit; "));
    assert_eq!(e[4], "Idx:13; ID:10; OCSD_GEN_TRC_ELEM_EXCEPTION(excep num (0x0e) )");
    assert!(e[5].starts_with("Idx:19;"));
}

#[test]
fn decoder_nacc_unsupported_isa_and_fatal_data() {
    // No image at 0x9000.
    let (e, _) = decode(&plain(), &synced(&[0x08, 0x00, 0x01, 0x90, 0x00, 0x00, 0x84, 0x84]));
    assert_eq!(e[3], "Idx:12; ID:10; OCSD_GEN_TRC_ELEM_ADDR_NACC( 0x9000; Memspace [0x19:Any S] )");
    // The next atom has no address to go from: reported once.
    assert_eq!(e[4], "Idx:13; ID:10; OCSD_GEN_TRC_ELEM_ADDR_UNKNOWN()");
    assert_eq!(e.len(), 6);

    // Jazelle (info bit 4): reported once, then wait for an address.
    let (e, _) = decode(&plain(), &synced(&[0x08, 0x10, 0x00, 0x80, 0x00, 0x00, 0x84, 0x84]));
    assert_eq!(e[2], "Idx:6; ID:10; OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=Jaz) S; 32-bit; )");
    assert!(e[3].starts_with("DCD_ETMV3_0016 : 0x0016 (OCSD_ERR_UNSUPPORTED_ISA) [ISA not supported in decoder]; TrcIdx=12; CS ID=10;"));
    assert_eq!(e.len(), 5);

    // Data trace cannot be decoded: OpenCSD stops the data path.
    let (e, fatal) = decode(&plain(), &synced(&[0x08, 0x00, 0x01, 0x80, 0x00, 0x00, 0x02, 0x84]));
    assert!(fatal);
    assert_eq!(
        e.last().unwrap(),
        "DCD_ETMV3_0016 : 0x0017 (OCSD_ERR_HW_CFG_UNSUPP) [Programmed trace configuration not supported by decodUer.]; TrcIdx=12; CS ID=10; Invalid packet type : Data Tracing decode not supported."
    );
}

#[test]
fn decoder_cycle_counts_before_first_isync() {
    let (e, _) = decode(
        &rich(),
        &synced(&[
            0x84, // WE before any address: unknown address, with its cycle
            0x84, // then cycle counts only
            0xbc, // WWWWWWWW
            0x42, 0x05, // timestamp
            // I-sync with cycle count 7, context ID 0, info trace enable, 0x8000 T32.
            0x70, 0x07, 0x00, 0x00, 0x00, 0x00, 0x20, 0x01, 0x80, 0x00, 0x00,
            0x82, // WEE: two ranges, the first with the W
        ]),
    );
    assert_eq!(
        &e[1..],
        [
            "Idx:6; ID:10; OCSD_GEN_TRC_ELEM_ADDR_UNKNOWN( [CC=1]; )",
            "Idx:7; ID:10; OCSD_GEN_TRC_ELEM_CYCLE_COUNT( [CC=1]; )",
            "Idx:8; ID:10; OCSD_GEN_TRC_ELEM_CYCLE_COUNT( [CC=8]; )",
            "Idx:9; ID:10; OCSD_GEN_TRC_ELEM_TIMESTAMP( [ TS=0x000000000005]; )",
            "Idx:11; ID:10; OCSD_GEN_TRC_ELEM_TRACE_ON( [begin or filter])",
            "Idx:11; ID:10; OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=T32) S; 32-bit; CTXTID=0x0;  [CC=7]; )",
            "Idx:22; ID:10; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x8000:[0x8002] num_i(1) last_sz(2) (ISA=T32) E ---  [CC=1]; )",
            "Idx:22; ID:10; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x8002:[0x8004] num_i(1) last_sz(2) (ISA=T32) E BR   [CC=0]; )",
            "Idx:22; ID:10; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])",
        ]
    );
}

// ---- properties ----------------------------------------------------------

fn prop_configs() -> Vec<Etm3Config> {
    vec![
        plain(),
        rich(),
        // Cycle accurate, original encoding, 1-byte context IDs, v7-M numbering.
        config(0x5000, 0x410CF240, 0x0040_0000, "Cortex-M3"),
        // Data-only trace with 2-byte context IDs and alternative encoding.
        config(0x0010_800C, 0x411CF250, 0, "Cortex-A9"),
    ]
}

/// `data` cut at `splits` (each taken modulo the length, in order): the
/// non-empty blocks with their offsets.
fn blocks<'a>(data: &'a [u8], splits: &[usize]) -> Vec<(usize, &'a [u8])> {
    let mut cuts: Vec<usize> = splits.iter().map(|&s| s % (data.len() + 1)).collect();
    cuts.sort_unstable();
    let mut out = Vec::new();
    let mut start = 0;
    for c in cuts.into_iter().chain(std::iter::once(data.len())) {
        if c > start {
            out.push((start, &data[start..c]));
            start = c;
        }
    }
    out
}

/// Parse (and decode) with the given split points; return the packet lines and
/// the bytes the packets account for.
fn run_prop(cfg: &Etm3Config, data: &[u8], splits: &[usize], with_decoder: bool) -> (Vec<String>, usize) {
    let mut p = Etm3Parser::new(cfg);
    let mut d = Etm3Decoder::new(cfg, image());
    let mut out = Vec::new();
    let mut bytes = 0usize;
    let mut sink = |k: &Etm3Packet, r: &[u8]| {
        let mut s = String::new();
        display::write_opencsd_line(&mut s, 0x10, k, r);
        display::write_json(&mut s, 0x10, k, r);
        out.push(s);
        bytes += r.len();
        if with_decoder {
            d.packet(k, &mut |o| {
                if let DecoderOutput::Element(e) = o {
                    let mut t = String::new();
                    element::write_opencsd_line(&mut t, e);
                }
            });
        }
    };
    for (start, block) in blocks(data, splits) {
        p.push(start as u64, block, &mut sink);
    }
    p.finish(&mut sink);
    if with_decoder {
        d.finish(&mut |_| {});
    }
    assert_eq!(p.bytes_in() as usize, data.len());
    (out, bytes)
}

/// A plausible synchronised stream to mutate.
fn sample() -> Vec<u8> {
    synced(&[
        0x08, 0x20, 0x01, 0x80, 0x00, 0x00, 0x88, 0x84, 0xc0, 0x84, 0x01, 0x84, 0x42, 0x85, 0x2b, 0x81, 0x80, 0x82,
        0x80, 0x50, 0x3d, 0x76, 0x70, 0x07, 0x00, 0x00, 0x00, 0x00, 0x20, 0x01, 0x80, 0x00, 0x00, 0x82, 0xbc, 0x04,
        0x85, 0x01, 0x6e, 0x78, 0x56, 0x34, 0x12, 0x3c, 0x41, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80,
    ])
}

/// What a decoder hands over, as text.
fn record(out: &mut Vec<String>, o: DecoderOutput<'_>) {
    match o {
        DecoderOutput::Element(e) => {
            let mut t = String::new();
            element::write_opencsd_line(&mut t, e);
            out.push(format!("{t} isa={:?} time={:?}", e.isa, e.time));
        }
        DecoderOutput::Message(m) => out.push(m.to_string()),
        _ => {}
    }
}

/// A sink that gives the decoder runs of P-headers whole, as a summary's
/// does; `taken` counts the bytes it took so.
struct RunSink<'a> {
    d: &'a mut Etm3Decoder,
    out: &'a mut Vec<String>,
    taken: usize,
}

impl Etm3Sink for RunSink<'_> {
    fn packet(&mut self, k: &Etm3Packet, _: &[u8]) -> bool {
        let out = &mut *self.out;
        self.d.packet(k, &mut |o| record(out, o));
        true
    }

    fn phdr_run(&mut self, index: u64, bytes: &[u8], last: &Etm3Packet, cycle_accurate: bool) -> usize {
        let out = &mut *self.out;
        let n = self.d.phdr_run(index, bytes, last, cycle_accurate, &mut |o| record(out, o));
        self.taken += n;
        n
    }
}

/// Decode `data` cut at `splits`, packet by packet or with runs of
/// P-headers taken whole: what the decoder handed over, the parser's and
/// decoder's saved states at the end, and the bytes runs took.
fn decode_with_runs(cfg: &Etm3Config, data: &[u8], splits: &[usize], runs: bool) -> (Vec<String>, Vec<u8>, Vec<u8>, usize) {
    let mut p = Etm3Parser::new(cfg);
    let mut d = Etm3Decoder::new(cfg, image());
    let mut out = Vec::new();
    let mut taken = 0;
    for (start, block) in blocks(data, splits) {
        if runs {
            let mut sink = RunSink { d: &mut d, out: &mut out, taken: 0 };
            p.push_until(start as u64, block, &mut sink);
            taken += sink.taken;
        } else {
            p.push(start as u64, block, &mut |k: &Etm3Packet, _: &[u8]| d.packet(k, &mut |o| record(&mut out, o)));
        }
    }
    assert_eq!(p.bytes_in() as usize, data.len());
    (out, p.save_state(), d.save_state(), taken)
}

/// Decode `data` cut at `splits` in a run that only counts (as a summary
/// does, runs of P-headers taken whole) or one by one with every element
/// handed over and counted as it comes: the counts, the messages, the
/// parser's and decoder's saved states at the end (with the cycles passed).
fn decode_counting(cfg: &Etm3Config, data: &[u8], splits: &[usize], counted: bool) -> (ElementCounts, Vec<String>, Vec<u8>, Vec<u8>) {
    let mut p = Etm3Parser::new(cfg);
    let mut d = Etm3Decoder::new(cfg, image());
    let mut out = Vec::new();
    let mut counts = ElementCounts::default();
    if counted {
        d.core_mut().counted = Some(Box::default());
    }
    for (start, block) in blocks(data, splits) {
        if counted {
            let mut sink = RunSink { d: &mut d, out: &mut out, taken: 0 };
            p.push_until(start as u64, block, &mut sink);
        } else {
            p.push(start as u64, block, &mut |k: &Etm3Packet, _: &[u8]| {
                d.packet(k, &mut |o| match o {
                    DecoderOutput::Element(e) => counts.add(&e.kind),
                    o => record(&mut out, o),
                })
            });
        }
    }
    if let Some(c) = d.core_mut().counted.take() {
        counts = *c;
    }
    (counts, out, p.save_state(), d.save_state())
}

#[test]
fn counted_p_headers_leave_the_decoder_as_handed_over_elements() {
    // I-sync to 0x8000 (T32, cycle accurate: an I-sync cycle count first),
    // then P-headers around the loop (movs, b.n back), out of it (b.n not
    // taken) and through bx lr in the same header: then an address is
    // needed. Twice, so that the second time every instruction is known.
    let cfg = &prop_configs()[2];
    let isync = [0x70, 0x05, 0x00, 0x20, 0x01, 0x80, 0x00, 0x00];
    let headers = [0x84, 0x84, 0x88, 0x88, 0xa0, 0xa4, 0x82, 0x8a, 0x88, 0x84, 0x8a, 0x84, 0xa0];
    let data = synced(&[&isync[..], &headers, &isync, &headers].concat());
    let (one, m1, p1, d1) = decode_counting(cfg, &data, &[], false);
    let (counted, m2, p2, d2) = decode_counting(cfg, &data, &[], true);
    assert_eq!(one, counted);
    assert_eq!(m1, m2);
    assert!(p1 == p2, "parser states differ");
    assert!(d1 == d2, "decoder states differ");
    assert!(one.range_instructions >= 30, "{one:?}");
}

/// Bytes that are mostly one-byte P-headers (valid or not in the mode),
/// with I-syncs to the image's code and other packets between.
fn phdr_heavy() -> impl Strategy<Value = Vec<u8>> {
    // I-sync to 0x8000 (T32), and a branch back there.
    let isync = Just(vec![0x08, 0x20, 0x01, 0x80, 0x00, 0x00]);
    let piece = prop_oneof![
        12 => any::<u8>().prop_map(|b| vec![(b | 0x80) & !1]),
        2 => any::<u8>().prop_map(|b| vec![b]),
        1 => isync,
        1 => Just(vec![0x01]),
    ];
    proptest::collection::vec(piece, 0..300).prop_map(|v| v.concat())
}

/// Decode `tail` after an A-sync, cut at `splits` into blocks that lie 100
/// bytes apart in the buffer (as one trace ID's blocks do among other IDs'
/// frames), with runs of P-headers taken whole: block by block, or the
/// blocks joined in one push of stretches (`joined`). What the decoder
/// handed over (with each element's index), and the parser's and decoder's
/// saved states at the end.
fn decode_joined(cfg: &Etm3Config, tail: &[u8], splits: &[usize], joined: bool) -> (Vec<String>, Vec<u8>, Vec<u8>) {
    let mut cuts: Vec<usize> = splits.iter().map(|s| s % (tail.len() + 1)).collect();
    cuts.extend([0, tail.len()]);
    cuts.sort_unstable();
    cuts.dedup();
    let mut p = Etm3Parser::new(cfg);
    let mut d = Etm3Decoder::new(cfg, image());
    let mut out = Vec::new();
    let mut sink = RunSink { d: &mut d, out: &mut out, taken: 0 };
    p.push_until(0, &ASYNC, &mut sink);
    let at = |i: usize, start: usize| (ASYNC.len() + 100 * (i + 1) + start) as u64;
    if joined {
        let spans: Vec<(usize, u64)> = cuts.windows(2).enumerate().map(|(i, w)| (w[0], at(i, w[0]))).collect();
        assert_eq!(p.push_spans_until(&spans, tail, &mut sink), tail.len());
    } else {
        for (i, w) in cuts.windows(2).enumerate() {
            p.push_until(at(i, w[0]), &tail[w[0]..w[1]], &mut sink);
        }
    }
    (out, p.save_state(), d.save_state())
}

#[test]
fn phdr_runs_are_taken_after_an_isync() {
    // I-sync to 0x8000, then six P-headers.
    let data = synced(&[0x08, 0x20, 0x01, 0x80, 0x00, 0x00, 0x84, 0x88, 0xa0, 0x84, 0xc0, 0x84]);
    let (one, ..) = decode_with_runs(&plain(), &data, &[], false);
    let (runs, _, _, taken) = decode_with_runs(&plain(), &data, &[], true);
    assert_eq!(one, runs);
    assert_eq!(taken, 6);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    /// Runs of P-headers taken whole give the same elements and messages,
    /// and leave the parser and decoder as taking them one by one does.
    #[test]
    fn phdr_runs_decode_as_one_by_one(
        tail in phdr_heavy(),
        splits in proptest::collection::vec(any::<usize>(), 0..6),
        which in 0usize..4,
    ) {
        let cfg = &prop_configs()[which];
        let data = synced(&tail);
        let (one, p1, d1, _) = decode_with_runs(cfg, &data, &splits, false);
        let (runs, p2, d2, _) = decode_with_runs(cfg, &data, &splits, true);
        prop_assert_eq!(one, runs);
        prop_assert!(p1 == p2, "parser states differ");
        prop_assert!(d1 == d2, "decoder states differ");
    }

    /// Once synchronised, a trace ID's blocks joined in one push decode as
    /// the blocks pushed one by one: the same elements at the same indices,
    /// and the parser and decoder left alike.
    #[test]
    fn joined_blocks_decode_as_the_blocks(
        tail in phdr_heavy(),
        splits in proptest::collection::vec(any::<usize>(), 0..24),
        which in 0usize..4,
    ) {
        let cfg = &prop_configs()[which];
        let (blocks, p1, d1) = decode_joined(cfg, &tail, &splits, false);
        let (joined, p2, d2) = decode_joined(cfg, &tail, &splits, true);
        prop_assert_eq!(blocks, joined);
        prop_assert!(p1 == p2, "parser states differ");
        prop_assert!(d1 == d2, "decoder states differ");
    }

    /// Counted, runs of P-headers give the counts of the elements handed
    /// over one by one, and leave the decoder as that does (its element
    /// list slot for slot, the cycles passed).
    #[test]
    fn counted_runs_count_what_is_handed_over(
        tail in phdr_heavy(),
        splits in proptest::collection::vec(any::<usize>(), 0..6),
        which in 0usize..4,
    ) {
        let cfg = &prop_configs()[which];
        let data = synced(&tail);
        let (one, m1, p1, d1) = decode_counting(cfg, &data, &splits, false);
        let (counted, m2, p2, d2) = decode_counting(cfg, &data, &splits, true);
        prop_assert_eq!(one, counted);
        prop_assert_eq!(m1, m2);
        prop_assert!(p1 == p2, "parser states differ");
        prop_assert!(d1 == d2, "decoder states differ");
    }

    #[test]
    fn random_bytes_never_panic_and_every_byte_is_in_a_packet(
        data in proptest::collection::vec(any::<u8>(), 0..600),
        splits in proptest::collection::vec(any::<usize>(), 0..8),
        which in 0usize..4,
    ) {
        let cfg = &prop_configs()[which];
        let (_, bytes) = run_prop(cfg, &data, &splits, true);
        prop_assert_eq!(bytes, data.len());
    }

    #[test]
    fn after_sync_packets_do_not_depend_on_block_boundaries(
        tail in proptest::collection::vec(any::<u8>(), 0..400),
        splits in proptest::collection::vec(any::<usize>(), 1..8),
        which in 0usize..4,
    ) {
        let cfg = &prop_configs()[which];
        let data = synced(&tail);
        let (whole, n1) = run_prop(cfg, &data, &[], false);
        // Splits only after the A-sync: before it, block ends cut NOTSYNC chunks.
        let splits: Vec<usize> = splits.iter().map(|s| 6 + s % (tail.len() + 1)).collect();
        let (split, n2) = run_prop(cfg, &data, &splits, false);
        prop_assert_eq!(n1, data.len());
        prop_assert_eq!(n2, data.len());
        prop_assert_eq!(whole, split);
    }

    #[test]
    fn mutated_streams_decode_without_panic(
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..12),
        cut in any::<usize>(),
        which in 0usize..4,
    ) {
        let mut data = sample();
        for (at, b) in flips {
            let n = data.len();
            data[at % n] = b;
        }
        let cfg = &prop_configs()[which];
        let (_, bytes) = run_prop(cfg, &data, &[cut], true);
        prop_assert_eq!(bytes, data.len());
    }
}

#[test]
fn packet_types_have_lister_names() {
    assert_eq!(PacketType::NoError.name(), "I_RESERVED");
    assert_eq!(PacketType::IncompleteEot.name(), "INCOMPLETE_EOT.");
    assert!(PacketType::BadTraceMode.is_error() && PacketType::NormalData.is_data());
}

#[test]
fn parser_messages_survive_saved_states() {
    // Saved states name a parse error message by its place in the table.
    let src = include_str!("parser.rs");
    let code = src.split("#[cfg(test)]").next().unwrap();
    // The names of saved-state fields that `check` refuses are not parse
    // messages: leave that function out.
    let code = match code.split_once("fn check(&self)") {
        Some((before, after)) => format!("{before}{}", after.split_once("\n    }\n").map_or("", |(_, rest)| rest)),
        None => code.to_string(),
    };
    let mut n = 0;
    for (i, lit) in code.split('"').enumerate() {
        if i % 2 == 1 && lit.len() > 15 && !lit.contains('{') {
            assert!(super::packet::PARSE_MESSAGES.contains(&lit), "message missing from the table: {lit}");
            n += 1;
        }
    }
    assert!(n >= super::packet::PARSE_MESSAGES.len());
}

#[test]
fn saved_state_resumes_exactly() {
    let cfg = rich();
    let data = sample();
    let listing = |parts: &[&[u8]], save_at: Option<usize>| -> String {
        let mut p = Etm3Parser::new(&cfg);
        let mut d = Etm3Decoder::new(&cfg, image());
        let mut out = String::new();
        let mut at = 0u64;
        for (k, part) in parts.iter().enumerate() {
            if save_at == Some(k) {
                p = Etm3Parser::load_state(&cfg, &p.save_state()).unwrap();
                d = Etm3Decoder::load_state(&cfg, image(), &d.save_state()).unwrap();
            }
            p.push(at, part, &mut |k: &Etm3Packet, r: &[u8]| {
                display::write_opencsd_line(&mut out, 0x10, k, r);
                d.packet(k, &mut |o| match o {
                    DecoderOutput::Element(e) => element::write_opencsd_line(&mut out, e),
                    DecoderOutput::Message(m) => out.push_str(m),
                    _ => {}
                });
            });
            at += part.len() as u64;
        }
        d.finish(&mut |o| {
            if let DecoderOutput::Element(e) = o {
                element::write_opencsd_line(&mut out, e)
            }
        });
        out
    };
    let whole = listing(&[&data], None);
    for cut in [3, 7, 13, 20, 31, 45] {
        let (a, b) = data.split_at(cut);
        assert_eq!(listing(&[a, b], Some(1)), whole, "state saved after {cut} bytes");
    }
}
