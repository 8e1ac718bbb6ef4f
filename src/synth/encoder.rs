//! From an execution to ETE trace: one stream per thread (trace unit), in
//! which every executed P0 instruction becomes an atom, every indirect branch
//! target an address, every SVC (and every unexplained change of flow, such as
//! a signal) an exception with its return; plus synchronisation, timestamps,
//! cycle counts and, optionally, speculation.
//!
//! Speculation is modelled on a simple branch predictor: a bimodal predictor
//! for conditional branches, a branch target buffer for indirect branches and
//! a return stack for returns. Where the predictor is wrong, the trace shows
//! what a speculating core's trace unit shows: the predicted direction as an
//! atom and the instructions down the wrong path as further atoms, resolved
//! by a Cancel of the wrong path and a Mispredict of the branch (conditional
//! branches), or by a Cancel and a corrected target address (indirect
//! branches). Resolved elements are committed in batches, never more than
//! MAXSPEC outstanding; at the end of a stream a last wrong path is left
//! unresolved and discarded.

use super::packets::{exception_type, Context, PacketWriter, WriterConfig};
use super::program::CodeImage;
use super::qemu::{Execution, Tb, TB_MASK, THREAD_SHIFT};
use crate::element::InstrType;
use crate::protocol::etm4::Etm4Config;
use crate::image::a64::{classify, A64Options, ArchVersion};

/// How SVCs and other exceptions appear.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SvcModel {
    /// The exception vector runs a short synthetic EL1 handler that returns
    /// with ERET (traced as an atom, then the return address with the EL0
    /// context): exception entry and return are both in the trace.
    KernelStub,
    /// EL1 is not traced: the exception is followed by Trace On and the
    /// return address, as a trace unit filtering out the kernel shows it.
    Filtered,
}

/// Speculation settings.
#[derive(Clone, Copy, Debug)]
pub struct SpecConfig {
    /// TRCIDR8.MAXSPEC: the most uncommitted P0 elements at any time.
    pub max_spec: u32,
    /// Commit when this many resolved P0 elements are outstanding.
    pub commit_batch: u32,
    /// Longest wrong path (P0 elements) traced after a misprediction.
    pub wrong_path_max: u32,
    /// Share of the predictor's mispredictions traced as speculation, per mille.
    pub rate_permille: u32,
    /// Leave a last wrong path unresolved at the end and discard it.
    pub discard_at_end: bool,
}

impl Default for SpecConfig {
    fn default() -> Self {
        SpecConfig { max_spec: 32, commit_batch: 16, wrong_path_max: 6, rate_permille: 1000, discard_at_end: true }
    }
}

/// What to synthesize.
#[derive(Clone, Debug)]
pub struct SynthConfig {
    /// Trace ID of the first thread; thread `n` gets `first_trace_id + n`.
    pub first_trace_id: u8,
    /// Alignment synchronisation + Trace Info + address every this many bytes
    /// (rounded to packet boundaries).
    pub sync_period: u64,
    pub timestamps: bool,
    /// Cycles between timestamps.
    pub ts_period: u64,
    pub cycle_counts: bool,
    /// Cycle count threshold: cycle counts are traced once this many cycles
    /// have passed since the last one.
    pub cc_threshold: u32,
    /// Commit mode 0 (TRCIDR0.COMMOPT = 0): commits ride in cycle count
    /// packets when both are due. Mode 1 (the default) traces commits in
    /// Commit packets only, which older decoders read more reliably.
    pub commit_in_cycle_counts: bool,
    pub speculation: Option<SpecConfig>,
    pub svc: SvcModel,
    /// Context ID of the first run (the process ID); None: no context ID tracing.
    pub context_id: Option<u32>,
    /// Run the execution this many times in a row (a long trace from a short run).
    pub repeat: u32,
    pub seed: u64,
    /// Record the fate of every speculative element (for tests).
    pub record: bool,
}

impl Default for SynthConfig {
    fn default() -> Self {
        SynthConfig {
            first_trace_id: 0x10,
            sync_period: 8192,
            timestamps: true,
            ts_period: 5000,
            cycle_counts: true,
            cc_threshold: 64,
            commit_in_cycle_counts: false,
            speculation: Some(SpecConfig::default()),
            svc: SvcModel::KernelStub,
            context_id: Some(1000),
            repeat: 1,
            seed: 1,
            record: false,
        }
    }
}

/// Width of the cycle counter (TRCIDR2.CCSIZE = 8: 20 bits).
const CC_BITS: u8 = 20;

impl SynthConfig {
    pub fn max_spec(&self) -> u32 {
        self.speculation.map_or(0, |s| s.max_spec)
    }

    /// The configuration of a trace unit emitting this stream: its register
    /// values, as a snapshot records them and a decoder reads them.
    pub fn registers(&self, trace_id: u8) -> Etm4Config {
        let spec = self.speculation.is_some();
        // TRCIDR0: RES1, TRCBB, TRCCCI, RETSTACK, 4 events, TSMARK, 64-bit
        // timestamps; commit mode 1 unless commits ride in cycle counts.
        let mut idr0 = 0x1 | 0x20 | 0x80 | 0x200 | 0xc00 | (1 << 23) | (0x8 << 24);
        if !(spec && self.commit_in_cycle_counts) {
            idr0 |= 1 << 29;
        }
        // TRCIDR2: 64-bit addresses, 32-bit context ID, 32-bit VMID, 20-bit
        // cycle counter, no WFI/WFE waypoints.
        let idr2 = 0x8 | (0x4 << 5) | (0x4 << 10) | (((CC_BITS - 12) as u32) << 25);
        let mut config = 0x1;
        if self.cycle_counts {
            config |= 1 << 4;
        }
        if self.context_id.is_some() {
            config |= 1 << 6;
        }
        if self.timestamps {
            config |= 1 << 11;
        }
        let regs: [(&str, u32); 7] = [
            ("TRCIDR0", idr0),
            ("TRCIDR1", 0x4100_fff0),
            ("TRCIDR2", idr2),
            ("TRCIDR8", self.max_spec()),
            ("TRCCONFIGR", config),
            ("TRCTRACEIDR", trace_id as u32),
            // ETE (ARCHVER 5) revision 1: timestamp markers.
            ("TRCDEVARCH", 0x4771_5a13),
        ];
        Etm4Config::from_registers(|n| regs.iter().find(|r| r.0 == n).map(|r| r.1 as u64), true, Some(CORE_TYPE))
            .expect("all registers present")
    }
}

/// The core type the snapshot names: an Armv8.4+ A-profile core, so that
/// decoders classify the pointer-authentication returns as branches.
pub const CORE_TYPE: &str = "ARM-AA64";

/// Address of the synthetic EL1 vector table (VBAR_EL1).
pub const VBAR_EL1: u64 = 0xffff_8000_0801_0000;
/// Synchronous exception from a lower EL (AArch64).
const VEC_SYNC_LOWER: u64 = 0x400;
/// IRQ from a lower EL (AArch64).
const VEC_IRQ_LOWER: u64 = 0x480;
/// The handler at each used vector: three NOPs and ERET.
const STUB: [u32; 4] = [0xd503_201f, 0xd503_201f, 0xd503_201f, 0xd69f_03e0];

/// The synthetic vector table: (address, words).
pub fn vector_table() -> (u64, Vec<u32>) {
    let mut words = vec![0u32; 0x800 / 4];
    for v in [VEC_SYNC_LOWER, VEC_IRQ_LOWER] {
        words[(v / 4) as usize..(v / 4) as usize + 4].copy_from_slice(&STUB);
    }
    (VBAR_EL1, words)
}

/// Cycles the kernel spends on a system call or an interrupt (synthetic).
const KERNEL_CYCLES: u64 = 180;
/// Cycles lost to a misprediction.
const MISPREDICT_PENALTY: u64 = 11;
/// Core cycles per timestamp tick.
const CYCLES_PER_TICK: u64 = 4;
/// Timestamp at the start of the trace.
const TS_BASE: u64 = 0x10_0000;

/// What finally happened to a speculative element, as the encoder traced it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    Committed,
    Canceled,
    Corrected,
    Discarded,
}

/// The kind of a speculative element as traced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum P0Kind {
    Atom(bool),
    Exception,
}

/// A speculative element that was not simply committed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpecFate {
    /// P0 sequence number in the stream (from 0).
    pub seq: u64,
    pub kind: P0Kind,
    pub fate: Fate,
}

/// Totals of one stream.
#[derive(Clone, Copy, Debug, Default)]
pub struct StreamStats {
    pub bytes: u64,
    pub instructions: u64,
    pub p0_elements: u64,
    pub exceptions: u64,
    pub mispredicted_branches: u64,
    pub canceled: u64,
    pub discarded: u64,
    pub cycles: u64,
    pub packets: super::packets::PacketCounts,
}

/// One finished stream (one trace unit).
#[derive(Clone, Debug)]
pub struct StreamResult {
    pub trace_id: u8,
    /// qemu CPU index of the thread.
    pub cpu: u32,
    /// The trace unit's configuration (register values).
    pub registers: Etm4Config,
    pub stats: StreamStats,
    /// P0 elements that were canceled, corrected or discarded (with `record`).
    pub spec: Vec<SpecFate>,
    /// First executed instruction.
    pub start_pc: u64,
}

/// A destination for stream bytes.
pub trait StreamSink {
    /// More bytes of the stream of trace ID `id`.
    fn write(&mut self, id: u8, bytes: &[u8]) -> std::io::Result<()>;
}

/// Per-block facts, computed once per translation block.
#[derive(Clone, Copy, Debug)]
enum Ev {
    Cond { target: u64 },
    Uncond { target: u64, link: bool },
    Indirect { link: bool, ret: bool },
    Barrier,
    Svc,
}

struct Summary {
    /// (instruction index in the block, event).
    evs: Vec<(u32, Ev)>,
    /// The last instruction is an event (the block ends on a branch or SVC).
    ends_on_event: bool,
}

fn a64_opts() -> A64Options {
    A64Options { arch: ArchVersion::Aa64, wfi_wfe_branch: false, dsb_dmb_waypoints: false, aa64_opcode_chk: false }
}

#[inline]
fn is_svc(op: u32) -> bool {
    op & 0xffe0_001f == 0xd400_0001
}

fn event_of(op: u32, pc: u64) -> Option<Ev> {
    if is_svc(op) {
        return Some(Ev::Svc);
    }
    let i = classify(op, pc, a64_opts());
    match i.itype {
        InstrType::Other => None,
        InstrType::Branch => {
            let target = i.target.unwrap_or(0);
            Some(if i.conditional { Ev::Cond { target } } else { Ev::Uncond { target, link: i.link } })
        }
        InstrType::IndirectBranch => {
            Some(Ev::Indirect { link: i.link, ret: i.subtype == crate::element::InstrSubtype::Return })
        }
        _ => Some(Ev::Barrier),
    }
}

fn summarize(exec: &Execution, tb: &Tb) -> Summary {
    let mut evs = Vec::new();
    for i in 0..tb.len {
        let op = exec.opcodes[(tb.first + i) as usize];
        if let Some(e) = event_of(op, tb.pc + 4 * i as u64) {
            evs.push((i, e));
        }
    }
    let ends_on_event = evs.last().is_some_and(|&(i, _)| i + 1 == tb.len);
    Summary { evs, ends_on_event }
}

/// splitmix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
    fn permille(&mut self, p: u32) -> bool {
        p >= 1000 || self.below(1000) < p as u64
    }
}

/// One thread's trace unit.
struct Stream {
    w: PacketWriter,
    trace_id: u8,
    cpu: u32,
    ctx: Context,
    /// The block waiting for its successor.
    pending: Option<u32>,
    started: bool,
    /// Where the decoder's instruction walk stands: the target of the last P0.
    range_start: u64,
    start_pc: u64,
    /// Uncommitted P0 elements (all resolved outside an injected wrong path).
    outstanding: u32,
    /// Stream bytes already handed to the sink.
    drained: u64,
    last_sync: u64,
    cycles: u64,
    cc_acc: u64,
    last_ts_cycles: u64,
    seq: u64,
    spec: Vec<SpecFate>,
    stats: StreamStats,
    bimodal: Vec<u8>,
    /// Branch target buffer: (branch address, target), direct mapped.
    btb: Vec<(u64, u64)>,
    ras: Vec<u64>,
    rng: Rng,
    run: u32,
}

struct Shared<'a> {
    cfg: &'a SynthConfig,
    code: &'a CodeImage,
    global_cycles: u64,
}

impl Stream {
    fn total_bytes(&self) -> u64 {
        self.drained + self.w.len() as u64
    }

    fn ts_value(&self, sh: &Shared) -> u64 {
        TS_BASE + sh.global_cycles / CYCLES_PER_TICK
    }

    fn record(&mut self, sh: &Shared, kind: P0Kind, fate: Fate) {
        if sh.cfg.record && fate != Fate::Committed {
            self.spec.push(SpecFate { seq: self.seq, kind, fate });
        }
        self.seq += 1;
        self.stats.p0_elements += 1;
    }

    fn add_cycles(&mut self, sh: &mut Shared, n: u64) {
        self.cycles += n;
        self.cc_acc += n;
        sh.global_cycles += n;
    }

    /// First packets of the stream.
    fn start(&mut self, pc: u64) {
        self.w.async_packet();
        self.w.trace_info();
        self.w.trace_on();
        self.w.address_context(pc, &self.ctx);
        self.last_sync = self.total_bytes();
        self.range_start = pc;
        self.start_pc = pc;
        self.started = true;
    }

    /// Commit, cycle count and timestamp decisions at a clean point (no P0
    /// element waiting for its address, no wrong path open).
    fn time_point(&mut self, sh: &Shared, force_commit: bool, force_ts: bool) {
        let cfg = sh.cfg;
        let spec = cfg.speculation.is_some();
        let batch = cfg.speculation.map_or(0, |s| s.commit_batch);
        let want_commit = spec && self.outstanding > 0 && (force_commit || self.outstanding >= batch);
        let cc_ready = cfg.cycle_counts && self.cc_acc >= cfg.cc_threshold as u64;
        // A cycle count goes with a commit (with speculation off every P0
        // element commits as it is traced).
        let want_cc = cc_ready && (!spec || want_commit);
        let ts_due = cfg.timestamps && (force_ts || self.cycles - self.last_ts_cycles >= cfg.ts_period);
        // With cycle counting a timestamp follows a cycle count, so that its
        // own cycle count field (cycles since the last cycle count) is zero.
        let want_ts = ts_due && (!cfg.cycle_counts || want_cc);
        if want_ts {
            self.w.timestamp_marker();
        }
        let commit_in_cc = cfg.commit_in_cycle_counts && spec;
        if want_commit && !(commit_in_cc && want_cc) {
            self.w.commit(self.outstanding);
            self.outstanding = 0;
        }
        let mut cc_since = self.cc_acc;
        if want_cc {
            // The cycle counter saturates at its width; a longer gap is traced
            // as several counts.
            let max = (1u64 << CC_BITS) - 1 + cfg.cc_threshold as u64;
            while self.cc_acc > max {
                self.w.cycle_count(max as u32, 0);
                self.cc_acc -= max;
            }
            self.w.cycle_count(self.cc_acc as u32, self.outstanding);
            self.outstanding = 0;
            self.cc_acc = 0;
            cc_since = 0;
        }
        if want_ts {
            let v = self.ts_value(sh);
            self.w.timestamp(v, cc_since.min(u32::MAX as u64) as u32);
            self.last_ts_cycles = self.cycles;
        }
    }

    /// Make room for `n` more uncommitted P0 elements.
    fn ensure_room(&mut self, sh: &Shared, n: u32) {
        if let Some(s) = sh.cfg.speculation {
            if self.outstanding + n > s.max_spec {
                self.time_point(sh, true, false);
            }
        }
    }

    fn periodic_sync(&mut self, sh: &Shared) {
        if self.total_bytes() - self.last_sync >= sh.cfg.sync_period {
            self.time_point(sh, true, false);
            self.w.async_packet();
            self.w.trace_info();
            self.w.address_context(self.range_start, &self.ctx);
            self.last_sync = self.total_bytes();
        }
    }

    /// Instructions down a wrong path from `pc`: up to `k` P0 elements, as
    /// atoms. Stops at anything whose outcome needs more than an atom.
    fn wrong_path(&mut self, code: &CodeImage, mut pc: u64, k: u32) -> Vec<bool> {
        let mut out = Vec::new();
        let mut steps = 0;
        while (out.len() as u32) < k && steps < 256 {
            steps += 1;
            let Some(op) = code.read_u32(pc) else { break };
            match event_of(op, pc) {
                None => pc += 4,
                Some(Ev::Cond { target }) => {
                    let e = self.rng.below(2) == 1;
                    out.push(e);
                    pc = if e { target } else { pc + 4 };
                }
                Some(Ev::Uncond { target, .. }) => {
                    out.push(true);
                    pc = target;
                }
                Some(Ev::Barrier) => {
                    out.push(true);
                    pc += 4;
                }
                Some(Ev::Indirect { .. }) | Some(Ev::Svc) => break,
            }
        }
        out
    }

    fn plain_atom(&mut self, sh: &Shared, e: bool) {
        self.ensure_room(sh, 1);
        self.w.atom(e);
        self.outstanding += 1;
        self.record(sh, P0Kind::Atom(e), Fate::Committed);
    }

    fn cond_branch(&mut self, sh: &mut Shared, a: u64, target: u64, taken: bool) {
        let slot = ((a >> 2) ^ (a >> 14)) as usize & (self.bimodal.len() - 1);
        let predicted = self.bimodal[slot] >= 2;
        self.bimodal[slot] = if taken { (self.bimodal[slot] + 1).min(3) } else { self.bimodal[slot].saturating_sub(1) };
        let spec = sh.cfg.speculation;
        if let Some(s) = spec.filter(|_| predicted != taken) {
            if self.rng.permille(s.rate_permille) {
                let k = self.rng.below(s.wrong_path_max.min(s.max_spec.saturating_sub(1)) as u64 + 1) as u32;
                let from = if predicted { target } else { a + 4 };
                let path = self.wrong_path(sh.code, from, k);
                self.ensure_room(sh, 1 + path.len() as u32);
                self.w.atom(predicted);
                self.record(sh, P0Kind::Atom(predicted), Fate::Corrected);
                for &e in &path {
                    self.w.atom(e);
                    self.record(sh, P0Kind::Atom(e), Fate::Canceled);
                }
                if path.is_empty() {
                    self.w.mispredict();
                } else {
                    self.w.cancel_mispredict(path.len() as u32);
                }
                self.outstanding += 1;
                self.stats.mispredicted_branches += 1;
                self.stats.canceled += path.len() as u64;
                self.add_cycles(sh, MISPREDICT_PENALTY);
                return;
            }
        }
        self.plain_atom(sh, taken);
    }

    fn indirect_branch(&mut self, sh: &mut Shared, a: u64, link: bool, ret: bool, target: Option<u64>) {
        let slot = ((a >> 2) ^ (a >> 13)) as usize & (self.btb.len() - 1);
        let predicted = if ret {
            self.ras.pop()
        } else {
            Some(self.btb[slot]).filter(|e| e.0 == a).map(|e| e.1)
        };
        if link {
            if self.ras.len() >= 32 {
                self.ras.remove(0);
            }
            self.ras.push(a + 4);
        }
        let Some(t) = target else {
            self.plain_atom(sh, true);
            return;
        };
        if !ret {
            self.btb[slot] = (a, t);
        }
        if let (Some(s), Some(p)) = (sh.cfg.speculation, predicted) {
            if p != t && sh.code.contains(p) && self.rng.permille(s.rate_permille) {
                let k = self.rng.below(s.wrong_path_max.min(s.max_spec.saturating_sub(1)) as u64 + 1) as u32;
                let path = self.wrong_path(sh.code, p, k);
                self.ensure_room(sh, 1 + path.len() as u32);
                self.w.atom(true);
                self.record(sh, P0Kind::Atom(true), Fate::Committed);
                self.w.address(p);
                for &e in &path {
                    self.w.atom(e);
                    self.record(sh, P0Kind::Atom(e), Fate::Canceled);
                }
                if !path.is_empty() {
                    self.w.cancel(path.len() as u32);
                }
                self.w.address(t);
                self.outstanding += 1;
                self.stats.mispredicted_branches += 1;
                self.stats.canceled += path.len() as u64;
                self.add_cycles(sh, MISPREDICT_PENALTY);
                self.range_start = t;
                return;
            }
        }
        self.plain_atom(sh, true);
        self.w.address(t);
        self.range_start = t;
    }

    /// An exception taken with preferred return address `ret`; execution
    /// resumes at `resume` (None: the thread ends in the exception).
    fn exception(&mut self, sh: &mut Shared, etype: u16, ret: u64, resume: Option<u64>) {
        let stub = sh.cfg.svc == SvcModel::KernelStub && resume.is_some();
        self.ensure_room(sh, if stub { 2 } else { 1 });
        self.w.exception(etype);
        self.w.address(ret);
        self.outstanding += 1;
        self.record(sh, P0Kind::Exception, Fate::Committed);
        self.stats.exceptions += 1;
        let Some(resume) = resume else {
            self.range_start = ret;
            return;
        };
        let el1 = Context { el: 1, ..self.ctx };
        let vector = VBAR_EL1 + if etype == exception_type::CALL { VEC_SYNC_LOWER } else { VEC_IRQ_LOWER };
        if stub {
            // Into the handler: the new context, then the vector address; out
            // with ERET (an atom), then the context and address returned to.
            self.w.context(&el1);
            self.w.address(vector);
            self.add_cycles(sh, KERNEL_CYCLES + STUB.len() as u64);
            self.w.atom(true);
            self.outstanding += 1;
            self.record(sh, P0Kind::Atom(true), Fate::Committed);
            self.w.context(&self.ctx);
            self.w.address(resume);
        } else {
            self.add_cycles(sh, KERNEL_CYCLES);
            self.w.trace_on();
            self.w.address_context(resume, &self.ctx);
        }
        self.range_start = resume;
    }

    /// One executed block; `succ` is where the thread went next.
    fn block(&mut self, sh: &mut Shared, tb: &Tb, sum: &Summary, succ: Option<u64>) {
        if !self.started {
            self.start(tb.pc);
        }
        let mut done = 0u32;
        for &(i, ev) in &sum.evs {
            let a = tb.pc + 4 * i as u64;
            self.add_cycles(sh, (i + 1 - done) as u64);
            done = i + 1;
            let next = if i + 1 < tb.len { Some(a + 4) } else { succ };
            // Where the instruction's own outcome says execution continues; a
            // different successor means an exception (a signal) came in between.
            let mut expect = None;
            match ev {
                Ev::Cond { target } => {
                    let taken = next == Some(target);
                    self.cond_branch(sh, a, target, taken);
                    self.range_start = if taken { target } else { a + 4 };
                    if taken {
                        self.add_cycles(sh, 1);
                    }
                    expect = Some(self.range_start);
                }
                Ev::Uncond { target, link } => {
                    if link {
                        if self.ras.len() >= 32 {
                            self.ras.remove(0);
                        }
                        self.ras.push(a + 4);
                    }
                    self.plain_atom(sh, true);
                    self.range_start = target;
                    self.add_cycles(sh, 1);
                    expect = Some(target);
                }
                Ev::Indirect { link, ret } => {
                    self.indirect_branch(sh, a, link, ret, next);
                    self.add_cycles(sh, 2);
                }
                Ev::Barrier => {
                    self.plain_atom(sh, true);
                    self.range_start = a + 4;
                    expect = Some(a + 4);
                }
                Ev::Svc => {
                    self.exception(sh, exception_type::CALL, a + 4, next);
                }
            }
            if let (Some(e), Some(n)) = (expect, next) {
                if e != n {
                    self.exception(sh, exception_type::IRQ, e, Some(n));
                }
            }
        }
        self.add_cycles(sh, (tb.len - done) as u64);
        self.stats.instructions += tb.len as u64;
        let end = tb.pc + 4 * tb.len as u64;
        if !sum.ends_on_event {
            if let Some(n) = succ.filter(|&n| n != end) {
                self.exception(sh, exception_type::IRQ, end, Some(n));
            }
        }
        self.time_point(sh, false, false);
        self.periodic_sync(sh);
    }

    /// End of the stream: commit everything, then (with speculation) a last
    /// wrong path that is discarded.
    fn finish(&mut self, sh: &mut Shared) {
        if !self.started {
            return;
        }
        self.time_point(sh, true, true);
        if let Some(s) = sh.cfg.speculation.filter(|s| s.discard_at_end) {
            let k = s.wrong_path_max.clamp(1, s.max_spec.max(1));
            let path = self.wrong_path(sh.code, self.range_start, k);
            for &e in &path {
                self.w.atom(e);
                self.record(sh, P0Kind::Atom(e), Fate::Discarded);
            }
            if !path.is_empty() {
                self.w.discard();
                self.stats.discarded += path.len() as u64;
            }
        }
        self.w.flush_atoms();
    }

    fn drain(&mut self, sink: &mut dyn StreamSink, min: usize) -> std::io::Result<()> {
        if self.w.len() >= min && !self.w.is_empty() {
            sink.write(self.trace_id, &self.w.buf)?;
            self.drained += self.w.len() as u64;
            self.w.buf.clear();
        }
        Ok(())
    }
}

/// Encode an execution: one stream per thread, written to `sink` as it
/// grows (in chunks of at least `chunk` bytes, interleaved in execution order).
pub fn encode(
    exec: &Execution,
    code: &CodeImage,
    cfg: &SynthConfig,
    sink: &mut dyn StreamSink,
    chunk: usize,
) -> Result<Vec<StreamResult>, super::SynthError> {
    let nthreads = exec.threads();
    if nthreads == 0 {
        return Err(super::SynthError::EmptyExecution);
    }
    if cfg.first_trace_id == 0 || cfg.first_trace_id as usize + nthreads > 0x70 {
        return Err(super::SynthError::BadTraceIds {
            first: cfg.first_trace_id as usize,
            last: cfg.first_trace_id as usize + nthreads - 1,
        });
    }
    let summaries: Vec<Summary> = exec.tbs.iter().map(|tb| summarize(exec, tb)).collect();
    let wcfg = WriterConfig {
        max_spec: cfg.max_spec(),
        commit_opt1: !(cfg.speculation.is_some() && cfg.commit_in_cycle_counts),
        cycle_counting: cfg.cycle_counts,
        cc_threshold: cfg.cc_threshold,
        cc_bits: CC_BITS,
    };
    let mut streams: Vec<Stream> = (0..nthreads)
        .map(|t| Stream {
            w: PacketWriter::new(wcfg),
            trace_id: cfg.first_trace_id + t as u8,
            cpu: exec.cpus[t],
            ctx: Context { el: 0, non_secure: true, aarch64: true, context_id: cfg.context_id },
            pending: None,
            started: false,
            range_start: 0,
            start_pc: 0,
            outstanding: 0,
            drained: 0,
            last_sync: 0,
            cycles: 0,
            cc_acc: 0,
            last_ts_cycles: 0,
            seq: 0,
            spec: Vec::new(),
            stats: StreamStats::default(),
            bimodal: vec![1; 4096],
            btb: vec![(u64::MAX, 0); 4096],
            ras: Vec::new(),
            rng: Rng(cfg.seed.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ t as u64),
            run: 0,
        })
        .collect();
    let mut sh = Shared { cfg, code, global_cycles: 0 };
    let io = super::SynthError::WriteTrace;
    for run in 0..cfg.repeat.max(1) {
        for &ev in &exec.events {
            let t = (ev >> THREAD_SHIFT) as usize;
            let tbi = ev & TB_MASK;
            let s = &mut streams[t];
            if s.run != run {
                // A new run of the program: a new process on the same core.
                s.run = run;
                s.ctx.context_id = cfg.context_id.map(|c| c.wrapping_add(run));
            }
            if let Some(p) = s.pending.replace(tbi) {
                let tb = exec.tbs[p as usize];
                s.block(&mut sh, &tb, &summaries[p as usize], Some(exec.tbs[tbi as usize].pc));
                s.drain(sink, chunk).map_err(io)?;
            }
        }
    }
    for s in &mut streams {
        if let Some(p) = s.pending.take() {
            let tb = exec.tbs[p as usize];
            s.block(&mut sh, &tb, &summaries[p as usize], None);
        }
        s.finish(&mut sh);
        s.drain(sink, 0).map_err(io)?;
    }
    Ok(streams
        .into_iter()
        .map(|s| {
            let mut stats = s.stats;
            stats.bytes = s.drained;
            stats.cycles = s.cycles;
            stats.packets = s.w.counts;
            StreamResult {
                trace_id: s.trace_id,
                cpu: s.cpu,
                registers: cfg.registers(s.trace_id),
                stats,
                spec: s.spec,
                start_pc: s.start_pc,
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registers_describe_the_stream() {
        let cfg = SynthConfig::default();
        let r = cfg.registers(0x10);
        assert!(r.is_ete() && r.has_ts_marker() && r.timestamps() && r.cycle_counting());
        assert_eq!((r.trace_id(), r.max_spec_depth(), r.cc_bits(), r.cid_bits()), (0x10, 32, CC_BITS, 32));
        assert!(r.ia_64bit() && r.context_id_tracing() && !r.return_stack() && !r.wfi_wfe_branch());
        assert!(r.commit_opt1());
        let r = SynthConfig { commit_in_cycle_counts: true, ..cfg.clone() }.registers(0x11);
        assert!(!r.commit_opt1());
        let r = SynthConfig { speculation: None, cycle_counts: false, timestamps: false, context_id: None, ..cfg }
            .registers(0x12);
        assert_eq!(r.max_spec_depth(), 0);
        assert!(!r.cycle_counting() && !r.timestamps() && !r.context_id_tracing());
    }
}
