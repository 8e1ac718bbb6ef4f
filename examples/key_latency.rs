//! Key-to-screen latency of the viewer, headless: from the action (a jump
//! to a random element far away, or a page down) until every visible row and
//! the source pane are loaded and the frame is drawn on a 160x48 TestBackend.
//! Wall clock, so it includes the worker threads' decoding.
//!
//! ```sh
//! cargo run --release --example key_latency -- /tmp/big/ack-1g [N]
//! ```
//!
//! Two figures per action: "direct" takes each worker answer the moment it
//! arrives; "event loop" takes them as `tui::run`'s loop does, between waits
//! for terminal input (2 ms while an answer is due, else 30 ms).

use std::path::Path;
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use ratatui::backend::TestBackend;
use ratatui::Terminal;
use tracesight::capture::CaptureOptions;
use tracesight::tui::app::{Action, App};
use tracesight::tui::{self, draw};

const SIZE: (u16, u16) = (160, 48);
const TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Clone, Copy, PartialEq)]
enum Wait {
    Direct,
    Poll30,
}

fn loaded(app: &App) -> bool {
    if !app.visible().iter().all(|p| app.entry(p.number).is_some()) {
        return false;
    }
    // No address, no source to follow.
    app.cursor_addr().is_none_or(|a| app.source.as_ref().is_some_and(|(v, _)| v.addr == a))
}

/// Take worker answers until the screen is loaded, then draw it.
fn settle(app: &mut App, term: &mut Terminal<TestBackend>, wait: Wait) {
    let start = Instant::now();
    while !loaded(app) {
        let left = TIMEOUT.checked_sub(start.elapsed()).expect("the screen did not load in time");
        match wait {
            Wait::Direct => match app.chans.rx.recv_timeout(left) {
                Ok(r) => app.on_response(r),
                Err(RecvTimeoutError::Timeout) => panic!("the screen did not load in time"),
                Err(RecvTimeoutError::Disconnected) => panic!("the workers stopped: {:?}", app.error),
            },
            Wait::Poll30 => {
                if !app.pump() {
                    std::thread::sleep(Duration::from_millis(if app.waiting() { 2 } else { 30 }));
                }
            }
        }
    }
    term.draw(|f| draw::draw(app, f)).expect("drawing");
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn summary(label: &str, ms: &mut [f64]) {
    ms.sort_by(|a, b| a.total_cmp(b));
    let q = |p: f64| ms[((ms.len() as f64 - 1.0) * p).round() as usize];
    println!(
        "{label:<32} n={:<4} median {:>7.2} ms  p90 {:>7.2} ms  p99 {:>7.2} ms  max {:>7.2} ms",
        ms.len(),
        q(0.5),
        q(0.9),
        q(0.99),
        ms[ms.len() - 1]
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else {
        eprintln!("usage: key_latency SNAPSHOT [N]");
        std::process::exit(2);
    };
    let n: usize = args.get(2).map_or(200, |s| s.parse().expect("N: a number of jumps"));
    let t0 = Instant::now();
    let mut app = tui::spawn(Path::new(path), &CaptureOptions::default(), SIZE);
    while app.indexed.is_none() {
        match app.chans.rx.recv_timeout(Duration::from_secs(600)) {
            Ok(r) => app.on_response(r),
            Err(e) => panic!("no index: {e:?} {:?}", app.error),
        }
    }
    let total = app.total().unwrap();
    println!("{path}: {total} elements, index ready in {:.2} s", t0.elapsed().as_secs_f64());
    // The entry counts decode the whole trace once on the finder thread;
    // waiting for them keeps that work out of the figures.
    let t1 = Instant::now();
    while !app.functions.iter().all(|f| f.count.is_some()) {
        app.pump();
        std::thread::sleep(Duration::from_millis(10));
    }
    if !app.functions.is_empty() {
        println!("function entry counts ready after {:.2} s more", t1.elapsed().as_secs_f64());
    }
    let mut term = Terminal::new(TestBackend::new(SIZE.0, SIZE.1)).expect("terminal");
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for wait in [Wait::Direct, Wait::Poll30] {
        let tag = if wait == Wait::Direct { "direct" } else { "event loop" };
        let mut jumps = Vec::with_capacity(n);
        let mut pages = Vec::with_capacity(n);
        for _ in 0..n {
            let at = rng.next() % total.max(1);
            let t = Instant::now();
            app.jump_to(at, false);
            settle(&mut app, &mut term, wait);
            jumps.push(t.elapsed().as_secs_f64() * 1e3);
            let t = Instant::now();
            app.update(Action::PageDown);
            settle(&mut app, &mut term, wait);
            pages.push(t.elapsed().as_secs_f64() * 1e3);
        }
        summary(&format!("random jump ({tag})"), &mut jumps);
        summary(&format!("page down after it ({tag})"), &mut pages);
    }
}
