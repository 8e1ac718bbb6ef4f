//! Walks to check the image's stop maps with (test code): random images of
//! A64, A32 or T32 code mapped as two regions, and where to walk them from.
//! The element decoders' tests walk them with and without the maps.

use proptest::prelude::*;

use super::branchmap::testcode::code;
use super::memory::MemoryImage;
use crate::element::{Isa, MemSpace};

/// A walk to check: code in `isa` mapped at `base` as two adjacent
/// regions (split at byte `split`, so runs meet a region's end), walked
/// from byte offsets `starts`, to the offset `to` when given.
#[derive(Debug, Clone)]
pub struct WalkCase {
    pub isa: Isa,
    pub code: Vec<u8>,
    pub base: u64,
    pub split: usize,
    pub starts: Vec<usize>,
    pub to: Option<usize>,
}

impl WalkCase {
    /// The image with the stop maps on, and a copy that steps.
    pub fn images(&self) -> (MemoryImage, MemoryImage) {
        let mut image = MemoryImage::new();
        let split = self.split.min(self.code.len());
        image.add_bytes(self.base, self.code[..split].to_vec(), MemSpace::ANY);
        image.add_bytes(self.base + split as u64, self.code[split..].to_vec(), MemSpace::ANY);
        let mut stepping = image.clone();
        stepping.set_stop_maps(false);
        (image, stepping)
    }

    pub fn start(&self, i: usize) -> u64 {
        self.base + (self.starts[i] % self.code.len()) as u64
    }

    pub fn to(&self) -> Option<u64> {
        self.to.map(|t| self.base + (t % self.code.len()) as u64)
    }
}

/// Random walks over up to two pages of A64, A32 or T32 code, some with
/// few stops, starting at any byte (every alignment).
pub fn walk_case() -> impl Strategy<Value = WalkCase> {
    let isa = prop_oneof![Just(Isa::A64), Just(Isa::A32), Just(Isa::T32)];
    let sparse = prop_oneof![Just(4u32), Just(60), Just(5000), Just(u32::MAX)];
    (isa, sparse, prop_oneof![Just(1usize), Just(50)]).prop_flat_map(|(isa, sparse, wide)| {
        (
            Just(isa),
            code(isa, 1..20_000, sparse, wide),
            (0u64..1 << 32).prop_map(|b| b & !1),
            any::<usize>(),
            proptest::collection::vec(any::<usize>(), 1..8),
            proptest::option::weighted(0.3, any::<usize>()),
        )
            .prop_map(|(isa, code, base, split, starts, to)| WalkCase {
                isa,
                split: split % (code.len() + 1),
                code,
                base,
                starts,
                to,
            })
    })
}
