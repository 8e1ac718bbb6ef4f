//! Where a saved decode state holds numbers that count from the start of the
//! decode (P0 sequence numbers, total cycles, bytes fed, the run's counts).
//!
//! The parallel index build starts decoders in the middle of a buffer. Once
//! such a decoder has synchronised, its state equals the state of a decode
//! from the start except for these counters, each of which is off by a fixed
//! amount; nothing the decoders do depends on their absolute value. Knowing
//! where they are in the serialized state lets the build compare two states
//! with the counters left out, and shift a state saved by the later decoder
//! into the one the decode from the start would have saved.
//!
//! The positions come from serializing the decoder objects once more with a
//! serializer that writes bincode's format (fixed-width little-endian
//! integers, u64 lengths, u32 variant indices) and notes every integer
//! written under a field with a counter's name. Its output is compared with
//! bincode's: when they differ, no positions are given and the state is never
//! treated as equal to another, which costs speed but never correctness.
//!
//! The session locates the marks when it saves a state; the index build
//! (a layer above) compares and shifts with them: so they live here, below
//! both.

use serde::ser::{self, Serialize};

/// What a counter counts; counters of one kind in one chain move together.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// P0 element sequence numbers (ETMv4/ETE speculation view).
    Seq,
    /// Cycles counted since the decoder started.
    Cycles,
    /// Bytes a packet parser has been given.
    BytesIn,
    /// The run's totals.
    Packets,
    Elements,
    Instructions,
}

/// One counter in a serialized state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mark {
    /// Byte offset of the little-endian u64 (or of the `None` tag).
    pub at: usize,
    pub kind: Kind,
    /// Trace ID of the chain holding it (0 for the raw chain and the totals).
    pub chain: u8,
    /// `None` for an absent optional counter whose absence changes what the
    /// decoder does next (a default of 0 takes its place): its group can only
    /// be shifted by 0.
    pub value: Option<u64>,
}

const KINDS: [Kind; 6] = [Kind::Seq, Kind::Cycles, Kind::BytesIn, Kind::Packets, Kind::Elements, Kind::Instructions];

/// `marks` as bytes (19 per mark), to keep them out of memory while an index
/// is built (the index build keeps them in its spill file).
pub fn to_bytes(marks: &[Mark]) -> Vec<u8> {
    let mut out = Vec::with_capacity(marks.len() * 19);
    for m in marks {
        out.extend_from_slice(&(m.at as u64).to_le_bytes());
        out.push(KINDS.iter().position(|k| *k == m.kind).unwrap_or(0) as u8);
        out.push(m.chain);
        out.push(m.value.is_some() as u8);
        out.extend_from_slice(&m.value.unwrap_or(0).to_le_bytes());
    }
    out
}

/// The marks [`to_bytes`] wrote; `None` for anything else.
pub fn from_bytes(bytes: &[u8]) -> Option<Vec<Mark>> {
    if !bytes.len().is_multiple_of(19) {
        return None;
    }
    bytes
        .chunks_exact(19)
        .map(|c| {
            let word = |i: usize| u64::from_le_bytes(c[i..i + 8].try_into().expect("8 bytes"));
            Some(Mark {
                at: usize::try_from(word(0)).ok()?,
                kind: *KINDS.get(c[8] as usize)?,
                chain: c[9],
                value: match c[10] {
                    0 => None,
                    1 => Some(word(11)),
                    _ => return None,
                },
            })
        })
        .collect()
}

/// The counter a field of this name holds, and whether its absence matters.
fn counter(field: &str) -> Option<(Kind, bool)> {
    match field {
        "seq" | "next_seq" | "tx_first_seq" => Some((Kind::Seq, false)),
        // A new transaction starts at `last_committed_seq + 1`, or at 0.
        "last_committed_seq" => Some((Kind::Seq, true)),
        "total_cycles" => Some((Kind::Cycles, false)),
        "bytes_in" => Some((Kind::BytesIn, false)),
        _ => None,
    }
}

/// `value` serialized as `bincode::serialize` does, with the counters in it.
/// `None` when the bytes differ from `expect` (bincode's own output).
pub fn locate<T: Serialize + ?Sized>(value: &T, chain: u8, expect: &[u8]) -> Option<Vec<Mark>> {
    let mut w = Writer { out: Vec::with_capacity(expect.len()), marks: Vec::new(), within: None, chain };
    value.serialize(&mut w).ok()?;
    (w.out == expect).then_some(w.marks)
}

struct Writer {
    out: Vec<u8>,
    marks: Vec<Mark>,
    /// The counter field being written, if any.
    within: Option<(Kind, bool)>,
    chain: u8,
}

#[derive(Debug)]
pub struct Error(String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl ser::Error for Error {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        Error(msg.to_string())
    }
}

type Res = Result<(), Error>;

impl Writer {
    fn int(&mut self, bytes: &[u8], value: Option<u64>) -> Res {
        if let (Some((kind, _)), Some(v)) = (self.within, value) {
            self.marks.push(Mark { at: self.out.len(), kind, chain: self.chain, value: Some(v) });
        }
        self.out.extend_from_slice(bytes);
        Ok(())
    }

    fn len(&mut self, len: Option<usize>) -> Res {
        let len = len.ok_or_else(|| Error("a sequence without a length".into()))?;
        self.out.extend_from_slice(&(len as u64).to_le_bytes());
        Ok(())
    }

    fn field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Res {
        let outer = self.within;
        if let Some(c) = counter(key) {
            self.within = Some(c);
        }
        let r = value.serialize(&mut *self);
        self.within = outer;
        r
    }
}

impl ser::Serializer for &mut Writer {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Self;
    type SerializeTuple = Self;
    type SerializeTupleStruct = Self;
    type SerializeTupleVariant = Self;
    type SerializeMap = Self;
    type SerializeStruct = Self;
    type SerializeStructVariant = Self;

    fn serialize_bool(self, v: bool) -> Res {
        self.int(&[v as u8], None)
    }
    fn serialize_i8(self, v: i8) -> Res {
        self.int(&v.to_le_bytes(), None)
    }
    fn serialize_i16(self, v: i16) -> Res {
        self.int(&v.to_le_bytes(), None)
    }
    fn serialize_i32(self, v: i32) -> Res {
        self.int(&v.to_le_bytes(), None)
    }
    fn serialize_i64(self, v: i64) -> Res {
        self.int(&v.to_le_bytes(), None)
    }
    fn serialize_i128(self, v: i128) -> Res {
        self.int(&v.to_le_bytes(), None)
    }
    fn serialize_u8(self, v: u8) -> Res {
        self.int(&[v], None)
    }
    fn serialize_u16(self, v: u16) -> Res {
        self.int(&v.to_le_bytes(), None)
    }
    fn serialize_u32(self, v: u32) -> Res {
        self.int(&v.to_le_bytes(), None)
    }
    fn serialize_u64(self, v: u64) -> Res {
        self.int(&v.to_le_bytes(), Some(v))
    }
    fn serialize_u128(self, v: u128) -> Res {
        self.int(&v.to_le_bytes(), None)
    }
    fn serialize_f32(self, v: f32) -> Res {
        self.int(&v.to_le_bytes(), None)
    }
    fn serialize_f64(self, v: f64) -> Res {
        self.int(&v.to_le_bytes(), None)
    }
    fn serialize_char(self, v: char) -> Res {
        let mut b = [0u8; 4];
        self.int(v.encode_utf8(&mut b).as_bytes(), None)
    }
    fn serialize_str(self, v: &str) -> Res {
        self.serialize_bytes(v.as_bytes())
    }
    fn serialize_bytes(self, v: &[u8]) -> Res {
        self.len(Some(v.len()))?;
        self.out.extend_from_slice(v);
        Ok(())
    }
    fn serialize_none(self) -> Res {
        if let Some((kind, true)) = self.within {
            self.marks.push(Mark { at: self.out.len(), kind, chain: self.chain, value: None });
        }
        self.out.push(0);
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Res {
        self.out.push(1);
        value.serialize(self)
    }
    fn serialize_unit(self) -> Res {
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Res {
        Ok(())
    }
    fn serialize_unit_variant(self, _: &'static str, index: u32, _: &'static str) -> Res {
        self.int(&index.to_le_bytes(), None)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, value: &T) -> Res {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(self, _: &'static str, index: u32, _: &'static str, value: &T) -> Res {
        self.int(&index.to_le_bytes(), None)?;
        value.serialize(self)
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<Self, Error> {
        self.len(len)?;
        Ok(self)
    }
    fn serialize_tuple(self, _: usize) -> Result<Self, Error> {
        Ok(self)
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Self, Error> {
        Ok(self)
    }
    fn serialize_tuple_variant(self, _: &'static str, index: u32, _: &'static str, _: usize) -> Result<Self, Error> {
        self.int(&index.to_le_bytes(), None)?;
        Ok(self)
    }
    fn serialize_map(self, len: Option<usize>) -> Result<Self, Error> {
        self.len(len)?;
        Ok(self)
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self, Error> {
        Ok(self)
    }
    fn serialize_struct_variant(self, _: &'static str, index: u32, _: &'static str, _: usize) -> Result<Self, Error> {
        self.int(&index.to_le_bytes(), None)?;
        Ok(self)
    }
    fn is_human_readable(&self) -> bool {
        false
    }
}

/// The compound parts of bincode's format: elements one after the other.
macro_rules! compound {
    ($($trait:ident :: $method:ident),*) => {$(
        impl ser::$trait for &mut Writer {
            type Ok = ();
            type Error = Error;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Res {
                value.serialize(&mut **self)
            }
            fn end(self) -> Res {
                Ok(())
            }
        }
    )*};
}

compound!(SerializeSeq::serialize_element, SerializeTuple::serialize_element, SerializeTupleStruct::serialize_field, SerializeTupleVariant::serialize_field);

impl ser::SerializeMap for &mut Writer {
    type Ok = ();
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Res {
        key.serialize(&mut **self)
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Res {
        value.serialize(&mut **self)
    }
    fn end(self) -> Res {
        Ok(())
    }
}

/// Struct fields, whose names say which are counters.
macro_rules! fields {
    ($($trait:ident),*) => {$(
        impl ser::$trait for &mut Writer {
            type Ok = ();
            type Error = Error;
            fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Res {
                self.field(key, value)
            }
            fn end(self) -> Res {
                Ok(())
            }
        }
    )*};
}

fields!(SerializeStruct, SerializeStructVariant);

/// How the counters of `later` must be shifted to give `earlier`, when the two
/// states are otherwise byte for byte equal: one amount per (kind, chain),
/// none of them negative. `None` when the states differ anywhere else, or a
/// group's counters disagree on the amount.
pub fn shift_between(earlier: &[u8], em: &[Mark], later: &[u8], lm: &[Mark]) -> Option<Shift> {
    if earlier.len() != later.len() || em.len() != lm.len() {
        return None;
    }
    let mut shift = Shift::default();
    let mut from = 0;
    for (a, b) in em.iter().zip(lm) {
        if (a.at, a.kind, a.chain, a.value.is_some()) != (b.at, b.kind, b.chain, b.value.is_some()) {
            return None;
        }
        if earlier[from..a.at] != later[from..a.at] {
            return None;
        }
        match (a.value, b.value) {
            (Some(x), Some(y)) => {
                let d = x.checked_sub(y)?;
                if !shift.set(a.kind, a.chain, d) {
                    return None;
                }
                from = a.at + 8;
            }
            _ => {
                // The tag itself is compared with the bytes that follow.
                shift.pin(a.kind, a.chain);
                from = a.at;
            }
        }
    }
    if earlier[from..] != later[from..] {
        return None;
    }
    shift.consistent().then_some(shift)
}

/// Amounts to add to counters, per (kind, chain).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Shift {
    by: Vec<(Kind, u8, u64)>,
    /// Groups that must not move (see [`Mark::value`]).
    pinned: Vec<(Kind, u8)>,
}

impl Shift {
    /// Record `d` for a group; false when it already has another amount.
    fn set(&mut self, kind: Kind, chain: u8, d: u64) -> bool {
        match self.by.iter().find(|(k, c, _)| (*k, *c) == (kind, chain)) {
            Some(&(_, _, have)) => have == d,
            None => {
                self.by.push((kind, chain, d));
                true
            }
        }
    }

    fn pin(&mut self, kind: Kind, chain: u8) {
        if !self.pinned.contains(&(kind, chain)) {
            self.pinned.push((kind, chain));
        }
    }

    pub fn consistent(&self) -> bool {
        self.pinned.iter().all(|&(k, c)| self.get(k, c) == 0)
    }

    /// The amount for a group (0 when it has none).
    pub fn get(&self, kind: Kind, chain: u8) -> u64 {
        self.by.iter().find(|(k, c, _)| (*k, *c) == (kind, chain)).map_or(0, |g| g.2)
    }

    /// This shift followed by `other` (amounts add up).
    pub fn then(&self, other: &Shift) -> Shift {
        let mut s = self.clone();
        for &(k, c, d) in &other.by {
            match s.by.iter_mut().find(|g| (g.0, g.1) == (k, c)) {
                Some(g) => g.2 += d,
                None => s.by.push((k, c, d)),
            }
        }
        for &p in &other.pinned {
            s.pin(p.0, p.1);
        }
        s
    }

    /// Shift the counters of `state` in place.
    pub fn apply(&self, state: &mut [u8], marks: &[Mark]) {
        for m in marks {
            if m.value.is_some() {
                let d = self.get(m.kind, m.chain);
                if d != 0 {
                    let w = &mut state[m.at..m.at + 8];
                    let v = u64::from_le_bytes((&*w).try_into().unwrap()).wrapping_add(d);
                    w.copy_from_slice(&v.to_le_bytes());
                }
            }
        }
    }
}
