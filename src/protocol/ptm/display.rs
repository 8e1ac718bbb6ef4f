//! Text forms of PTM packets: the OpenCSD `trc_pkt_lister` line format and
//! JSON lines.

use std::fmt::Write;

use super::packet::{exception_name, PtmPacket, PtmPacketType};
use crate::element::Isa;
use crate::textout;

/// Append the trc_pkt_lister packet line (with raw bytes, as in its `-decode`
/// mode) for `pkt`, followed by a newline. PTM descriptions end with `; `.
pub fn write_opencsd_line(out: &mut String, stream_id: u8, pkt: &PtmPacket, raw: &[u8]) {
    textout::packet_prefix(out, pkt.index, stream_id, raw);
    write_description(out, pkt);
    out.push('\n');
}

/// The message OpenCSD's PTM packet processor logs for a malformed packet,
/// which trc_pkt_lister prints (unterminated) before the packet line. Nothing
/// is appended for other packets. `trace_id` is the configured trace ID.
pub fn write_parser_error(out: &mut String, trace_id: u8, pkt: &PtmPacket) {
    if let (PtmPacketType::BadSequence, Some(msg)) = (pkt.ptype, pkt.error_message) {
        let _ = write!(
            out,
            "PKTP_PTM_{:04} : 0x0013 (OCSD_ERR_BAD_PACKET_SEQ) [Bad packet sequence]; TrcIdx={}; CS ID={:02x}; {}",
            trace_id, pkt.index, trace_id, msg
        );
    }
}

/// `NAME : Description; details`, as OpenCSD's `PtmTrcPacket::toString`.
pub fn write_description(out: &mut String, pkt: &PtmPacket) {
    use PtmPacketType as P;
    out.push_str(pkt.ptype.name());
    out.push_str(" : ");
    out.push_str(pkt.ptype.description());
    out.push_str("; ");
    match pkt.ptype {
        P::BadSequence => {
            let _ = write!(out, "[{}]; ", pkt.err_type.name());
        }
        P::Atom => {
            if pkt.cc_valid {
                out.push_str(if pkt.atom_bits & 1 != 0 { "E; " } else { "N; " });
                cycles_str(out, pkt);
            } else {
                for e in pkt.atoms() {
                    out.push(if e { 'E' } else { 'N' });
                }
                out.push_str("; ");
            }
        }
        P::ContextId => {
            let _ = write!(out, "CtxtID=0x{:08x}; ", pkt.context_id);
        }
        P::Vmid => {
            let _ = write!(out, "VMID=0x{:02x}; ", pkt.vmid);
        }
        P::WaypointUpdate | P::BranchAddress => {
            out.push_str("Addr=");
            value_str(out, 32, pkt.addr_valid_bits, pkt.addr, pkt.addr_pkt_bits);
            out.push_str("; ");
            if pkt.isa_changed() {
                isa_str(out, pkt.isa);
            }
            if pkt.context_updated {
                out.push_str(if pkt.ns { "NS; " } else { "S; " });
                if pkt.hyp {
                    out.push_str("Hyp; ");
                }
            }
            if pkt.exception_present {
                let _ = write!(out, "Excep={} [{:02x}]; ", exception_name(pkt.exception_number), pkt.exception_number);
            }
            if pkt.cc_valid {
                cycles_str(out, pkt);
            }
        }
        P::ISync => {
            let _ = write!(out, "({}); Addr=0x{:08x}; ", pkt.isync_reason.text(), pkt.addr as u32);
            out.push_str(if pkt.ns { "NS; " } else { "S; " });
            out.push_str(if pkt.hyp { "Hyp; " } else { " " });
            if pkt.context_id_updated {
                let _ = write!(out, "CtxtID={:08x}; ", pkt.context_id);
            }
            isa_str(out, pkt.isa);
            if pkt.cc_valid {
                cycles_str(out, pkt);
            }
        }
        P::Timestamp => {
            out.push_str("TS=");
            value_str(out, 64, 64, pkt.timestamp, pkt.ts_update_bits);
            let _ = write!(out, "({}); ", pkt.timestamp);
            if pkt.cc_valid {
                cycles_str(out, pkt);
            }
        }
        _ => {}
    }
}

fn cycles_str(out: &mut String, pkt: &PtmPacket) {
    out.push_str("Cycles=");
    textout::dec(out, pkt.cycle_count as u64);
    out.push_str("; ");
}

fn isa_name(isa: Isa) -> &'static str {
    match isa {
        Isa::A32 => "ARM(32)",
        Isa::T32 => "Thumb2",
        Isa::A64 => "AArch64",
        Isa::ThumbEE => "ThumbEE",
        Isa::Jazelle => "Jazelle",
        _ => "Unknown",
    }
}

fn isa_str(out: &mut String, isa: Isa) {
    out.push_str("ISA=");
    out.push_str(isa_name(isa));
    out.push_str("; ");
}

/// OpenCSD's `getValStr`: full-width upper-case hex, `?` for digits not known
/// yet with the valid range, and the bits this packet set.
fn value_str(out: &mut String, total: u32, valid: u8, value: u64, update_bits: u8) {
    let valid = (valid as u32).min(total);
    let num_hex = total.div_ceil(4);
    let valid_chars = valid.div_ceil(4);
    out.push_str("0x");
    for _ in valid_chars..num_hex {
        out.push('?');
    }
    // As sprintf("%0*X"): the whole value (32 bits of it up to 32 valid bits),
    // at least one digit.
    let shown = if valid > 32 { value } else { value as u32 as u64 };
    textout::hex_upper(out, shown, valid_chars as usize);
    if valid < total {
        let _ = write!(out, " ({}:0)", valid as i32 - 1);
    }
    if update_bits > 0 {
        let mask = if update_bits >= 64 { u64::MAX } else { (1u64 << update_bits) - 1 };
        out.push_str(" ~[0x");
        textout::hex_upper(out, value & mask, 0);
        out.push(']');
    }
}

/// One JSON object (no trailing newline) with the packet's typed fields.
pub fn write_json(out: &mut String, stream_id: u8, pkt: &PtmPacket, raw: &[u8]) {
    use PtmPacketType as P;
    let _ =
        write!(out, "{{\"index\":{},\"id\":{},\"type\":\"{}\",\"bytes\":\"", pkt.index, stream_id, pkt.ptype.name());
    for b in raw {
        let _ = write!(out, "{b:02x}");
    }
    out.push('"');
    match pkt.ptype {
        P::BadSequence | P::IncompleteEot => {
            let _ = write!(out, ",\"error_of\":\"{}\"", pkt.err_type.name());
        }
        P::Atom => {
            out.push_str(",\"atoms\":\"");
            for e in pkt.atoms() {
                out.push(if e { 'E' } else { 'N' });
            }
            out.push('"');
        }
        P::BranchAddress | P::WaypointUpdate => {
            let _ = write!(
                out,
                ",\"addr\":\"0x{:x}\",\"addr_bits\":{},\"isa\":\"{}\"",
                pkt.addr,
                pkt.addr_pkt_bits,
                pkt.isa.name()
            );
            if pkt.context_updated {
                let _ = write!(out, ",\"ns\":{},\"hyp\":{}", pkt.ns, pkt.hyp);
            }
            if pkt.exception_present {
                let _ = write!(
                    out,
                    ",\"exception\":{},\"exception_name\":\"{}\"",
                    pkt.exception_number,
                    exception_name(pkt.exception_number)
                );
            }
        }
        P::ISync => {
            let _ = write!(
                out,
                ",\"reason\":\"{}\",\"addr\":\"0x{:x}\",\"isa\":\"{}\",\"ns\":{},\"hyp\":{}",
                pkt.isync_reason.text(),
                pkt.addr,
                pkt.isa.name(),
                pkt.ns,
                pkt.hyp
            );
            if pkt.context_id_updated {
                let _ = write!(out, ",\"context_id\":{}", pkt.context_id);
            }
        }
        P::ContextId => {
            let _ = write!(out, ",\"context_id\":{}", pkt.context_id);
        }
        P::Vmid => {
            let _ = write!(out, ",\"vmid\":{}", pkt.vmid);
        }
        P::Timestamp => {
            let _ = write!(out, ",\"timestamp\":{},\"ts_bits\":{}", pkt.timestamp, pkt.ts_update_bits);
        }
        _ => {}
    }
    if pkt.cc_valid {
        let _ = write!(out, ",\"cycle_count\":{}", pkt.cycle_count);
    }
    out.push('}');
}
