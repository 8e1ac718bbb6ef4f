//! The fixture captures and the buffer plan of one, shared by the tests
//! that decode every fixture through the library.

use std::path::{Path, PathBuf};

use tracesight::input::Snapshot;
use tracesight::session::BufferPlan;

/// `../shared/fixtures/opencsd`, when it is there.
pub fn fixtures() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/opencsd");
    p.is_dir().then_some(p)
}

/// The plan of a snapshot's default buffer, when it has a source that decodes.
pub fn plan_of(dir: &Path) -> Option<BufferPlan> {
    let snap = Snapshot::open(dir).ok()?;
    let buffer = snap.default_buffer()?.clone();
    let plan = BufferPlan::new(&snap, &buffer).ok()?;
    plan.sources.iter().any(|s| s.kind.is_decoded()).then_some(plan)
}
