//! `tracesight [CAPTURE]`: the viewer.

use crate::cli::CliError;
use std::path::PathBuf;
use std::process::ExitCode;

use super::{demo_path, CaptureArgs, SourceArgs};

/// Open `path` (the bundled demo without one) in the viewer.
pub fn run(path: Option<PathBuf>, capture: &CaptureArgs, sources: &SourceArgs) -> Result<ExitCode, CliError> {
    let path = path.unwrap_or_else(demo_path);
    let mut copts = capture.options();
    copts.source_roots = sources.source_roots.clone();
    copts.substitutions =
        sources.substitutions.iter().map(|a| tracesight::symbols::parse_substitution(a)).collect::<Result<_, _>>()?;
    // Open once here so a bad path fails before the screen switches.
    tracesight::capture::Capture::open(&path, &copts)?;
    tracesight::tui::run(&path, &copts)?;
    Ok(ExitCode::SUCCESS)
}
