//! ETMv4/ETE packet types and the packet record the parser hands out.
//!
//! A [`Packet`] is the parser's view after one packet: the fields the packet set
//! plus the state that packets carry forward (the address and its three-entry
//! history, the context, the timestamp). It lives inside the parser and is lent to
//! the sink, so parsing allocates nothing per packet.

/// Packet types. Discriminants are the header byte of the first encoding of each
/// type (IHI 0064 table 6-1 and Arm ARM D4.4), so they read like the spec; the
/// values above 0xff are extension, error and ETE-derived types.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum PacketType {
    Extension = 0x00,
    TraceInfo = 0x01,
    Timestamp = 0x02,
    TraceOn = 0x04,
    FuncRet = 0x05,
    Exception = 0x06,
    ExceptionReturn = 0x07,
    Ite = 0x09,
    TransStart = 0x0a,
    TransCommit = 0x0b,
    CycleCountF2 = 0x0c,
    CycleCountF1 = 0x0e,
    CycleCountF3 = 0x10,
    NumDataSyncMarker = 0x20,
    UnnumDataSyncMarker = 0x28,
    Commit = 0x2d,
    CancelF1 = 0x2e,
    CancelF1Mispredict = 0x2f,
    Mispredict = 0x30,
    CancelF2 = 0x34,
    CancelF3 = 0x38,
    CondInstrF2 = 0x40,
    CondFlush = 0x43,
    CondResultF4 = 0x44,
    CondResultF2 = 0x48,
    CondResultF3 = 0x50,
    CondResultF1 = 0x68,
    CondInstrF1 = 0x6c,
    CondInstrF3 = 0x6d,
    Ignore = 0x70,
    Event = 0x71,
    Context = 0x80,
    AddrCtxtL32Is0 = 0x82,
    AddrCtxtL32Is1 = 0x83,
    AddrCtxtL64Is0 = 0x85,
    AddrCtxtL64Is1 = 0x86,
    TimestampMarker = 0x88,
    AddrMatch = 0x90,
    AddrShortIs0 = 0x95,
    AddrShortIs1 = 0x96,
    AddrL32Is0 = 0x9a,
    AddrL32Is1 = 0x9b,
    AddrL64Is0 = 0x9d,
    AddrL64Is1 = 0x9e,
    Q = 0xa0,
    SrcAddrMatch = 0xb0,
    SrcAddrShortIs0 = 0xb4,
    SrcAddrShortIs1 = 0xb5,
    SrcAddrL32Is0 = 0xb6,
    SrcAddrL32Is1 = 0xb7,
    SrcAddrL64Is0 = 0xb8,
    SrcAddrL64Is1 = 0xb9,
    AtomF6 = 0xc0,
    AtomF5 = 0xd5,
    AtomF2 = 0xd8,
    AtomF4 = 0xdc,
    AtomF1 = 0xf6,
    AtomF3 = 0xf8,
    // Extension packets: 0x00 followed by this byte.
    Async = 0x100,
    Discard = 0x103,
    Overflow = 0x105,
    // Stream states and errors.
    NotSync = 0x200,
    IncompleteEot = 0x201,
    NoErrType = 0x202,
    BadSequence = 0x300,
    BadTraceMode = 0x301,
    Reserved = 0x302,
    ReservedCfg = 0x303,
    // ETE exception packets that are their own element.
    PeReset = 0x400,
    TransFail = 0x401,
}

impl PacketType {
    /// The name trc_pkt_lister prints (including OpenCSD's `I_SCR_ADDR_L_32IS0`
    /// misspelling, kept so existing scripts keep matching).
    pub fn name(self) -> &'static str {
        use PacketType::*;
        match self {
            Extension => "I_EXTENSION",
            TraceInfo => "I_TRACE_INFO",
            Timestamp => "I_TIMESTAMP",
            TraceOn => "I_TRACE_ON",
            FuncRet => "I_FUNC_RET",
            Exception => "I_EXCEPT",
            ExceptionReturn => "I_EXCEPT_RTN",
            Ite => "I_ITE",
            TransStart => "I_TRANS_ST",
            TransCommit => "I_TRANS_COMMIT",
            CycleCountF2 => "I_CCNT_F2",
            CycleCountF1 => "I_CCNT_F1",
            CycleCountF3 => "I_CCNT_F3",
            NumDataSyncMarker => "I_NUM_DS_MKR",
            UnnumDataSyncMarker => "I_UNNUM_DS_MKR",
            Commit => "I_COMMIT",
            CancelF1 => "I_CANCEL_F1",
            CancelF1Mispredict => "I_CANCEL_F1_MISPRED",
            Mispredict => "I_MISPREDICT",
            CancelF2 => "I_CANCEL_F2",
            CancelF3 => "I_CANCEL_F3",
            CondInstrF2 => "I_COND_I_F2",
            CondFlush => "I_COND_FLUSH",
            CondResultF4 => "I_COND_RES_F4",
            CondResultF2 => "I_COND_RES_F2",
            CondResultF3 => "I_COND_RES_F3",
            CondResultF1 => "I_COND_RES_F1",
            CondInstrF1 => "I_COND_I_F1",
            CondInstrF3 => "I_COND_I_F3",
            Ignore => "I_IGNORE",
            Event => "I_EVENT",
            Context => "I_CTXT",
            AddrCtxtL32Is0 => "I_ADDR_CTXT_L_32IS0",
            AddrCtxtL32Is1 => "I_ADDR_CTXT_L_32IS1",
            AddrCtxtL64Is0 => "I_ADDR_CTXT_L_64IS0",
            AddrCtxtL64Is1 => "I_ADDR_CTXT_L_64IS1",
            TimestampMarker => "I_TS_MARKER",
            AddrMatch => "I_ADDR_MATCH",
            AddrShortIs0 => "I_ADDR_S_IS0",
            AddrShortIs1 => "I_ADDR_S_IS1",
            AddrL32Is0 => "I_ADDR_L_32IS0",
            AddrL32Is1 => "I_ADDR_L_32IS1",
            AddrL64Is0 => "I_ADDR_L_64IS0",
            AddrL64Is1 => "I_ADDR_L_64IS1",
            Q => "I_Q",
            SrcAddrMatch => "I_SRC_ADDR_MATCH",
            SrcAddrShortIs0 => "I_SRC_ADDR_S_IS0",
            SrcAddrShortIs1 => "I_SRC_ADDR_S_IS1",
            SrcAddrL32Is0 => "I_SCR_ADDR_L_32IS0",
            SrcAddrL32Is1 => "I_SRC_ADDR_L_32IS1",
            SrcAddrL64Is0 => "I_SRC_ADDR_L_64IS0",
            SrcAddrL64Is1 => "I_SRC_ADDR_L_64IS1",
            AtomF6 => "I_ATOM_F6",
            AtomF5 => "I_ATOM_F5",
            AtomF2 => "I_ATOM_F2",
            AtomF4 => "I_ATOM_F4",
            AtomF1 => "I_ATOM_F1",
            AtomF3 => "I_ATOM_F3",
            Async => "I_ASYNC",
            Discard => "I_DISCARD",
            Overflow => "I_OVERFLOW",
            NotSync => "I_NOT_SYNC",
            IncompleteEot => "I_INCOMPLETE_EOT",
            NoErrType => "I_NO_ERR_TYPE",
            BadSequence => "I_BAD_SEQUENCE",
            BadTraceMode => "I_BAD_TRACEMODE",
            Reserved => "I_RESERVED",
            ReservedCfg => "I_RESERVED_CFG",
            PeReset => "I_PE_RESET",
            TransFail => "I_TRANS_FAIL",
        }
    }

    /// The one-line description trc_pkt_lister prints after the name.
    pub fn description(self) -> &'static str {
        use PacketType::*;
        match self {
            Extension => "Extension packet header.",
            TraceInfo => "Trace Info.",
            Timestamp => "Timestamp.",
            TraceOn => "Trace On.",
            FuncRet => "V8M - function return.",
            Exception => "Exception.",
            ExceptionReturn => "Exception Return.",
            Ite => "Instrumentation",
            TransStart => "Transaction Start.",
            TransCommit => "Transaction Commit.",
            CycleCountF2 => "Cycle Count format 2.",
            CycleCountF1 => "Cycle Count format 1.",
            CycleCountF3 => "Cycle Count format 3.",
            NumDataSyncMarker => "Data Synchronisation Marker - Numbered.",
            UnnumDataSyncMarker => "Data Synchronisation Marker - Unnumbered.",
            Commit => "Commit",
            CancelF1 => "Cancel Format 1.",
            CancelF1Mispredict => "Cancel Format 1 + Mispredict.",
            Mispredict => "Mispredict.",
            CancelF2 => "Cancel Format 2.",
            CancelF3 => "Cancel Format 3.",
            CondInstrF2 => "Conditional Instruction, format 2.",
            CondFlush => "Conditional Flush.",
            CondResultF4 => "Conditional Result, format 4.",
            CondResultF2 => "Conditional Result, format 2.",
            CondResultF3 => "Conditional Result, format 3.",
            CondResultF1 => "Conditional Result, format 1.",
            CondInstrF1 => "Conditional Instruction, format 1.",
            CondInstrF3 => "Conditional Instruction, format 3.",
            Ignore => "Ignore.",
            Event => "Trace Event.",
            Context => "Context Packet.",
            AddrCtxtL32Is0 => "Address & Context, Long, 32 bit, IS0.",
            AddrCtxtL32Is1 => "Address & Context, Long, 32 bit, IS1.",
            AddrCtxtL64Is0 => "Address & Context, Long, 64 bit, IS0.",
            AddrCtxtL64Is1 => "Address & Context, Long, 64 bit, IS1.",
            TimestampMarker => "Timestamp Marker",
            AddrMatch => "Exact Address Match.",
            AddrShortIs0 => "Address, Short, IS0.",
            AddrShortIs1 => "Address, Short, IS1.",
            AddrL32Is0 => "Address, Long, 32 bit, IS0.",
            AddrL32Is1 => "Address, Long, 32 bit, IS1.",
            AddrL64Is0 => "Address, Long, 64 bit, IS0.",
            AddrL64Is1 => "Address, Long, 64 bit, IS1.",
            Q => "Q Packet.",
            SrcAddrMatch => "Exact Source Address Match.",
            SrcAddrShortIs0 => "Source Address, Short, IS0.",
            SrcAddrShortIs1 => "Source Address, Short, IS1.",
            SrcAddrL32Is0 => "Source Address, Long, 32 bit, IS0.",
            SrcAddrL32Is1 => "Source Address, Long, 32 bit, IS1.",
            SrcAddrL64Is0 => "Source Address, Long, 64 bit, IS0.",
            SrcAddrL64Is1 => "Source Address, Long, 64 bit, IS1.",
            AtomF6 => "Atom format 6.",
            AtomF5 => "Atom format 5.",
            AtomF2 => "Atom format 2.",
            AtomF4 => "Atom format 4.",
            AtomF1 => "Atom format 1.",
            AtomF3 => "Atom format 3.",
            Async => "Alignment Synchronisation.",
            Discard => "Discard.",
            Overflow => "Overflow.",
            NotSync => "I Stream not synchronised",
            IncompleteEot => "Incomplete packet at end of trace.",
            NoErrType => "No Error Type.",
            BadSequence => "Invalid Sequence in packet.",
            BadTraceMode => "Invalid Packet for trace mode.",
            Reserved => "Reserved Packet Header",
            ReservedCfg => "Reserved header for current configuration.",
            PeReset => "PE Reset.",
            TransFail => "Transaction Fail.",
        }
    }

    /// True for the types that report a malformed or unexpected stream.
    pub fn is_error(self) -> bool {
        matches!(
            self,
            PacketType::BadSequence
                | PacketType::BadTraceMode
                | PacketType::Reserved
                | PacketType::ReservedCfg
                | PacketType::IncompleteEot
        )
    }

    /// True for every address-carrying packet that updates the target address.
    pub fn is_address(self) -> bool {
        use PacketType::*;
        matches!(
            self,
            AddrCtxtL32Is0
                | AddrCtxtL32Is1
                | AddrCtxtL64Is0
                | AddrCtxtL64Is1
                | AddrMatch
                | AddrShortIs0
                | AddrShortIs1
                | AddrL32Is0
                | AddrL32Is1
                | AddrL64Is0
                | AddrL64Is1
        )
    }

    /// True for the ETE source address packets.
    pub fn is_source_address(self) -> bool {
        use PacketType::*;
        matches!(
            self,
            SrcAddrMatch | SrcAddrShortIs0 | SrcAddrShortIs1 | SrcAddrL32Is0 | SrcAddrL32Is1 | SrcAddrL64Is0 | SrcAddrL64Is1
        )
    }

    /// True for the six atom formats.
    pub fn is_atom(self) -> bool {
        use PacketType::*;
        matches!(self, AtomF1 | AtomF2 | AtomF3 | AtomF4 | AtomF5 | AtomF6)
    }
}

/// An address value with how much of it is known.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Address {
    pub value: u64,
    /// Number of low-order bits known to be valid (64 once fully known).
    pub valid_bits: u8,
    /// Number of low-order bits the last packet carried.
    pub pkt_bits: u8,
    /// The address is a 64-bit address (else 32-bit).
    pub is_64bit: bool,
    /// Instruction set: 0 = IS0 (A64/A32), 1 = IS1 (T32).
    pub isa: u8,
}

/// Context carried by Context and Address-with-Context packets.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PeContext {
    pub el: u8,
    /// SF: the PE is in AArch64 state.
    pub sf: bool,
    /// NS bit (with NSE, selects Secure / Non-secure / Root / Realm).
    pub ns: bool,
    /// NSE bit (FEAT_RME).
    pub nse: bool,
    pub context_id: u32,
    pub vmid: u32,
    /// This packet carried context information (else "same as before").
    pub updated: bool,
    /// This packet carried a context ID.
    pub updated_cid: bool,
    /// This packet carried a VMID.
    pub updated_vmid: bool,
}

/// Trace Info packet contents (IHI 0064 6.4.2, Arm ARM D4.4.3).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TraceInfo {
    /// The INFO section value.
    pub info: u32,
    pub p0_key: u32,
    pub spec_depth: u32,
    pub cc_threshold: u32,
    /// A speculation-depth section was present.
    pub spec_present: bool,
    /// A cycle-count threshold section was present.
    pub cyct_present: bool,
    /// The first Trace Info since the parser started or was reset: the point the
    /// decoder synchronises on.
    pub initial: bool,
}

impl TraceInfo {
    pub fn cc_enabled(&self) -> bool {
        self.info & 1 != 0
    }
    pub fn cond_enabled(&self) -> u8 {
        ((self.info >> 1) & 0x7) as u8
    }
    pub fn p0_load(&self) -> bool {
        self.info & (1 << 4) != 0
    }
    pub fn p0_store(&self) -> bool {
        self.info & (1 << 5) != 0
    }
    /// ETE: the PE was in a transactional state.
    pub fn in_transaction(&self) -> bool {
        self.info & (1 << 6) != 0
    }
}

/// Exception packet contents.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExceptionInfo {
    pub number: u16,
    /// 0: no address follows ... 1: address follows, 2: address follows and equals
    /// the previous target (IHI 0064 6.4.6 "E1:E0").
    pub addr_interp: u8,
    pub m_fault_pending: bool,
    /// M-profile numbering.
    pub m_type: bool,
}

/// Q packet contents.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QInfo {
    pub count: u32,
    pub count_present: bool,
    pub addr_present: bool,
    pub addr_match: bool,
    pub q_type: u8,
}

/// The parser's view after one packet.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet {
    /// Offset in the captured buffer of the packet's first byte.
    pub index: u64,
    /// Where the packet's bytes start in the buffer. Equal to `index` except
    /// for the surplus zeros before an A-sync, which the unsynchronised parser
    /// reports one byte at a time: OpenCSD 1.8.0 gives every one of them the
    /// index where the run of zeros began (`iPktASync` in
    /// trc_pkt_proc_etmv4i.cpp), so `index` repeats while this advances. Not
    /// part of the saved state: set before every packet is reported.
    #[serde(skip)]
    pub offset: u64,
    /// The packet type; for error packets the error type.
    pub ptype: PacketType,
    /// For error packets, the type that was being parsed.
    pub err_type: PacketType,
    /// For reserved headers, the header byte.
    pub err_header: u8,
    /// First unsynchronised bytes of the stream (only the first NotSync packet).
    pub first_not_sync: bool,

    // State carried from packet to packet.
    pub addr: Address,
    pub context: PeContext,
    pub context_valid: bool,
    pub timestamp: u64,
    /// How many low-order timestamp bits the last Timestamp packet set.
    pub ts_bits_changed: u8,
    pub ts_valid: bool,
    pub trace_info: TraceInfo,

    // Fields valid for the current packet only.
    /// Atom pattern, bit 0 = oldest atom, 1 = E.
    pub atom_bits: u32,
    pub atom_count: u8,
    pub cycle_count: u32,
    pub cc_valid: bool,
    pub commit: u32,
    pub commit_valid: bool,
    pub cancel: u32,
    pub exception: ExceptionInfo,
    pub exact_match_idx: u8,
    pub event: u8,
    pub dsm: u8,
    pub q: QInfo,
    pub ite_el: u8,
    pub ite_payload: u64,
}

impl Packet {
    pub(crate) fn start_state() -> Packet {
        Packet {
            index: 0,
            offset: 0,
            ptype: PacketType::NotSync,
            err_type: PacketType::NoErrType,
            err_header: 0,
            first_not_sync: false,
            addr: Address::default(),
            context: PeContext::default(),
            context_valid: false,
            timestamp: 0,
            ts_bits_changed: 0,
            ts_valid: false,
            trace_info: TraceInfo::default(),
            atom_bits: 0,
            atom_count: 0,
            cycle_count: 0,
            cc_valid: false,
            commit: 0,
            commit_valid: false,
            cancel: 0,
            exception: ExceptionInfo::default(),
            exact_match_idx: 0,
            event: 0,
            dsm: 0,
            q: QInfo::default(),
            ite_el: 0,
            ite_payload: 0,
        }
    }

    /// Atoms as E/N letters, oldest first.
    pub fn atoms(&self) -> impl Iterator<Item = bool> + '_ {
        (0..self.atom_count).map(move |i| (self.atom_bits >> i) & 1 == 1)
    }

    /// Whether this packet's type is an error report.
    pub fn is_error(&self) -> bool {
        self.ptype.is_error()
    }
}
