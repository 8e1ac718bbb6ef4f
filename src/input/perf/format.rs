//! Numbers of the perf.data format shared by the reader and the writer of
//! synthesized recordings (`synth::perf`).

/// Size of `perf_file_header`.
pub(crate) const HEADER_SIZE: usize = 104;
/// First record type written by user space rather than the kernel; those
/// carry no `sample_id`.
pub(crate) const USER_TYPE_START: u32 = 64;

// Record types (perf_event.h, tools/lib/perf/include/perf/event.h).
pub(crate) const REC_MMAP: u32 = 1;
pub(crate) const REC_COMM: u32 = 3;
pub(crate) const REC_MMAP2: u32 = 10;
pub(crate) const REC_AUX: u32 = 11;
pub(crate) const REC_ITRACE_START: u32 = 12;
pub(crate) const REC_SWITCH: u32 = 14;
pub(crate) const REC_SWITCH_CPU_WIDE: u32 = 15;
pub(crate) const REC_AUX_OUTPUT_HW_ID: u32 = 21;
pub(crate) const REC_AUXTRACE_INFO: u32 = 70;
pub(crate) const REC_AUXTRACE: u32 = 71;
pub(crate) const REC_COMPRESSED: u32 = 81;
pub(crate) const REC_COMPRESSED2: u32 = 83;

// Feature bits (header.h `HEADER_*`).
pub(crate) const FEAT_BUILD_ID: u32 = 2;
pub(crate) const FEAT_HOSTNAME: u32 = 3;
pub(crate) const FEAT_OSRELEASE: u32 = 4;
pub(crate) const FEAT_ARCH: u32 = 6;
pub(crate) const FEAT_CMDLINE: u32 = 11;
pub(crate) const FEAT_AUXTRACE: u32 = 18;

// perf_event_attr.sample_type bits that make up `sample_id`.
pub(crate) const S_TID: u64 = 1 << 1;
pub(crate) const S_TIME: u64 = 1 << 2;
pub(crate) const S_ID: u64 = 1 << 6;
pub(crate) const S_CPU: u64 = 1 << 7;
pub(crate) const S_STREAM_ID: u64 = 1 << 9;
pub(crate) const S_IDENTIFIER: u64 = 1 << 16;
pub(crate) const SAMPLE_ID_BITS: u64 = S_TID | S_TIME | S_ID | S_CPU | S_STREAM_ID | S_IDENTIFIER;
/// perf_event_attr flags bit `sample_id_all`.
pub(crate) const ATTR_SAMPLE_ID_ALL: u64 = 1 << 18;

// Record header `misc` bits.
pub(crate) const MISC_MMAP_BUILD_ID: u16 = 1 << 14;
pub(crate) const MISC_COMM_EXEC: u16 = 1 << 13;
pub(crate) const MISC_SWITCH_OUT: u16 = 1 << 13;
pub(crate) const MISC_SWITCH_OUT_PREEMPT: u16 = 1 << 14;
pub(crate) const MISC_BUILD_ID_SIZE: u16 = 1 << 15;

/// `__perf_cs_etmv3_magic`, also used for PTM.
pub(crate) const MAGIC_ETM3: u64 = 0x3030_3030_3030_3030;
/// `__perf_cs_etmv4_magic`.
pub(crate) const MAGIC_ETM4: u64 = 0x4040_4040_4040_4040;
/// `__perf_cs_ete_magic`.
pub(crate) const MAGIC_ETE: u64 = 0x5050_5050_5050_5050;

/// `PERF_AUXTRACE_CS_ETM` in the record's `type` field.
pub(crate) const AUXTRACE_TYPE_CS_ETM: u32 = 3;

