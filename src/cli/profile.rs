//! `tracesight profile`: function statistics and profiles of a capture, and
//! `tracesight profile merge`.

use crate::cli::CliError;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use tracesight::profile::merge::MergeFormat;
use tracesight::profile::pass::{profile_capture, ProfileOptions};

#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct ProfileArgs {
    #[command(subcommand)]
    pub command: Option<ProfileCommand>,
    /// The capture (an OpenCSD snapshot directory or a perf.data file).
    #[arg(required = true)]
    pub capture: Option<PathBuf>,
    /// Write to this file instead of standard output.
    // Between --format (order 1) and --symdir (2), where it was listed
    // before the options moved into the library.
    #[arg(short, long, display_order = 2)]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub options: ProfileOptions,
}

#[derive(clap::Subcommand, Debug)]
pub enum ProfileCommand {
    /// Sum profiles of one format (AutoFDO by binary and build ID, BOLT,
    /// folded stacks); counts saturate at 2^64-1 with a warning.
    Merge(MergeArgs),
}

#[derive(clap::Args, Debug)]
pub struct MergeArgs {
    /// Profiles to add up.
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// Where to write the sum.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Read every input as this format (default: recognised from the text).
    #[arg(long, value_enum)]
    pub format: Option<MergeFormat>,
}

pub fn run(args: ProfileArgs) -> Result<ExitCode, CliError> {
    if let Some(ProfileCommand::Merge(m)) = args.command {
        let merged = tracesight::profile::merge::merge_files(&m.inputs, m.format).map_err(|e| e.to_string())?;
        if merged.saturated {
            eprintln!("tracesight: warning: a count reached 2^64-1 and stays there (saturated)");
        }
        write_output(Some(&m.output), &merged.text)?;
        return Ok(ExitCode::SUCCESS);
    }
    let capture = args.capture.clone().ok_or("give a capture, or 'merge'")?;
    let text = profile_capture(&capture, &args.options)?;
    write_output(args.output.as_deref(), &text)?;
    Ok(ExitCode::SUCCESS)
}

fn write_output(path: Option<&Path>, text: &str) -> Result<(), CliError> {
    match path {
        Some(p) => std::fs::write(p, text).map_err(|e| format!("{}: {e}", p.display()).into()),
        None => {
            let mut o = std::io::stdout().lock();
            match o.write_all(text.as_bytes()).and_then(|_| o.flush()) {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(format!("writing output: {e}").into()),
                _ => Ok(()),
            }
        }
    }
}
