//! The decoder's P0 element stack as a ring whose capacity is a power of
//! two, so that a slot is found with a mask.
//!
//! Nearly every packet pushes onto it or takes from it. callgrind put 8% of
//! a decode of texit-poe2 inside `VecDeque`, which wraps its indices with
//! comparisons; with the ring the whole decode took 1% fewer instructions.
//! It grows by doubling and never shrinks (the decoder bounds its length),
//! and serializes as a plain sequence, front first, as `VecDeque` did, so
//! saved states read the same.

/// A double-ended queue over a power-of-two ring.
#[derive(Clone, Debug)]
pub(super) struct Ring<T> {
    buf: Vec<T>,
    head: usize,
    len: usize,
}

impl<T: Copy + Default> Ring<T> {
    pub fn with_capacity(n: usize) -> Ring<T> {
        Ring { buf: vec![T::default(); n.max(1).next_power_of_two()], head: 0, len: 0 }
    }

    #[inline(always)]
    fn mask(&self) -> usize {
        self.buf.len() - 1
    }

    #[inline(always)]
    fn slot(&self, i: usize) -> usize {
        (self.head + i) & self.mask()
    }

    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn clear(&mut self) {
        self.head = 0;
        self.len = 0;
    }

    #[inline]
    pub fn get(&self, i: usize) -> Option<&T> {
        (i < self.len).then(|| &self.buf[self.slot(i)])
    }

    #[inline]
    pub fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        let s = self.slot(i);
        (i < self.len).then(|| &mut self.buf[s])
    }

    #[inline]
    pub fn front(&self) -> Option<&T> {
        self.get(0)
    }

    #[inline]
    pub fn front_mut(&mut self) -> Option<&mut T> {
        self.get_mut(0)
    }

    // Inlined, with the slot handed back: as a call, the caller built the
    // element on its stack with narrow stores and the copy read it back in
    // 16-byte loads, which stalled on store forwarding (81% of the samples
    // of the call, 19% of a summary of ts_bit64_set, a timestamp capture).
    #[inline(always)]
    pub fn push_back(&mut self, v: T) -> &mut T {
        if self.len == self.buf.len() {
            self.grow();
        }
        let s = self.slot(self.len);
        self.len += 1;
        let slot = &mut self.buf[s];
        *slot = v;
        slot
    }

    #[inline]
    pub fn pop_front(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let v = self.buf[self.head];
        self.head = (self.head + 1) & self.mask();
        self.len -= 1;
        Some(v)
    }

    #[inline]
    pub fn pop_back(&mut self) -> Option<T> {
        let n = self.len.checked_sub(1)?;
        let v = self.buf[self.slot(n)];
        self.len = n;
        Some(v)
    }

    /// Take out the element at `i`, moving the shorter side over its slot:
    /// those before it back, or those after it forward. (An exception drops
    /// the elements just behind the front of a stack that may hold hundreds
    /// under speculation; moving all those after them was 5% of a summary of
    /// ete_spec_1.)
    pub fn remove(&mut self, i: usize) -> Option<T> {
        let v = *self.get(i)?;
        if i < self.len / 2 {
            for k in (0..i).rev() {
                let (to, from) = (self.slot(k + 1), self.slot(k));
                self.buf[to] = self.buf[from];
            }
            self.head = (self.head + 1) & self.mask();
        } else {
            for k in i..self.len - 1 {
                let (to, from) = (self.slot(k), self.slot(k + 1));
                self.buf[to] = self.buf[from];
            }
        }
        self.len -= 1;
        Some(v)
    }

    pub fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        (0..self.len).map(move |i| &self.buf[self.slot(i)])
    }

    /// Twice the room, the elements laid out from slot 0.
    #[cold]
    fn grow(&mut self) {
        let mut buf = vec![T::default(); self.buf.len() * 2];
        for (i, v) in self.iter().enumerate() {
            buf[i] = *v;
        }
        self.buf = buf;
        self.head = 0;
    }
}

impl<T: Copy + Default> Default for Ring<T> {
    fn default() -> Ring<T> {
        Ring::with_capacity(1)
    }
}

impl<T: Copy + Default> std::ops::Index<usize> for Ring<T> {
    type Output = T;
    fn index(&self, i: usize) -> &T {
        self.get(i).expect("ring index within its length")
    }
}

impl<T: Copy + Default> std::ops::IndexMut<usize> for Ring<T> {
    fn index_mut(&mut self, i: usize) -> &mut T {
        self.get_mut(i).expect("ring index within its length")
    }
}

impl<T: Copy + Default + serde::Serialize> serde::Serialize for Ring<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

impl<'de, T: Copy + Default + serde::Deserialize<'de>> serde::Deserialize<'de> for Ring<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Ring<T>, D::Error> {
        let items: Vec<T> = Vec::deserialize(d)?;
        let mut r = Ring::with_capacity(items.len());
        for v in items {
            r.push_back(v);
        }
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::Ring;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    #[derive(Clone, Debug)]
    enum Op {
        Push(u32),
        PopFront,
        PopBack,
        Remove(usize),
        Bump,
        Clear,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => any::<u32>().prop_map(Op::Push),
            2 => Just(Op::PopFront),
            2 => Just(Op::PopBack),
            2 => (0usize..40).prop_map(Op::Remove),
            2 => Just(Op::Bump),
            1 => Just(Op::Clear),
        ]
    }

    proptest! {
        /// Any sequence of operations does to a ring what it does to a
        /// `VecDeque`, across growth and wrap-around.
        #[test]
        fn ring_behaves_as_vecdeque(ops in proptest::collection::vec(op(), 0..400), cap in 1usize..9) {
            let mut ring: Ring<u32> = Ring::with_capacity(cap);
            let mut deque: VecDeque<u32> = VecDeque::new();
            for o in ops {
                match o {
                    Op::Push(v) => {
                        // The slot handed back is the new last one.
                        *ring.push_back(v) ^= 5;
                        deque.push_back(v ^ 5);
                    }
                    Op::PopFront => prop_assert_eq!(ring.pop_front(), deque.pop_front()),
                    Op::PopBack => prop_assert_eq!(ring.pop_back(), deque.pop_back()),
                    Op::Remove(i) => prop_assert_eq!(ring.remove(i), deque.remove(i)),
                    Op::Bump => {
                        if let (Some(a), Some(b)) = (ring.len().checked_sub(1).and_then(|n| ring.get_mut(n)), deque.back_mut()) {
                            *a = a.wrapping_add(1);
                            *b = b.wrapping_add(1);
                        }
                        if let (Some(a), Some(b)) = (ring.front_mut(), deque.front_mut()) {
                            *a ^= 3;
                            *b ^= 3;
                        }
                    }
                    Op::Clear => {
                        ring.clear();
                        deque.clear();
                    }
                }
                prop_assert_eq!(ring.len(), deque.len());
                prop_assert_eq!(ring.front(), deque.front());
                prop_assert!(ring.iter().eq(deque.iter()));
            }
        }
    }

    /// Saved the way a `VecDeque` was: a state written before reads back.
    #[test]
    fn ring_serializes_as_vecdeque() {
        let deque: VecDeque<u32> = (0..37).collect();
        let bytes = bincode::serialize(&deque).unwrap();
        let ring: Ring<u32> = bincode::deserialize(&bytes).unwrap();
        assert!(ring.iter().eq(deque.iter()));
        assert_eq!(bincode::serialize(&ring).unwrap(), bytes);
    }
}
