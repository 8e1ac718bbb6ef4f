//! Inputs shared by the benchmarks: a fixture's default trace buffer, repeated in
//! memory to a minimum size (whole copies, as ../shared/fixtures/opencsd/BASELINE.md
//! built its large inputs).

use std::path::Path;

use tracesight::input::Snapshot;
use tracesight::session::BufferPlan;

pub struct Input {
    pub name: String,
    pub plan: BufferPlan,
    pub data: Vec<u8>,
}

/// Fixture `name`'s default buffer, repeated to at least `min_len` bytes.
pub fn input(name: &str, min_len: usize) -> Option<Input> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/opencsd").join(name);
    let snap = Snapshot::open(&dir).ok()?;
    let buffer = snap.default_buffer()?.clone();
    let plan = BufferPlan::new(&snap, &buffer).ok()?;
    let one = std::fs::read(&buffer.path).ok()?;
    let copies = min_len.div_ceil(one.len()).max(1);
    let data: Vec<u8> = one.iter().copied().cycle().take(one.len() * copies).collect();
    let label = if copies == 1 { name.to_string() } else { format!("{name}-x{copies}") };
    Some(Input { name: label, plan, data })
}
