//! ETMv3 packet types and the packet record the parser lends to its sink.
//!
//! As in OpenCSD, a packet is the parser's running view of the stream: the
//! fields the current packet set (atoms, exception, data) next to the state that
//! packets carry forward (address, instruction set, security state, context ID,
//! VMID, timestamp). Only the per-packet fields are cleared between packets.

use crate::element::Isa;

/// Packet types, in OpenCSD's `ocsd_etmv3_pkt_type` order.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum PacketType {
    /// No packet yet (the state before the first one).
    #[default]
    NoError,
    /// Bytes before the first A-sync.
    NotSync,
    IncompleteEot,
    BranchAddress,
    ASync,
    CycleCount,
    ISync,
    ISyncCycle,
    Trigger,
    PHeader,
    StoreFail,
    OooData,
    OooAddrPlaceholder,
    NormalData,
    DataSuppressed,
    ValueNotTraced,
    Ignore,
    ContextId,
    Vmid,
    ExceptionEntry,
    ExceptionExit,
    Timestamp,
    /// Internal: a 0x01 header in unformatted (bypassed formatter) trace.
    BranchOrBypassEot,
    BadSequence,
    BadTraceMode,
    Reserved,
}

impl PacketType {
    /// Name and description as trc_pkt_lister prints them (unknown and
    /// internal types print as a reserved header, as in OpenCSD).
    pub fn name_and_description(self) -> (&'static str, &'static str) {
        use PacketType::*;
        match self {
            NotSync => ("NOTSYNC", "Trace Stream not synchronised"),
            IncompleteEot => ("INCOMPLETE_EOT.", "Incomplete packet at end of trace data."),
            BranchAddress => ("BRANCH_ADDRESS", "Branch address."),
            ASync => ("A_SYNC", "Alignment Synchronisation."),
            CycleCount => ("CYCLE_COUNT", "Cycle Count."),
            ISync => ("I_SYNC", "Instruction Packet synchronisation."),
            ISyncCycle => ("I_SYNC_CYCLE", "Instruction Packet synchronisation with cycle count."),
            Trigger => ("TRIGGER", "Trace Trigger Event."),
            PHeader => ("P_HDR", "Atom P-header."),
            StoreFail => ("STORE_FAIL", "Data Store Failed."),
            OooData => ("OOO_DATA", "Out of Order data value packet."),
            OooAddrPlaceholder => ("OOO_ADDR_PLC", "Out of Order data address placeholder."),
            NormalData => ("NORM_DATA", "Data trace packet."),
            DataSuppressed => ("DATA_SUPPRESSED", "Data trace suppressed."),
            ValueNotTraced => ("VAL_NOT_TRACED", "Data trace value not traced."),
            Ignore => ("IGNORE", "Packet ignored."),
            ContextId => ("CONTEXT_ID", "Context ID change."),
            Vmid => ("VMID", "VMID change."),
            ExceptionEntry => ("EXCEPTION_ENTRY", "Exception entry data marker."),
            ExceptionExit => ("EXCEPTION_EXIT", "Exception return."),
            Timestamp => ("TIMESTAMP", "Timestamp Value."),
            BadSequence => ("BAD_SEQUENCE", "Invalid sequence for packet type."),
            BadTraceMode => ("BAD_TRACEMODE", "Invalid packet type for this trace mode."),
            NoError | BranchOrBypassEot | Reserved => ("I_RESERVED", "Reserved Packet Header"),
        }
    }

    pub fn name(self) -> &'static str {
        self.name_and_description().0
    }

    pub fn description(self) -> &'static str {
        self.name_and_description().1
    }

    /// The error types (OpenCSD's `isBadPacket`).
    pub fn is_error(self) -> bool {
        matches!(self, PacketType::BadSequence | PacketType::BadTraceMode | PacketType::Reserved)
    }

    /// Data trace packets.
    pub fn is_data(self) -> bool {
        use PacketType::*;
        matches!(self, StoreFail | OooData | OooAddrPlaceholder | NormalData | DataSuppressed | ValueNotTraced)
    }
}

/// A partially known 32-bit address.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Address {
    pub value: u64,
    /// Low-order bits known so far.
    pub valid_bits: u8,
    /// Low-order bits the current packet carried (0 when it carried none).
    pub pkt_bits: u8,
}

impl Address {
    /// Replace the low `bits` bits with those of `value`.
    pub(crate) fn update(&mut self, value: u64, bits: u8) {
        let mask = if bits >= 64 { u64::MAX } else { (1u64 << bits) - 1 };
        self.pkt_bits = bits;
        self.value = (self.value & !mask) | (value & mask);
        self.valid_bits = self.valid_bits.max(bits);
    }
}

/// Security and context state (OpenCSD `etmv3_context_t`).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Context {
    /// The ThumbEE alternative-ISA flag from the last exception information.
    pub alt_isa: bool,
    pub ns: bool,
    pub hyp: bool,
    /// This packet set the NS / Hyp / alternative-ISA flags.
    pub updated: bool,
    /// This packet carried a context ID.
    pub updated_cid: bool,
    /// This packet carried a VMID.
    pub updated_vmid: bool,
    pub context_id: u32,
    pub vmid: u8,
}

/// I-sync packet details.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ISyncInfo {
    /// 0 periodic, 1 trace enable, 2 restart after overflow, 3 exit from debug.
    pub reason: u8,
    pub has_cycle_count: bool,
    /// The address is that of a load/store in progress (never set by OpenCSD's
    /// parser, kept for the listing).
    pub has_lsip_address: bool,
    /// Data-only trace: no instruction address.
    pub no_address: bool,
}

/// Exception information of a branch address packet.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExceptionInfo {
    pub present: bool,
    /// The exception cancels the last traced instruction.
    pub cancel: bool,
    /// Armv7-M numbering.
    pub m_type: bool,
    pub resume: u8,
    pub irq_n: u16,
    pub number: u16,
}

/// Data trace fields (OpenCSD `etmv3_data_t`).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DataInfo {
    pub value: u32,
    /// The data address as OpenCSD's listing shows it. OpenCSD's parser writes
    /// data addresses into the instruction address instead, so this stays
    /// unknown; it is kept so listings match.
    pub addr: Address,
    pub ooo_tag: u8,
    pub big_endian: bool,
    pub update_be: bool,
    pub update_addr: bool,
    pub update_value: bool,
}

/// Why the parser reported a packet as malformed (OpenCSD logs these and
/// sends the packet on).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// OpenCSD error code (`ocsd_err_t`).
    pub code: u16,
    pub message: &'static str,
}

/// Every message the parser reports; saved states refer to them by position.
pub(crate) const PARSE_MESSAGES: [&str; 19] = [
    "Invalid P-Header.",
    "Bypassed ETM stream not supported in this version of the decoder.",
    "Invalid data trace header (out of order data) - not tracing data values.",
    "Invalid data trace header (store failed) - not tracing data values.",
    "Invalid data trace header (out of order placeholder) - not tracing data.",
    "Packet header reserved encoding",
    "Invalid data trace header (normal data) - not tracing data.",
    "Invalid data trace header (data suppressed) - not tracing data.",
    "Invalid data trace header (value not traced) - not tracing data.",
    "Packet header reserved encoding.",
    "A-Sync ?: Extra 0x00 in sequence",
    "A-Sync ? : Unexpected byte in sequence",
    "Malformed out of order data packet.",
    "Malformed context id packet.",
    "Interpreter failed - cannot process payload for unexpected or unsupported packet.",
    "Malformed Packet - oversized packet.",
    "Malformed Packet - Unknown ISA.",
    "Too few bytes to extract context ID.",
    "Insufficient bytes to extract timestamp.",
];

/// How a [`ParseError`] is saved: the message by its place in the table.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy)]
struct SavedParseError {
    code: u16,
    message: u8,
}

impl From<ParseError> for SavedParseError {
    fn from(e: ParseError) -> Self {
        let i = PARSE_MESSAGES.iter().position(|m| *m == e.message).unwrap_or(u8::MAX as usize);
        SavedParseError { code: e.code, message: i as u8 }
    }
}

impl From<SavedParseError> for ParseError {
    fn from(e: SavedParseError) -> Self {
        ParseError { code: e.code, message: PARSE_MESSAGES.get(e.message as usize).copied().unwrap_or("") }
    }
}

impl serde::Serialize for ParseError {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        SavedParseError::from(*self).serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for ParseError {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        SavedParseError::deserialize(d).map(ParseError::from)
    }
}

pub(crate) const ERR_BAD_PACKET_SEQ: u16 = 0x13;
pub(crate) const ERR_INVALID_PCKT_HDR: u16 = 0x14;
pub(crate) const ERR_PKT_INTERP_FAIL: u16 = 0x15;
pub(crate) const ERR_HW_CFG_UNSUPP: u16 = 0x17;

impl ParseError {
    /// `OCSD_ERR_...` name and description of the code.
    pub fn code_text(&self) -> (&'static str, &'static str) {
        match self.code {
            ERR_BAD_PACKET_SEQ => ("OCSD_ERR_BAD_PACKET_SEQ", "Bad packet sequence"),
            ERR_INVALID_PCKT_HDR => ("OCSD_ERR_INVALID_PCKT_HDR", "Invalid packet header"),
            ERR_PKT_INTERP_FAIL => {
                ("OCSD_ERR_PKT_INTERP_FAIL", "Interpreter failed - cannot recover - bad data or sequence")
            }
            _ => ("OCSD_ERR_HW_CFG_UNSUPP", "Programmed trace configuration not supported by decodUer."),
        }
    }
}

/// The parser's view after one packet.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Etm3Packet {
    /// Offset in the captured buffer of the packet's first byte.
    pub index: u64,
    pub ptype: PacketType,
    /// For error packets, the type being parsed (as OpenCSD records it).
    pub err_type: PacketType,
    /// The parser logged this error for the packet.
    pub error: Option<ParseError>,

    // Carried from packet to packet.
    pub isa: Isa,
    /// Instruction set before this packet (differs when the packet changed it).
    pub prev_isa: Isa,
    pub context: Context,
    pub addr: Address,
    pub isync: ISyncInfo,
    pub exception: ExceptionInfo,
    /// Atom pattern, bit 0 = oldest, 1 = E.
    pub atom_bits: u32,
    pub atom_count: u8,
    /// P-header format (1-4) of the last P-header.
    pub phdr_format: u8,
    pub cycle_count: u32,
    pub timestamp: u64,
    /// Timestamp bits the last timestamp packet updated.
    pub ts_update_bits: u8,
    pub data: DataInfo,
}

impl Etm3Packet {
    /// The state after a parser reset.
    pub(crate) fn reset_state() -> Etm3Packet {
        Etm3Packet {
            index: 0,
            ptype: PacketType::NoError,
            err_type: PacketType::NoError,
            error: None,
            isa: Isa::Unknown,
            prev_isa: Isa::Unknown,
            context: Context::default(),
            addr: Address::default(),
            isync: ISyncInfo::default(),
            exception: ExceptionInfo::default(),
            atom_bits: 0,
            atom_count: 0,
            phdr_format: 0,
            cycle_count: 0,
            timestamp: 0,
            ts_update_bits: 0,
            data: DataInfo::default(),
        }
    }

    /// Clear the per-packet fields before a new packet.
    pub(crate) fn clear(&mut self) {
        self.addr.pkt_bits = 0;
        self.prev_isa = self.isa;
        self.exception.present = false;
        self.atom_count = 0;
        self.cycle_count = 0;
        self.context.updated = false;
        self.context.updated_cid = false;
        self.context.updated_vmid = false;
        self.data.ooo_tag = 0;
        self.data.value = 0;
        self.data.update_addr = false;
        self.data.update_be = false;
        self.data.update_value = false;
        self.ts_update_bits = 0;
        self.isync.has_cycle_count = false;
        self.isync.has_lsip_address = false;
        self.isync.no_address = false;
        self.error = None;
    }

    pub(crate) fn set_err_type(&mut self, t: PacketType) {
        self.err_type = self.ptype;
        self.ptype = t;
    }

    pub(crate) fn update_isa(&mut self, isa: Isa) {
        self.prev_isa = self.isa;
        self.isa = isa;
    }

    pub(crate) fn update_ns(&mut self, ns: bool) {
        self.context.ns = ns;
        self.context.updated = true;
    }

    pub(crate) fn update_alt_isa(&mut self, alt: bool) {
        self.context.alt_isa = alt;
        self.context.updated = true;
    }

    pub(crate) fn update_hyp(&mut self, hyp: bool) {
        self.context.hyp = hyp;
        self.context.updated = true;
    }

    pub(crate) fn update_context_id(&mut self, id: u32) {
        self.context.context_id = id;
        self.context.updated_cid = true;
    }

    pub(crate) fn update_vmid(&mut self, vmid: u8) {
        self.context.vmid = vmid;
        self.context.updated_vmid = true;
    }

    pub(crate) fn set_data_value(&mut self, v: u32) {
        self.data.value = v;
        self.data.update_value = true;
    }

    /// OpenCSD records data addresses in the instruction address field.
    pub(crate) fn update_data_address(&mut self, value: u32, bits: u8) {
        let mask = if bits >= 32 { u32::MAX } else { (1u32 << bits).wrapping_sub(1) };
        self.addr.pkt_bits = bits;
        self.addr.value = (self.addr.value & !(mask as u64)) | (value & mask) as u64;
        self.addr.valid_bits = self.addr.valid_bits.max(bits);
        self.data.update_addr = true;
    }

    pub(crate) fn update_timestamp(&mut self, value: u64, bits: u8) {
        let mask = if bits >= 64 { u64::MAX } else { (1u64 << bits) - 1 };
        self.timestamp = (self.timestamp & !mask) | (value & mask);
        self.ts_update_bits = bits;
    }

    pub(crate) fn set_exception(&mut self, number: u16, cancel: bool, m_type: bool, irq_n: u16, resume: u8) {
        self.exception = ExceptionInfo { present: true, cancel, m_type, resume, irq_n, number };
    }

    /// Interpret a P-header (IHI 0014 "P-headers"); false for an encoding that
    /// is invalid in this mode.
    pub(crate) fn atoms_from_phdr(&mut self, h: u8, cycle_accurate: bool) -> bool {
        if !cycle_accurate {
            match h & 0x3 {
                0x0 => {
                    // Format 1: E atoms then an optional N.
                    let e = (h >> 2) & 0xf;
                    let n = (h >> 6) & 1;
                    self.atom_count = e + n;
                    self.atom_bits = (1u32 << e) - 1;
                    self.phdr_format = 1;
                }
                0x2 => {
                    // Format 2: two atoms, bit 3 the oldest (0 = E).
                    self.atom_count = 2;
                    self.phdr_format = 2;
                    self.atom_bits = (h & 0x8 == 0) as u32 | (((h & 0x4 == 0) as u32) << 1);
                }
                _ => return false,
            }
            return true;
        }
        match h & 0xa3 {
            0x80 => {
                // Format 1: E atoms and an optional N, one W per atom.
                self.phdr_format = 1;
                let e = (h >> 2) & 0x7;
                let n = (h >> 6) & 1;
                self.atom_count = e + n;
                if self.atom_count == 0 {
                    return false;
                }
                self.atom_bits = (1u32 << e) - 1;
                self.cycle_count = (e + n) as u32;
            }
            0x82 => {
                if h & 0x10 != 0 {
                    // Format 4: one atom, no cycle.
                    self.phdr_format = 4;
                    self.atom_count = 1;
                    self.cycle_count = 0;
                    self.atom_bits = (h & 0x4 == 0) as u32;
                } else {
                    // Format 2: W then two atoms.
                    self.phdr_format = 2;
                    self.atom_count = 2;
                    self.cycle_count = 1;
                    self.atom_bits = (h & 0x8 == 0) as u32 | (((h & 0x4 == 0) as u32) << 1);
                }
            }
            0xa0 => {
                // Format 3: 1-8 W then an optional E.
                self.phdr_format = 3;
                self.cycle_count = ((h >> 2) & 7) as u32 + 1;
                let e = (h >> 6) & 1;
                self.atom_count = e;
                self.atom_bits = e as u32;
            }
            _ => return false,
        }
        true
    }

    /// Atoms as E/N, oldest first.
    pub fn atoms(&self) -> impl Iterator<Item = bool> + '_ {
        (0..self.atom_count).map(move |i| (self.atom_bits >> i) & 1 == 1)
    }

    /// Any context information changed in this packet.
    pub fn context_updated(&self) -> bool {
        self.context.updated || self.context.updated_cid || self.context.updated_vmid
    }

    /// The packet carries an exception that cancels the last instruction.
    pub fn exception_cancels(&self) -> bool {
        self.exception.present && self.exception.cancel
    }

    pub fn is_error(&self) -> bool {
        self.ptype.is_error()
    }
}
