//! The `tracesight` command: parses the command line and hands each
//! subcommand to its file under `cli/`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use cli::CliError;

mod cli;

#[derive(Parser)]
#[command(
    name = "tracesight",
    version,
    about = "Decode and browse Arm CoreSight trace (ETE, ETMv4, ETMv3, PTM)",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Capture to open in the viewer (an OpenCSD snapshot directory or a
    /// perf.data file). Without
    /// one, the bundled demo capture is opened.
    path: Option<PathBuf>,
    #[command(flatten)]
    capture: cli::CaptureArgs,
    #[command(flatten)]
    view: cli::view::ViewArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Decode a capture and print its packets.
    Decode(cli::decode::DecodeArgs),
    /// Describe a capture: buffers, trace sources and their configuration;
    /// with --image, the images and the functions the trace enters.
    Info(cli::info::InfoArgs),
    /// Run an AArch64 program under qemu-aarch64 and write the ETE trace of its
    /// execution as an OpenCSD snapshot directory.
    Synth(cli::synth::SynthArgs),
    /// Build (or refresh) the index of a capture and describe it: checkpoints,
    /// elements, instructions and time span per trace ID.
    Index(cli::index::IndexArgs),
    /// Write a range of elements to a file: the OpenCSD listing, JSON lines,
    /// CSV, or function slices for ui.perfetto.dev.
    Export(cli::export::ExportArgs),
    /// Print the function and file:line of each address, inline frames
    /// innermost first, in the layout of `addr2line -a -f -i -C`.
    Symbolize(cli::symbolize::SymbolizeArgs),
    /// Function statistics and profiles (stats, AutoFDO, BOLT, folded stacks,
    /// call graph) of a capture; `profile merge` sums profiles.
    Profile(cli::profile::ProfileArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Decode(args)) => cli::decode::run(args),
        Some(Command::Info(args)) => cli::info::run(args),
        Some(Command::Symbolize(args)) => cli::symbolize::run(args),
        Some(Command::Index(args)) => cli::index::run(args),
        Some(Command::Export(args)) => cli::export::run(args),
        Some(Command::Synth(args)) => cli::synth::run(args).map_err(CliError::from),
        Some(Command::Profile(args)) => cli::profile::run(args),
        None => cli::view::run(cli.path, &cli.capture, &cli.view),
    };
    match result {
        Ok(code) => code,
        Err(msg) => {
            eprintln!("tracesight: {msg}");
            ExitCode::from(1)
        }
    }
}
