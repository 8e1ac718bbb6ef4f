//! CoreSight trace formatter: interleaves several trace IDs' byte streams into
//! 16-byte frames, as an ETB/ETR captures them (`format=coresight`).
//!
//! Frame layout (CoreSight Architecture, formatter protocol): bytes 0, 2, ..,
//! 14 hold either an ID change (bit 0 set, ID in bits 7:1) or a data byte
//! whose bit 0 moves to the auxiliary byte 15; odd bytes 1..13 are data. An ID
//! change at byte `2k` with bit `k` of byte 15 set applies after the data byte
//! `2k+1`, which still belongs to the previous ID: that is how a change is
//! placed when the switch falls on an odd byte. The last frame is padded with
//! data for ID 0 (null data, which no decoder reads).

use std::io::{self, Write};

/// Formatter state over an output.
pub struct FrameWriter<W: Write> {
    out: W,
    /// Bytes waiting for a frame, from `pos` on.
    data: Vec<u8>,
    pos: usize,
    /// Runs of `data` by trace ID: (end offset in `data`, ID), oldest first.
    runs: std::collections::VecDeque<(usize, u8)>,
    /// ID in force at the end of the last written frame (0xff: none).
    cur: u8,
    /// Bytes of frames written.
    pub written: u64,
}

impl<W: Write> FrameWriter<W> {
    pub fn new(out: W) -> FrameWriter<W> {
        FrameWriter {
            out,
            data: Vec::with_capacity(1 << 16),
            pos: 0,
            runs: std::collections::VecDeque::new(),
            cur: 0xff,
            written: 0,
        }
    }

    /// Append data for trace ID `id` (0x01..=0x6f).
    pub fn push(&mut self, id: u8, data: &[u8]) -> io::Result<()> {
        debug_assert!((1..0x70).contains(&id));
        if data.is_empty() {
            return Ok(());
        }
        let end = self.data.len() + data.len();
        match self.runs.back_mut() {
            Some(r) if r.1 == id => r.0 = end,
            _ => self.runs.push_back((end, id)),
        }
        self.data.extend_from_slice(data);
        // Keep a few bytes queued: a frame needs one byte of look-ahead.
        while self.queued() > 32 {
            self.frame(false)?;
        }
        if self.pos > 1 << 15 {
            self.data.drain(..self.pos);
            for r in self.runs.iter_mut() {
                r.0 -= self.pos;
            }
            self.pos = 0;
        }
        Ok(())
    }

    /// The output written so far (for a `Vec<u8>` output, to move completed
    /// frames elsewhere).
    pub fn output_mut(&mut self) -> &mut W {
        &mut self.out
    }

    /// Write out everything, padding the last frame; returns the output.
    pub fn finish(mut self) -> io::Result<W> {
        while self.queued() > 0 {
            self.frame(true)?;
        }
        self.out.flush()?;
        Ok(self.out)
    }

    fn queued(&self) -> usize {
        self.data.len() - self.pos
    }

    /// The ID of the `k`th queued byte.
    fn peek_id(&self, k: usize) -> Option<u8> {
        let i = self.pos + k;
        if i >= self.data.len() {
            return None;
        }
        self.runs.iter().find(|r| r.0 > i).map(|r| r.1)
    }

    /// Take the next queued byte.
    fn pop(&mut self) -> (u8, u8) {
        let b = self.data[self.pos];
        let (end, id) = *self.runs.front().expect("queued byte without a run");
        self.pos += 1;
        if end == self.pos {
            self.runs.pop_front();
        }
        (id, b)
    }

    /// Build and write one frame from the queue.
    fn frame(&mut self, at_end: bool) -> io::Result<()> {
        let mut f = [0u8; 16];
        let mut aux = 0u8;
        let mut p = 0usize;
        let mut padding = false;
        while p < 15 {
            if padding {
                // Null data for ID 0: zero bytes, aux bits clear.
                p += 1;
                continue;
            }
            if p % 2 == 1 {
                // Odd bytes are always data of the current ID.
                let (id, b) = self.pop();
                debug_assert_eq!(id, self.cur);
                f[p] = b;
                p += 1;
                continue;
            }
            let Some(id) = self.peek_id(0) else {
                if !at_end && p == 0 {
                    return Ok(());
                }
                // End of data: switch to ID 0 and pad.
                f[p] = 0x01;
                self.cur = 0;
                padding = true;
                p += 1;
                continue;
            };
            if id != self.cur {
                // Immediate ID change; its data follows at the odd byte.
                f[p] = (id << 1) | 1;
                self.cur = id;
                p += 1;
                if p == 15 {
                    break;
                }
                continue;
            }
            // Data of the current ID at an even byte. If the item after it
            // belongs to another ID (or is the end), change the ID here with the
            // delayed flag so that the odd byte still carries this data.
            if p <= 12 {
                let next = self.peek_id(1);
                let switch_to = match next {
                    Some(n) if n != id => Some(n),
                    None if at_end => Some(0),
                    _ => None,
                };
                if let Some(n) = switch_to {
                    let (_, b) = self.pop();
                    f[p] = (n << 1) | 1;
                    aux |= 1 << (p / 2);
                    f[p + 1] = b;
                    self.cur = n;
                    p += 2;
                    if n == 0 {
                        padding = true;
                    }
                    continue;
                }
            }
            let (_, b) = self.pop();
            f[p] = b & 0xfe;
            aux |= (b & 1) << (p / 2);
            p += 1;
        }
        f[15] = aux;
        self.out.write_all(&f)?;
        self.written += 16;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{Deformatter, FrameMode};

    fn roundtrip(chunks: &[(u8, Vec<u8>)]) {
        let mut w = FrameWriter::new(Vec::new());
        for (id, d) in chunks {
            w.push(*id, d).unwrap();
        }
        let out = w.finish().unwrap();
        assert_eq!(out.len() % 16, 0);
        let mut got: std::collections::BTreeMap<u8, Vec<u8>> = Default::default();
        let mut d = Deformatter::new(FrameMode::MemAligned);
        let mut sink = |id: u8, _i: u64, b: &[u8]| {
            if id != 0 {
                assert!(!b.is_empty());
                got.entry(id).or_default().extend_from_slice(b);
            }
        };
        d.push(0, &out, &mut sink).unwrap();
        d.finish(&mut sink).unwrap();
        let mut want: std::collections::BTreeMap<u8, Vec<u8>> = Default::default();
        for (id, dd) in chunks {
            want.entry(*id).or_default().extend_from_slice(dd);
        }
        assert_eq!(got, want);
    }

    #[test]
    fn interleaved_streams_survive_deformatting() {
        let mut seed = 0x1234_5678u64;
        let mut rnd = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for round in 0..200 {
            let mut chunks = Vec::new();
            for _ in 0..(round % 7 + 1) {
                let id = [0x10u8, 0x11, 0x12, 0x6f][(rnd() % 4) as usize];
                let len = (rnd() % 40) as usize + 1;
                chunks.push((id, (0..len).map(|_| rnd() as u8).collect()));
            }
            roundtrip(&chunks);
        }
        roundtrip(&[(0x10, vec![0xff; 1])]);
        roundtrip(&[(0x10, vec![1, 2]), (0x11, vec![3]), (0x10, vec![4])]);
    }
}
