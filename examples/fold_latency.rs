//! Key-to-screen latency of folding, headless: at a random element, `-`
//! (fold the call under the cursor) until the folded row is on screen with
//! every visible row and its call stack loaded and the frame drawn on a
//! 160x48 TestBackend; then `+` (unfold) the same way. Wall clock, worker
//! threads included; answers are taken as they arrive.
//!
//! ```sh
//! cargo run --release --example fold_latency -- /tmp/big/ack-64m [N]
//! ```
//!
//! The background pass must end first (call depth is known after it); its
//! time is printed. Then, before the folds, the frame time of the
//! statistics pane and of the function chart (300 frames each, 160x48 and
//! 80x24), which come from that pass.

use std::path::Path;
use std::time::{Duration, Instant};

use ratatui::backend::TestBackend;
use ratatui::Terminal;
use tracesight::capture::CaptureOptions;
use tracesight::tui::app::{Action, App, Pos};
use tracesight::tui::{self, draw};

const SIZE: (u16, u16) = (160, 48);
const TIMEOUT: Duration = Duration::from_secs(20);

fn loaded(app: &App) -> bool {
    app.visible().iter().all(|p| app.entry(p.number).is_some() && app.calls.row(p.number).is_some())
}

/// Take answers until `done` and the screen are there, then draw.
fn settle(app: &mut App, term: &mut Terminal<TestBackend>, done: impl Fn(&App) -> bool) -> bool {
    let start = Instant::now();
    while !(done(app) && loaded(app)) {
        if start.elapsed() > TIMEOUT {
            let missing: Vec<u64> = app
                .visible()
                .iter()
                .filter(|p| app.entry(p.number).is_none() || app.calls.row(p.number).is_none())
                .map(|p| p.number)
                .collect();
            eprintln!("not loaded after {TIMEOUT:?}: cursor {}, rows missing {missing:?}, message {:?}", app.cursor.number, app.message);
            return false;
        }
        match app.chans.rx.recv_timeout(Duration::from_millis(50)) {
            Ok(r) => app.on_response(r),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(_) => panic!("the workers stopped: {:?}", app.error),
        }
    }
    term.draw(|f| draw::draw(app, f)).expect("drawing");
    true
}

fn summary(label: &str, ms: &mut [f64]) {
    if ms.is_empty() {
        println!("{label}: no samples");
        return;
    }
    ms.sort_by(|a, b| a.total_cmp(b));
    let q = |p: f64| ms[((ms.len() as f64 - 1.0) * p).round() as usize];
    println!("{label:<24} n={:<4} median {:>7.2} ms  p90 {:>7.2} ms  max {:>7.2} ms", ms.len(), q(0.5), q(0.9), ms[ms.len() - 1]);
}

/// Whole frames (cleared, then drawn, as the render bench draws them) of
/// the statistics pane over the whole capture and of the function chart,
/// in the middle of the capture, at 160x48 and 80x24.
fn frame_times(app: &mut App, term: &mut Terminal<TestBackend>, total: u64) {
    app.jump_to(total / 2, false);
    assert!(settle(app, term, |_| true), "the screen did not load");
    app.update(Action::Stats);
    assert!(settle(app, term, |a| a.calls.stats.table.is_some()), "no statistics");
    let time = |app: &mut App, label: &str| {
        for (w, h) in [SIZE, (80, 24)] {
            app.update(Action::Resize(w, h));
            let mut t = Terminal::new(TestBackend::new(w, h)).expect("terminal");
            let mut ms = Vec::new();
            for _ in 0..300 {
                let s = Instant::now();
                t.clear().expect("clearing");
                t.draw(|f| draw::draw(app, f)).expect("drawing");
                ms.push(s.elapsed().as_secs_f64() * 1e3);
            }
            summary(&format!("{label} frame {w}x{h}"), &mut ms);
        }
        app.update(Action::Resize(SIZE.0, SIZE.1));
    };
    time(app, "statistics");
    app.update(Action::Cancel);
    app.update(Action::Chart);
    app.update(Action::ChartDeeper);
    time(app, "function chart");
    app.update(Action::Chart);
    let _ = term.clear();
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else {
        eprintln!("usage: fold_latency SNAPSHOT [N]");
        std::process::exit(2);
    };
    let n: usize = args.get(2).map_or(100, |s| s.parse().expect("N: a number of folds"));
    let t0 = Instant::now();
    let mut app = tui::spawn(Path::new(path), &CaptureOptions::default(), SIZE);
    while !app.calls.ready {
        match app.chans.rx.recv_timeout(Duration::from_secs(3600)) {
            Ok(r) => app.on_response(r),
            Err(e) => panic!("no call stacks: {e:?} {:?}", app.error),
        }
    }
    let total = app.total().unwrap();
    println!("{path}: {total} elements, background pass done after {:.2} s", t0.elapsed().as_secs_f64());
    let mut term = Terminal::new(TestBackend::new(SIZE.0, SIZE.1)).expect("terminal");
    frame_times(&mut app, &mut term, total);
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let (mut folds, mut unfolds) = (Vec::new(), Vec::new());
    let mut skipped = 0;
    while folds.len() < n && skipped < 10 * n {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        app.jump_to(seed % total, false);
        if !settle(&mut app, &mut term, |_| true) {
            panic!("the screen did not load");
        }
        // Only inside a call (outermost code has nothing to fold).
        if app.calls.row(app.cursor.number).is_none_or(|r| r.depth() < 2) {
            skipped += 1;
            continue;
        }
        app.message.clear();
        let before = app.calls.folds.len();
        let t = Instant::now();
        app.update(Action::Fold);
        let ok = settle(&mut app, &mut term, |a| a.calls.folds.len() > before || !a.message.is_empty());
        if !ok || app.calls.folds.len() == before {
            skipped += 1;
            continue;
        }
        folds.push(t.elapsed().as_secs_f64() * 1e3);
        // On a call the cursor stays on the call's row: `+` goes on the
        // folded row below it.
        let head = *app.calls.folds.keys().next().expect("a fold");
        app.cursor = Pos { number: head, sub: app.elem_sub(head) };
        let t = Instant::now();
        app.update(Action::Unfold);
        settle(&mut app, &mut term, |a| a.calls.folds.is_empty());
        unfolds.push(t.elapsed().as_secs_f64() * 1e3);
    }
    summary("fold (-)", &mut folds);
    summary("unfold (+)", &mut unfolds);
}
