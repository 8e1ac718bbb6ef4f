//! One full viewer frame, `draw::draw` on ratatui's TestBackend, with the
//! pages on screen already decoded: the cost the event loop pays for every
//! key and every progress tick. At 160x48 (list beside source) and 80x24
//! (source below the list), at the start, middle and end of a capture.
//!
//! Run: `cargo bench --bench render`. The capture is the demo unless
//! TRACESIGHT_BENCH_CAPTURE names a snapshot directory, e.g. one made by
//! `cargo run --release --example big_trace -- ../shared/fixtures/opencsd/001-ack_test /tmp/big/ack-1g 1024`
//! (index it first with `tracesight index /tmp/big/ack-1g`, or the first
//! run builds the index before measuring).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use tracesight::capture::CaptureOptions;
use tracesight::tui::{self, app::App};

/// Loading a page of a 1 GiB capture decodes from a checkpoint; a loaded
/// machine can take seconds, a missing index minutes.
const DEADLINE: Duration = Duration::from_secs(600);

fn capture() -> PathBuf {
    match std::env::var_os("TRACESIGHT_BENCH_CAPTURE") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("assets/demo/snapshot"),
    }
}

/// Pump worker answers until `done` holds; the workers run on their own
/// threads, so there is nothing to do but wait.
fn pump_until(app: &mut App, what: &str, done: impl Fn(&App) -> bool) {
    let start = Instant::now();
    while !done(app) {
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        if !app.pump() {
            std::thread::sleep(Duration::from_millis(2));
        }
        assert!(app.error.is_none(), "{what}: {:?}", app.error);
    }
}

/// Every visible row decoded and the source pane following the cursor (an
/// element without an address has no source to wait for).
fn screen_loaded(app: &App) -> bool {
    let rows = app.visible().iter().all(|p| app.entry(p.number).is_some());
    let source = match app.cursor_addr() {
        Some(a) => app.source.as_ref().is_some_and(|(v, _)| v.addr == a),
        None => app.entry(app.cursor.number).is_some(),
    };
    rows && source
}

/// The entry counts run once on the finder thread after opening; measuring
/// while they run would time the other core's load, not the frame.
fn counts_done(app: &App) -> bool {
    app.functions.iter().all(|f| f.count.is_some())
}

fn bench(c: &mut Criterion) {
    let path = capture();
    let name = path.file_name().map_or("capture".into(), |n| n.to_string_lossy().into_owned());
    let mut g = c.benchmark_group(format!("render/{name}"));
    g.measurement_time(Duration::from_secs(3));
    for (w, h) in [(160u16, 48u16), (80, 24)] {
        let mut app = tui::spawn(&path, &CaptureOptions::default(), (w, h));
        pump_until(&mut app, "the index", |a| a.indexed.is_some());
        pump_until(&mut app, "the function entry counts", counts_done);
        let total = app.total().unwrap();
        let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
        for (label, at) in [("start", 0), ("middle", total / 2), ("end", total.saturating_sub(1))] {
            app.jump_to(at, false);
            pump_until(&mut app, &format!("the screen at element {at}"), screen_loaded);
            g.bench_with_input(BenchmarkId::new(format!("{w}x{h}"), label), &app, |b, app| {
                b.iter(|| {
                    // From a blank screen, so every cell goes through the diff
                    // and out, as after a page down; redrawing an unchanged
                    // screen would send nothing.
                    term.clear().unwrap();
                    term.draw(|f| tui::draw::draw(app, f)).unwrap();
                })
            });
        }
        // The statistics pane and the function chart, after the background
        // pass (their data comes from it), in the middle of the capture.
        pump_until(&mut app, "the background pass", |a| a.calls.ready);
        app.jump_to(total / 2, false);
        pump_until(&mut app, "the screen", screen_loaded);
        app.update(tui::app::Action::Stats);
        pump_until(&mut app, "the statistics", |a| a.calls.stats.table.is_some());
        g.bench_with_input(BenchmarkId::new(format!("{w}x{h}"), "statistics"), &app, |b, app| {
            b.iter(|| {
                term.clear().unwrap();
                term.draw(|f| tui::draw::draw(app, f)).unwrap();
            })
        });
        app.update(tui::app::Action::Cancel);
        app.update(tui::app::Action::Chart);
        app.update(tui::app::Action::ChartDeeper);
        g.bench_with_input(BenchmarkId::new(format!("{w}x{h}"), "function_chart"), &app, |b, app| {
            b.iter(|| {
                term.clear().unwrap();
                term.draw(|f| tui::draw::draw(app, f)).unwrap();
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
