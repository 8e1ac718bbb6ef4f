//! Packet-level tables for the ETMv4/ETE parser: hand-written byte sequences,
//! one group per packet family of IHI 0064 chapter 6 / Arm ARM D4.4, each
//! checked against the packet type, its offset and the trc_pkt_lister text.

use tracesight::protocol::etm4::display::write_description;
use tracesight::protocol::etm4::{Etm4Config, Etm4Parser, Packet, PacketType};

/// An ETE 1.3 trace unit like the one in OpenCSD's ete-ite-instr snapshot:
/// 64-bit addresses, 32-bit context IDs and VMIDs, cycle counting, Q support.
fn ete() -> Etm4Config {
    let regs = [
        ("TRCCONFIGR", 0x1u64),
        ("TRCTRACEIDR", 0x1),
        ("TRCDEVARCH", 0x47735a13),
        ("TRCIDR0", 0x0801_8aa1 | (0x3 << 15)),
        ("TRCIDR1", 0x4100fff0),
        ("TRCIDR2", 0xc0001088),
        ("TRCIDR8", 0x0),
    ];
    Etm4Config::from_registers(|n| regs.iter().find(|(k, _)| *k == n).map(|(_, v)| *v), true, Some("Cortex-A710"))
        .unwrap()
}

/// An ETMv4.0 trace unit like juno_r1_1's: 8-bit VMID, 32-bit context ID.
fn etm40() -> Etm4Config {
    let regs = [
        ("TRCCONFIGR", 0xc1u64),
        ("TRCTRACEIDR", 0x10),
        ("TRCIDR0", 0x28000ea1),
        ("TRCIDR1", 0x4100f403),
        ("TRCIDR2", 0x00000488),
    ];
    Etm4Config::from_registers(|n| regs.iter().find(|(k, _)| *k == n).map(|(_, v)| *v), false, Some("Cortex-A57"))
        .unwrap()
}

const ASYNC: [u8; 12] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80];
/// A-sync then a minimal Trace Info (PLCTL with only INFO, INFO = 0).
const SYNC: [u8; 15] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80, 0x01, 0x01, 0x00];

struct Seen {
    index: u64,
    ptype: PacketType,
    raw: Vec<u8>,
    text: String,
    pkt: Packet,
}

/// Parse `bytes` pushed in chunks of `chunk` bytes; return every packet.
fn parse_chunked(cfg: &Etm4Config, bytes: &[u8], chunk: usize) -> Vec<Seen> {
    let mut p = Etm4Parser::new(cfg);
    let mut seen = Vec::new();
    let ete = cfg.is_ete();
    let mut sink = |pkt: &Packet, raw: &[u8]| {
        let mut text = String::new();
        write_description(&mut text, pkt, ete);
        seen.push(Seen { index: pkt.index, ptype: pkt.ptype, raw: raw.to_vec(), text, pkt: *pkt });
    };
    for (i, c) in bytes.chunks(chunk.max(1)).enumerate() {
        p.push((i * chunk.max(1)) as u64, c, &mut sink);
    }
    p.finish(&mut sink);
    seen
}

/// Parse after a sync prefix and return the packets that follow it.
fn after_sync(cfg: &Etm4Config, body: &[u8]) -> Vec<Seen> {
    let mut all = SYNC.to_vec();
    all.extend_from_slice(body);
    let whole = parse_chunked(cfg, &all, all.len());
    // Any split of the input gives the same packets.
    for chunk in [1, 2, 3, 5] {
        let split = parse_chunked(cfg, &all, chunk);
        assert_eq!(split.len(), whole.len(), "chunk {chunk}");
        for (a, b) in split.iter().zip(&whole) {
            assert_eq!((a.index, &a.raw, &a.text), (b.index, &b.raw, &b.text), "chunk {chunk}");
        }
    }
    assert_eq!(whole[0].ptype, PacketType::Async);
    assert_eq!(whole[1].ptype, PacketType::TraceInfo);
    whole.into_iter().skip(2).collect()
}

fn one(cfg: &Etm4Config, body: &[u8]) -> Seen {
    let mut v = after_sync(cfg, body);
    assert_eq!(v.len(), 1, "expected one packet from {body:02x?}, got {:?}", v.iter().map(|s| &s.text).collect::<Vec<_>>());
    let s = v.remove(0);
    assert_eq!(s.index, SYNC.len() as u64);
    assert_eq!(s.raw, body);
    s
}

#[test]
fn alignment_sync_and_unsynchronised_bytes() {
    // Bytes before the first A-sync come out as I_NOT_SYNC chunks of at most 8.
    let mut bytes = vec![0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa];
    bytes.extend_from_slice(&ASYNC);
    let seen = parse_chunked(&ete(), &bytes, 64);
    let types: Vec<_> = seen.iter().map(|s| (s.ptype, s.index, s.raw.len())).collect();
    assert_eq!(
        types,
        vec![(PacketType::NotSync, 0, 8), (PacketType::NotSync, 8, 2), (PacketType::Async, 10, 12)]
    );
    assert!(seen[0].pkt.first_not_sync && !seen[1].pkt.first_not_sync);
    assert_eq!(seen[0].text, "I_NOT_SYNC : I Stream not synchronised");
    assert_eq!(seen[2].text, "I_ASYNC : Alignment Synchronisation.");
}

#[test]
fn async_with_wrong_terminator_is_bad_sequence_once_synced() {
    // Eleven zeros then 0x81 after sync: a bad periodic A-sync.
    let mut body = vec![0u8; 11];
    body.push(0x81);
    let s = one(&ete(), &body);
    assert_eq!(s.ptype, PacketType::BadSequence);
    assert_eq!(s.text, "I_BAD_SEQUENCE : Invalid Sequence in packet.[I_ASYNC]");
}

#[test]
fn trace_info_sections() {
    // 0x01 header; PLCTL 0x0f = INFO, KEY, SPEC, CYCT present; INFO=0x01 (CC on),
    // KEY=0x05, SPEC=0x83 0x01 (= 131), CYCT=0x16.
    let cfg = ete();
    let bytes = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80, 0x01, 0x0f, 0x01, 0x05, 0x83, 0x01, 0x16];
    let seen = parse_chunked(&cfg, &bytes, 4);
    let ti = &seen[1];
    assert_eq!(ti.ptype, PacketType::TraceInfo);
    assert_eq!(ti.pkt.trace_info.p0_key, 5);
    assert_eq!(ti.pkt.trace_info.spec_depth, 131);
    assert_eq!(ti.pkt.trace_info.cc_threshold, 0x16);
    assert_eq!(
        ti.text,
        "I_TRACE_INFO : Trace Info.; INFO=0x1 { CC.1, TSTATE.0 }; CC_THRESHOLD=0x16; INIT SPEC DEPTH=131; Decoder Sync point TINFO"
    );
    // A second Trace Info is no longer the decoder's sync point.
    let mut again = bytes.to_vec();
    again.extend_from_slice(&[0x01, 0x00]);
    let seen = parse_chunked(&cfg, &again, 64);
    assert_eq!(seen[2].text, "I_TRACE_INFO : Trace Info.; INFO=0x0 { CC.0, TSTATE.0 }");
    // ETMv4 prints no TSTATE.
    let seen = parse_chunked(&etm40(), &SYNC, 64);
    assert_eq!(seen[1].text, "I_TRACE_INFO : Trace Info.; INFO=0x0 { CC.0 }; Decoder Sync point TINFO");
}

#[test]
fn timestamps_of_every_length() {
    let cfg = ete();
    // First timestamp after a Trace Info: missing high bits are zero.
    let s = one(&cfg, &[0x02, 0x92, 0xcb, 0x81, 0x00]);
    assert_eq!(s.pkt.timestamp, 0x12 | (0x4b << 7) | (0x01 << 14));
    // The longest form: 8 bytes of 7 bits then a 9th byte of 8 bits (bit 63 set).
    let s = one(&cfg, &[0x02, 0x92, 0xcb, 0x81, 0x80, 0xff, 0xff, 0xff, 0xff, 0xff]);
    assert_eq!(s.text, "I_TIMESTAMP : Timestamp.; Updated val = 0xfffffffff0006592");
    // With a cycle count (header bit 0): count bytes follow, masked to CCSIZE.
    let s = one(&cfg, &[0x03, 0x05, 0x84, 0x01]);
    assert!(s.pkt.cc_valid);
    assert_eq!(s.pkt.cycle_count, 0x84 & 0x7f | (1 << 7));
    assert_eq!(s.text, "I_TIMESTAMP : Timestamp.; Updated val = 0x5; CC=0x84");
    // A later short timestamp only replaces the bits it carries.
    let v = after_sync(&cfg, &[0x02, 0xff, 0x7f, 0x02, 0x01]);
    assert_eq!(v[1].pkt.timestamp, (0x3fff & !0x7f) | 0x01);
}

#[test]
fn cycle_count_formats() {
    let cfg = ete(); // commit mode 0, threshold 0
    let s = one(&cfg, &[0x0e, 0x02, 0x85, 0x01]); // F1: commit 2, count 0x85
    assert_eq!((s.pkt.commit, s.pkt.cycle_count), (2, 0x85));
    assert_eq!(s.text, "I_CCNT_F1 : Cycle Count format 1.; Count=0x85; Commit(2)");
    let s = one(&cfg, &[0x0f, 0x03]); // F1 with unknown count
    assert_eq!(s.text, "I_CCNT_F1 : Cycle Count format 1.; Count=0x0; Commit(3)");
    let s = one(&cfg, &[0x0c, 0x87]); // F2: commit (8 + 1), count 7
    assert_eq!(s.text, "I_CCNT_F2 : Cycle Count format 2.; Count=0x7; Commit(9)");
    let s = one(&cfg, &[0x1b]); // F3: commit 3, count 3
    assert_eq!(s.text, "I_CCNT_F3 : Cycle Count format 3.; Count=0x3; Commit(3)");
}

#[test]
fn speculation_packets() {
    let cfg = ete();
    assert_eq!(one(&cfg, &[0x2d, 0x81, 0x01]).text, "I_COMMIT : Commit; Commit(129)");
    assert_eq!(one(&cfg, &[0x2e, 0x04]).text, "I_CANCEL_F1 : Cancel Format 1.; Cancel(4)");
    assert_eq!(one(&cfg, &[0x2f, 0x02]).text, "I_CANCEL_F1_MISPRED : Cancel Format 1 + Mispredict.; Cancel(2), Mispredict");
    assert_eq!(one(&cfg, &[0x30]).text, "I_MISPREDICT : Mispredict.; Mispredict");
    assert_eq!(one(&cfg, &[0x32]).text, "I_MISPREDICT : Mispredict.; Atom: EE, Mispredict");
    assert_eq!(one(&cfg, &[0x37]).text, "I_CANCEL_F2 : Cancel Format 2.; Atom: N, Cancel(1), Mispredict");
    let s = one(&cfg, &[0x3d]);
    assert_eq!(s.pkt.cancel, 4);
    assert_eq!(s.text, "I_CANCEL_F3 : Cancel Format 3.; Atom: E, Cancel(4), Mispredict");
    assert_eq!(one(&cfg, &[0x00, 0x03]).ptype, PacketType::Discard);
    assert_eq!(one(&cfg, &[0x00, 0x05]).ptype, PacketType::Overflow);
    assert_eq!(one(&cfg, &[0x00, 0x07]).text, "I_BAD_SEQUENCE : Invalid Sequence in packet.[I_EXTENSION]");
}

/// Commits, cancels and mispredicts after an atom packet: each starts with
/// no atoms, as every packet does byte by byte, whatever the packet before
/// held. (Taken whole, the fast path takes them; a one-byte packet is taken
/// whole even pushed a byte at a time, so only a table can check it.)
#[test]
fn speculation_packets_after_atoms() {
    for cfg in [ete(), etm40()] {
        for (body, want) in [
            (&[0xf7, 0x30][..], "I_MISPREDICT : Mispredict.; Mispredict"),
            (&[0xf7, 0x31], "I_MISPREDICT : Mispredict.; Atom: E, Mispredict"),
            (&[0xf7, 0x34], "I_CANCEL_F2 : Cancel Format 2.; Cancel(1), Mispredict"),
            (&[0xf7, 0x38], "I_CANCEL_F3 : Cancel Format 3.; Cancel(2), Mispredict"),
            (&[0xf7, 0x3b], "I_CANCEL_F3 : Cancel Format 3.; Atom: E, Cancel(3), Mispredict"),
            (&[0xf7, 0x2d, 0x85, 0x01], "I_COMMIT : Commit; Commit(133)"),
            (&[0xf7, 0x2e, 0x7f], "I_CANCEL_F1 : Cancel Format 1.; Cancel(127)"),
        ] {
            let seen = after_sync(&cfg, body);
            let texts: Vec<_> = seen.iter().map(|s| s.text.as_str()).collect();
            assert_eq!(texts, ["I_ATOM_F1 : Atom format 1.; E", want], "{body:02x?}");
        }
    }
}

#[test]
fn atoms_all_formats() {
    let cfg = ete();
    let cases: [(u8, &str); 10] = [
        (0xf7, "I_ATOM_F1 : Atom format 1.; E"),
        (0xf6, "I_ATOM_F1 : Atom format 1.; N"),
        (0xd9, "I_ATOM_F2 : Atom format 2.; EN"),
        (0xfc, "I_ATOM_F3 : Atom format 3.; NNE"),
        (0xdc, "I_ATOM_F4 : Atom format 4.; NEEE"),
        (0xd5, "I_ATOM_F5 : Atom format 5.; NNNNN"),
        (0xf5, "I_ATOM_F5 : Atom format 5.; NEEEE"),
        (0xc0, "I_ATOM_F6 : Atom format 6.; EEEE"),
        (0xe0, "I_ATOM_F6 : Atom format 6.; EEEN"),
        (0xd4, "I_ATOM_F6 : Atom format 6.; EEEEEEEEEEEEEEEEEEEEEEEE"),
    ];
    for (b, text) in cases {
        assert_eq!(one(&cfg, &[b]).text, text, "header {b:#x}");
    }
}

#[test]
fn addresses_and_history() {
    let cfg = ete();
    // Long 64-bit IS0: bits [8:2] in byte 1, [15:9] in byte 2, then 6 bytes.
    let l64 = [0x9d, 0x00, 0x35, 0x09, 0x00, 0xc0, 0xff, 0xff, 0xff];
    let s = one(&cfg, &l64);
    assert_eq!(s.pkt.addr.value, 0xffff_ffc0_0009_6a00);
    assert_eq!(s.text, "I_ADDR_L_64IS0 : Address, Long, 64 bit, IS0.; Addr=0xFFFFFFC000096A00; ");
    // Short IS0, one byte (9 bits) and two bytes (17 bits).
    let v = after_sync(&cfg, &[&l64[..], &[0x95, 0x23], &[0x95, 0xa3, 0x01]].concat());
    assert_eq!(v[1].text, "I_ADDR_S_IS0 : Address, Short, IS0.; Addr=0xFFFFFFC000096A8C ~[0x8C]");
    // Seventeen bits replace bits [16:0] of the previous address.
    assert_eq!(v[2].pkt.addr.value, 0xffff_ffc0_0008_0000 | (0x23 << 2) | (0x01 << 9));
    // Exact match 2 picks the address two entries back in the history.
    let v = after_sync(&cfg, &[&l64[..], &[0x95, 0x23], &[0x95, 0x24], &[0x92]].concat());
    assert_eq!(v[3].pkt.addr.value, 0xffff_ffc0_0009_6a00);
    assert_eq!(v[3].text, "I_ADDR_MATCH : Exact Address Match., [2]; Addr=0xFFFFFFC000096A00; ");
    // Long 32-bit IS1 (T32): bit 0 is zero, bits [7:1] in byte 1, [15:8] in byte 2.
    let s = one(&cfg, &[0x9b, 0x01, 0x9a, 0x4f, 0x00]);
    assert_eq!(s.pkt.addr.value, 0x004f_9a02);
    assert_eq!(s.pkt.addr.isa, 1);
}

#[test]
fn context_and_address_with_context() {
    let cfg = etm40();
    // Address & context, 64-bit IS0, info 0xf1 = EL1, AArch64, NS, VMID + CID.
    let bytes = [0x85, 0x00, 0x35, 0x09, 0x00, 0xc0, 0xff, 0xff, 0xff, 0xf1, 0x00, 0x00, 0x00, 0x00, 0x00];
    let s = one(&cfg, &bytes);
    assert_eq!(
        s.text,
        "I_ADDR_CTXT_L_64IS0 : Address & Context, Long, 64 bit, IS0.; Addr=0xFFFFFFC000096A00; Ctxt: AArch64,EL1, NS; CID=0x00000000; VMID=0x0000; "
    );
    assert_eq!(one(&cfg, &[0x80]).text, "I_CTXT : Context Packet.; Ctxt: Same");
    let s = one(&cfg, &[0x81, 0x80, 0x78, 0x56, 0x34, 0x12]);
    assert_eq!(s.pkt.context.context_id, 0x1234_5678);
    assert_eq!(s.text, "I_CTXT : Context Packet.; Ctxt: AArch32, EL0, S; CID=0x12345678; ");
    // ETE realm state: NSE and NS both set.
    let s = one(&ete(), &[0x81, 0x39]);
    assert_eq!(s.text, "I_CTXT : Context Packet.; Ctxt: AArch64,EL1, Realm; ");
}

#[test]
fn exceptions() {
    let cfg = etm40();
    assert_eq!(one(&cfg, &[0x06, 0x1d]).text, "I_EXCEPT : Exception.;  IRQ; Ret Addr Follows;");
    assert_eq!(one(&cfg, &[0x06, 0x58]).text, "I_EXCEPT : Exception.;  Data Fault; Ret Addr Follows, Match Prev;");
    // Two-byte form with the extension byte for a wide exception number.
    let s = one(&cfg, &[0x06, 0x85, 0x01]);
    assert_eq!(s.pkt.exception.number, 0x2 | (1 << 5));
    // ETE: type 0x18 is a transaction failure and type 0 a PE reset, always 3 bytes.
    let e = ete();
    assert_eq!(one(&e, &[0x06, 0x30, 0x00]).text, "I_TRANS_FAIL : Transaction Fail.");
    assert_eq!(one(&e, &[0x06, 0x00, 0x00]).ptype, PacketType::PeReset);
    // Exception return does not exist in ETE.
    assert_eq!(one(&e, &[0x07]).text, "I_RESERVED_CFG : Reserved header for current configuration.[I_EXCEPT_RTN]");
    assert_eq!(one(&cfg, &[0x07]).text, "I_EXCEPT_RTN : Exception Return.");
}

#[test]
fn ete_only_packets() {
    let cfg = ete();
    assert_eq!(one(&cfg, &[0x0a]).text, "I_TRANS_ST : Transaction Start.");
    assert_eq!(one(&cfg, &[0x0b]).text, "I_TRANS_COMMIT : Transaction Commit.");
    assert_eq!(one(&cfg, &[0x88]).text, "I_TS_MARKER : Timestamp Marker");
    let ite = [0x09, 0x01, 0xff, 0xff, 0x0f, 0x00, 0x00, 0x00, 0x00, 0x00];
    assert_eq!(one(&cfg, &ite).text, "I_ITE : Instrumentation; EL1; Payload=0xfffff");
    let s = one(&cfg, &[0xb4, 0x48]);
    assert_eq!(s.text, "I_SRC_ADDR_S_IS0 : Source Address, Short, IS0.; Addr=0x0000000000000120 ~[0x120]");
    // Q with a 32-bit IS0 address and count 3.
    let s = one(&cfg, &[0xaa, 0x34, 0x3f, 0x06, 0x00, 0x03]);
    assert_eq!(s.text, "I_Q : Q Packet.; Count(3); Addr=0x0000000000067ED0 ~[0x67ED0]");
    // Q type 0xF carries neither count nor address.
    assert_eq!(one(&cfg, &[0xaf]).text, "I_Q : Q Packet.; Count(Unknown)");
    // ETMv4.0 has no Q support: the header is reserved there.
    assert_eq!(one(&etm40(), &[0xaf]).text, "I_RESERVED : Reserved Packet Header");
    // Event and ignore (ETE >= 4.3).
    assert_eq!(one(&cfg, &[0x71]).pkt.event, 1);
    assert_eq!(one(&cfg, &[0x70]).ptype, PacketType::Ignore);
    assert_eq!(one(&etm40(), &[0x70]).ptype, PacketType::Reserved);
}

#[test]
fn packet_cut_off_by_end_of_trace() {
    let cfg = etm40();
    let mut bytes = SYNC.to_vec();
    bytes.push(0x9a); // long address header with no payload
    let seen = parse_chunked(&cfg, &bytes, 7);
    let last = seen.last().unwrap();
    assert_eq!(last.ptype, PacketType::IncompleteEot);
    assert_eq!(last.index, SYNC.len() as u64);
    assert_eq!(last.text, "I_INCOMPLETE_EOT : Incomplete packet at end of trace.[I_ADDR_L_32IS0]");
}

#[test]
fn packet_split_across_blocks_keeps_its_first_index() {
    // The blocks are not contiguous in the buffer (as with formatter frames):
    // the packet's index is where its first byte was.
    let cfg = ete();
    let mut p = Etm4Parser::new(&cfg);
    let mut seen = Vec::new();
    let mut sink = |pkt: &Packet, raw: &[u8]| seen.push((pkt.index, pkt.ptype, raw.to_vec()));
    p.push(0, &SYNC, &mut sink);
    p.push(100, &[0x9d, 0x00, 0x35], &mut sink);
    p.push(200, &[0x09, 0x00, 0xc0, 0xff, 0xff, 0xff], &mut sink);
    p.finish(&mut sink);
    let last = seen.last().unwrap();
    assert_eq!(last.0, 100);
    assert_eq!(last.1, PacketType::AddrL64Is0);
    assert_eq!(last.2.len(), 9);
}

#[test]
fn reserved_headers_are_errors_and_parsing_goes_on() {
    let cfg = etm40();
    let v = after_sync(&cfg, &[0x08, 0xf7]);
    assert_eq!(v[0].text, "I_RESERVED : Reserved Packet Header");
    assert_eq!(v[0].pkt.err_header, 0x08);
    assert_eq!(v[1].ptype, PacketType::AtomF1);
}

/// Every atom header carries at least one atom: a run's decoder takes that
/// for granted (`Etm4Decoder::run_atom`), and a header that gave none
/// would go to the byte-wise machine instead.
#[test]
fn every_atom_header_carries_atoms() {
    use PacketType as P;
    let mut atoms = 0;
    for cfg in [ete(), etm40()] {
        for b in 0..=255u8 {
            let mut all = SYNC.to_vec();
            all.push(b);
            for s in parse_chunked(&cfg, &all, all.len()).iter().skip(2) {
                if matches!(s.ptype, P::AtomF1 | P::AtomF2 | P::AtomF3 | P::AtomF4 | P::AtomF5 | P::AtomF6) {
                    assert!(s.pkt.atom_count > 0, "header {b:#04x}: {}", s.text);
                    atoms += 1;
                }
            }
        }
    }
    // F1 2, F2 4, F3 8, F4 4, F5 4 and F6 42 headers (ETMv4.0 and ETE alike).
    assert_eq!(atoms, 2 * (2 + 4 + 8 + 4 + 4 + 42));
}

/// A sink that refuses a packet stops the parse just after it, whichever
/// way the packet was parsed (the fast loop hands atoms and short
/// addresses over from their own arms to a closure): pushing the rest then
/// gives the packets a parse without a stop gives.
#[test]
fn a_refused_packet_ends_the_push_just_after_it() {
    let cfg = ete();
    let mut all = SYNC.to_vec();
    // Atoms (F1, F2, F3), short addresses of one and two bytes, a 64-bit
    // long address, an exact match, cycle counts (F3, F2), an exception,
    // a context packet.
    all.extend_from_slice(&[0xf7, 0xd9, 0xf8, 0x95, 0x12, 0x95, 0x83, 0x04, 0xf6, 0x9d, 0, 0, 0, 0xc0, 0xff, 0xff, 0, 0]);
    all.extend_from_slice(&[0xdb, 0x90, 0x10, 0x0c, 0x06, 0x06, 0x04, 0x80, 0xf6, 0xdc, 0x95, 0x20]);
    let whole = parse_chunked(&cfg, &all, all.len());
    assert!(whole.len() > 16);
    for stop in 0..whole.len() {
        let mut p = Etm4Parser::new(&cfg);
        let mut got: Vec<(u64, Vec<u8>)> = Vec::new();
        let used = p.push_until(0, &all, &mut |pkt: &Packet, raw: &[u8]| {
            got.push((pkt.index, raw.to_vec()));
            got.len() <= stop
        });
        assert_eq!(got.len(), stop + 1, "stop after packet {stop}");
        let end = whole[stop].index as usize + whole[stop].raw.len();
        assert_eq!(used, end, "stop after packet {stop} ({})", whole[stop].text);
        p.push(used as u64, &all[used..], &mut |pkt: &Packet, raw: &[u8]| got.push((pkt.index, raw.to_vec())));
        p.finish(&mut |pkt: &Packet, raw: &[u8]| got.push((pkt.index, raw.to_vec())));
        let want: Vec<(u64, Vec<u8>)> = whole.iter().map(|s| (s.index, s.raw.clone())).collect();
        assert_eq!(got, want, "stop after packet {stop}");
    }
}
