//! Text forms of ETMv3 packets: the OpenCSD `trc_pkt_lister` line format and
//! JSON lines.

use std::fmt::Write;

use super::packet::{Etm3Packet, PacketType};
use super::parser::parse_error_string;
use crate::element::Isa;
use crate::protocol::ptm::packet::EXCEPTION_NAMES as A_EXCEPTIONS;
use crate::textout;

/// Append the trc_pkt_lister packet line (with raw bytes, as in its `-decode`
/// mode) for `pkt`, followed by a newline. `stream_id` is the ID the data
/// arrived under (0 for an unformatted buffer).
pub fn write_opencsd_line(out: &mut String, stream_id: u8, pkt: &Etm3Packet, raw: &[u8]) {
    textout::packet_prefix(out, pkt.index, stream_id, raw);
    write_description(out, pkt);
    out.push('\n');
}

/// The message OpenCSD's parser logs for a malformed packet (printed, without
/// a newline, before the packet line in packet-only listings; trc_pkt_lister
/// does not show it when it also decodes). Nothing for a well-formed packet.
pub fn write_parser_error(out: &mut String, trace_id: u8, pkt: &Etm3Packet) {
    if let Some(e) = &pkt.error {
        out.push_str(&parse_error_string(trace_id, e, Some(pkt.index)));
    }
}

/// `NAME : Description; details`, as OpenCSD's `EtmV3TrcPacket::toString`.
pub fn write_description(out: &mut String, pkt: &Etm3Packet) {
    use PacketType as P;
    let (name, desc) = pkt.ptype.name_and_description();
    out.push_str(name);
    out.push_str(" : ");
    out.push_str(desc);
    match pkt.ptype {
        P::BadSequence | P::BadTraceMode => {
            out.push('[');
            out.push_str(pkt.err_type.name());
            out.push(']');
        }
        P::BranchAddress => {
            out.push_str("; Addr=");
            val_str(out, 32, pkt.addr.valid_bits as i32, pkt.addr.value, pkt.addr.pkt_bits as u32);
            out.push_str("; ");
            if pkt.isa != pkt.prev_isa {
                isa_str(out, pkt.isa);
            }
            if pkt.context.updated {
                out.push_str(if pkt.context.ns { "NS; " } else { "S; " });
                if pkt.context.hyp {
                    out.push_str("Hyp; ");
                }
            }
            if pkt.exception.present {
                exception_str(out, pkt);
            }
        }
        P::ISync | P::ISyncCycle => {
            out.push_str("; ");
            isync_str(out, pkt);
        }
        P::PHeader => {
            out.push_str("; ");
            atom_str(out, pkt);
        }
        P::CycleCount => {
            out.push_str("; Cycles=");
            textout::dec(out, pkt.cycle_count as u64);
        }
        P::ContextId => {
            let _ = write!(out, "; CtxtID=0x{:x}", pkt.context.context_id);
        }
        P::Vmid => {
            // Deliberate deviation: OpenCSD 1.8.0 streams the 8-bit VMID as a
            // character, so a VMID of 0x0a breaks the listing's line structure
            // and others print as garbage. We print the number.
            let _ = write!(out, "; VMID=0x{:x}", pkt.context.vmid);
        }
        P::Timestamp => {
            let _ = write!(out, "; TS=0x{:x} ({}) ", pkt.timestamp, pkt.timestamp);
        }
        P::OooData => {
            let _ = write!(out, "; Val=0x{:x}; OO_Tag=0x{:x}", pkt.data.value, pkt.data.ooo_tag);
        }
        P::ValueNotTraced if pkt.data.update_addr => data_addr_str(out, pkt),
        P::OooAddrPlaceholder => {
            if pkt.data.update_addr {
                data_addr_str(out, pkt);
            }
            let _ = write!(out, "; OO_Tag=0x{:x}", pkt.data.ooo_tag);
        }
        P::NormalData => {
            if pkt.data.update_addr {
                data_addr_str(out, pkt);
            }
            if pkt.data.update_value {
                let _ = write!(out, "; Val=0x{:x}", pkt.data.value);
            }
        }
        _ => {}
    }
}

fn data_addr_str(out: &mut String, pkt: &Etm3Packet) {
    let a = &pkt.data.addr;
    out.push_str("; Addr=");
    val_str(out, 32, a.valid_bits as i32, a.value, a.pkt_bits as u32);
}

/// OpenCSD's `getValStr` in hex: full-width upper-case hex with `?` for the
/// digits not known yet and their range, then the bits this packet updated.
fn val_str(out: &mut String, total_bits: i32, valid_bits: i32, value: u64, update_bits: u32) {
    out.push_str("0x");
    let num_hex = (total_bits + 3) / 4;
    let valid_chars = (valid_bits + 3) / 4;
    for _ in valid_chars..num_hex {
        out.push('?');
    }
    let shown = if valid_bits > 32 { value } else { value as u32 as u64 };
    textout::hex_upper(out, shown, valid_chars.max(0) as usize);
    if valid_bits < total_bits {
        let _ = write!(out, " ({}:0)", valid_bits - 1);
    }
    if update_bits != 0 {
        let mask = u64::MAX >> (64 - update_bits.min(64));
        out.push_str(" ~[0x");
        textout::hex_upper(out, value & mask, 0);
        out.push(']');
    }
}

fn isa_str(out: &mut String, isa: Isa) {
    out.push_str(match isa {
        Isa::A32 => "ISA=ARM(32); ",
        Isa::T32 => "ISA=Thumb2; ",
        Isa::A64 => "ISA=AArch64; ",
        Isa::ThumbEE => "ISA=ThumbEE; ",
        Isa::Jazelle => "ISA=Jazelle; ",
        _ => "ISA=Unknown; ",
    });
}

// OpenCSD's table lacks a comma after "HardFault", so its last entries are
// shifted by one; the names below are what it prints.
const M_EXCEPTIONS: [&str; 23] = [
    "No Exception",
    "IRQ1",
    "IRQ2",
    "IRQ3",
    "IRQ4",
    "IRQ5",
    "IRQ6",
    "IRQ7",
    "IRQ0",
    "usage Fault",
    "NMI",
    "SVC",
    "DebugMonitor",
    "Mem Manage",
    "PendSV",
    "SysTick",
    "Reserved",
    "PE Reset",
    "Reserved",
    "HardFaultReserved",
    "BusFault",
    "Reserved",
    "Reserved",
];

/// Name of an exception number of a branch address packet.
pub fn exception_name(number: u16, m_type: bool) -> String {
    if m_type {
        if number < 0x18 {
            M_EXCEPTIONS.get(number as usize).copied().unwrap_or("Reserved").to_string()
        } else {
            format!("IRQ{}", number as i32 - 0x10)
        }
    } else {
        A_EXCEPTIONS.get(number as usize).copied().unwrap_or("Reserved").to_string()
    }
}

fn exception_str(out: &mut String, pkt: &Etm3Packet) {
    let e = &pkt.exception;
    out.push_str("Exception=");
    out.push_str(&exception_name(e.number, e.m_type));
    if e.m_type {
        if e.resume != 0 {
            let _ = write!(out, "; Resume={}", e.resume);
        }
    } else {
        out.push_str("; ");
    }
    if e.cancel {
        out.push_str("; Cancel prev instr");
    }
}

fn atom_str(out: &mut String, pkt: &Etm3Packet) {
    let letter = |e: bool| if e { 'E' } else { 'N' };
    if pkt.cycle_count == 0 {
        for e in pkt.atoms() {
            out.push(letter(e));
        }
        return;
    }
    match pkt.phdr_format {
        1 => {
            for e in pkt.atoms() {
                out.push('W');
                out.push(letter(e));
            }
        }
        2 => {
            out.push('W');
            for e in pkt.atoms() {
                out.push(letter(e));
            }
        }
        3 => {
            for _ in 0..pkt.cycle_count {
                out.push('W');
            }
            if pkt.atom_count > 0 {
                out.push(letter(pkt.atom_bits & 1 == 1));
            }
        }
        _ => {}
    }
    out.push_str("; Cycles=");
    textout::dec(out, pkt.cycle_count as u64);
}

fn isync_str(out: &mut String, pkt: &Etm3Packet) {
    const REASONS: [&str; 4] = ["Periodic", "Trace Enable", "Restart Overflow", "Debug Exit"];
    let i = &pkt.isync;
    let _ = write!(out, "({}); ", REASONS[(i.reason & 3) as usize]);
    if !i.no_address {
        out.push_str(if i.has_lsip_address { "Data Instr Addr=0x" } else { "Addr=0x" });
        textout::hex(out, pkt.addr.value, 8);
        out.push_str("; ");
    }
    out.push_str(if pkt.context.ns { "NS; " } else { "S; " });
    out.push_str(if pkt.context.hyp { "Hyp; " } else { " " });
    if pkt.context.updated_cid {
        let _ = write!(out, "CtxtID={:x}; ", pkt.context.context_id);
    }
    if i.no_address {
        return;
    }
    isa_str(out, pkt.isa);
    if i.has_cycle_count {
        out.push_str("Cycles=");
        textout::dec(out, pkt.cycle_count as u64);
        out.push_str("; ");
    }
    if i.has_lsip_address {
        out.push_str("Curr Instr Addr=");
        let a = &pkt.data.addr;
        val_str(out, 32, a.valid_bits as i32, a.value, a.pkt_bits as u32);
        out.push(';');
    }
}

fn isa_json(isa: Isa) -> &'static str {
    match isa {
        Isa::A32 => "A32",
        Isa::T32 => "T32",
        Isa::A64 => "A64",
        Isa::ThumbEE => "ThumbEE",
        Isa::Jazelle => "Jazelle",
        _ => "unknown",
    }
}

/// One JSON object (no trailing newline) with the packet's typed fields.
pub fn write_json(out: &mut String, stream_id: u8, pkt: &Etm3Packet, raw: &[u8]) {
    use PacketType as P;
    let _ = write!(out, "{{\"index\":{},\"id\":{},\"type\":\"{}\",\"bytes\":\"", pkt.index, stream_id, pkt.ptype.name());
    for b in raw {
        let _ = write!(out, "{b:02x}");
    }
    out.push('"');
    if pkt.ptype.is_error() {
        let _ = write!(out, ",\"error_of\":\"{}\"", pkt.err_type.name());
    }
    if let Some(e) = &pkt.error {
        out.push_str(",\"parse_error\":");
        crate::element::write_json_string(out, e.message);
    }
    match pkt.ptype {
        P::BranchAddress => {
            let _ = write!(
                out,
                ",\"addr\":\"0x{:x}\",\"addr_bits\":{},\"isa\":\"{}\"",
                pkt.addr.value,
                pkt.addr.pkt_bits,
                isa_json(pkt.isa)
            );
            if pkt.context.updated {
                let _ = write!(out, ",\"ns\":{},\"hyp\":{}", pkt.context.ns, pkt.context.hyp);
            }
            if pkt.exception.present {
                let e = &pkt.exception;
                let _ = write!(
                    out,
                    ",\"exception\":{},\"exception_name\":\"{}\",\"cancel\":{}",
                    e.number,
                    exception_name(e.number, e.m_type),
                    e.cancel
                );
            }
        }
        P::ISync | P::ISyncCycle => {
            const REASONS: [&str; 4] = ["periodic", "trace_enable", "restart_overflow", "debug_exit"];
            let _ = write!(out, ",\"reason\":\"{}\"", REASONS[(pkt.isync.reason & 3) as usize]);
            if !pkt.isync.no_address {
                let _ = write!(out, ",\"addr\":\"0x{:x}\",\"isa\":\"{}\"", pkt.addr.value, isa_json(pkt.isa));
            }
            let _ = write!(out, ",\"ns\":{},\"hyp\":{}", pkt.context.ns, pkt.context.hyp);
            if pkt.context.updated_cid {
                let _ = write!(out, ",\"context_id\":{}", pkt.context.context_id);
            }
            if pkt.isync.has_cycle_count {
                let _ = write!(out, ",\"cycle_count\":{}", pkt.cycle_count);
            }
        }
        P::PHeader => {
            out.push_str(",\"atoms\":\"");
            for e in pkt.atoms() {
                out.push(if e { 'E' } else { 'N' });
            }
            let _ = write!(out, "\",\"format\":{}", pkt.phdr_format);
            if pkt.cycle_count != 0 || pkt.phdr_format >= 3 {
                let _ = write!(out, ",\"cycle_count\":{}", pkt.cycle_count);
            }
        }
        P::CycleCount => {
            let _ = write!(out, ",\"cycle_count\":{}", pkt.cycle_count);
        }
        P::ContextId => {
            let _ = write!(out, ",\"context_id\":{}", pkt.context.context_id);
        }
        P::Vmid => {
            let _ = write!(out, ",\"vmid\":{}", pkt.context.vmid);
        }
        P::Timestamp => {
            let _ = write!(out, ",\"timestamp\":{},\"ts_bits\":{}", pkt.timestamp, pkt.ts_update_bits);
        }
        P::OooData | P::OooAddrPlaceholder | P::NormalData | P::ValueNotTraced => {
            if pkt.data.update_value {
                let _ = write!(out, ",\"value\":{}", pkt.data.value);
            }
            if matches!(pkt.ptype, P::OooData | P::OooAddrPlaceholder) {
                let _ = write!(out, ",\"tag\":{}", pkt.data.ooo_tag);
            }
        }
        _ => {}
    }
    out.push('}');
}
