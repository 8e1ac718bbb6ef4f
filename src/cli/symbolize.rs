//! `tracesight symbolize`: the function and file:line of addresses, in the
//! layout of `addr2line -a -f -i -C`.

use crate::cli::CliError;
use std::io::{self, Write};
use std::process::ExitCode;

use tracesight::symbols;

#[derive(clap::Args)]
pub struct SymbolizeArgs {
    /// ELF file, at its own addresses or with its lowest segment at
    /// @ADDRESS (hex) (repeatable).
    #[arg(long = "image", value_name = "ELF[@ADDRESS]", required = true)]
    pub images: Vec<String>,
    /// Addresses in hex (with or without 0x); read from standard input when
    /// none are given.
    pub addrs: Vec<String>,
    /// Print each frame's source line under its file:line.
    #[arg(long)]
    pub show_source: bool,
    #[command(flatten)]
    pub sources: super::SourceArgs,
}

pub fn run(args: SymbolizeArgs) -> Result<ExitCode, CliError> {
    let sym = symbols::Symbolizer::from_image_args(&args.images).map_err(|e| e.to_string())?;
    for im in sym.images() {
        for n in im.notes() {
            eprintln!("tracesight: {}: {n}", im.path().display());
        }
    }
    let mut words = args.addrs.clone();
    if words.is_empty() {
        let mut text = String::new();
        io::Read::read_to_string(&mut io::stdin(), &mut text).map_err(|e| format!("standard input: {e}"))?;
        words = text.split_whitespace().map(str::to_string).collect();
    }
    let addrs = words.iter().map(|a| symbols::parse_address(a)).collect::<Result<Vec<_>, _>>()?;
    let text = if args.show_source {
        let resolver = symbols::SourceResolver::from_args(&args.sources.source_roots, &args.sources.substitutions)?;
        symbols::source::with_source_lines(&symbols::symbolize_text(&sym, &addrs), &resolver)
    } else {
        symbols::symbolize_text(&sym, &addrs)
    };
    let mut stdout = io::stdout().lock();
    match stdout.write_all(text.as_bytes()).and_then(|_| stdout.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(format!("writing output: {e}").into()),
        _ => Ok(ExitCode::SUCCESS),
    }
}
