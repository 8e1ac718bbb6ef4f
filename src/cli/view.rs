//! `tracesight [CAPTURE]`: the viewer.

use std::path::PathBuf;
use std::process::ExitCode;

use super::{demo_path, CaptureArgs};

/// Open `path` (the bundled demo without one) in the viewer.
pub fn run(path: Option<PathBuf>, capture: &CaptureArgs) -> Result<ExitCode, String> {
    let path = path.unwrap_or_else(demo_path);
    let copts = capture.options();
    // Open once here so a bad path fails before the screen switches.
    tracesight::capture::Capture::open(&path, &copts)
        .and_then(|_| tracesight::tui::run(&path, &copts))
        .map(|_| ExitCode::SUCCESS)
}
