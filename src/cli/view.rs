//! `tracesight [CAPTURE]`: the viewer.

use crate::cli::CliError;
use std::path::PathBuf;
use std::process::ExitCode;

use super::{demo_path, CaptureArgs, SourceArgs};

/// The viewer's own options.
#[derive(clap::Args)]
pub struct ViewArgs {
    #[command(flatten)]
    pub sources: SourceArgs,
    /// Timestamp ticks per second (the trace's timestamp clock, e.g.
    /// 100000000 for 100 MHz): the Δ column shows time instead of ticks.
    #[arg(long, value_name = "HZ", value_parser = parse_freq)]
    pub ts_freq: Option<f64>,
}

fn parse_freq(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(f) if f.is_finite() && f > 0.0 => Ok(f),
        _ => Err(format!("'{s}' is not a frequency in Hz (a positive number, e.g. 100000000 or 1e8)")),
    }
}

/// Open `path` (the bundled demo without one) in the viewer.
pub fn run(path: Option<PathBuf>, capture: &CaptureArgs, view: &ViewArgs) -> Result<ExitCode, CliError> {
    let path = path.unwrap_or_else(demo_path);
    let sources = &view.sources;
    let mut copts = capture.options();
    copts.ts_freq = view.ts_freq;
    copts.source_roots = sources.source_roots.clone();
    copts.substitutions =
        sources.substitutions.iter().map(|a| tracesight::symbols::parse_substitution(a)).collect::<Result<_, _>>()?;
    // Open once here so a bad path fails before the screen switches.
    tracesight::capture::Capture::open(&path, &copts)?;
    tracesight::tui::run(&path, &copts)?;
    Ok(ExitCode::SUCCESS)
}
