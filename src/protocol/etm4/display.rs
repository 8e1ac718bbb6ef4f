//! Text forms of ETMv4/ETE packets: the OpenCSD `trc_pkt_lister` line format and
//! JSON lines.

use std::fmt::Write;

use super::packet::{Packet, PacketType};
use crate::textout;

/// Append the trc_pkt_lister packet line (with raw bytes, as in its `-decode`
/// mode) for `pkt`, followed by a newline.
pub fn write_opencsd_line(out: &mut String, trace_id: u8, pkt: &Packet, raw: &[u8], is_ete: bool) {
    textout::packet_prefix(out, pkt.index, trace_id, raw);
    write_description(out, pkt, is_ete);
    out.push('\n');
}

/// `NAME : Description; details`, as OpenCSD's `EtmV4ITrcPacket::toString`.
pub fn write_description(out: &mut String, pkt: &Packet, is_ete: bool) {
    use PacketType as P;
    let t = pkt.ptype;
    out.push_str(t.name());
    out.push_str(" : ");
    out.push_str(t.description());
    match t {
        P::BadSequence | P::IncompleteEot | P::ReservedCfg => {
            let _ = write!(out, "[{}]", pkt.err_type.name());
        }
        P::AddrCtxtL32Is0 | P::AddrCtxtL32Is1 | P::AddrL32Is0 | P::AddrL32Is1 | P::SrcAddrL32Is0 | P::SrcAddrL32Is1 => {
            let update = if pkt.addr.pkt_bits < 32 { pkt.addr.pkt_bits } else { 0 };
            out.push_str("; Addr=");
            addr_str(out, pkt, update);
            out.push_str("; ");
            if matches!(t, P::AddrCtxtL32Is0 | P::AddrCtxtL32Is1) {
                context_str(out, pkt);
            }
        }
        P::AddrCtxtL64Is0 | P::AddrCtxtL64Is1 | P::AddrL64Is0 | P::AddrL64Is1 | P::SrcAddrL64Is0 | P::SrcAddrL64Is1 => {
            let update = if pkt.addr.pkt_bits < 64 { pkt.addr.pkt_bits } else { 0 };
            out.push_str("; Addr=");
            addr_str(out, pkt, update);
            out.push_str("; ");
            if matches!(t, P::AddrCtxtL64Is0 | P::AddrCtxtL64Is1) {
                context_str(out, pkt);
            }
        }
        P::Context => {
            out.push_str("; ");
            context_str(out, pkt);
        }
        P::AddrShortIs0 | P::AddrShortIs1 | P::SrcAddrShortIs0 | P::SrcAddrShortIs1 => {
            out.push_str("; Addr=");
            addr_str(out, pkt, pkt.addr.pkt_bits);
        }
        P::AddrMatch | P::SrcAddrMatch => {
            let _ = write!(out, ", [{}]; Addr=", pkt.exact_match_idx);
            addr_str(out, pkt, 0);
            out.push_str("; ");
        }
        P::AtomF1 | P::AtomF2 | P::AtomF3 | P::AtomF4 | P::AtomF5 | P::AtomF6 => {
            out.push_str("; ");
            atom_str(out, pkt);
        }
        P::Exception => {
            out.push_str("; ");
            exception_str(out, pkt);
        }
        P::Timestamp => {
            let _ = write!(out, "; Updated val = 0x{:x}", pkt.timestamp);
            if pkt.cc_valid {
                let _ = write!(out, "; CC=0x{:x}", pkt.cycle_count);
            }
        }
        P::TraceInfo => {
            let ti = &pkt.trace_info;
            let _ = write!(out, "; INFO=0x{:x} {{ CC.{}", ti.info, ti.cc_enabled() as u8);
            if is_ete {
                let _ = write!(out, ", TSTATE.{}", ti.in_transaction() as u8);
            }
            out.push_str(" }");
            if ti.cc_enabled() {
                let _ = write!(out, "; CC_THRESHOLD=0x{:x}", ti.cc_threshold);
            }
            if ti.initial {
                if ti.spec_present {
                    let _ = write!(out, "; INIT SPEC DEPTH={}", ti.spec_depth);
                }
                out.push_str("; Decoder Sync point TINFO");
            }
        }
        P::CycleCountF1 | P::CycleCountF2 | P::CycleCountF3 => {
            let _ = write!(out, "; Count=0x{:x}", pkt.cycle_count);
            if pkt.commit_valid {
                let _ = write!(out, "; Commit({})", pkt.commit);
            }
        }
        P::CancelF1 => {
            let _ = write!(out, "; Cancel({})", pkt.cancel);
        }
        P::CancelF1Mispredict => {
            let _ = write!(out, "; Cancel({}), Mispredict", pkt.cancel);
        }
        P::Mispredict => {
            out.push_str("; ");
            if pkt.atom_count > 0 {
                out.push_str("Atom: ");
                atom_str(out, pkt);
                out.push_str(", ");
            }
            out.push_str("Mispredict");
        }
        P::CancelF2 => {
            out.push_str("; ");
            if pkt.atom_count > 0 {
                out.push_str("Atom: ");
                atom_str(out, pkt);
                out.push_str(", ");
            }
            out.push_str("Cancel(1), Mispredict");
        }
        P::CancelF3 => {
            out.push_str("; ");
            if pkt.atom_count > 0 {
                out.push_str("Atom: E, ");
            }
            let _ = write!(out, "Cancel({}), Mispredict", pkt.cancel);
        }
        P::Commit => {
            let _ = write!(out, "; Commit({})", pkt.commit);
        }
        P::Q => {
            if pkt.q.count_present {
                let _ = write!(out, "; Count({})", pkt.q.count);
            } else {
                out.push_str("; Count(Unknown)");
            }
            if pkt.q.addr_match {
                let _ = write!(out, "; [{}]", pkt.exact_match_idx);
            }
            if pkt.q.addr_present || pkt.q.addr_match {
                let update = if pkt.addr.pkt_bits < 64 { pkt.addr.pkt_bits } else { 0 };
                out.push_str("; Addr=");
                addr_str(out, pkt, update);
            }
        }
        P::Ite => {
            let _ = write!(out, "; EL{}; Payload=0x{:x}", pkt.ite_el, pkt.ite_payload);
        }
        _ => {}
    }
}

/// OpenCSD's `getValStr` for an address: full-width upper-case hex, `?` for
/// unknown digits with the valid range, and the bits this packet carried.
fn addr_str(out: &mut String, pkt: &Packet, update_bits: u8) {
    let a = &pkt.addr;
    let total: u32 = if a.is_64bit { 64 } else { 32 };
    let valid = a.valid_bits as u32;
    let num_hex = total.div_ceil(4);
    let valid_chars = valid.div_ceil(4);
    out.push_str("0x");
    for _ in valid_chars..num_hex {
        out.push('?');
    }
    if valid > 32 {
        textout::hex_upper(out, a.value, valid_chars as usize);
    } else {
        textout::hex_upper(out, a.value as u32 as u64, valid_chars as usize);
    }
    if valid < total {
        let _ = write!(out, " ({}:0)", valid as i32 - 1);
    }
    if update_bits > 0 {
        let mask = u64::MAX >> (64 - update_bits as u32);
        out.push_str(" ~[0x");
        textout::hex_upper(out, a.value & mask, 0);
        out.push(']');
    }
}

fn context_str(out: &mut String, pkt: &Packet) {
    if !pkt.context_valid {
        return;
    }
    let c = &pkt.context;
    if !c.updated {
        out.push_str("Ctxt: Same");
        return;
    }
    out.push_str(if c.sf { "Ctxt: AArch64," } else { "Ctxt: AArch32, " });
    let _ = write!(out, "EL{}, ", c.el);
    out.push_str(match (c.nse, c.ns) {
        (true, true) => "Realm; ",
        (true, false) => "Root; ",
        (false, true) => "NS; ",
        (false, false) => "S; ",
    });
    if c.updated_cid {
        let _ = write!(out, "CID=0x{:08x}; ", c.context_id);
    }
    if c.updated_vmid {
        let _ = write!(out, "VMID=0x{:04x}; ", c.vmid);
    }
}

fn atom_str(out: &mut String, pkt: &Packet) {
    for e in pkt.atoms() {
        out.push(if e { 'E' } else { 'N' });
    }
}

const A_EXCEPTIONS: [&str; 16] = [
    "PE Reset", "Debug Halt", "Call", "Trap", "System Error", "Reserved", "Inst Debug", "Data Debug", "Reserved",
    "Reserved", "Alignment", "Inst Fault", "Data Fault", "Reserved", "IRQ", "FIQ",
];

const M_EXCEPTIONS: [&str; 32] = [
    "Reserved", "PE Reset", "NMI", "HardFault", "MemManage", "BusFault", "UsageFault", "Reserved", "Reserved",
    "Reserved", "Reserved", "SVC", "DebugMonitor", "Reserved", "PendSV", "SysTick", "IRQ0", "IRQ1", "IRQ2", "IRQ3",
    "IRQ4", "IRQ5", "IRQ6", "IRQ7", "DebugHalt", "LazyFP Push", "Lockup", "Reserved", "Reserved", "Reserved",
    "Reserved", "Reserved",
];

/// Name of an exception number as the trace unit reports it.
pub fn exception_name(number: u16, m_profile: bool) -> std::borrow::Cow<'static, str> {
    if !m_profile {
        A_EXCEPTIONS.get(number as usize).copied().unwrap_or("Reserved").into()
    } else if let Some(n) = M_EXCEPTIONS.get(number as usize) {
        (*n).into()
    } else if (0x208..=0x3ef).contains(&number) {
        format!("IRQ{}", number - 0x200).into()
    } else {
        "Reserved".into()
    }
}

fn exception_str(out: &mut String, pkt: &Packet) {
    let e = &pkt.exception;
    let _ = write!(out, " {};", exception_name(e.number, e.m_type));
    if e.m_type && e.m_fault_pending {
        out.push_str(" Fault Pending;");
    }
    match e.addr_interp {
        1 => out.push_str(" Ret Addr Follows;"),
        2 => out.push_str(" Ret Addr Follows, Match Prev;"),
        _ => {}
    }
}

/// One JSON object (no trailing newline) with the packet's typed fields.
pub fn write_json(out: &mut String, trace_id: u8, pkt: &Packet, raw: &[u8]) {
    use PacketType as P;
    let _ = write!(out, "{{\"index\":{},", pkt.index);
    if pkt.offset != pkt.index {
        // Only the surplus zeros before an A-sync, where OpenCSD's index stays put.
        let _ = write!(out, "\"offset\":{},", pkt.offset);
    }
    let _ = write!(out, "\"id\":{},\"type\":\"{}\",\"bytes\":\"", trace_id, pkt.ptype.name());
    for b in raw {
        let _ = write!(out, "{b:02x}");
    }
    out.push('"');
    let t = pkt.ptype;
    if t.is_error() {
        let _ = write!(out, ",\"error_of\":\"{}\"", pkt.err_type.name());
        if t == P::Reserved {
            let _ = write!(out, ",\"header\":{}", pkt.err_header);
        }
    }
    if t.is_address() || t.is_source_address() || (t == P::Q && (pkt.q.addr_present || pkt.q.addr_match)) {
        let _ = write!(
            out,
            ",\"addr\":\"0x{:x}\",\"isa\":{},\"addr_bits\":{}",
            pkt.addr.value, pkt.addr.isa, pkt.addr.pkt_bits
        );
        if matches!(t, P::AddrMatch | P::SrcAddrMatch) {
            let _ = write!(out, ",\"match_index\":{}", pkt.exact_match_idx);
        }
    }
    if matches!(t, P::Context | P::AddrCtxtL32Is0 | P::AddrCtxtL32Is1 | P::AddrCtxtL64Is0 | P::AddrCtxtL64Is1) {
        let c = &pkt.context;
        if c.updated {
            let _ = write!(out, ",\"el\":{},\"aarch64\":{},\"ns\":{},\"nse\":{}", c.el, c.sf, c.ns, c.nse);
            if c.updated_cid {
                let _ = write!(out, ",\"context_id\":{}", c.context_id);
            }
            if c.updated_vmid {
                let _ = write!(out, ",\"vmid\":{}", c.vmid);
            }
        } else {
            out.push_str(",\"context_same\":true");
        }
    }
    if t.is_atom() || (matches!(t, P::Mispredict | P::CancelF2 | P::CancelF3) && pkt.atom_count > 0) {
        out.push_str(",\"atoms\":\"");
        for e in pkt.atoms() {
            out.push(if e { 'E' } else { 'N' });
        }
        out.push('"');
    }
    match t {
        P::Timestamp => {
            let _ = write!(out, ",\"timestamp\":{},\"ts_bits\":{}", pkt.timestamp, pkt.ts_bits_changed);
        }
        P::TraceInfo => {
            let ti = &pkt.trace_info;
            let _ = write!(
                out,
                ",\"info\":{},\"cc_enabled\":{},\"p0_key\":{},\"spec_depth\":{},\"cc_threshold\":{},\"in_transaction\":{}",
                ti.info,
                ti.cc_enabled(),
                ti.p0_key,
                ti.spec_depth,
                ti.cc_threshold,
                ti.in_transaction()
            );
        }
        P::Exception => {
            let e = &pkt.exception;
            let _ = write!(
                out,
                ",\"exception\":{},\"exception_name\":\"{}\",\"addr_interp\":{}",
                e.number,
                exception_name(e.number, e.m_type),
                e.addr_interp
            );
        }
        P::CancelF1 | P::CancelF1Mispredict | P::CancelF2 | P::CancelF3 => {
            let _ = write!(out, ",\"cancel\":{}", pkt.cancel);
        }
        P::Q if pkt.q.count_present => {
            let _ = write!(out, ",\"count\":{}", pkt.q.count);
        }
        P::Event => {
            let _ = write!(out, ",\"event\":{}", pkt.event);
        }
        P::Ite => {
            let _ = write!(out, ",\"el\":{},\"payload\":{}", pkt.ite_el, pkt.ite_payload);
        }
        _ => {}
    }
    if pkt.cc_valid {
        let _ = write!(out, ",\"cycle_count\":{}", pkt.cycle_count);
    }
    if pkt.commit_valid {
        let _ = write!(out, ",\"commit\":{}", pkt.commit);
    }
    out.push('}');
}
