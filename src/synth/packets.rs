//! Low-level ETE packet writer: one trace unit's byte stream, packet by
//! packet, with the compression state a decoder keeps (the three-entry
//! address history, the last timestamp, whether a 64-bit context is known).
//!
//! Encodings follow the Arm ARM ETE packet descriptions (D4.4) as the
//! decoders read them (`protocol::etm4::parser`): every packet written here is
//! the smallest encoding that decodes to the intended value given the
//! decoder's state at that point of the stream. Atoms are queued and packed
//! into the densest sequence of atom packets when anything else is written.

/// Exception types (the ETE exception packet TYPE field).
pub mod exception_type {
    /// SVC, HVC, SMC.
    pub const CALL: u16 = 0x2;
    /// An asynchronous interrupt.
    pub const IRQ: u16 = 0xe;
}

/// The PE context carried by Context and Address-with-Context packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Context {
    pub el: u8,
    pub non_secure: bool,
    pub aarch64: bool,
    /// Context ID (CONTEXTIDR), traced when context ID tracing is enabled.
    pub context_id: Option<u32>,
}

impl Context {
    fn info_byte(&self) -> u8 {
        (self.el & 3)
            | if self.aarch64 { 0x10 } else { 0 }
            | if self.non_secure { 0x20 } else { 0 }
            | if self.context_id.is_some() { 0x80 } else { 0 }
    }
}

/// What the stream's configuration fixes for the packet encodings.
#[derive(Clone, Copy, Debug)]
pub struct WriterConfig {
    /// TRCIDR8.MAXSPEC (the Cycle Count format 2 commit offset uses it).
    pub max_spec: u32,
    /// Commit mode 1: cycle count packets carry no commit count.
    pub commit_opt1: bool,
    /// Cycle counting enabled: timestamps carry a cycle count field.
    pub cycle_counting: bool,
    /// Cycle count threshold traced in Trace Info (TRCCCCTLR.THRESHOLD).
    pub cc_threshold: u32,
    /// Width of the cycle counter in bits (TRCIDR2.CCSIZE + 12).
    pub cc_bits: u8,
}

/// Counts of packets written, by kind.
#[derive(Clone, Copy, Debug, Default)]
pub struct PacketCounts {
    pub atom_packets: u64,
    pub atoms: u64,
    pub addresses: u64,
    pub exact_matches: u64,
    pub short_addresses: u64,
    pub long_addresses: u64,
    pub syncs: u64,
    pub exceptions: u64,
    pub commits: u64,
    pub cancels: u64,
    pub mispredicts: u64,
    pub cycle_counts: u64,
    pub timestamps: u64,
}

/// Writes one trace unit's packets into a byte buffer.
pub struct PacketWriter {
    pub buf: Vec<u8>,
    cfg: WriterConfig,
    /// Address history; `hist[head]` is the most recent.
    hist: [u64; 3],
    head: usize,
    /// A context with SF set has been traced (32-bit address packets then
    /// keep the upper half of the previous address).
    sf_context: bool,
    /// Last timestamp since the last Trace Info.
    last_ts: Option<u64>,
    /// Queued atoms, oldest first, as bits (bit i = atom i, 1 = E).
    atoms: u64,
    natoms: u32,
    pub counts: PacketCounts,
}

/// Longest run an atom queue holds before it is packed.
const ATOM_QUEUE: u32 = 48;

impl PacketWriter {
    pub fn new(cfg: WriterConfig) -> PacketWriter {
        PacketWriter {
            buf: Vec::with_capacity(1 << 16),
            cfg,
            hist: [0; 3],
            head: 0,
            sf_context: false,
            last_ts: None,
            atoms: 0,
            natoms: 0,
            counts: PacketCounts::default(),
        }
    }

    /// Bytes written so far (not counting queued atoms).
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    // ---- atoms ------------------------------------------------------------

    /// Queue an atom (E = executed / taken).
    #[inline]
    pub fn atom(&mut self, e: bool) {
        self.atoms |= (e as u64) << self.natoms;
        self.natoms += 1;
        if self.natoms >= ATOM_QUEUE {
            self.pack_atoms(24);
        }
    }

    /// Write every queued atom.
    #[inline]
    pub fn flush_atoms(&mut self) {
        if self.natoms > 0 {
            self.pack_atoms(0);
        }
    }

    /// Pack queued atoms into packets, keeping at most `keep` of them queued
    /// (the youngest), so that a long run can still join later atoms. The
    /// packing is the fewest packets for the queued sequence.
    fn pack_atoms(&mut self, keep: u32) {
        let n = self.natoms as usize;
        let bits = self.atoms;
        if keep == 0 && n <= 3 {
            // One packet of format 1, 2 or 3.
            let b = bits as u8;
            self.buf.push(match n {
                1 => 0xf6 | (b & 1),
                2 => 0xd8 | (b & 3),
                _ => 0xf8 | (b & 7),
            });
            self.counts.atom_packets += 1;
            self.counts.atoms += n as u64;
            self.atoms = 0;
            self.natoms = 0;
            return;
        }
        // cost[i]: fewest packets for atoms[i..n]; take[i]: (atoms, header) of
        // the first packet of such a packing.
        let mut cost = [0u8; 65];
        let mut take = [(0u8, 0u8); 65];
        for i in (0..n).rev() {
            let rem = (n - i) as u32;
            let b = bits >> i;
            let mut best = (u8::MAX, 0u8, 0u8);
            let mut consider = |len: u32, header: u8| {
                let c = cost[i + len as usize].saturating_add(1);
                if c < best.0 || (c == best.0 && len as u8 > best.1) {
                    best = (c, len as u8, header);
                }
            };
            consider(1, 0xf6 | (b & 1) as u8);
            if rem >= 2 {
                consider(2, 0xd8 | (b & 3) as u8);
            }
            if rem >= 3 {
                consider(3, 0xf8 | (b & 7) as u8);
            }
            if rem >= 4 {
                let h = match b & 0xf {
                    0xe => 0xdc,
                    0x0 => 0xdd,
                    0xa => 0xde,
                    0x5 => 0xdf,
                    _ => 0,
                };
                if h != 0 {
                    consider(4, h);
                }
                // Format 6: 3..=23 E atoms, then one E or N atom.
                let lead = (!b).trailing_zeros().min(rem);
                for e in 3..=lead.min(rem - 1).min(23) {
                    let last_e = (b >> e) & 1 == 1;
                    consider(e + 1, if last_e { 0xc0 } else { 0xe0 } | (e - 3) as u8);
                }
            }
            if rem >= 5 {
                let h = match b & 0x1f {
                    0x1e => 0xf5,
                    0x00 => 0xd5,
                    0x0a => 0xd6,
                    0x15 => 0xd7,
                    _ => 0,
                };
                if h != 0 {
                    consider(5, h);
                }
            }
            cost[i] = best.0;
            take[i] = (best.1, best.2);
        }
        let stop = n.saturating_sub(keep as usize);
        let mut i = 0usize;
        while i < stop {
            let (len, byte) = take[i];
            self.buf.push(byte);
            self.counts.atom_packets += 1;
            self.counts.atoms += len as u64;
            i += len as usize;
        }
        self.atoms = if i >= 64 { 0 } else { bits >> i };
        self.natoms -= i as u32;
    }

    // ---- synchronisation ---------------------------------------------------

    /// Alignment synchronisation.
    pub fn async_packet(&mut self) {
        self.flush_atoms();
        self.buf.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80]);
        self.counts.syncs += 1;
    }

    /// Trace Info: cycle counting state and threshold, speculation depth 0.
    /// Resets the address history and the timestamp compression.
    pub fn trace_info(&mut self) {
        self.flush_atoms();
        self.buf.push(0x01);
        if self.cfg.cycle_counting {
            // INFO and CYCT sections present.
            self.buf.push(0x09);
            self.buf.push(0x01);
            push_cont(&mut self.buf, self.cfg.cc_threshold);
        } else {
            self.buf.push(0x00);
        }
        self.hist = [0; 3];
        self.head = 0;
        self.last_ts = None;
    }

    pub fn trace_on(&mut self) {
        self.flush_atoms();
        self.buf.push(0x04);
    }

    pub fn discard(&mut self) {
        self.flush_atoms();
        self.buf.extend_from_slice(&[0x00, 0x03]);
    }

    // ---- addresses -----------------------------------------------------------

    fn push_hist(&mut self, a: u64) {
        self.head = if self.head == 0 { 2 } else { self.head - 1 };
        self.hist[self.head] = a;
    }

    /// A target address, in the shortest packet the history allows.
    pub fn address(&mut self, a: u64) {
        self.flush_atoms();
        self.counts.addresses += 1;
        for i in 0..3 {
            if self.hist[(self.head + i) % 3] == a {
                self.buf.push(0x90 | i as u8);
                self.counts.exact_matches += 1;
                self.push_hist(a);
                return;
            }
        }
        let base = self.hist[self.head];
        let diff = a ^ base;
        if diff >> 9 == 0 {
            self.buf.extend_from_slice(&[0x95, ((a >> 2) & 0x7f) as u8]);
            self.counts.short_addresses += 1;
        } else if diff >> 17 == 0 {
            self.buf.extend_from_slice(&[0x95, 0x80 | ((a >> 2) & 0x7f) as u8, (a >> 9) as u8]);
            self.counts.short_addresses += 1;
        } else if diff >> 32 == 0 && self.sf_context {
            self.buf.push(0x9a);
            push_long32(&mut self.buf, a);
            self.counts.long_addresses += 1;
        } else {
            self.buf.push(0x9d);
            push_long64(&mut self.buf, a);
            self.counts.long_addresses += 1;
        }
        self.push_hist(a);
    }

    /// Address and context together; the 32-bit form when the upper half of
    /// the address is known from the history.
    pub fn address_context(&mut self, a: u64, ctx: &Context) {
        self.flush_atoms();
        self.counts.addresses += 1;
        self.counts.long_addresses += 1;
        if (a ^ self.hist[self.head]) >> 32 == 0 && self.sf_context {
            self.buf.push(0x82);
            push_long32(&mut self.buf, a);
        } else {
            self.buf.push(0x85);
            push_long64(&mut self.buf, a);
        }
        self.context_payload(ctx);
        self.push_hist(a);
    }

    /// A context packet (the address follows separately).
    pub fn context(&mut self, ctx: &Context) {
        self.flush_atoms();
        self.buf.push(0x81);
        self.context_payload(ctx);
    }

    fn context_payload(&mut self, ctx: &Context) {
        self.buf.push(ctx.info_byte());
        if let Some(cid) = ctx.context_id {
            self.buf.extend_from_slice(&cid.to_le_bytes());
        }
        if ctx.aarch64 {
            self.sf_context = true;
        }
    }

    // ---- exceptions ----------------------------------------------------------

    /// Exception packet announcing that the preferred return address follows
    /// (the caller writes it next).
    pub fn exception(&mut self, etype: u16) {
        self.flush_atoms();
        self.counts.exceptions += 1;
        self.buf.push(0x06);
        let b1 = (((etype & 0x1f) as u8) << 1) | 0x01;
        if etype > 0x1f {
            self.buf.push(b1 | 0x80);
            self.buf.push(((etype >> 5) & 0x1f) as u8);
        } else {
            self.buf.push(b1);
        }
    }

    // ---- speculation -----------------------------------------------------------

    pub fn commit(&mut self, n: u32) {
        self.flush_atoms();
        self.counts.commits += 1;
        self.buf.push(0x2d);
        push_cont(&mut self.buf, n);
    }

    /// Cancel the `n` youngest P0 elements.
    pub fn cancel(&mut self, n: u32) {
        self.flush_atoms();
        self.counts.cancels += 1;
        self.buf.push(0x2e);
        push_cont(&mut self.buf, n);
    }

    /// Cancel the `n` youngest P0 elements, then flip the youngest remaining atom.
    pub fn cancel_mispredict(&mut self, n: u32) {
        self.flush_atoms();
        self.counts.cancels += 1;
        self.counts.mispredicts += 1;
        self.buf.push(0x2f);
        push_cont(&mut self.buf, n);
    }

    /// Flip the youngest atom.
    pub fn mispredict(&mut self) {
        self.flush_atoms();
        self.counts.mispredicts += 1;
        self.buf.push(0x30);
    }

    // ---- time -------------------------------------------------------------------

    /// A cycle count element of `count` cycles (at least the threshold), with
    /// a commit of `commit` P0 elements in commit mode 0.
    pub fn cycle_count(&mut self, count: u32, commit: u32) {
        self.flush_atoms();
        self.counts.cycle_counts += 1;
        let max = (1u64 << self.cfg.cc_bits) - 1;
        let field = (count.saturating_sub(self.cfg.cc_threshold) as u64).min(max) as u32;
        if self.cfg.commit_opt1 {
            if field <= 3 {
                self.buf.push(0x10 | field as u8);
            } else if field <= 15 {
                self.buf.extend_from_slice(&[0x0c, field as u8]);
            } else {
                self.buf.push(0x0e);
                push_cont(&mut self.buf, field);
            }
            return;
        }
        if commit > 0 {
            self.counts.commits += 1;
        }
        let ms = self.cfg.max_spec;
        if (1..=4).contains(&commit) && field <= 3 {
            self.buf.push(0x10 | ((commit - 1) << 2) as u8 | field as u8);
        } else if (1..=16).contains(&commit) && field <= 15 {
            self.buf.extend_from_slice(&[0x0c, (((commit - 1) << 4) | field) as u8]);
        } else if ms >= 15 && commit >= ms - 15 && commit <= ms && field <= 15 {
            self.buf.extend_from_slice(&[0x0d, (((commit - (ms - 15)) << 4) | field) as u8]);
        } else {
            self.buf.push(0x0e);
            push_cont(&mut self.buf, commit);
            push_cont(&mut self.buf, field);
        }
    }

    pub fn timestamp_marker(&mut self) {
        self.flush_atoms();
        self.buf.push(0x88);
    }

    /// A timestamp, compressed against the previous one since the last Trace
    /// Info; with cycle counting, `cc` cycles since the last cycle count.
    pub fn timestamp(&mut self, value: u64, cc: u32) {
        self.flush_atoms();
        self.counts.timestamps += 1;
        self.buf.push(if self.cfg.cycle_counting { 0x03 } else { 0x02 });
        // Bytes needed: the bits left out must equal the previous value's
        // (or be zero right after a Trace Info).
        let prev = self.last_ts.unwrap_or(0);
        let mut n = 9;
        for k in 1..9u32 {
            if value >> (7 * k) == prev >> (7 * k) {
                n = k;
                break;
            }
        }
        for k in 0..n {
            if k == 8 {
                self.buf.push((value >> 56) as u8);
            } else {
                let more = k + 1 < n;
                self.buf.push(((value >> (7 * k)) & 0x7f) as u8 | if more { 0x80 } else { 0 });
            }
        }
        if self.cfg.cycle_counting {
            let max = (1u32 << self.cfg.cc_bits.min(20)) - 1;
            push_cont(&mut self.buf, cc.min(max));
        }
        self.last_ts = Some(value);
    }
}

/// 7 bits per byte, little endian, bit 7 = more bytes follow.
fn push_cont(buf: &mut Vec<u8>, mut v: u32) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            buf.push(b);
            return;
        }
        buf.push(b | 0x80);
    }
}

fn push_long32(buf: &mut Vec<u8>, a: u64) {
    buf.extend_from_slice(&[((a >> 2) & 0x7f) as u8, ((a >> 9) & 0x7f) as u8, (a >> 16) as u8, (a >> 24) as u8]);
}

fn push_long64(buf: &mut Vec<u8>, a: u64) {
    push_long32(buf, a);
    buf.extend_from_slice(&((a >> 32) as u32).to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> WriterConfig {
        WriterConfig { max_spec: 32, commit_opt1: false, cycle_counting: false, cc_threshold: 0, cc_bits: 20 }
    }

    #[test]
    fn atom_runs_pack_densely() {
        let mut w = PacketWriter::new(cfg());
        for _ in 0..10 {
            w.atom(true);
        }
        w.atom(false);
        w.flush_atoms();
        // Ten E then N: one format 6 packet.
        assert_eq!(w.buf, vec![0xe0 | 7]);
        let mut w = PacketWriter::new(cfg());
        for e in [false, true, false, true, false] {
            w.atom(e);
        }
        w.flush_atoms();
        assert_eq!(w.buf, vec![0xd6]);
    }

    #[test]
    fn addresses_use_the_history() {
        let mut w = PacketWriter::new(cfg());
        let ctx = Context { el: 0, non_secure: true, aarch64: true, context_id: None };
        w.address_context(0x40_1000, &ctx);
        w.buf.clear();
        w.address(0x40_1040);
        assert_eq!(w.buf, vec![0x95, 0x10]);
        w.buf.clear();
        w.address(0x40_1000);
        assert_eq!(w.buf, vec![0x91]);
        w.buf.clear();
        w.address(0x48_0000);
        assert_eq!(w.buf[0], 0x9a);
    }
}
