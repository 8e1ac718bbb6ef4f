//! The terminal viewer: terminal events become [`app::Action`]s, actions
//! change the [`app::App`] state, and [`draw::draw`] paints the state. The
//! worker threads ([`worker`]) do all decoding, so drawing never waits.

pub mod app;
pub mod calls;
pub mod chart;
pub mod cycles;
pub mod draw;
pub mod folding;
pub mod keymap;
pub mod layout;
pub mod mixed;
pub mod model;
pub mod rowmap;
pub mod search;
pub mod sourceview;
pub mod style;
pub mod statspane;
pub mod views;
pub mod viewdraw;
pub mod worker;

use std::io;
use std::path::Path;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossterm::event::{self, DisableMouseCapture, EnableMouseCapture, Event};
use crossterm::terminal::{self, BeginSynchronizedUpdate, EndSynchronizedUpdate, EnterAlternateScreen, LeaveAlternateScreen};
use crossterm::ExecutableCommand;
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;

use crate::capture::CaptureOptions;
use app::{App, Channels};
use worker::{Progress, Request};

/// Why the viewer could not run, or a request of it failed.
#[derive(Debug, thiserror::Error)]
pub enum TuiError {
    /// Standard output is not a terminal.
    #[error("the viewer needs a terminal (use `tracesight decode` for scripts)")]
    NotATerminal,
    /// Setting up, drawing on or reading from the terminal failed.
    #[error("terminal: {0}")]
    Terminal(#[source] io::Error),
    /// The capture could not be opened or indexed.
    #[error("{0}")]
    Capture(#[from] crate::capture::CaptureError),
    /// A decode through the index failed.
    #[error("{0}")]
    Index(#[from] crate::index::IndexError),
    /// An address in a go-to position did not parse.
    #[error("{0}")]
    Symbols(#[from] crate::symbols::SymbolError),
    #[error("no function matches '{name}'")]
    NoFunction { name: String },
    /// A go-to position of no known form.
    #[error("'{input}': expected N, instr:N, ts:N, cc:N, off:N, addr:HEX or fn:NAME")]
    BadGoto { input: String },
    /// Code to disassemble at an address the program image does not hold.
    #[error("memory at 0x{addr:x} is not in the program image")]
    Unmapped { addr: u64 },
    /// Code of an instruction set the viewer has no disassembler for.
    #[error("{} code cannot be disassembled", isa.name())]
    NoDisassembler { isa: crate::element::Isa },
}

/// Start the worker threads on a capture and return the app that talks to
/// them (headless: no terminal involved).
pub fn spawn(path: &Path, copts: &CaptureOptions, size: (u16, u16)) -> App {
    let progress = Arc::new(Progress::default());
    let (pager_tx, pager_rx) = mpsc::channel();
    let (finder_tx, finder_rx) = mpsc::channel();
    let (resp_tx, resp_rx) = mpsc::channel();
    let (ready_tx, ready_rx) = mpsc::channel();
    {
        let (p, c, pr, tx) = (path.to_path_buf(), copts.clone(), progress.clone(), resp_tx.clone());
        std::thread::Builder::new()
            .name("tracesight-pager".into())
            .spawn(move || worker::pager(p, c, pr, pager_rx, tx, ready_tx))
            .expect("spawning a thread");
    }
    {
        let (p, c, pr, tx) = (path.to_path_buf(), copts.clone(), progress.clone(), resp_tx);
        std::thread::Builder::new()
            .name("tracesight-finder".into())
            .spawn(move || worker::finder(p, c, pr, finder_rx, tx, ready_rx))
            .expect("spawning a thread");
    }
    let mut app = App::new(Channels { pager: pager_tx, finder: finder_tx, rx: resp_rx }, progress, size);
    app.ts_freq = copts.ts_freq.filter(|f| f.is_finite() && *f > 0.0);
    app
}

impl Drop for App {
    fn drop(&mut self) {
        let _ = self.chans.pager.send(Request::Quit);
        let _ = self.chans.finder.send(Request::Quit);
        self.progress.find_generation.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.progress.export_cancel.store(true, std::sync::atomic::Ordering::Relaxed);
        self.progress.request_waiting.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Held while a frame is written, so that a fatal signal restoring the
/// terminal never has a frame land on the restored screen after it.
static SCREEN: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A signal that ends the process (`kill`, a closed terminal): give the
/// terminal back first, and keep the screen so no later frame undoes it.
fn restore_for_signal() {
    let guard = SCREEN.lock().unwrap_or_else(|e| e.into_inner());
    restore_terminal();
    std::mem::forget(guard);
}

/// Put the terminal back as it was: on exit, on error, from the panic hook
/// and on fatal signals.
fn restore_terminal() {
    let mut out = io::stdout();
    let _ = out.execute(DisableMouseCapture);
    let _ = out.execute(LeaveAlternateScreen);
    let _ = terminal::disable_raw_mode();
    let _ = out.execute(crossterm::cursor::Show);
}

/// Run the viewer on a capture until the user quits.
pub fn run(path: &Path, copts: &CaptureOptions) -> Result<(), TuiError> {
    use std::io::IsTerminal;
    if !io::stdout().is_terminal() {
        return Err(TuiError::NotATerminal);
    }
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore_terminal();
        prev(info);
    }));
    // In raw mode the keyboard sends no signals, but `kill` and a closed
    // terminal still do: each would leave the terminal in the alternate
    // screen with echo off.
    {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
        crate::outfile::die_on_signals(&[SIGTERM, SIGHUP, SIGINT, SIGQUIT], restore_for_signal);
    }
    terminal::enable_raw_mode().map_err(TuiError::Terminal)?;
    let mut out = io::stdout();
    let setup = out.execute(EnterAlternateScreen).and_then(|o| o.execute(EnableMouseCapture)).map(|_| ());
    if let Err(e) = setup {
        restore_terminal();
        return Err(TuiError::Terminal(e));
    }
    let result = event_loop(path, copts);
    restore_terminal();
    result
}

fn event_loop(path: &Path, copts: &CaptureOptions) -> Result<(), TuiError> {
    let mut term = Terminal::new(CrosstermBackend::new(io::stdout())).map_err(TuiError::Terminal)?;
    let size = term.size().map_err(TuiError::Terminal)?;
    let mut app = spawn(path, copts, (size.width, size.height));
    let mut keys = keymap::Keymap;
    let mut dirty = true;
    let mut last_draw = Instant::now();
    while !app.quit {
        dirty |= app.pump();
        // Progress counters move without messages: repaint while work runs.
        let busy = app.indexed.is_none() || app.finding.is_some() || app.exporting.is_some() || app.filtering();
        if dirty || (busy && last_draw.elapsed() > Duration::from_millis(200)) {
            // Synchronized updates: the terminal shows whole frames only.
            let screen = SCREEN.lock().unwrap_or_else(|e| e.into_inner());
            let _ = io::stdout().execute(BeginSynchronizedUpdate);
            term.draw(|f| draw::draw(&app, f)).map_err(TuiError::Terminal)?;
            let _ = io::stdout().execute(EndSynchronizedUpdate);
            drop(screen);
            dirty = false;
            last_draw = Instant::now();
        }
        // Terminal input and worker answers cannot be waited on together:
        // poll briefly while an answer is due, so rows show as soon as decoded.
        let wait = if app.waiting() { 2 } else { 30 };
        if event::poll(Duration::from_millis(wait)).map_err(TuiError::Terminal)? {
            // Every event already queued is applied before the next frame:
            // a burst of keys (a held key, fast typing) costs one draw, and
            // none waits behind a frame per key. Bounded, so a flood still
            // lets a frame through.
            for _ in 0..1024 {
                dirty |= app.pump();
                let ev = event::read().map_err(TuiError::Terminal)?;
                if let Event::Resize(w, h) = ev {
                    let _ = term.autoresize();
                    app.update(app::Action::Resize(w, h));
                    dirty = true;
                } else if let Some(a) = keys.action(&ev, &app.mode) {
                    app.update(a);
                    dirty = true;
                }
                if app.quit || !event::poll(Duration::ZERO).map_err(TuiError::Terminal)? {
                    break;
                }
            }
        }
    }
    Ok(())
}
