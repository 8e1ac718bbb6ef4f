//! PTM element decoder: packets plus the program image in, executed
//! instruction ranges and the other trace elements out.
//!
//! PTM traces waypoints only: each atom says whether the next branch in the
//! program was taken, a branch address packet gives the target of an
//! indirect (or, with branch broadcast, any) taken branch, and an exception is
//! a branch address packet with the exception number. The decoder walks the
//! program image from waypoint to waypoint, as OpenCSD's `TrcPktDecodePtm`
//! does, element for element (including its use of the return stack and of
//! waypoint update packets, and its error handling).

use std::sync::Arc;

use super::config::PtmConfig;
use super::packet::{ISyncReason, PtmPacket, PtmPacketType};
use crate::element::{
    Element, ElementKind, InstrSubtype, InstrType, Isa, MemSpace, PeContext, Security, Time, TraceOnReason,
    UnsyncReason,
};
use crate::image::instr::{self, DecodeOptions, InstrInfo, ItState};
use crate::image::memory::MemoryImage;
use crate::protocol::decoder::{DecodeError, Decoder, DecoderCore, ReturnStack, PLAIN_STEPS};
use crate::protocol::etm4::decoder::DecoderOptions;
use crate::protocol::ProtocolError;
use crate::protocol::etm4::decoder::DecoderOutput;
use crate::protocol::etm4::CoreProfile;

#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Report NO_SYNC on the next packet.
    NoSync,
    /// Waiting for an A-sync.
    WaitSync,
    /// Waiting for an I-sync.
    WaitISync,
    Decode,
}

/// How far a walk through the program goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WalkTo {
    /// To the next waypoint (branch or barrier).
    Waypoint,
    /// To and including the instruction at this address (waypoint update).
    AddressIncl(u64),
}


/// Where the walk through the program image is.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug)]
struct PeState {
    addr: u64,
    isa: Isa,
    valid: bool,
}

/// Entries of the cache of walks to the next waypoint (a power of two),
/// direct-mapped; made on the first walk. With 4096, one walk in seven of
/// TC2's PTM trace missed and was stepped again (121,588 of 816,615, a
/// twentieth of a summary's instructions); with 16384, 36,238.
const WALK_CACHE: usize = 16384;

/// A walk to the next waypoint as [`PtmDecoder::walk`] made it, kept so
/// that the next walk from the same place is not stepped again. PTM
/// decoding keeps no IT-block state (OpenCSD's PTM decoder tracks none), so
/// such a walk depends only on where it starts (address, instruction set,
/// memory space) and on the decoder's program image and options, which do
/// not change under it.
#[derive(Clone, Copy)]
struct CachedWalk {
    start: u64,
    isa: Isa,
    space: u8,
    end: u64,
    count: u32,
    /// The walk met a waypoint; otherwise it stopped at the inaccessible
    /// address `nacc_addr`.
    found: bool,
    nacc_addr: u64,
    last: InstrInfo,
}

/// Result of a walk.
struct Walk {
    start: u64,
    end: u64,
    count: u32,
    found: bool,
    last: InstrInfo,
}

/// The PTM element decoder for one trace ID.
///
/// Its decode state serializes ([`Decoder::save_state`]) so that decoding
/// can resume exactly; what comes from the configuration and the program
/// image are supplied again on load.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct PtmDecoder {
    #[serde(skip)]
    image: Arc<MemoryImage>,
    #[serde(skip)]
    idec: DecodeOptions,
    it: ItState,
    core: DecoderCore,
    state: State,
    unsync_reason: UnsyncReason,
    need_isync: bool,
    context: PeContext,
    pe: PeState,
    nacc_pending: bool,
    nacc_addr: u64,
    rs: ReturnStack,
    /// Instruction set of the element being built (persists between elements
    /// as in OpenCSD's reused output element).
    elem_isa: Isa,
    /// OpenCSD's output element keeps the unsync reason in storage it shares
    /// with the trace-on reason, exception number, instruction count and
    /// memory space: a NO_SYNC after a bad packet shows whichever was last set.
    shared_payload: u32,
    /// Walks to the next waypoint already made (see [`CachedWalk`]); not
    /// part of the state: made again from the image after a load.
    #[serde(skip)]
    walks: Vec<Option<CachedWalk>>,
}

impl Decoder for PtmDecoder {
    type Config = PtmConfig;
    type Packet = PtmPacket;
    const TAG: &'static str = "DCD_PTM";
    const STATE: &'static str = "PTM decoder";
    const RESYNC: &'static str = "A-sync and I-sync";

    fn create(cfg: &PtmConfig, image: Arc<MemoryImage>, _opts: DecoderOptions) -> PtmDecoder {
        PtmDecoder::new(cfg, image)
    }

    fn core(&self) -> &DecoderCore {
        &self.core
    }

    fn core_mut(&mut self) -> &mut DecoderCore {
        &mut self.core
    }

    fn packet<F: FnMut(DecoderOutput<'_>)>(&mut self, pkt: &PtmPacket, sink: &mut F) {
        self.take_packet(pkt, sink);
    }

    fn finish<F: FnMut(DecoderOutput<'_>)>(&mut self, sink: &mut F) {
        self.end_of_trace(sink);
    }

    fn restart(&mut self, why: UnsyncReason) {
        self.unsync_reason = why;
        self.reset_state();
    }

    fn restore(&mut self, cfg: &PtmConfig, image: Arc<MemoryImage>) {
        let fresh = PtmDecoder::new(cfg, image);
        self.image = fresh.image;
        self.idec = fresh.idec;
        self.walks = Vec::new();
        self.core.trace_id = fresh.core.trace_id;
        self.rs.active = fresh.rs.active;
    }

    /// The return stack's index and fill stay within its 16 entries (its
    /// fill goes negative after pops from an empty stack, as OpenCSD's).
    fn check(&self) -> Result<(), ProtocolError> {
        crate::protocol::check_state("PTM decoder", &self.rs.bounds())
    }
}

impl PtmDecoder {
    pub fn new(cfg: &PtmConfig, image: Arc<MemoryImage>) -> PtmDecoder {
        let idec = DecodeOptions {
            arch: cfg.arch,
            m_profile: cfg.profile == CoreProfile::Microcontroller,
            // OpenCSD's PTM decoder: WFI/WFE are not waypoints, no IT-block
            // tracking, DMB/DSB waypoints as ETMCCER says.
            wfi_wfe_branch: false,
            dsb_dmb_waypoints: cfg.dmb_dsb_waypoints(),
            aa64_opcode_check: false,
            track_it_block: false,
        };
        let mut d = PtmDecoder {
            image,
            idec,
            it: ItState::new(),
            core: DecoderCore::new(cfg.trace_id()),
            state: State::NoSync,
            unsync_reason: UnsyncReason::InitDecoder,
            need_isync: true,
            context: PeContext::default(),
            pe: PeState { addr: 0, isa: Isa::Unknown, valid: false },
            nacc_pending: false,
            nacc_addr: 0,
            rs: ReturnStack::new(cfg.return_stack_active()),
            elem_isa: Isa::Unknown,
            shared_payload: 0,
            walks: Vec::new(),
        };
        d.reset_state();
        d
    }

    fn reset_state(&mut self) {
        self.state = State::NoSync;
        self.need_isync = true;
        self.nacc_pending = false;
        self.context = PeContext {
            security: Security::Secure,
            el: 0,
            el_valid: false,
            aarch64: false,
            vmid: None,
            context_id: None,
        };
        self.pe = PeState { addr: 0, isa: Isa::Unknown, valid: false };
        self.elem_isa = Isa::Unknown;
        self.shared_payload = 0;
        self.it = ItState::new();
        self.rs.flush();
    }

    // ---- output ----------------------------------------------------------

    fn emit<F: FnMut(DecoderOutput<'_>)>(&mut self, sink: &mut F, index: u64, kind: ElementKind, cc: Option<u32>) {
        let mut e = Element { index, trace_id: self.core.trace_id, kind, isa: self.elem_isa, cycle_count: cc, time: Time::default() };
        self.core.deliver(&mut e, sink);
    }

    fn log<F: FnMut(DecoderOutput<'_>)>(&mut self, sink: &mut F, err: DecodeError, text: &str) {
        let at = Some(self.core.index_curr);
        self.core.log(sink, Self::TAG, err, at, text);
    }

    fn unsync_from_payload(&self) -> UnsyncReason {
        match self.shared_payload {
            // The payload is shared with other elements (a memory space can
            // be 8): OpenCSD prints no reason above 7.
            c @ 0..=7 => UnsyncReason::from_code(c),
            _ => UnsyncReason::Undefined,
        }
    }

    // ---- packet entry -----------------------------------------------------

    /// [`Decoder::packet`].
    fn take_packet<F: FnMut(DecoderOutput<'_>)>(&mut self, pkt: &PtmPacket, sink: &mut F) {
        // Only the first chunk of unsynchronised bytes reaches the decoder.
        if pkt.ptype == PtmPacketType::NotSync && !pkt.first_not_sync {
            return;
        }
        if self.core.fatal {
            return;
        }
        self.core.index_curr = pkt.index;
        loop {
            match self.state {
                State::NoSync => {
                    self.shared_payload = self.unsync_reason.code();
                    self.emit(sink, self.core.index_curr, ElementKind::NoSync(self.unsync_reason), None);
                    self.state = if pkt.ptype == PtmPacketType::ASync { State::WaitISync } else { State::WaitSync };
                    return;
                }
                State::WaitSync => {
                    if pkt.ptype == PtmPacketType::ASync {
                        self.state = State::WaitISync;
                    }
                    return;
                }
                State::WaitISync => {
                    if pkt.ptype != PtmPacketType::ISync {
                        return;
                    }
                    self.state = State::Decode;
                }
                State::Decode => {
                    self.decode(pkt, sink);
                    return;
                }
            }
        }
    }

    /// [`Decoder::finish`].
    fn end_of_trace<F: FnMut(DecoderOutput<'_>)>(&mut self, sink: &mut F) {
        if self.core.fatal {
            return;
        }
        self.shared_payload = 7;
        self.emit(sink, self.core.index_curr, ElementKind::EndOfTrace(UnsyncReason::EndOfTrace), None);
    }

    fn decode<F: FnMut(DecoderOutput<'_>)>(&mut self, pkt: &PtmPacket, sink: &mut F) {
        use PtmPacketType as P;
        match pkt.ptype {
            P::NotSync | P::IncompleteEot | P::NoError | P::ASync | P::Ignore => {}
            P::BadSequence | P::Reserved => {
                self.state = State::WaitSync;
                self.need_isync = true;
                let r = self.unsync_from_payload();
                self.emit(sink, self.core.index_curr, ElementKind::NoSync(r), None);
            }
            P::ISync => self.isync(pkt, sink),
            P::BranchAddress => self.branch(pkt, sink),
            P::Trigger => {
                // OpenCSD: EVENT element of type trigger.
                self.shared_payload = 1;
                self.emit(sink, self.core.index_curr, ElementKind::Trigger, None);
            }
            P::WaypointUpdate => {
                if self.pe.valid {
                    self.atom_range(true, WalkTo::AddressIncl(pkt.addr), pkt, sink);
                }
                self.pending_nacc(sink);
            }
            P::ContextId => {
                if self.context.context_id != Some(pkt.context_id) {
                    self.context.context_id = Some(pkt.context_id);
                    self.emit(sink, self.core.index_curr, ElementKind::PeContext(self.context), None);
                }
            }
            P::Vmid => {
                if self.context.vmid != Some(pkt.vmid as u32) {
                    self.context.vmid = Some(pkt.vmid as u32);
                    self.emit(sink, self.core.index_curr, ElementKind::PeContext(self.context), None);
                }
            }
            P::Atom => {
                if self.pe.valid {
                    for e in pkt.atoms() {
                        if !self.pe.valid || self.core.fatal {
                            break;
                        }
                        self.atom_range(e, WalkTo::Waypoint, pkt, sink);
                    }
                    if !self.core.fatal {
                        self.pending_nacc(sink);
                    }
                }
            }
            P::Timestamp => {
                let cc = pkt.cc_valid.then_some(pkt.cycle_count);
                self.emit(sink, self.core.index_curr, ElementKind::Timestamp { value: pkt.timestamp }, cc);
            }
            P::ExceptionReturn => {
                self.emit(sink, self.core.index_curr, ElementKind::ExceptionReturn, None);
            }
        }
    }

    fn isync<F: FnMut(DecoderOutput<'_>)>(&mut self, pkt: &PtmPacket, sink: &mut F) {
        self.pe = PeState { addr: pkt.addr, isa: pkt.isa, valid: true };
        let mut ctxt_changed = pkt.isa_changed();
        if pkt.context_id_updated {
            self.context.context_id = Some(pkt.context_id);
            ctxt_changed = true;
        }
        if pkt.vmid_updated {
            self.context.vmid = Some(pkt.vmid as u32);
            ctxt_changed = true;
        }
        self.context.security = if pkt.ns { Security::NonSecure } else { Security::Secure };
        if self.need_isync || pkt.isync_reason != ISyncReason::Periodic {
            let reason = match pkt.isync_reason {
                ISyncReason::RestartOverflow => TraceOnReason::Overflow,
                ISyncReason::DebugExit => TraceOnReason::DebugRestart,
                _ => TraceOnReason::Normal,
            };
            self.shared_payload = match reason {
                TraceOnReason::Normal => 0,
                TraceOnReason::Overflow => 1,
                TraceOnReason::DebugRestart => 2,
            };
            let cc = pkt.cc_valid.then_some(pkt.cycle_count);
            self.emit(sink, self.core.index_curr, ElementKind::TraceOn(reason), cc);
        } else {
            ctxt_changed = false;
        }
        self.need_isync = false;
        self.rs.flush();
        if ctxt_changed {
            self.elem_isa = self.pe.isa;
            self.emit(sink, self.core.index_curr, ElementKind::PeContext(self.context), None);
        }
    }

    fn branch<F: FnMut(DecoderOutput<'_>)>(&mut self, pkt: &PtmPacket, sink: &mut F) {
        if pkt.exception_present {
            let ret_addr = self.pe.valid.then_some(self.pe.addr);
            let number = pkt.exception_number as u32;
            self.shared_payload = number;
            let cc = pkt.cc_valid.then_some(pkt.cycle_count);
            let kind =
                ElementKind::Exception { number, ret_addr, ret_addr_is_branch_target: false, m_tail_chain: false };
            self.emit(sink, self.core.index_curr, kind, cc);
        } else if self.pe.valid {
            // A branch address implies an E atom on the branch before it.
            self.atom_range(true, WalkTo::Waypoint, pkt, sink);
            if self.core.fatal {
                return;
            }
        }
        self.pe = PeState { addr: pkt.addr, isa: pkt.isa, valid: true };
        self.pending_nacc(sink);
    }

    fn pending_nacc<F: FnMut(DecoderOutput<'_>)>(&mut self, sink: &mut F) {
        if self.nacc_pending {
            let space = self.mem_space();
            self.shared_payload = space.0 as u32;
            let kind = ElementKind::AddrNotAccessible { addr: self.nacc_addr, space };
            self.emit(sink, self.core.index_curr, kind, None);
            self.nacc_pending = false;
        }
    }

    fn mem_space(&self) -> MemSpace {
        if self.context.security == Security::Secure {
            MemSpace::S
        } else {
            MemSpace::N
        }
    }

    /// Walk the program for one atom (`executed` = E) and report the range.
    fn atom_range<F: FnMut(DecoderOutput<'_>)>(&mut self, executed: bool, to: WalkTo, pkt: &PtmPacket, sink: &mut F) {
        let w = match self.walk(to) {
            Ok(w) => w,
            Err(e) => {
                // OpenCSD names the packet being processed.
                let what = match pkt.ptype {
                    PtmPacketType::WaypointUpdate => "WP update",
                    PtmPacketType::BranchAddress => "BranchAddr",
                    _ => "atom",
                };
                if e == DecodeError::UnsupportedIsa {
                    // A warning: wait for an address in a decodable instruction set.
                    self.pe.valid = false;
                    let text = format!("Warning: unsupported instruction set processing {what} packet.");
                    self.log(sink, e, &text);
                    return;
                }
                let text = format!("Error processing {what} packet.");
                self.log(sink, e, &text);
                self.core.fatal = true;
                return;
            }
        };
        let range_isa = self.pe.isa;
        if w.found {
            let next = w.end;
            let mut new_addr = next;
            let mut new_isa = w.last.next_isa;
            match w.last.itype {
                InstrType::Branch if executed => {
                    new_addr = w.last.target;
                    if w.last.link {
                        self.rs.push(next, range_isa);
                    }
                }
                InstrType::IndirectBranch if executed => {
                    // Taken indirect branch: the next address comes from a
                    // branch address packet, or for an atom from the return stack.
                    self.pe.valid = false;
                    if self.rs.active && pkt.ptype == PtmPacketType::Atom {
                        let popped = self.rs.pop();
                        if self.rs.overflow() {
                            let text = "Return stack error processing atom packet.";
                            self.log(sink, DecodeError::ReturnStackOverflow, text);
                            self.core.fatal = true;
                            return;
                        }
                        if let Some((a, isa)) = popped {
                            new_addr = a;
                            new_isa = isa;
                        }
                        self.pe.valid = true;
                    }
                    if w.last.link {
                        self.rs.push(next, range_isa);
                    }
                }
                _ => {}
            }
            let cc = pkt.cc_valid.then_some(pkt.cycle_count);
            self.emit_range(sink, &w, range_isa, executed, cc);
            self.pe.addr = new_addr;
            self.pe.isa = new_isa;
        } else {
            // No waypoint before inaccessible memory: report what was walked.
            self.pe.valid = false;
            if w.start != w.end {
                self.emit_range(sink, &w, range_isa, true, None);
            }
        }
    }

    fn emit_range<F: FnMut(DecoderOutput<'_>)>(
        &mut self,
        sink: &mut F,
        w: &Walk,
        isa: Isa,
        executed: bool,
        cc: Option<u32>,
    ) {
        self.elem_isa = isa;
        self.shared_payload = w.count;
        let kind = ElementKind::InstrRange {
            start: w.start,
            end: w.end,
            count: w.count,
            last_type: w.last.itype,
            last_subtype: w.last.subtype,
            last_size: w.last.size,
            executed,
            conditional: w.last.conditional,
        };
        self.emit(sink, self.core.index_curr, kind, cc);
    }

    /// Walk from the current address, as OpenCSD's `traceInstrToWP`: to the
    /// next waypoint through the cache of such walks (a walk that failed
    /// is not kept, and is made again each time).
    fn walk(&mut self, to: WalkTo) -> Result<Walk, DecodeError> {
        if to != WalkTo::Waypoint {
            return self.step(to);
        }
        let (start, isa, space) = (self.pe.addr, self.pe.isa, self.mem_space().0);
        let slot = ((start >> 1) ^ (start >> 13)) as usize & (WALK_CACHE - 1);
        let hit = self.walks.get(slot).copied().flatten().filter(|c| c.start == start && c.isa == isa && c.space == space);
        if let Some(c) = hit {
            if !c.found {
                self.nacc_pending = true;
                self.nacc_addr = c.nacc_addr;
            }
            return Ok(Walk { start, end: c.end, count: c.count, found: c.found, last: c.last });
        }
        let w = self.step(to)?;
        if self.walks.is_empty() {
            self.walks = vec![None; WALK_CACHE];
        }
        if let Some(entry) = self.walks.get_mut(slot) {
            let nacc_addr = if w.found { 0 } else { self.nacc_addr };
            *entry = Some(CachedWalk { start, isa, space, end: w.end, count: w.count, found: w.found, nacc_addr, last: w.last });
        }
        Ok(w)
    }

    /// Walk from the current address instruction by instruction (passing
    /// ordinary code with the image's stop map).
    fn step(&mut self, to: WalkTo) -> Result<Walk, DecodeError> {
        let space = self.mem_space();
        let isa = self.pe.isa;
        let mut addr = self.pe.addr;
        let mut w = Walk {
            start: addr,
            end: addr,
            count: 0,
            found: false,
            last: InstrInfo {
                itype: InstrType::Other,
                subtype: InstrSubtype::None,
                next_isa: isa,
                ..Default::default()
            },
        };
        let until = match to {
            WalkTo::AddressIncl(a) => Some(a),
            WalkTo::Waypoint => None,
        };
        let mut next_pass = PLAIN_STEPS;
        loop {
            if w.count >= next_pass {
                // Past a few instructions, ordinary code is passed with the
                // image's stop map (the count stays below where it would wrap).
                let max = (u32::MAX - w.count) as u64;
                if let Some((n, next)) = self.image.pass_plain(isa, &self.idec, self.it, addr, space, max, until) {
                    w.count += n as u32;
                    addr = next;
                }
                next_pass = w.count + PLAIN_STEPS;
            }
            let here = addr;
            let mut bytes = [0u8; 4];
            let n = self.image.read(addr, space, &mut bytes);
            let first = u16::from_le_bytes([bytes[0], bytes[1]]);
            let readable = n == 4 || (isa == Isa::T32 && n >= 2 && !instr::t32_is_32bit(first));
            if !readable {
                self.nacc_pending = true;
                self.nacc_addr = addr;
                return Ok(w);
            }
            let info = match isa {
                Isa::T32 => {
                    let second = u16::from_le_bytes([bytes[2], bytes[3]]);
                    instr::decode(isa, first as u32, second, addr, &self.idec, &mut self.it)?
                }
                _ => instr::decode(isa, u32::from_le_bytes(bytes), 0, addr, &self.idec, &mut self.it)?,
            };
            addr = addr.wrapping_add(info.size as u64);
            w.end = addr;
            w.count += 1;
            w.last = info;
            w.found = match to {
                WalkTo::Waypoint => info.itype != InstrType::Other,
                WalkTo::AddressIncl(a) => here == a,
            };
            if w.found {
                return Ok(w);
            }
        }
    }
}

#[cfg(test)]
mod walk_tests {
    use super::*;
    use crate::image::walkcase::walk_case;

    fn decoder(image: &MemoryImage) -> PtmDecoder {
        let cfg = PtmConfig::from_registers(
            |r| match r {
                "ETMCR" => Some(0),
                "ETMCCER" => Some(0x34c0_1ac2),
                "ETMIDR" => Some(0x411c_f312),
                "ETMTRACEIDR" => Some(0x10),
                _ => None,
            },
            Some("Cortex-A15"),
        )
        .unwrap();
        PtmDecoder::new(&cfg, Arc::new(image.clone()))
    }

    /// One walk of `d` from `start`, and what it left: as text.
    fn walk_with(d: &mut PtmDecoder, isa: Isa, start: u64, to: Option<u64>) -> String {
        d.pe = PeState { addr: start, isa, valid: true };
        d.nacc_pending = false;
        d.nacc_addr = 0;
        let w = d.walk(to.map_or(WalkTo::Waypoint, WalkTo::AddressIncl)).map(|w| (w.start, w.end, w.count, w.found, w.last));
        format!("{w:?} nacc {} {:#x} it {:?}", d.nacc_pending, d.nacc_addr, d.it)
    }

    fn walk_from(image: &MemoryImage, isa: Isa, start: u64, to: Option<u64>) -> String {
        walk_with(&mut decoder(image), isa, start, to)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(32))]

        /// Issue 16: PTM walks over random code (A32, T32, and A64 words
        /// walked as A32) are the same with and without the stop maps, to the
        /// next waypoint and to and including an address.
        #[test]
        fn ptm_walks_are_the_same_with_and_without_the_stop_maps(case in walk_case()) {
            let (mapped, stepping) = case.images();
            let isa = if case.isa == Isa::T32 { Isa::T32 } else { Isa::A32 };
            for i in 0..case.starts.len() {
                let start = case.start(i);
                for to in [None, case.to()] {
                    proptest::prop_assert_eq!(walk_from(&mapped, isa, start, to), walk_from(&stepping, isa, start, to), "{:?} from {:#x} to {:?}", isa, start, to);
                }
            }
        }

        /// Issue 16: a walk to the next waypoint made again, from the
        /// decoder's cache of walks, gives what it gave when it was made
        /// (its range, last instruction and inaccessible address alike), in
        /// any order of starts.
        #[test]
        fn ptm_walks_from_the_cache_are_the_walks_made(case in walk_case()) {
            let (mapped, _) = case.images();
            let isa = if case.isa == Isa::T32 { Isa::T32 } else { Isa::A32 };
            let mut d = decoder(&mapped);
            let made: Vec<String> = (0..case.starts.len()).map(|i| walk_with(&mut d, isa, case.start(i), None)).collect();
            // (A start may take another's entry: only the last one walked
            // is sure to be kept.)
            let last = case.starts.len() - 1;
            if made[last].starts_with("Ok") {
                let kept = d.walks.iter().flatten().any(|c| c.start == case.start(last) && c.isa == isa);
                proptest::prop_assert!(kept, "walk from {:#x} not kept", case.start(last));
            }
            for (i, first) in made.iter().enumerate().rev() {
                let start = case.start(i);
                proptest::prop_assert_eq!(&walk_with(&mut d, isa, start, None), first, "{:?} from {:#x}", isa, start);
            }
        }
    }
}
