//! PTM packet types and the packet record the parser hands out.
//!
//! As for ETMv4, a [`PtmPacket`] is the parser's view after one packet: the
//! fields this packet set plus the state packets carry forward (address,
//! instruction set, security state, context ID, VMID, timestamp). It lives in
//! the parser and is lent to the sink.

use crate::element::Isa;

/// PTM packet types (IHI 0035 chapter 4), plus the stream states and error
/// kinds the parser reports.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PtmPacketType {
    /// Bytes before the first A-sync.
    NotSync,
    /// A packet cut short by the end of the trace.
    IncompleteEot,
    /// "No error" placeholder of [`PtmPacket::err_type`].
    NoError,
    BranchAddress,
    ASync,
    ISync,
    Trigger,
    WaypointUpdate,
    Ignore,
    ContextId,
    Vmid,
    Atom,
    Timestamp,
    ExceptionReturn,
    /// A malformed packet (a bad A-sync in a synchronised stream).
    BadSequence,
    /// A reserved header byte.
    Reserved,
}

impl PtmPacketType {
    /// The name trc_pkt_lister prints.
    pub fn name(self) -> &'static str {
        use PtmPacketType::*;
        match self {
            NotSync => "NOTSYNC",
            IncompleteEot => "INCOMPLETE_EOT",
            NoError => "NO_ERROR",
            BranchAddress => "BRANCH_ADDRESS",
            ASync => "ASYNC",
            ISync => "ISYNC",
            Trigger => "TRIGGER",
            WaypointUpdate => "WP_UPDATE",
            Ignore => "IGNORE",
            ContextId => "CTXTID",
            Vmid => "VMID",
            Atom => "ATOM",
            Timestamp => "TIMESTAMP",
            ExceptionReturn => "ERET",
            BadSequence => "BAD_SEQUENCE",
            Reserved => "RESERVED",
        }
    }

    /// The description trc_pkt_lister prints after the name.
    pub fn description(self) -> &'static str {
        use PtmPacketType::*;
        match self {
            NotSync => "PTM Not Synchronised",
            IncompleteEot => "Incomplete packet flushed at end of trace",
            NoError => "Error type not set",
            BranchAddress => "Branch address packet",
            ASync => "Alignment Synchronisation Packet",
            ISync => "Instruction Synchronisation packet",
            Trigger => "Trigger Event packet",
            WaypointUpdate => "Waypoint update packet",
            Ignore => "Ignore packet",
            ContextId => "Context ID packet",
            Vmid => "VM ID packet",
            Atom => "Atom packet",
            Timestamp => "Timestamp packet",
            ExceptionReturn => "Exception return packet",
            BadSequence => "Invalid sequence in packet",
            Reserved => "Reserved Packet Header",
        }
    }

    /// Error packets: the decoder drops synchronisation on them.
    pub fn is_error(self) -> bool {
        matches!(self, PtmPacketType::BadSequence | PtmPacketType::Reserved)
    }
}

/// Why an I-sync packet was emitted (its info byte bits 6:5).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum ISyncReason {
    #[default]
    Periodic,
    TraceEnable,
    RestartOverflow,
    DebugExit,
}

impl ISyncReason {
    pub fn from_bits(v: u8) -> ISyncReason {
        match v & 3 {
            0 => ISyncReason::Periodic,
            1 => ISyncReason::TraceEnable,
            2 => ISyncReason::RestartOverflow,
            _ => ISyncReason::DebugExit,
        }
    }

    /// Text trc_pkt_lister prints in parentheses.
    pub fn text(self) -> &'static str {
        match self {
            ISyncReason::Periodic => "Periodic",
            ISyncReason::TraceEnable => "Trace Enable",
            ISyncReason::RestartOverflow => "Restart Overflow",
            ISyncReason::DebugExit => "Debug Exit",
        }
    }
}

/// Armv7-A/R exception names by the number a branch packet carries.
pub const EXCEPTION_NAMES: [&str; 16] = [
    "No Exception",
    "Debug Halt",
    "SMC",
    "Hyp",
    "Async Data Abort",
    "Jazelle",
    "Reserved",
    "Reserved",
    "PE Reset",
    "Undefined Instr",
    "SVC",
    "Prefetch Abort",
    "Data Fault",
    "Generic",
    "IRQ",
    "FIQ",
];

/// Name of an exception number (`Unknown` above 15).
pub fn exception_name(number: u16) -> &'static str {
    EXCEPTION_NAMES.get(number as usize).copied().unwrap_or("Unknown")
}

/// Messages of BadSequence packets. They are listed in [`PARSE_MESSAGES`]
/// because a saved parser state can only name a `&'static str` by its place
/// in a table.
pub(crate) const MSG_BAD_ASYNC: &str = "Bad Async packet";
pub(crate) const MSG_BRANCH_SEQUENCE: &str = "sequencing error analysing branch packet";
pub(crate) const MSG_SHORT_CONTEXT_ID: &str = "Insufficient packet bytes for Context ID value.";
pub(crate) const MSG_SHORT_CYCLE_COUNT: &str = "Insufficient packet bytes for Cycle Count value.";
pub(crate) const MSG_SHORT_TIMESTAMP: &str = "Insufficient packet bytes for Timestamp value.";

pub(crate) const PARSE_MESSAGES: [&str; 5] =
    [MSG_BAD_ASYNC, MSG_BRANCH_SEQUENCE, MSG_SHORT_CONTEXT_ID, MSG_SHORT_CYCLE_COUNT, MSG_SHORT_TIMESTAMP];

/// Spelt through an alias because serde's derive takes a field written as
/// `Option<&str>` to borrow from the input, which would tie a loaded parser
/// state to its bytes.
type StaticText = &'static str;

/// Serde for [`PtmPacket::error_message`]: the place in [`PARSE_MESSAGES`].
mod saved_message {
    use super::PARSE_MESSAGES;
    use serde::{de, ser, Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(m: &Option<&'static str>, s: S) -> Result<S::Ok, S::Error> {
        // Refusing an unlisted message keeps a state from coming back with a
        // different (or no) message.
        let place = m
            .map(|text| {
                PARSE_MESSAGES
                    .iter()
                    .position(|k| *k == text)
                    .ok_or_else(|| ser::Error::custom("unlisted parse message"))
            })
            .transpose()?;
        place.map(|i| i as u8).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'static str>, D::Error> {
        let place = Option::<u8>::deserialize(d)?;
        place
            .map(|i| PARSE_MESSAGES.get(i as usize).copied().ok_or_else(|| de::Error::custom("unknown parse message")))
            .transpose()
    }
}

/// The parser's view after one packet.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct PtmPacket {
    /// Offset in the captured buffer of the packet's first byte.
    pub index: u64,
    pub ptype: PtmPacketType,
    /// For error and incomplete packets, the type that was being parsed.
    pub err_type: PtmPacketType,
    /// On a NotSync packet: this chunk is the one the decoder sees (the first
    /// chunk of unsynchronised data). Other NotSync chunks are listing only.
    pub first_not_sync: bool,
    /// On a BadSequence packet: the message OpenCSD's packet processor logs
    /// (see [`super::display::write_parser_error`]).
    #[serde(with = "saved_message")]
    pub error_message: Option<StaticText>,

    // State carried from packet to packet.
    /// Instruction set after this packet.
    pub isa: Isa,
    /// Instruction set before this packet (differs when it changed).
    pub prev_isa: Isa,
    /// Address (32 bits used).
    pub addr: u64,
    /// Address bits known since the last full address.
    pub addr_valid_bits: u8,
    /// Address bits this packet set.
    pub addr_pkt_bits: u8,
    pub ns: bool,
    pub alt_isa: bool,
    pub hyp: bool,
    pub context_id: u32,
    pub vmid: u8,
    pub timestamp: u64,

    // Fields of this packet only.
    /// Security/Hyp state set by this packet.
    pub context_updated: bool,
    pub context_id_updated: bool,
    pub vmid_updated: bool,
    /// Timestamp bits this packet set.
    pub ts_update_bits: u8,
    /// Atoms: bit 0 is the first processed, 1 = E.
    pub atom_bits: u8,
    pub atom_count: u8,
    pub isync_reason: ISyncReason,
    pub cycle_count: u32,
    pub cc_valid: bool,
    pub exception_present: bool,
    pub exception_number: u16,
}

impl PtmPacket {
    pub(crate) fn start_state() -> PtmPacket {
        PtmPacket {
            index: 0,
            ptype: PtmPacketType::NotSync,
            err_type: PtmPacketType::NoError,
            first_not_sync: false,
            error_message: None,
            isa: Isa::Unknown,
            prev_isa: Isa::Unknown,
            addr: 0,
            addr_valid_bits: 0,
            addr_pkt_bits: 0,
            ns: false,
            alt_isa: false,
            hyp: false,
            context_id: 0,
            vmid: 0,
            timestamp: 0,
            context_updated: false,
            context_id_updated: false,
            vmid_updated: false,
            ts_update_bits: 0,
            atom_bits: 0,
            atom_count: 0,
            isync_reason: ISyncReason::Periodic,
            cycle_count: 0,
            cc_valid: false,
            exception_present: false,
            exception_number: 0,
        }
    }

    /// Forget the per-packet fields before the next packet (the carried state stays).
    pub(crate) fn clear(&mut self) {
        self.err_type = PtmPacketType::NoError;
        self.error_message = None;
        self.first_not_sync = false;
        self.cycle_count = 0;
        self.cc_valid = false;
        self.context_updated = false;
        self.context_id_updated = false;
        self.vmid_updated = false;
        self.ts_update_bits = 0;
        self.atom_bits = 0;
        self.exception_present = false;
        self.prev_isa = self.isa;
    }

    /// The instruction set changed with this packet.
    pub fn isa_changed(&self) -> bool {
        self.isa != self.prev_isa
    }

    /// Atoms in processing order, true = E.
    pub fn atoms(&self) -> impl Iterator<Item = bool> + '_ {
        (0..self.atom_count).map(move |i| (self.atom_bits >> i) & 1 == 1)
    }

    pub fn is_error(&self) -> bool {
        self.ptype.is_error()
    }

    pub(crate) fn update_address(&mut self, value: u64, bits: u8) {
        let mask = if bits >= 64 { u64::MAX } else { (1u64 << bits) - 1 };
        self.addr_pkt_bits = bits;
        self.addr = (self.addr & !mask) | (value & mask);
        if bits > self.addr_valid_bits {
            self.addr_valid_bits = bits;
        }
    }

    pub(crate) fn update_timestamp(&mut self, value: u64, bits: u8) {
        let mask = if bits >= 64 { u64::MAX } else { (1u64 << bits) - 1 };
        self.timestamp = (self.timestamp & !mask) | (value & mask);
        self.ts_update_bits = bits;
    }

    pub(crate) fn update_isa(&mut self, isa: Isa) {
        self.prev_isa = self.isa;
        self.isa = isa;
    }
}
