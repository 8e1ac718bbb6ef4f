//! Where a walk must stop: for one memory region, one instruction set and one
//! set of classification options, a bit per instruction slot saying whether
//! the element decoders' walk could pass the instruction there without
//! looking at it (an ordinary instruction) or must step it (a waypoint, an
//! opcode the A64 opcode check rejects, a T32 IT instruction, an instruction
//! cut by the region's end). With the bits, the run of ordinary instructions
//! from an address is found 64 slots at a time, and a page without any stop
//! in one check, so a walk over a long branch-free range costs a few bit scans
//! per 64 KiB instead of a classification per instruction (issue 16 item 2).
//!
//! # Slots and chains
//!
//! A64 and A32 slots are the 4-byte words of the region at one alignment (the
//! walk's address modulo 4: a map is kept per alignment, so a walk that
//! starts anywhere has one). T32 instructions are 2 or 4 bytes, so where
//! instructions begin depends on where decoding started: a slot is a halfword,
//! and each page also records two *chains*, the instruction starts met when
//! decoding from the page's first halfword and from its second. An
//! instruction ends at most one halfword into the next page, so a chain
//! crossing into the next page lands on that page's first or second halfword,
//! the start of one of its chains: runs that begin on a chain stay on chains
//! from page to page. A walk that begins elsewhere (the second halfword of a
//! 32-bit instruction of both chains, which happens only where the two chains
//! have met) is stepped one instruction at a time by the decoder until it
//! lands on a chain, at most to the end of that page.
//!
//! Whether a T32 instruction stops a walk depends only on its own halfwords
//! (the IT state changes only `conditional`), and IT instructions are stops,
//! so a run never enters an IT block: decoders use the map only outside one.
//!
//! # Memory and time
//!
//! Pages (16384 slots: 64 KiB of A64/A32 code, 32 KiB of T32) are built the
//! first time a walk reaches them and kept for the life of the image: 1 bit per
//! 4 bytes of A64/A32 code, 3 bits per 2 bytes of T32, only for the pages
//! walks reach. A run that has crossed a page without a stop asks for the
//! next pages in batches that double (up to [`MAX_AHEAD`]) and are built on all
//! cores (rayon), so a walk never waits for more than about twice the pages
//! it passes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use rayon::prelude::*;

use crate::element::{InstrType, Isa};

use super::a64::{self, A64Options};
use super::arm32::{self, ArmOptions, ItState};
use super::instr::DecodeOptions;

/// Slots per page (a power of two, a multiple of 64).
const PAGE_SLOTS: u64 = 1 << 14;

/// Most pages built ahead of a run at once.
pub const MAX_AHEAD: usize = 64;

/// What a map is built for: the instruction set, the options that change
/// where ranges end, and the alignment of the slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MapKey {
    isa: Isa,
    a64: A64Options,
    arm: ArmOptions,
    /// Address modulo the slot size.
    phase: u8,
}

impl MapKey {
    /// The key for a walk in `isa` with `opts` from `addr`; `None` for
    /// instruction sets the walks do not decode.
    pub fn new(isa: Isa, opts: &DecodeOptions, addr: u64) -> Option<MapKey> {
        if !matches!(isa, Isa::A64 | Isa::A32 | Isa::T32) {
            return None;
        }
        let mut key = MapKey {
            isa,
            a64: A64Options::default(),
            arm: ArmOptions::default(),
            phase: 0,
        };
        if isa == Isa::A64 {
            key.a64 = A64Options {
                arch: opts.arch,
                wfi_wfe_branch: opts.wfi_wfe_branch,
                dsb_dmb_waypoints: opts.dsb_dmb_waypoints,
                aa64_opcode_chk: opts.aa64_opcode_check,
            };
        } else {
            // IT instructions are stops whether or not blocks are tracked, so
            // the tracking option does not change the map.
            key.arm = ArmOptions {
                dsb_dmb_waypoints: opts.dsb_dmb_waypoints,
                wfi_wfe_branch: opts.wfi_wfe_branch,
                track_it_block: false,
            };
        }
        key.phase = (addr % key.slot()) as u8;
        Some(key)
    }

    /// Bytes per slot.
    #[inline]
    fn slot(&self) -> u64 {
        if self.isa == Isa::T32 {
            2
        } else {
            4
        }
    }

    /// Must the walk step the A64 or A32 instruction `op`? Yes when
    /// classifying it ([`super::instr::decode`]) gives a waypoint or (A64
    /// opcode check) an error. The address moves only branch targets, which
    /// the class does not depend on.
    #[inline]
    pub fn word_stops(&self, op: u32) -> bool {
        match self.isa {
            Isa::A64 => {
                let i = a64::classify(op, 0, self.a64);
                i.bad_opcode || i.itype != InstrType::Other
            }
            _ => arm32::classify_a32(op, 0, self.arm).itype != InstrType::Other,
        }
    }

    /// Must the walk step the T32 instruction of halfwords `first` (and
    /// `second` when 32-bit)? Yes for a waypoint and for an IT instruction
    /// (the instructions after it depend on the IT state).
    #[inline]
    pub fn t32_stops(&self, first: u16, second: u16) -> bool {
        let mut it = ItState::new();
        let opts = ArmOptions { track_it_block: true, ..self.arm };
        let i = arm32::classify_t32(first, second, 0, &mut it, opts);
        i.itype != InstrType::Other || it.remaining() != 0
    }
}

/// Work counters of the maps of one image (shared by its clones), so that
/// tests and benchmarks can check what a walk cost.
#[derive(Debug, Default)]
pub struct MapStats {
    pages: AtomicU64,
    bytes: AtomicU64,
    runs: AtomicU64,
    skipped: AtomicU64,
}

/// A snapshot of [`MapStats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MapCounts {
    /// Pages built.
    pub pages_built: u64,
    /// Code bytes classified to build them.
    pub bytes_scanned: u64,
    /// Runs found.
    pub runs: u64,
    /// Instructions walks passed without classifying them: every run but its
    /// last instruction, which the walk steps (so that it knows it).
    pub instructions_passed: u64,
}

impl MapStats {
    pub fn counts(&self) -> MapCounts {
        MapCounts {
            pages_built: self.pages.load(Ordering::Relaxed),
            bytes_scanned: self.bytes.load(Ordering::Relaxed),
            runs: self.runs.load(Ordering::Relaxed),
            instructions_passed: self.skipped.load(Ordering::Relaxed),
        }
    }

    /// Count a run of `count` instructions.
    pub(crate) fn note_run(&self, count: u64) {
        self.runs.fetch_add(1, Ordering::Relaxed);
        self.skipped.fetch_add(count - 1, Ordering::Relaxed);
    }
}

/// A run of ordinary instructions found by [`StopMap::plain_run`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlainRun {
    /// Instructions in the run (at least 1).
    pub count: u64,
    /// Address of the run's last instruction.
    pub last: u64,
}

/// The stop bits of one region for one [`MapKey`].
pub struct StopMap {
    key: MapKey,
    /// Address of slot 0 (the first address in the region at the key's
    /// alignment).
    base: u64,
    /// Whole slots in the region from `base`.
    slots: u64,
    pages: Box<[OnceLock<Page>]>,
    stats: Arc<MapStats>,
}

/// One page's bits (bit i of word i / 64: slot i of the page).
struct Page {
    /// Slots in this page.
    len: u64,
    /// The instruction at the slot must be stepped.
    stop: Box<[u64]>,
    /// T32 only: the instruction starts decoding from slot 0 (chain 0) and
    /// slot 1 (chain 1) meets. Empty for A64/A32, where every slot is one.
    chain: [Box<[u64]>; 2],
    /// Where each chain continues in the next page (slot 0 or 1).
    exit: [u8; 2],
    /// Instructions on each chain in this page.
    count: [u64; 2],
    /// Last instruction of each chain in this page.
    last: [u64; 2],
    /// No instruction of the chain is a stop.
    clear: [bool; 2],
}

impl Page {
    /// Chain `c`'s bits in word `w`.
    #[inline]
    fn chain_word(&self, c: usize, w: usize) -> u64 {
        if self.chain[c].is_empty() {
            let from = w as u64 * 64;
            match self.len - from {
                n if n >= 64 => !0,
                n => (1u64 << n) - 1,
            }
        } else {
            self.chain[c][w]
        }
    }

    #[inline]
    fn on_chain(&self, c: usize, i: u64) -> bool {
        i < self.len && self.chain_word(c, (i / 64) as usize) >> (i % 64) & 1 == 1
    }
}

/// The position of the `n`th (from 0) set bit of `x`, which has more.
#[inline]
fn nth_bit(mut x: u64, n: u32) -> u32 {
    for _ in 0..n {
        x &= x - 1;
    }
    x.trailing_zeros()
}

impl StopMap {
    /// An empty map for the region `[start, start + len)`; pages are built
    /// when first used.
    pub fn new(key: MapKey, start: u64, len: u64, stats: Arc<MapStats>) -> StopMap {
        let slot = key.slot();
        let skip = (key.phase as u64 + slot - start % slot) % slot;
        // A region too short (or too near the top of the address space) for
        // one slot at this alignment has none.
        let (base, slots) = match start.checked_add(skip) {
            Some(base) if skip < len => (base, (len - skip) / slot),
            _ => (start, 0),
        };
        let pages = slots.div_ceil(PAGE_SLOTS) as usize;
        StopMap { key, base, slots, pages: (0..pages).map(|_| OnceLock::new()).collect(), stats }
    }

    pub fn key(&self) -> MapKey {
        self.key
    }

    /// The run of ordinary instructions a walk from `addr` passes before it
    /// must step one, counting at most `max` and only within the region, and
    /// stopping before the instruction at `until` if the walk meets it.
    /// `bytes` are the region's bytes from `start`. `None` when there is no
    /// such instruction, or (T32) when `addr` is on neither chain of its page.
    pub fn plain_run(&self, bytes: &[u8], start: u64, addr: u64, max: u64, until: Option<u64>) -> Option<PlainRun> {
        let slot = self.key.slot();
        if max == 0 || addr < self.base || !(addr - self.base).is_multiple_of(slot) {
            return None;
        }
        let first = (addr - self.base) / slot;
        if first >= self.slots {
            return None;
        }
        let until = until
            .filter(|&u| u >= addr && (u - self.base).is_multiple_of(slot))
            .map(|u| (u - self.base) / slot);
        let fixed = self.key.isa != Isa::T32;
        let mut k = (first / PAGE_SLOTS) as usize;
        let mut l = first % PAGE_SLOTS;
        let mut ahead = 1usize;
        self.build(bytes, start, k, 1);
        let mut page = self.pages[k].get()?;
        let mut c = if fixed || page.on_chain(0, l) {
            0
        } else if page.on_chain(1, l) {
            1
        } else {
            return None;
        };
        let mut count = 0u64;
        let mut last = None;
        loop {
            let page_start = k as u64 * PAGE_SLOTS;
            let until_here = until.filter(|&u| u >= page_start && u < page_start + page.len).map(|u| u - page_start);
            if l == c as u64 && page.clear[c] && until_here.is_none() && max - count >= page.count[c] {
                // A page without a stop on the chain: one check.
                if page.count[c] > 0 {
                    count += page.count[c];
                    last = Some(page_start + page.last[c]);
                }
            } else {
                for w in (l / 64) as usize..page.len.div_ceil(64) as usize {
                    let mut on = page.chain_word(c, w);
                    if w as u64 == l / 64 {
                        on &= !0 << (l % 64);
                    }
                    let mut stops = page.stop[w];
                    if let Some(u) = until_here.filter(|&u| u / 64 == w as u64) {
                        stops |= 1 << (u % 64);
                    }
                    let hit = on & stops;
                    if hit != 0 {
                        on &= (1u64 << hit.trailing_zeros()) - 1;
                    }
                    let n = on.count_ones() as u64;
                    if n >= max - count {
                        // The cap falls in this word: the run ends at its
                        // (max - count)th instruction.
                        if max > count {
                            let at = nth_bit(on, (max - count - 1) as u32);
                            last = Some(page_start + w as u64 * 64 + at as u64);
                        }
                        count = max;
                        return self.finish(count, last);
                    }
                    if on != 0 {
                        count += n;
                        last = Some(page_start + w as u64 * 64 + 63 - on.leading_zeros() as u64);
                    }
                    if hit != 0 {
                        return self.finish(count, last);
                    }
                }
            }
            // On into the next page, where the chain continues.
            let exit = page.exit[c] as u64;
            if page_start + PAGE_SLOTS + exit >= self.slots {
                return self.finish(count, last);
            }
            k += 1;
            l = exit;
            c = if fixed { 0 } else { exit as usize };
            if count == max {
                return self.finish(count, last);
            }
            // Pages the run may still need, at most (an instruction takes
            // one or two slots).
            let need = ((max - count) / (PAGE_SLOTS / 2) + 1) as usize;
            self.build(bytes, start, k, ahead.min(need));
            ahead = (ahead * 2).min(MAX_AHEAD);
            page = self.pages[k].get()?;
        }
    }

    fn finish(&self, count: u64, last: Option<u64>) -> Option<PlainRun> {
        let last = last.filter(|_| count > 0)?;
        Some(PlainRun { count, last: self.base + last * self.key.slot() })
    }

    /// Make sure pages `from..from + n` (those that exist) are built, on all
    /// cores when there are several to build.
    fn build(&self, bytes: &[u8], start: u64, from: usize, n: usize) {
        if self.pages.get(from).is_some_and(|p| p.get().is_some()) {
            return;
        }
        let to = from.saturating_add(n).min(self.pages.len());
        if to - from > 1 {
            (from..to).into_par_iter().for_each(|k| {
                self.page(bytes, start, k);
            });
        } else if from < to {
            self.page(bytes, start, from);
        }
    }

    /// Page `k`, built on first use.
    fn page(&self, bytes: &[u8], start: u64, k: usize) -> &Page {
        self.pages[k].get_or_init(|| {
            let from = k as u64 * PAGE_SLOTS;
            let len = (self.slots - from).min(PAGE_SLOTS);
            let slot = self.key.slot();
            self.stats.pages.fetch_add(1, Ordering::Relaxed);
            self.stats.bytes.fetch_add(len * slot, Ordering::Relaxed);
            // Byte offset of the page's first slot in `bytes`.
            let off = (self.base - start + from * slot) as usize;
            if self.key.isa == Isa::T32 {
                self.t32_page(bytes, off, from, len)
            } else {
                self.word_page(&bytes[off..off + (len * 4) as usize], len)
            }
        })
    }

    fn word_page(&self, code: &[u8], len: u64) -> Page {
        let mut stop = vec![0u64; len.div_ceil(64) as usize].into_boxed_slice();
        // Code repeats words (padding, NOP runs): classify each new one once.
        let mut prev: Option<(u32, bool)> = None;
        for (i, op) in code.chunks_exact(4).enumerate() {
            let op = u32::from_le_bytes([op[0], op[1], op[2], op[3]]);
            let stops = match prev {
                Some((p, s)) if p == op => s,
                _ => self.key.word_stops(op),
            };
            prev = Some((op, stops));
            stop[i / 64] |= (stops as u64) << (i % 64);
        }
        let clear = stop.iter().all(|&b| b == 0);
        Page {
            len,
            stop,
            chain: [Box::default(), Box::default()],
            exit: [0, 0],
            count: [len, 0],
            last: [len - 1, 0],
            clear: [clear, false],
        }
    }

    /// A T32 page of `len` halfwords from region slot `from`, the first at
    /// byte `off` of `bytes`.
    fn t32_page(&self, bytes: &[u8], off: usize, from: u64, len: u64) -> Page {
        let words = len.div_ceil(64) as usize;
        let mut stop = vec![0u64; words].into_boxed_slice();
        let mut chain = [vec![0u64; words].into_boxed_slice(), vec![0u64; words].into_boxed_slice()];
        let hw = |i: u64| {
            let at = off + (i * 2) as usize;
            u16::from_le_bytes([bytes[at], bytes[at + 1]])
        };
        let mut next = [0u64, 1];
        let mut count = [0u64; 2];
        let mut last = [0u64; 2];
        // Classify each new (first, second) pair once, as for words.
        let mut prev: Option<(u16, Option<u16>, bool)> = None;
        for i in 0..len {
            let first = hw(i);
            let wide = arm32::t32_is_32bit(first);
            // A 32-bit instruction cut by the region's end is a stop: the
            // decoder reads what it can there.
            let cut = wide && from + i + 1 >= self.slots;
            let second = (wide && !cut).then(|| hw(i + 1));
            let stops = match prev {
                _ if cut => true,
                Some((f, s2, s)) if f == first && s2 == second => s,
                _ => self.key.t32_stops(first, second.unwrap_or(0)),
            };
            if !cut {
                prev = Some((first, second, stops));
            }
            let (w, b) = ((i / 64) as usize, i % 64);
            stop[w] |= (stops as u64) << b;
            for c in 0..2 {
                if next[c] == i {
                    chain[c][w] |= 1 << b;
                    next[c] += 1 + wide as u64;
                    count[c] += 1;
                    last[c] = i;
                }
            }
        }
        let clear = [0, 1].map(|c| chain[c].iter().zip(stop.iter()).all(|(a, s)| a & s == 0));
        Page {
            len,
            stop,
            exit: [0, 1].map(|c| next[c].saturating_sub(len).min(1) as u8),
            chain,
            count,
            last,
            clear,
        }
    }
}

/// Code for the tests of the maps and of the walks that use them.
#[cfg(test)]
pub(crate) mod testcode {
    use proptest::prelude::*;

    use crate::element::Isa;

    /// Ordinary instructions of each set (as little-endian words; a T32 word
    /// is two halfwords), narrow and wide for T32, so that runs are long and
    /// T32 decoding from different halfwords differs.
    pub fn plain_words(isa: Isa) -> &'static [u32] {
        match isa {
            // NOP, ADD X0, X0, #1, LDR X1, [X2], zeros (UDF, plain unless the
            // opcode check is on).
            Isa::A64 => &[0xd503_201f, 0x9100_0400, 0xf940_0041, 0],
            // MOV R0, R0; ADD R1, R1, #1; LDRNE R2, [R3].
            Isa::A32 => &[0xe1a0_0000, 0xe281_1001, 0x1593_2000],
            // MOV/ADDS pairs; STR.W (0xf8c1, then any halfword: a store is
            // never a waypoint), also with a second halfword that starts a
            // wide instruction itself, and narrow-wide mixes.
            _ => &[0x1c40_4600, 0x0000_f8c1, 0xf8c1_f8c1, 0xf8c1_4600, 0x4600_f8c1],
        }
    }

    /// `words` words of code in `isa`: ordinary instructions with a random
    /// word about once in `sparse` words (random words hold waypoints, IT
    /// instructions, wide T32 prefixes, ...).
    /// With `wide` > 1, the third ordinary word (two T32 halfwords that both
    /// start a 32-bit instruction) is that many times likelier than the
    /// others: decodings from different halfwords then stay apart for long.
    pub fn code(isa: Isa, words: std::ops::Range<usize>, sparse: u32, wide: usize) -> impl Strategy<Value = Vec<u8>> {
        let plain = plain_words(isa);
        let picks = plain.len() + wide - 1;
        proptest::collection::vec((0..sparse, 0..picks, any::<u32>()), words).prop_map(move |ws| {
            ws.into_iter()
                .flat_map(|(r, p, w)| if r == 0 { w } else { plain.get(p).copied().unwrap_or(plain[2]) }.to_le_bytes())
                .collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    const NOP: u32 = 0xd503_201f;
    const RET: u32 = 0xd65f_03c0;
    const B: u32 = 0x1400_0004;
    const A32_MOV: u32 = 0xe1a0_0000;
    const A32_B: u32 = 0xea00_0000;

    fn words(ops: &[u32]) -> Vec<u8> {
        ops.iter().flat_map(|o| o.to_le_bytes()).collect()
    }

    fn key(isa: Isa, addr: u64) -> MapKey {
        MapKey::new(isa, &DecodeOptions::default(), addr).unwrap()
    }

    fn map(k: MapKey, start: u64, len: usize) -> StopMap {
        StopMap::new(k, start, len as u64, Arc::default())
    }

    /// The run found by classifying one instruction at a time, reading only
    /// within the region, as the decoders do.
    fn stepped(k: &MapKey, bytes: &[u8], start: u64, addr: u64, max: u64, until: Option<u64>) -> Option<PlainRun> {
        let (mut a, mut count, mut last) = (addr, 0, 0);
        let at = |a: u64, n: u64| {
            let off = a.checked_sub(start)?;
            bytes.get(off as usize..off.checked_add(n)? as usize)
        };
        while count < max && Some(a) != until {
            let size = if k.isa == Isa::T32 {
                let Some(h) = at(a, 2) else { break };
                let first = u16::from_le_bytes([h[0], h[1]]);
                if arm32::t32_is_32bit(first) {
                    let Some(w) = at(a, 4) else { break };
                    if k.t32_stops(first, u16::from_le_bytes([w[2], w[3]])) {
                        break;
                    }
                    4
                } else if k.t32_stops(first, 0) {
                    break;
                } else {
                    2
                }
            } else {
                let Some(w) = at(a, 4) else { break };
                if k.word_stops(u32::from_le_bytes([w[0], w[1], w[2], w[3]])) {
                    break;
                }
                4
            };
            last = a;
            count += 1;
            a += size;
        }
        (count > 0).then_some(PlainRun { count, last })
    }

    /// The map and the stepped walk agree from every byte of `bytes` (mapped
    /// at `start`) that `starts` keeps, with the maps each alignment needs.
    fn agree_from_every_start(isa: Isa, bytes: &[u8], start: u64, starts: impl Fn(u64) -> bool, max: u64) {
        let opts = DecodeOptions::default();
        let maps: Vec<StopMap> = (0..4).map(|a| map(MapKey::new(isa, &opts, start + a).unwrap(), start, bytes.len())).collect();
        let mut checked = 0;
        for addr in (start..start + bytes.len() as u64).filter(|&a| starts(a - start)) {
            let m = maps.iter().find(|m| m.key() == MapKey::new(isa, &opts, addr).unwrap()).unwrap();
            let k = m.key();
            let want = stepped(&k, bytes, start, addr, max, None);
            match m.plain_run(bytes, start, addr, max, None) {
                Some(got) => assert_eq!(Some(got), want, "{isa:?} from {addr:#x}"),
                // Only a T32 walk off both chains may be left to step.
                None if want.is_some() => {
                    assert_eq!(isa, Isa::T32, "from {addr:#x}: no run, stepped {want:?}");
                    let page = m.base + (addr - m.base) / 2 / PAGE_SLOTS * PAGE_SLOTS * 2;
                    for from in [page, page + 2] {
                        let mut a = from;
                        while a < addr {
                            let off = (a - start) as usize;
                            a += if arm32::t32_is_32bit(u16::from_le_bytes([bytes[off], bytes[off + 1]])) { 4 } else { 2 };
                        }
                        assert_ne!(a, addr, "from {addr:#x}: no run, but decoding from {from:#x} meets it");
                    }
                }
                None => {}
            }
            checked += 1;
        }
        assert!(checked > 0);
    }

    /// The tests' ordinary instructions are ordinary, in every T32 pairing.
    #[test]
    fn the_test_code_is_plain() {
        for isa in [Isa::A64, Isa::A32] {
            assert!(testcode::plain_words(isa).iter().all(|&w| !key(isa, 0).word_stops(w)), "{isa:?}");
        }
        let k = key(Isa::T32, 0);
        let halves: Vec<u16> = testcode::plain_words(Isa::T32).iter().flat_map(|&w| [w as u16, (w >> 16) as u16]).collect();
        for &first in &halves {
            for &second in &halves {
                assert!(!k.t32_stops(first, second), "{first:#06x} {second:#06x}");
            }
        }
    }

    #[test]
    fn runs_end_at_the_next_waypoint() {
        let bytes = words(&[NOP, NOP, NOP, RET, NOP, B, NOP]);
        let m = map(key(Isa::A64, 0), 0x1000, bytes.len());
        let cases = [
            (0x1000, 100, None, Some((3, 0x1008))), // three NOPs, then RET
            (0x1004, 100, None, Some((2, 0x1008))),
            (0x100c, 100, None, None), // at the RET itself
            (0x1010, 100, None, Some((1, 0x1010))),
            (0x1018, 100, None, Some((1, 0x1018))), // runs off the region's end
            (0x1000, 2, None, Some((2, 0x1004))),   // capped
            (0x1000, 100, Some(0x1008), Some((2, 0x1004))), // stops before `until`
            (0x1000, 100, Some(0x1006), Some((3, 0x1008))), // which the walk never meets
            (0x1002, 100, None, None), // another alignment's map
            (0x0ffc, 100, None, None), // before the region
            (0x101c, 100, None, None), // past it
        ];
        for (addr, max, until, want) in cases {
            let want = want.map(|(count, last)| PlainRun { count, last });
            assert_eq!(m.plain_run(&bytes, 0x1000, addr, max, until), want, "at {addr:#x} max {max}");
        }
    }

    #[test]
    fn a32_t32_and_options_have_their_own_maps() {
        let bytes = words(&[A32_MOV, A32_MOV, A32_B, A32_MOV]);
        let m = map(key(Isa::A32, 0), 0x8000, bytes.len());
        assert_eq!(m.plain_run(&bytes, 0x8000, 0x8000, 10, None), Some(PlainRun { count: 2, last: 0x8004 }));
        // MOV (narrow), LDR.W (wide), IT EQ, MOV, B (narrow).
        let t32: Vec<u8> = [0x4600u16, 0xf8d1, 0x0000, 0xbf08, 0x4600, 0xe7fe].iter().flat_map(|h| h.to_le_bytes()).collect();
        let m = map(key(Isa::T32, 0), 0, t32.len());
        assert_eq!(m.plain_run(&t32, 0, 0, 10, None), Some(PlainRun { count: 2, last: 2 }), "up to the IT");
        assert_eq!(m.plain_run(&t32, 0, 8, 10, None), Some(PlainRun { count: 1, last: 8 }), "up to the B");
        // The second half of the LDR.W is on neither decoding of the page:
        // left to step.
        assert_eq!(m.plain_run(&t32, 0, 4, 10, None), None, "off both chains");
        assert!(MapKey::new(Isa::Jazelle, &DecodeOptions::default(), 0).is_none());
        // The A64 opcode check makes a zero-topped word a stop.
        let bytes = words(&[NOP, 0x0000_1234, NOP]);
        let checked = MapKey::new(Isa::A64, &DecodeOptions { aa64_opcode_check: true, ..Default::default() }, 0).unwrap();
        assert_ne!(checked, key(Isa::A64, 0));
        assert_eq!(map(key(Isa::A64, 0), 0, 12).plain_run(&bytes, 0, 0, 10, None).map(|r| r.count), Some(3));
        assert_eq!(map(checked, 0, 12).plain_run(&bytes, 0, 0, 10, None).map(|r| r.count), Some(1));
    }

    #[test]
    fn a_wide_t32_instruction_cut_by_the_region_end_is_stepped() {
        let t32: Vec<u8> = [0x4600u16, 0x4600, 0xf8d1].iter().flat_map(|h| h.to_le_bytes()).collect();
        let m = map(key(Isa::T32, 0), 0x100, t32.len());
        assert_eq!(m.plain_run(&t32, 0x100, 0x100, 10, None), Some(PlainRun { count: 2, last: 0x102 }));
        assert_eq!(m.plain_run(&t32, 0x100, 0x104, 10, None), None);
    }

    #[test]
    fn pages_edges_alignments_and_caps_agree_with_stepping() {
        // Waypoints right at and around page edges, a region starting 2 bytes
        // before an aligned word and ending with a partial word.
        let n = (PAGE_SLOTS * 3 + 17) as usize;
        let mut ops = vec![NOP; n];
        for w in [0usize, 63, 64, PAGE_SLOTS as usize - 1, PAGE_SLOTS as usize, 2 * PAGE_SLOTS as usize + 5, n - 1] {
            ops[w] = RET;
        }
        let mut bytes = vec![0xaa, 0xbb];
        bytes.extend(words(&ops));
        bytes.push(0xcc);
        let start = 0x4_0000 - 2;
        let k = key(Isa::A64, 0);
        let m = map(k, start, bytes.len());
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..3000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let addr = 0x4_0000 + (seed % n as u64) * 4;
            let max = if seed & 1 == 0 { u64::MAX } else { (seed >> 8) % 40_000 };
            let until = (seed & 6 == 0).then(|| addr + (seed >> 20) % 80_000 * 4);
            assert_eq!(m.plain_run(&bytes, start, addr, max, until), stepped(&k, &bytes, start, addr, max, until), "{addr:#x} {max}");
        }
    }

    /// T32 code whose two decodings differ for long stretches (wide
    /// instructions whose second halfword starts a wide one), over three
    /// pages: from every halfword and byte around the page edges, the map
    /// answers as stepping does, or (off both chains) leaves it to stepping.
    #[test]
    fn t32_from_every_start_across_pages() {
        let plain = testcode::plain_words(Isa::T32);
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut code = Vec::new();
        while code.len() < (PAGE_SLOTS as usize * 2) * 3 + 10 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let w = if seed.is_multiple_of(500) { 0xe7fe_e7fe } else { plain[(seed >> 32) as usize % plain.len()] };
            code.extend_from_slice(&w.to_le_bytes());
        }
        let edge = PAGE_SLOTS * 2;
        let near = |off: u64| off < 300 || (1..4).any(|p| off.abs_diff(p * edge) < 300) || off.is_multiple_of(97);
        agree_from_every_start(Isa::T32, &code, 0x20_0002, near, u64::MAX);
        agree_from_every_start(Isa::T32, &code, 0x20_0002, near, 7);
    }

    fn fixture(rel: &str) -> Option<Vec<u8>> {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/opencsd").join(rel);
        std::fs::read(p).ok()
    }

    /// The fixtures' program images, from every byte offset: the T32 code
    /// of the PTM and v8.1-M captures (range2 starts 2 bytes past a word),
    /// the Snowball kernel as A32 and T32, Juno's as A64.
    #[test]
    fn fixture_images_from_every_start() {
        let cases = [
            ("tc2-ptm-rstk-t32/mem_Cortex-A15_0_1_RO_CODE.bin", 0x8000_0278u64, Isa::T32),
            ("tc2-ptm-rstk-t32/mem_Cortex-A15_0_1_RO_CODE.bin", 0x8000_0278, Isa::A32),
            ("armv8_1m_branches/range1.bin", 0x1e008, Isa::T32),
            ("armv8_1m_branches/range2.bin", 0x4f_9a02, Isa::T32),
            ("Snowball/kernel_dump.bin", 0xc000_8000, Isa::A32),
            ("Snowball/kernel_dump.bin", 0xc000_8000, Isa::T32),
            ("juno_r1_1/kernel_dump.bin", 0xffff_ffc0_0008_1000, Isa::A64),
        ];
        let mut seen = 0;
        for (file, start, isa) in cases {
            let Some(bytes) = fixture(file) else { continue };
            seen += 1;
            agree_from_every_start(isa, &bytes, start, |_| true, u64::MAX);
        }
        assert!(seen > 0, "no fixture found under ../shared/fixtures/opencsd");
    }

    #[test]
    fn every_a64_opcode_class_matches_the_classifier() {
        let k = key(Isa::A64, 0);
        let mut op = 1u32;
        for _ in 0..200_000 {
            op = op.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let info = a64::classify(op, 0, k.a64);
            let stops = info.bad_opcode || info.itype != InstrType::Other;
            assert_eq!(map(k, 0, 4).plain_run(&op.to_le_bytes(), 0, 0, 1, None).is_none(), stops, "{op:#010x}");
        }
    }

    /// A run builds the pages it passes and, ahead of it, at most as many
    /// again; a capped run builds only what the cap can reach.
    #[test]
    fn pages_are_built_as_runs_need_them() {
        let pages = 40u64;
        let bytes = words(&vec![NOP; (PAGE_SLOTS * pages) as usize]);
        let stats = Arc::new(MapStats::default());
        let m = StopMap::new(key(Isa::A64, 0), 0, bytes.len() as u64, Arc::clone(&stats));
        assert_eq!(stats.counts().pages_built, 0);
        let run = m.plain_run(&bytes, 0, 0, 10, None).unwrap();
        assert_eq!((run.count, stats.counts().pages_built), (10, 1));
        // Through 5 pages: 1 + 1 + 2 + 4 + 8 built at most.
        let run = m.plain_run(&bytes, 0, 0, PAGE_SLOTS * 5 - 1, None).unwrap();
        assert_eq!(run.count, PAGE_SLOTS * 5 - 1);
        assert!(stats.counts().pages_built <= 16, "{:?}", stats.counts());
        let run = m.plain_run(&bytes, 0, 0, u64::MAX, None).unwrap();
        assert_eq!(run.count, PAGE_SLOTS * pages);
        assert_eq!(stats.counts().pages_built, pages);
        assert_eq!(stats.counts().bytes_scanned, bytes.len() as u64);
    }
}
