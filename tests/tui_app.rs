//! The viewer, headless: the app is driven with actions against real worker
//! threads on the bundled demo, its state is checked, and frames drawn on a
//! test backend are compared with reviewed snapshots (insta).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ratatui::backend::TestBackend;
use ratatui::style::Color;
use ratatui::Terminal;
use tracesight::capture::CaptureOptions;
use tracesight::tui::app::{Action, App, Mode};
use tracesight::tui::draw::{draw_with, Palette};
use tracesight::tui::model::{RowKind, RowState, View};

fn demo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo/snapshot")
}

fn open(size: (u16, u16)) -> App {
    let mut app = tracesight::tui::spawn(&demo(), &CaptureOptions::default(), size);
    wait(&mut app, "the index", |a| a.indexed.is_some());
    // The timeline's lanes come from a background pass: wait for it so that
    // every snapshot sees the same picture.
    wait(&mut app, "the background pass", |a| !a.lanes.is_empty());
    settle(&mut app);
    app
}

/// Pump worker answers until `done` holds (the workers are real threads).
fn wait(app: &mut App, what: &str, done: impl Fn(&App) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        app.pump();
        if done(app) {
            return;
        }
        if let Some(e) = &app.error {
            panic!("waiting for {what}: {e}");
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Until every visible row is decoded and the source pane follows the cursor.
fn settle(app: &mut App) {
    wait(app, "the visible rows", |a| a.visible().iter().all(|p| a.entry(p.number).is_some()));
    // Once the background pass is done, rows indent by call depth.
    wait(app, "the call stacks", |a| !a.calls.ready || a.visible().iter().all(|p| a.calls.row(p.number).is_some()));
    if app.cursor_addr().is_some() {
        wait(app, "the source pane", |a| a.source.as_ref().is_some_and(|(v, _)| Some(v.addr) == a.cursor_addr()));
    }
}

fn act(app: &mut App, actions: &[Action]) {
    for a in actions {
        app.update(*a);
    }
}

fn typed(app: &mut App, text: &str) {
    for c in text.chars() {
        app.update(Action::Input(c));
    }
}

fn screen(app: &App, pal: Palette) -> (String, ratatui::buffer::Buffer) {
    let (w, h) = app.size;
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
    term.draw(|f| draw_with(app, f, pal)).unwrap();
    let buf = term.backend().buffer().clone();
    let mut s = String::new();
    for y in 0..h {
        for x in 0..w {
            s.push_str(buf[(x, y)].symbol());
        }
        s.push('\n');
    }
    (s, buf)
}

const PLAIN: Palette = Palette { color: false };
const COLOR: Palette = Palette { color: true };

fn goto(app: &mut App, n: u64) {
    app.update(Action::Goto);
    typed(app, &n.to_string());
    app.update(Action::Submit);
    assert_eq!(app.cursor.number, n);
    settle(app);
}

/// Go to the first instruction range at or after element `n`: its number
/// and start address.
fn first_range_from(app: &mut App, mut n: u64) -> (u64, u64) {
    goto(app, n);
    let addr = loop {
        match app.entry(n).map(|e| e.row.clone()) {
            Some(r) if r.kind == RowKind::Range => break r.addr.unwrap(),
            Some(_) => n += 1,
            None => goto(app, n),
        }
    };
    goto(app, n);
    (n, addr)
}

fn found(app: &mut App) {
    wait(app, "a search", |a| a.finding.is_none());
    settle(app);
}

#[test]
fn snapshots_at_80x24_and_160x48() {
    for size in [(80u16, 24u16), (160, 48)] {
        let tag = format!("{}x{}", size.0, size.1);
        let mut app = open(size);
        insta::assert_snapshot!(format!("first_screen_{tag}"), screen(&app, PLAIN).0);
        // In main's inlined callees: source with an inline chain and counts.
        goto(&mut app, 1_000_000);
        insta::assert_snapshot!(format!("element_1000000_source_{tag}"), screen(&app, PLAIN).0);
        act(&mut app, &[Action::ToggleDisasm]);
        insta::assert_snapshot!(format!("element_1000000_disassembly_{tag}"), screen(&app, PLAIN).0);
        act(&mut app, &[Action::ToggleDisasm, Action::ToggleView]);
        settle(&mut app);
        insta::assert_snapshot!(format!("element_1000000_speculation_{tag}"), screen(&app, PLAIN).0);
        act(&mut app, &[Action::ToggleView, Action::Expand]);
        wait(&mut app, "the instructions", |a| a.expanded.is_some());
        insta::assert_snapshot!(format!("element_1000000_expanded_{tag}"), screen(&app, PLAIN).0);
        act(&mut app, &[Action::Expand]);
        act(&mut app, &[Action::Help]);
        insta::assert_snapshot!(format!("help_{tag}"), screen(&app, PLAIN).0);
        act(&mut app, &[Action::Cancel, Action::Search]);
        wait(&mut app, "the function list", |a| !a.functions.is_empty() && a.functions.iter().all(|f| f.count.is_some()));
        typed(&mut app, "hash");
        insta::assert_snapshot!(format!("search_hash_{tag}"), screen(&app, PLAIN).0);
    }
}

#[test]
fn speculation_states_have_their_own_colors() {
    let mut app = open((160, 48));
    goto(&mut app, 1000);
    act(&mut app, &[Action::ToggleView]);
    settle(&mut app);
    let (text, buf) = screen(&app, COLOR);
    let mut seen = std::collections::HashMap::new();
    for (y, line) in text.lines().enumerate() {
        for (tag, state) in [("cmt ", RowState::Committed), ("canc", RowState::Canceled), ("corr", RowState::Corrected)] {
            // The state column is the first inside the list's border.
            if line.chars().skip(1).take(4).collect::<String>() == tag {
                seen.insert(tag, (buf[(1, y as u16)].fg, state));
            }
        }
    }
    let pal = COLOR;
    for tag in ["cmt ", "canc", "corr"] {
        let (fg, state) = seen.get(tag).unwrap_or_else(|| panic!("no {tag} row on screen:\n{text}"));
        assert_eq!(Some(*fg), pal.state(*state).fg, "{tag}");
    }
    assert_eq!(seen["cmt "].0, Color::Green);
    assert_eq!(seen["canc"].0, Color::Red);
    assert_eq!(seen["corr"].0, Color::Magenta);
    // Without color every cell keeps the terminal's own colors; the tags remain.
    let (plain, pbuf) = screen(&app, PLAIN);
    assert!(plain.contains("canc") && plain.contains("corr"));
    for y in 0..48 {
        for x in 0..160 {
            assert_eq!(pbuf[(x, y)].fg, Color::Reset, "NO_COLOR cell ({x},{y})");
        }
    }
}

#[test]
fn navigation_search_marks_history_and_selection() {
    let mut app = open((120, 40));
    // Function search jumps to the first entry; n finds no second one.
    act(&mut app, &[Action::Search]);
    wait(&mut app, "the function list", |a| !a.functions.is_empty());
    typed(&mut app, "main");
    let Mode::Search { hits, .. } = &app.mode else { panic!("search mode") };
    assert_eq!(app.functions[hits[0].function].name, "main");
    app.update(Action::Submit);
    found(&mut app);
    let main_at = app.cursor.number;
    let row = app.entry(main_at).unwrap().row.clone();
    assert_eq!(row.kind, RowKind::Range);
    assert_eq!(row.function.as_deref(), Some("main"));
    assert!(app.message.contains("main: element"), "{}", app.message);

    // An address search repeats with n / N.
    act(&mut app, &[Action::Goto]);
    typed(&mut app, "fn:hash_djb");
    app.update(Action::Submit);
    found(&mut app);
    let first = app.cursor.number;
    assert_eq!(app.entry(first).unwrap().row.function.as_deref(), Some("hash_djb"));
    act(&mut app, &[Action::NextMatch]);
    found(&mut app);
    let second = app.cursor.number;
    assert!(second > first);
    assert_eq!(app.entry(second).unwrap().row.function.as_deref(), Some("hash_djb"));
    act(&mut app, &[Action::PrevMatch]);
    found(&mut app);
    assert_eq!(app.cursor.number, first);

    // History: back to `second`, then further back to main, then forward.
    act(&mut app, &[Action::Back]);
    assert_eq!(app.cursor.number, second);
    act(&mut app, &[Action::Back, Action::Back]);
    assert_eq!(app.cursor.number, main_at);
    act(&mut app, &[Action::Forward]);
    assert_eq!(app.cursor.number, first);

    // Marks.
    act(&mut app, &[Action::SetMark, Action::Input('a')]);
    goto(&mut app, 20);
    act(&mut app, &[Action::JumpMark, Action::Input('a')]);
    assert_eq!(app.cursor.number, first);

    // Selection: anchor, move, range.
    settle(&mut app);
    act(&mut app, &[Action::Anchor, Action::Down, Action::Down, Action::Down]);
    assert_eq!(app.selection(), Some((first, first + 4)));
    act(&mut app, &[Action::Cancel]);
    assert_eq!(app.anchor, None);
}

#[test]
fn exceptions_calls_and_expansion() {
    let mut app = open((120, 40));
    act(&mut app, &[Action::NextException]);
    found(&mut app);
    let ex = app.cursor.number;
    assert_eq!(app.entry(ex).unwrap().row.kind, RowKind::Exception, "{}", app.message);
    act(&mut app, &[Action::PrevException]);
    found(&mut app);
    assert!(app.cursor.number < ex || app.message.contains("not found"));

    // From a call to its return: the first range back at the return address.
    goto(&mut app, 1000);
    let mut n = 1000;
    let ret = loop {
        let r = app.entry(n).map(|e| e.row.clone());
        match r {
            Some(r) if r.call_return.is_some() => break r.call_return.unwrap(),
            Some(_) => n += 1,
            None => {
                goto(&mut app, n);
            }
        }
    };
    goto(&mut app, n);
    act(&mut app, &[Action::CallReturn]);
    found(&mut app);
    assert!(app.cursor.number > n);
    assert_eq!(app.entry(app.cursor.number).unwrap().row.addr, Some(ret));

    // Enter expands a range into one line per instruction.
    let count = app.entry(app.cursor.number).unwrap().row.instructions as usize;
    act(&mut app, &[Action::Expand]);
    wait(&mut app, "the instructions", |a| a.expanded.is_some());
    let (_, lines) = app.expanded.clone().unwrap();
    assert_eq!(lines.len(), count);
    assert_eq!(lines[0].addr, ret);
    act(&mut app, &[Action::Down]);
    assert_eq!(app.cursor_addr(), Some(ret));
    act(&mut app, &[Action::Expand]);
    assert!(app.expanded.is_none());
}

#[test]
fn speculation_view_inserts_records_and_keeps_the_element() {
    let mut app = open((120, 40));
    goto(&mut app, 1000);
    act(&mut app, &[Action::ToggleView]);
    assert_eq!(app.view, View::Speculation);
    settle(&mut app);
    assert_eq!(app.cursor.number, 1000);
    let e = app.entry(1000).unwrap();
    assert_eq!(app.cursor.sub as usize, e.pre.len(), "the cursor stays on the element line");
    // Somewhere on screen a canceled record sits between elements.
    let visible = app.visible();
    assert!(visible.iter().any(|p| app.entry(p.number).is_some_and(|e| (p.sub as usize) < e.pre.len())));
    act(&mut app, &[Action::NextSpec]);
    found(&mut app);
    assert!(!app.entry(app.cursor.number).unwrap().pre.is_empty() || app.cursor.number > 1000);
}

#[test]
fn export_from_the_viewer_writes_the_selection() {
    let dir = std::env::temp_dir().join(format!("tracesight-tui-export-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut app = open((120, 40));
    goto(&mut app, 100);
    act(&mut app, &[Action::Anchor, Action::Down, Action::Down, Action::Export]);
    let Mode::Export { from, to, .. } = app.mode.clone() else { panic!("export dialog") };
    assert_eq!((from, to), (100, 103));
    act(&mut app, &[Action::NextField]); // jsonl
    let Mode::Export { file, .. } = app.mode.clone() else { panic!() };
    assert_eq!(file, "tracesight-100-103.jsonl");
    for _ in 0..file.len() {
        app.update(Action::Backspace);
    }
    let path = dir.join("sel.jsonl");
    typed(&mut app, path.to_str().unwrap());
    app.update(Action::Submit);
    wait(&mut app, "the export", |a| a.exporting.is_none());
    assert!(app.message.starts_with("exported 3 elements"), "{}", app.message);
    let text = std::fs::read_to_string(&path).unwrap();
    let numbers: Vec<u64> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["number"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, vec![100, 101, 102]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn resize_reflows_and_keeps_the_cursor_visible() {
    let mut app = open((160, 48));
    goto(&mut app, 500);
    for _ in 0..30 {
        app.update(Action::Down);
    }
    let big = app.list_height();
    app.update(Action::Resize(80, 24));
    assert!(app.list_height() < big);
    assert!(app.visible().contains(&app.cursor));
    let (text, _) = screen(&app, PLAIN);
    assert_eq!(text.lines().count(), 24);
    assert!(text.lines().all(|l| l.chars().count() == 80));
}

/// Copy a fixture so the index written beside its trace stays out of the
/// shared directory.
fn fixture_copy(name: &str) -> Option<PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/opencsd").join(name);
    if !src.is_dir() {
        return None;
    }
    // The directory's own name shows in the status bar: keep it stable.
    let dst = std::env::temp_dir().join(format!("tracesight-tui-{}", std::process::id())).join(name);
    let _ = std::fs::remove_dir_all(&dst);
    std::fs::create_dir_all(&dst).unwrap();
    for e in std::fs::read_dir(&src).unwrap().flatten() {
        if e.path().is_file() && !e.file_name().to_string_lossy().ends_with(".tsidx") {
            std::fs::copy(e.path(), dst.join(e.file_name())).unwrap();
        }
    }
    Some(dst)
}

#[test]
fn one_timeline_lane_per_trace_id() {
    let Some(dir) = fixture_copy("juno_r1_1") else { return };
    let mut app = tracesight::tui::spawn(&dir, &CaptureOptions::default(), (160, 48));
    wait(&mut app, "the index", |a| a.indexed.is_some());
    let ids: Vec<u8> = app.indexed.as_ref().unwrap().ids.iter().map(|i| i.trace_id).collect();
    assert!(ids.len() > 1, "juno_r1_1 has several trace IDs");
    wait(&mut app, "the lanes", |a| !a.lanes.is_empty());
    let lane_ids: Vec<u8> = app.lanes.iter().map(|l| l.trace_id).collect();
    assert_eq!(lane_ids, ids, "a lane for each trace ID with elements");
    settle(&mut app);
    let (text, _) = screen(&app, PLAIN);
    for id in &ids {
        assert!(text.lines().any(|l| l.starts_with(&format!("│{id:02x}  "))), "lane {id:02x} drawn:\n{text}");
    }
    insta::assert_snapshot!("juno_lanes_160x48", text);
    drop(app);
    let _ = std::fs::remove_dir_all(dir.parent().unwrap());
}

#[test]
fn timeline_cursor_jumps_on_enter() {
    let mut app = open((120, 40));
    act(&mut app, &[Action::Timeline]);
    let start = app.timeline_cursor.expect("the timeline has the keyboard");
    for _ in 0..5 {
        app.update(Action::PageDown);
    }
    let moved = app.timeline_cursor.unwrap();
    assert!(moved > start);
    assert_eq!(app.cursor.number, 0, "keys move the timeline cursor, not the list");
    app.update(Action::Submit);
    assert!(app.timeline_cursor.is_none());
    found(&mut app);
    assert!(app.cursor.number > 0, "jumped into the trace: {}", app.message);
    let f = app.fraction_of(app.cursor.number).unwrap();
    assert!((f - moved).abs() < 0.02, "landed at {f}, aimed at {moved}");
}

#[test]
fn perf_data_opens_with_a_lane_per_cpu_and_a_cpu_column() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/perf/simpleperf");
    if !src.is_dir() {
        return;
    }
    // The index is written beside the capture: work on a copy.
    let dir = std::env::temp_dir().join(format!("tracesight-tui-perf-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for f in ["perf_etm.data", "etm_test_loop"] {
        std::fs::copy(src.join(f), dir.join(f)).unwrap();
    }
    let copts = CaptureOptions { symdirs: vec![dir.clone()], ..CaptureOptions::default() };
    let mut app = tracesight::tui::spawn(&dir.join("perf_etm.data"), &copts, (140, 40));
    wait(&mut app, "the index", |a| a.indexed.is_some());
    wait(&mut app, "the lanes", |a| !a.lanes.is_empty());
    settle(&mut app);
    assert_eq!(app.cpu_of(0x1e), Some(7), "trace ID 0x1e is CPU 7's");
    let lane_cpus: Vec<Option<u32>> = app.lanes.iter().map(|l| app.cpu_of(l.trace_id)).collect();
    assert_eq!(lane_cpus, vec![Some(7)], "one lane, CPU 7's (the only CPU with trace)");
    let (text, _) = screen(&app, PLAIN);
    assert!(text.lines().any(|l| l.starts_with("│cpu7 ")), "CPU 7's lane is labelled:\n{text}");
    assert!(text.contains("cpu id ctx"), "the list has a CPU column:\n{text}");
    assert!(text.lines().any(|l| l.contains("   7 1e ")), "rows name CPU 7:\n{text}");
    drop(app);
    let _ = std::fs::remove_dir_all(&dir);
}

fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap().flatten() {
        let name = e.file_name();
        if name.to_string_lossy().ends_with(".tsidx") {
            continue;
        }
        if e.path().is_dir() {
            copy_dir(&e.path(), &dst.join(&name));
        } else {
            std::fs::copy(e.path(), dst.join(&name)).unwrap();
        }
    }
}

/// No place takes the index file: the viewer keeps the index it built in
/// memory, says so, and browses as usual (it used to hang at "indexing").
/// A directory where the index file goes beside the trace and a file as the
/// cache directory make both places unwritable, even for root.
#[test]
fn an_index_that_cannot_be_written_is_kept_in_memory() {
    let dir = std::env::temp_dir().join(format!("tracesight-tui-unsaved-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let snap = dir.join("snapshot");
    copy_dir(&demo(), &snap);
    let copts = CaptureOptions::default();
    let cap = tracesight::capture::Capture::open(&snap, &copts).unwrap();
    let ix = cap.open_index(&Default::default(), false, &tracesight::index::BuildProgress::new()).unwrap();
    let beside = ix.path.clone();
    drop(ix);
    drop(cap);
    assert!(beside.starts_with(&snap), "the index was written beside the trace: {}", beside.display());
    std::fs::remove_file(&beside).unwrap();
    std::fs::create_dir_all(beside.join("in-the-way")).unwrap();
    let not_a_dir = dir.join("cache-is-a-file");
    std::fs::write(&not_a_dir, b"").unwrap();
    // Read when each index path is worked out; other tests only lose the
    // cache as a second place (they write beside their trace).
    std::env::set_var("XDG_CACHE_HOME", &not_a_dir);
    let mut app = tracesight::tui::spawn(&snap, &copts, (120, 40));
    wait(&mut app, "the index (in memory)", |a| a.indexed.is_some());
    let ix = app.indexed.clone().unwrap();
    assert!(ix.unsaved.is_some(), "the index says it is not saved");
    assert!(app.message.starts_with("index kept in memory"), "{}", app.message);
    // Everything that needs the index works: the finder shares it.
    goto(&mut app, 1000);
    act(&mut app, &[Action::NextException]);
    found(&mut app);
    assert_eq!(app.entry(app.cursor.number).unwrap().row.kind, RowKind::Exception, "{}", app.message);
    let (text, _) = screen(&app, PLAIN);
    assert!(text.contains(" index in memory "), "the status bar says so:\n{text}");
    assert!(beside.is_dir(), "nothing replaced what was in the way");
    drop(app);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `H` and `L` move the zoomed span without changing its width.
#[test]
fn panning_keeps_the_zoomed_span() {
    let mut app = open((120, 40));
    act(&mut app, &[Action::ZoomIn, Action::ZoomIn, Action::ZoomIn]);
    let (lo, hi) = app.zoom;
    let w = hi - lo;
    for (a, moved) in [(Action::PanRight, true), (Action::PanRight, true), (Action::PanLeft, true)] {
        let before = app.zoom;
        app.update(a);
        let (l, h) = app.zoom;
        assert!(((h - l) - w).abs() < 1e-12, "{a:?}: span {} became {}", w, h - l);
        assert_eq!(before != app.zoom, moved, "{a:?} moved the span");
    }
    // At the edge the span stays whole.
    for _ in 0..100 {
        app.update(Action::PanLeft);
    }
    let (l, h) = app.zoom;
    assert_eq!(l, 0.0);
    assert!(((h - l) - w).abs() < 1e-12);
}

/// A row without an address empties the source pane instead of keeping the
/// file of the row before.
#[test]
fn the_source_pane_follows_the_cursor_to_rows_without_an_address() {
    let mut app = open((120, 40));
    goto(&mut app, 1000);
    let (before, _) = screen(&app, PLAIN);
    assert!(!before.contains("no address"), "element 1000 has an address:\n{before}");
    let mut n = 1000;
    let plain = loop {
        n += 1;
        match app.entry(n) {
            Some(e) if e.row.addr.is_none() && e.notes.is_empty() => break n,
            Some(_) => {}
            None => goto(&mut app, n),
        }
        assert!(n < 5000, "no row without an address near 1000");
    };
    goto(&mut app, plain);
    let (text, _) = screen(&app, PLAIN);
    assert!(text.contains(" source · no address "), "element {plain}:\n{text}");
    act(&mut app, &[Action::ToggleDisasm]);
    let (text, _) = screen(&app, PLAIN);
    assert!(text.contains(" disassembly · no address "), "element {plain}:\n{text}");
}

/// Keys pressed faster than searches answer are all applied: five `x` in a
/// row land where five `x` one after the other do.
#[test]
fn repeated_searches_pressed_at_once_each_move() {
    let mut app = open((120, 40));
    let mut one_by_one = Vec::new();
    for _ in 0..5 {
        act(&mut app, &[Action::NextException]);
        found(&mut app);
        one_by_one.push(app.cursor.number);
    }
    assert!(one_by_one.windows(2).all(|w| w[1] > w[0]), "five distinct exceptions: {one_by_one:?}");
    goto(&mut app, 0);
    act(&mut app, &[Action::NextException; 5]);
    found(&mut app);
    assert_eq!(app.cursor.number, one_by_one[4], "{}", app.message);
    // Back through the history, one jump at a time.
    act(&mut app, &[Action::Back]);
    assert_eq!(app.cursor.number, one_by_one[3]);
}

/// A cancelled search stops at once: the next one does not wait for it to
/// read the whole trace, and a running search reports how far it got.
#[test]
fn a_cancelled_search_does_not_delay_the_next() {
    let mut app = open((120, 40));
    // An address the trace never executes: the search reads everything.
    let full = |app: &mut App| {
        let t = Instant::now();
        act(app, &[Action::Goto]);
        typed(app, "addr:0x4");
        app.update(Action::Submit);
        let mut progress = 0;
        wait(app, "a search that finds nothing", |a| {
            a.finding.is_none()
        });
        app.pump();
        progress = progress.max(app.progress.find_at.load(std::sync::atomic::Ordering::Relaxed));
        (t.elapsed(), progress)
    };
    let (whole, reached) = full(&mut app);
    assert!(app.message.contains("not found"), "{}", app.message);
    assert!(reached > 0, "the search reported its progress");
    goto(&mut app, 0);
    let t = Instant::now();
    act(&mut app, &[Action::Goto]);
    typed(&mut app, "addr:0x4");
    app.update(Action::Submit);
    app.update(Action::Cancel);
    assert!(app.message.contains("cancelled"), "{}", app.message);
    act(&mut app, &[Action::NextException]);
    found(&mut app);
    let after_cancel = t.elapsed();
    assert_eq!(app.entry(app.cursor.number).unwrap().row.kind, RowKind::Exception, "{}", app.message);
    // Only meaningful when reading the whole trace takes a while.
    if whole > Duration::from_millis(300) {
        assert!(after_cancel < whole / 2, "after a cancel the next search took {after_cancel:?}; a whole search takes {whole:?}");
    }
}

/// `g` says when it cannot go where asked; `addr:` goes to the next
/// execution after the cursor and says when it wrapped; a message goes away
/// with the next key that acts.
#[test]
fn goto_explains_clamping_and_addr_goes_to_the_next_execution() {
    let mut app = open((120, 40));
    let total = app.total().unwrap();
    act(&mut app, &[Action::Goto]);
    typed(&mut app, &(total + 50).to_string());
    app.update(Action::Submit);
    assert_eq!(app.cursor.number, total - 1);
    assert!(app.message.contains("past the end"), "{}", app.message);
    settle(&mut app);
    act(&mut app, &[Action::Up]);
    assert_eq!(app.message, "", "the message went stale");

    // A range executed more than once.
    let (n, addr) = first_range_from(&mut app, 1000);
    act(&mut app, &[Action::Goto]);
    typed(&mut app, &format!("addr:{addr:#x}"));
    app.update(Action::Submit);
    found(&mut app);
    let next = app.cursor.number;
    assert!(next > n, "addr: went to {next}, not past the cursor at {n}: {}", app.message);
    assert!(!app.message.contains("wrapped"), "{}", app.message);
    // From the last element it wraps to the first execution.
    act(&mut app, &[Action::Bottom]);
    act(&mut app, &[Action::Goto]);
    typed(&mut app, &format!("addr:{addr:#x}"));
    app.update(Action::Submit);
    found(&mut app);
    assert!(app.cursor.number <= n, "wrapped to the first execution: {}", app.message);
    assert!(app.message.contains("wrapped"), "{}", app.message);
}

/// What `decode` warns about shows in the viewer, the end of the trace is a
/// row of its own, `End` shows the last screenful, and a terminal too small
/// says so.
#[test]
fn warnings_the_end_of_the_trace_and_small_terminals_are_shown() {
    let dir = std::env::temp_dir().join(format!("tracesight-tui-cut-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let snap = dir.join("snapshot");
    copy_dir(&demo(), &snap);
    // A memory image missing and the trace cut short.
    std::fs::remove_file(snap.join("mem/vectors.bin")).unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(snap.join("trace.bin")).unwrap();
    f.set_len(1_000_005).unwrap();
    drop(f);
    let mut app = tracesight::tui::spawn(&snap, &CaptureOptions::default(), (80, 24));
    wait(&mut app, "the capture", |a| a.info.is_some());
    assert!(app.message.starts_with("warning: ") && app.message.contains("vectors.bin"), "{}", app.message);
    wait(&mut app, "the index", |a| a.indexed.is_some());
    settle(&mut app);
    let (text, _) = screen(&app, PLAIN);
    assert!(text.contains("⚠ 1 warning"), "the status bar counts the warnings:\n{text}");
    let total = app.total().unwrap();
    act(&mut app, &[Action::Bottom]);
    settle(&mut app);
    let (text, _) = screen(&app, PLAIN);
    let last = format!(" {} ", total - 1);
    let rows: Vec<&str> = text.lines().filter(|l| l.starts_with('│')).collect();
    let end = rows.iter().position(|l| l.contains("— end of trace —")).unwrap_or_else(|| panic!("no end row:\n{text}"));
    assert!(rows[end - 1].contains(&last), "the last element is just above the end row:\n{text}");
    // The list is full: the rows above reach the list's header.
    assert_eq!(app.top.number + app.list_height() as u64 - 1, total, "the last screenful, less the end row:\n{text}");
    app.update(Action::Resize(20, 5));
    let (text, _) = screen(&app, PLAIN);
    assert!(text.contains("terminal too small"), "{text}");
    drop(app);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Prompts edit at a caret: ← → Home End move it, typing inserts there,
/// Ctrl-U deletes what is before it. An export over an existing file asks
/// for a second Enter, and the dialog names the directory it writes to.
#[test]
fn text_fields_edit_and_export_asks_before_overwriting() {
    let mut app = open((120, 40));
    act(&mut app, &[Action::Goto]);
    typed(&mut app, "1300");
    act(&mut app, &[Action::Left, Action::Left, Action::Backspace]);
    typed(&mut app, "2");
    act(&mut app, &[Action::Top]);
    typed(&mut app, "x");
    act(&mut app, &[Action::ClearLine]);
    let Mode::Goto { input } = app.mode.clone() else { panic!("go to prompt") };
    assert_eq!(input, "1200");
    act(&mut app, &[Action::Bottom]);
    typed(&mut app, "0");
    let (text, _) = screen(&app, PLAIN);
    assert!(text.contains("go to: 12000▏"), "{text}");
    act(&mut app, &[Action::Left, Action::Left]);
    let (text, _) = screen(&app, PLAIN);
    assert!(text.contains("go to: 120▏00"), "{text}");
    app.update(Action::Submit);
    assert_eq!(app.cursor.number, 12000);
    settle(&mut app);

    let dir = std::env::temp_dir().join(format!("tracesight-tui-overwrite-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sel.txt");
    std::fs::write(&path, "keep me").unwrap();
    act(&mut app, &[Action::Anchor, Action::Down, Action::Export, Action::ClearLine]);
    let Mode::Export { file, .. } = app.mode.clone() else { panic!("export dialog") };
    assert_eq!(file, "", "Ctrl-U at the end clears the name");
    typed(&mut app, path.to_str().unwrap());
    let (text, _) = screen(&app, PLAIN);
    assert!(text.contains(&format!(" in {}", dir.display())), "the directory is named:\n{text}");
    app.update(Action::Submit);
    assert!(matches!(app.mode, Mode::Export { .. }), "the first Enter only asks");
    assert!(app.exporting.is_none());
    let (text, _) = screen(&app, PLAIN);
    assert!(text.contains("the file exists: Enter again replaces it"), "{text}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "keep me");
    app.update(Action::Submit);
    wait(&mut app, "the export", |a| a.exporting.is_none());
    assert!(app.message.starts_with("exported 2 elements"), "{}", app.message);
    assert_ne!(std::fs::read_to_string(&path).unwrap(), "keep me");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `p` goes to the next execution of the address under the cursor and `P`
/// comes back to it: the nearest earlier execution is the one it left.
#[test]
fn p_and_shift_p_visit_executions_of_the_cursor_address() {
    let mut app = open((120, 40));
    let (n, addr) = first_range_from(&mut app, 1000);
    act(&mut app, &[Action::NextVisit]);
    found(&mut app);
    let next = app.cursor.number;
    assert!(next > n, "p went to {next}, not past {n}: {}", app.message);
    let row = app.entry(next).unwrap().row.clone();
    assert!(row.addr.unwrap() <= addr && addr < row.end.unwrap(), "{next} does not execute {addr:#x}");
    act(&mut app, &[Action::PrevVisit]);
    found(&mut app);
    assert_eq!(app.cursor.number, n, "P did not come back: {}", app.message);
}

/// A capture moved away from its sources: the source pane lists where it
/// looked and names the options; `--source-root` (here the demo's own
/// directory) finds the file again.
#[test]
fn sources_not_found_show_where_they_were_looked_for_and_source_root_finds_them() {
    let dir = std::env::temp_dir().join(format!("tracesight-tui-moved-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let snap = dir.join("a/b/c/d/snapshot");
    copy_dir(&demo(), &snap);
    let start = |copts: &CaptureOptions| {
        let mut app = tracesight::tui::spawn(&snap, copts, (160, 48));
        wait(&mut app, "the index", |a| a.indexed.is_some());
        wait(&mut app, "the background pass", |a| !a.lanes.is_empty());
        settle(&mut app);
        // The program's own code (libc has no debug information).
        act(&mut app, &[Action::Goto]);
        typed(&mut app, "fn:main");
        app.update(Action::Submit);
        found(&mut app);
        assert!(app.cursor_addr().is_some(), "fn:main went to a row without an address: {}", app.message);
        app
    };
    let app = start(&CaptureOptions::default());
    let (text, _) = screen(&app, PLAIN);
    assert!(text.contains("source not found: src/demo.c"), "{text}");
    assert!(text.contains("demo.c not found; tried:"), "{text}");
    assert!(text.contains("--source-root DIR"), "{text}");
    drop(app);

    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo");
    let app = start(&CaptureOptions { source_roots: vec![root], ..CaptureOptions::default() });
    let (text, _) = screen(&app, PLAIN);
    assert!(!text.contains("not found"), "{text}");
    assert!(text.contains("demo.c:"), "the source pane names the file and line:\n{text}");
    drop(app);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The Δ column: from the element before, or from the zero mark `z`; in
/// cycles or timestamp ticks, and as time with a timestamp frequency. The
/// time column leaves a row blank rather than print `0cc`.
#[test]
fn delta_column_counts_from_the_row_before_or_the_zero_mark() {
    use tracesight::tui::draw::delta_text;
    let mut app = open((240, 48));
    goto(&mut app, 1000);
    let row = |app: &App, n: u64| app.entry(n).unwrap().row.clone();
    let expect = |a: &tracesight::tui::model::ElemRow, b: &tracesight::tui::model::ElemRow, hz: Option<f64>| -> String {
        match (a.timestamp, b.timestamp) {
            (Some(x), Some(y)) if x == y && a.cycles == b.cycles => "0".into(),
            (Some(x), Some(y)) if x != y => match hz {
                Some(_) => unreachable!("checked on its own below"),
                None => format!("+{}t", x - y),
            },
            _ => format!("+{}cc", a.cycles - b.cycles),
        }
    };
    let (r, prev) = (row(&app, 1005), row(&app, 1004));
    assert_eq!(delta_text(&app, &r), expect(&r, &prev, None));
    let (text, _) = screen(&app, PLAIN);
    assert!(text.lines().nth(6).is_some_and(|l| l.contains(" Δ ")), "no Δ header:\n{text}");
    assert!(!text.contains(" 0cc "), "a 0cc placeholder:\n{text}");

    // Count from element 1000.
    act(&mut app, &[Action::ZeroMark]);
    assert_eq!(app.zero, Some(1000));
    assert_eq!(delta_text(&app, &row(&app, 1000)), "z");
    let zero = row(&app, 1000);
    let later = row(&app, 1020);
    assert_eq!(delta_text(&app, &later), expect(&later, &zero, None));
    let (text, _) = screen(&app, PLAIN);
    assert!(text.contains("Δ from z"), "{text}");
    // As time: a frequency that makes the timestamp delta one microsecond.
    let timed = (1001..1700).find_map(|n| {
        if app.entry(n).is_none() {
            goto(&mut app, n);
        }
        let r = row(&app, n);
        (r.timestamp.zip(zero.timestamp).is_some_and(|(a, b)| a > b)).then_some(r)
    });
    let timed = timed.expect("a later timestamp within 700 elements");
    app.ts_freq = Some((timed.timestamp.unwrap() - zero.timestamp.unwrap()) as f64 * 1e6);
    assert_eq!(delta_text(&app, &timed), "+1.000µs");
    // z again: from the row before.
    act(&mut app, &[Action::ZeroMark]);
    assert_eq!(app.zero, None);
}

/// The viewer opened on the demo with its call stacks known.
fn open_with_calls(size: (u16, u16)) -> App {
    let app = open(size);
    assert!(app.calls.ready, "the background pass sends the call stacks before the lanes");
    app
}

/// The timeline pane's lines of a screen.
fn timeline_text(app: &App, text: &str) -> String {
    let h = app.layout().timeline.height as usize;
    text.lines().take(h).collect::<Vec<_>>().join("\n")
}

// The demo's elements 999988 to 1000013 (checked below, not assumed): main
// calls hash_djb through a function pointer at 1000008; its first range is
// 1000009, its return 1000012; 999988 to 999990 are one loop range run
// three times.

#[test]
fn rows_indent_by_call_depth_and_calls_fold() {
    for size in [(80u16, 24u16), (160, 48)] {
        let tag = format!("{}x{}", size.0, size.1);
        let mut app = open_with_calls(size);
        goto(&mut app, 1_000_010);
        let depth = |app: &App, n| app.calls.row(n).map(|r| r.depth()).unwrap();
        assert_eq!(app.entry(1_000_009).unwrap().row.function.as_deref(), Some("hash_djb"));
        assert!(app.entry(1_000_008).unwrap().row.call_return.is_some(), "1000008 ends in a call");
        assert_eq!(depth(&app, 1_000_009), depth(&app, 1_000_008) + 1, "the callee is one level deeper");
        assert_eq!(depth(&app, 1_000_013), depth(&app, 1_000_008), "back in main after the return");
        assert!(app.calls.row(1_000_009).unwrap().enters);
        // The function column is indented by depth.
        let text = screen(&app, PLAIN).0;
        let line = |n: u64| text.lines().find(|l| l.contains(&format!(" {n} "))).unwrap().to_string();
        let col = |l: &str, f: &str| l.find(f).unwrap();
        assert!(col(&line(1_000_010), "hash_djb") > col(&line(1_000_008), "main"), "{text}");

        // `-` inside the call folds it into its first row.
        act(&mut app, &[Action::Fold]);
        wait(&mut app, "the fold", |a| a.calls.folds.contains_key(&1_000_009));
        settle(&mut app);
        let f = app.calls.folds[&1_000_009].clone();
        assert_eq!((f.name.as_str(), f.end), ("hash_djb", 1_000_012), "{f:?}");
        assert_eq!(f.instructions, 16, "1 + 9 + 5 + 1 instructions: {f:?}");
        assert_eq!(app.cursor.number, 1_000_009, "the cursor moves to the folded row");
        assert_eq!(app.next_pos(app.cursor).unwrap().number, 1_000_013);
        assert_eq!(app.prev_pos(tracesight::tui::app::Pos { number: 1_000_013, sub: 0 }).unwrap().number, 1_000_009);
        let text = screen(&app, PLAIN).0;
        assert!(text.contains("⊞ hash_djb · 16 instr"), "{text}");
        assert!(!text.contains(" 1000010 "), "{text}");
        insta::assert_snapshot!(format!("folded_call_{tag}"), text);

        // `+` unfolds it.
        act(&mut app, &[Action::Unfold]);
        settle(&mut app);
        assert!(app.calls.folds.is_empty());
        assert_eq!(app.next_pos(app.cursor).unwrap().number, 1_000_010);

        // `-` on the call itself folds its callee.
        goto(&mut app, 1_000_008);
        act(&mut app, &[Action::Fold]);
        wait(&mut app, "the callee's fold", |a| a.calls.folds.contains_key(&1_000_009));
        assert_eq!(app.cursor.number, 1_000_008, "the call row stays");
        // A jump into a fold opens it.
        goto(&mut app, 1_000_011);
        assert!(app.calls.folds.is_empty(), "a jump into a folded call unfolds it");
    }
}

#[test]
fn loops_fold_and_percent_goes_from_a_return_to_its_call() {
    let mut app = open_with_calls((160, 48));
    // A run of one range three times is one row, ×3.
    goto(&mut app, 999_988);
    let r = app.entry(999_988).unwrap().row.clone();
    for n in 999_989..=999_990 {
        let o = &app.entry(n).unwrap().row;
        assert_eq!((o.kind, o.addr, o.end), (RowKind::Range, r.addr, r.end), "element {n}");
    }
    assert_eq!(app.calls.row(999_988).unwrap().run, Some((999_988, 999_990)));
    assert_eq!(app.next_pos(app.cursor).unwrap().number, 999_991);
    assert!(screen(&app, PLAIN).0.contains(" ×3"));
    act(&mut app, &[Action::Unfold]);
    assert_eq!(app.next_pos(app.cursor).unwrap().number, 999_989, "+ opens the run");
    assert!(!screen(&app, PLAIN).0.contains(" ×3"));

    // `%` on a return goes to the call; on the call, to where it returns.
    goto(&mut app, 1_000_012);
    assert!(app.entry(1_000_012).unwrap().row.is_return);
    act(&mut app, &[Action::CallReturn]);
    assert_eq!(app.cursor.number, 1_000_008, "{}", app.message);
    settle(&mut app);
    act(&mut app, &[Action::CallReturn]);
    found(&mut app);
    assert_eq!(app.cursor.number, 1_000_013, "{}", app.message);
}

#[test]
fn underscore_folds_every_deeper_call_and_plus_minus_zoom_in_the_timeline() {
    let mut app = open_with_calls((160, 48));
    goto(&mut app, 1_000_005);
    let d = app.calls.row(1_000_005).unwrap().depth();
    act(&mut app, &[Action::FoldBelow]);
    assert_eq!(app.calls.fold_below, Some(d));
    // hash_djb (1000009) and strncmp (1000016) are called from here.
    wait(&mut app, "the deeper calls to fold", |a| a.calls.folds.contains_key(&1_000_009) && a.calls.folds.contains_key(&1_000_016));
    settle(&mut app);
    assert!(app.calls.folds.values().all(|f| app.calls.row(f.entry).is_none_or(|r| r.depth() == d + 1)));
    let vis: Vec<u64> = app.visible().iter().map(|p| p.number).collect();
    assert!(vis.contains(&1_000_009) && !vis.contains(&1_000_010) && !vis.contains(&1_000_017), "{vis:?}");
    act(&mut app, &[Action::FoldBelow]);
    assert!(app.calls.folds.is_empty() && app.calls.fold_below.is_none());

    // In the timeline + and - zoom; in the list they fold.
    act(&mut app, &[Action::Timeline, Action::Unfold]);
    assert!((app.zoom.1 - app.zoom.0 - 0.5).abs() < 1e-9, "{:?}", app.zoom);
    act(&mut app, &[Action::Fold]);
    assert!((app.zoom.1 - app.zoom.0 - 1.0).abs() < 1e-9, "{:?}", app.zoom);
    assert!(app.calls.folds.is_empty(), "no fold while the timeline has the keys");
    act(&mut app, &[Action::Cancel]);
    // The help names the keys.
    act(&mut app, &[Action::Help]);
    let text = screen(&app, PLAIN).0;
    assert!(text.contains("fold / unfold the call") && text.contains("function statistics"), "{text}");
}

#[test]
fn statistics_pane_is_the_profile_and_goes_to_entries() {
    use tracesight::profile::stats::Column;
    use tracesight::tui::calls::Span;
    for size in [(80u16, 24u16), (160, 48)] {
        let tag = format!("{}x{}", size.0, size.1);
        let mut app = open_with_calls(size);
        act(&mut app, &[Action::Stats]);
        assert_eq!(app.mode, Mode::Stats);
        wait(&mut app, "the statistics", |a| a.calls.stats.table.is_some());
        let table = app.calls.stats.table.clone().unwrap();
        assert_eq!(table.span, Span::Whole);

        // The same numbers as the profile's own pass over the capture.
        let cap = tracesight::capture::Capture::open(&demo(), &CaptureOptions::default()).unwrap();
        let idx = cap.open_index(&tracesight::index::IndexOptions::default(), false, &tracesight::index::BuildProgress::new()).unwrap();
        let seeker = cap.seeker(&idx.file);
        let code = tracesight::profile::FunctionMap::from_table(&cap.symbols.as_ref().unwrap().function_table());
        let mut col = tracesight::profile::Collector::new(&code, Default::default(), false, false);
        tracesight::profile::pass::collect(&seeker, 0, idx.file.totals().elements, &mut col, |_| {}).unwrap();
        assert_eq!(table.rows.len(), col.stats.functions.len());
        for r in &table.rows {
            assert_eq!(Some(&r.stats), col.stats.functions.get(&(None, r.key)), "{}", r.name);
        }
        assert_eq!(table.unknown_ends, col.stats.unknown_ends);

        // Sorted by self instructions, largest first; → sorts by the next.
        let sorted = |app: &App, c: Column| {
            let rows = tracesight::tui::calls::sorted(&app.calls.stats);
            rows.windows(2).all(|w| c.value(&w[0].stats) >= c.value(&w[1].stats))
        };
        assert!(sorted(&app, Column::SelfInstructions));
        let text = screen(&app, PLAIN).0;
        assert!(text.contains("function statistics · whole capture · by self instr") && text.contains("main"), "{text}");
        insta::assert_snapshot!(format!("statistics_{tag}"), text);
        act(&mut app, &[Action::Right]);
        assert_eq!(app.calls.stats.sort, Column::TotalInstructions);
        assert!(sorted(&app, Column::TotalInstructions));
        act(&mut app, &[Action::Right, Action::Right, Action::Right, Action::Right, Action::Right, Action::Right]);
        assert_eq!(app.calls.stats.sort, Column::Max);
        act(&mut app, &[Action::Left, Action::Left, Action::Left, Action::Left, Action::Left, Action::Left, Action::Left]);

        // Enter goes to the selected function's first entry; n goes on.
        act(&mut app, &[Action::Down]);
        let (key, name) = {
            let r = tracesight::tui::calls::sorted(&app.calls.stats)[1];
            (r.key, r.name.clone())
        };
        act(&mut app, &[Action::Submit]);
        assert_eq!(app.mode, Mode::Normal);
        found(&mut app);
        let first = app.cursor.number;
        assert_eq!(app.entry(first).unwrap().row.addr, Some(key), "{name}: {}", app.message);
        act(&mut app, &[Action::NextMatch]);
        found(&mut app);
        assert!(app.cursor.number > first);
        assert_eq!(app.entry(app.cursor.number).unwrap().row.addr, Some(key), "{name}: {}", app.message);

        // The zoomed span: the segments under the timeline's zoom.
        act(&mut app, &[Action::ZoomIn, Action::ZoomIn, Action::Stats, Action::ToggleView]);
        wait(&mut app, "the zoomed span's statistics", |a| a.calls.stats.table.is_some());
        let zoomed = app.calls.stats.table.clone().unwrap();
        let segs = app.indexed.as_ref().unwrap().segments.len();
        match zoomed.span {
            Span::Segments(a, b) => assert!(a <= b && b - a + 1 < segs, "{a}..={b} of {segs}"),
            s => panic!("{s:?}"),
        }
        let self_sum = |t: &tracesight::tui::calls::StatsTable| t.rows.iter().map(|r| r.stats.self_instructions).sum::<u64>();
        assert!(self_sum(&zoomed) < self_sum(&table) && self_sum(&zoomed) > 0);

        // The selection: exactly the elements selected.
        act(&mut app, &[Action::Cancel]);
        goto(&mut app, 1_000_008);
        act(&mut app, &[Action::Anchor]);
        for _ in 0..5 {
            act(&mut app, &[Action::Down]);
        }
        act(&mut app, &[Action::Stats]);
        wait(&mut app, "the selection's statistics", |a| a.calls.stats.table.is_some());
        let sel = app.calls.stats.table.clone().unwrap();
        assert_eq!(sel.span, Span::Elements(1_000_008, 1_000_014));
        let hash = sel.rows.iter().find(|r| r.name == "hash_djb").expect("hash_djb ran in the selection");
        assert_eq!((hash.stats.calls, hash.stats.self_instructions, hash.stats.total_instructions), (1, 16, 16));
        assert!(screen(&app, PLAIN).0.contains("selection 1000008–1000013"));
        act(&mut app, &[Action::Stats]);
        assert_eq!(app.mode, Mode::Normal);
    }
}

#[test]
fn function_chart_names_what_ran_at_a_depth() {
    for size in [(80u16, 24u16), (160, 48)] {
        let tag = format!("{}x{}", size.0, size.1);
        let mut app = open_with_calls(size);
        let density = timeline_text(&app, &screen(&app, PLAIN).0);
        act(&mut app, &[Action::Chart]);
        assert!(app.calls.show_chart);
        // Deeper until main is what runs.
        let mut found_main = None;
        for d in 0..tracesight::tui::calls::CHART_DEPTHS {
            let t = timeline_text(&app, &screen(&app, PLAIN).0);
            assert!(t.contains(&format!("function chart · depth {d}")), "{t}");
            if t.contains("▏main") {
                found_main = Some(d);
                break;
            }
            act(&mut app, &[Action::ChartDeeper]);
        }
        let d = found_main.expect("main in the chart at some depth");
        // main's frame is as deep as the call stacks say.
        goto(&mut app, 1_000_000);
        assert_eq!(app.calls.row(1_000_000).unwrap().depth(), d + 1);
        // One level deeper, zoomed in: what main calls, named where it fits.
        act(&mut app, &[Action::ChartDeeper, Action::ZoomIn, Action::ZoomIn, Action::ZoomIn, Action::ZoomIn, Action::ZoomIn]);
        let text = screen(&app, PLAIN).0;
        insta::assert_snapshot!(format!("function_chart_{tag}"), timeline_text(&app, &text));
        // Colored segments, one color per function.
        let (_, buf) = screen(&app, COLOR);
        let row = 1u16;
        let colors: std::collections::HashSet<Color> = (1..size.0 - 1).map(|x| buf[(x, row)].bg).collect();
        assert!(colors.iter().filter(|c| **c != Color::Reset).count() >= 2, "{colors:?}");
        act(&mut app, &[Action::ChartShallower, Action::ZoomReset]);
        assert_eq!(app.calls.chart_depth, d);
        act(&mut app, &[Action::Chart]);
        assert!(!app.calls.show_chart);
        assert_eq!(timeline_text(&app, &screen(&app, PLAIN).0).lines().nth(1), density.lines().nth(1), "the density is back");
    }
}

fn open_fixture(name: &str, size: (u16, u16)) -> Option<(App, PathBuf)> {
    let dir = fixture_copy(name)?;
    let mut app = tracesight::tui::spawn(&dir, &CaptureOptions::default(), size);
    wait(&mut app, "the index", |a| a.indexed.is_some());
    wait(&mut app, "the lanes", |a| !a.lanes.is_empty());
    settle(&mut app);
    Some((app, dir))
}

fn set_view(app: &mut App, text: &str) {
    app.update(Action::Filter);
    app.update(Action::ClearLine);
    typed(app, text);
    app.update(Action::Submit);
    wait(app, "the view's rows", |a| !a.filtering());
    settle(app);
}

/// `f id:11` on a capture of six cores: only that trace ID's elements,
/// as many as the index counted for it, in order; moving, paging and End
/// stay inside the view; an empty filter shows every element again.
#[test]
fn a_trace_id_filter_shows_one_core() {
    let Some((mut app, dir)) = open_fixture("juno_r1_1", (160, 48)) else { return };
    let per_id = app.indexed.as_ref().unwrap().ids.iter().find(|i| i.trace_id == 0x11).unwrap().elements;
    set_view(&mut app, "id:11");
    let map = app.rowmap.clone().expect("the view's rows");
    assert_eq!(map.rows(), per_id, "every element of trace ID 0x11, no other");
    let vis = app.visible();
    assert!(vis.len() > 20);
    assert!(vis.windows(2).all(|w| w[0].number < w[1].number), "element order");
    for p in &vis {
        assert_eq!(app.entry(p.number).unwrap().row.trace_id, 0x11, "row of element {}", p.number);
    }
    let (text, _) = screen(&app, PLAIN);
    assert!(text.contains("cpu:1 · row 0 of"), "the title names the view by its CPU (cpu_1=ETM_1 in trace.ini):\n{text}");
    insta::assert_snapshot!("juno_filter_id11_160x48", text);
    act(&mut app, &[Action::PageDown, Action::PageDown, Action::Down]);
    settle(&mut app);
    assert_eq!(app.entry(app.cursor.number).unwrap().row.trace_id, 0x11);
    act(&mut app, &[Action::Bottom]);
    settle(&mut app);
    assert_eq!(Some(app.cursor.number), map.element_at(map.rows() - 1), "End: the view's last row");
    let (text, _) = screen(&app, PLAIN);
    assert!(text.contains("— end of trace —"), "the end row shows under the last row:\n{text}");
    // A search that lands on another core goes to the next row shown.
    act(&mut app, &[Action::Top, Action::NextException]);
    found(&mut app);
    assert_eq!(app.entry(app.cursor.number).unwrap().row.trace_id, 0x11);
    set_view(&mut app, "");
    assert!(app.rowmap.is_none() && app.filter.is_all());
    act(&mut app, &[Action::Top]);
    settle(&mut app);
    let numbers: Vec<u64> = app.visible().iter().map(|p| p.number).collect();
    assert_eq!(numbers, (0..numbers.len() as u64).collect::<Vec<_>>(), "every element again");
    drop(app);
    let _ = std::fs::remove_dir_all(dir.parent().unwrap());
}

/// A filtered view searches and exports what it shows: a text search
/// passes over the other cores' matches (the capture's first range is
/// core 0's), and an export of a selection writes the selected rows only.
#[test]
fn a_filtered_view_searches_and_exports_only_its_rows() {
    let Some((mut app, dir)) = open_fixture("juno_r1_1", (160, 48)) else { return };
    set_view(&mut app, "cpu:1");
    let map = app.rowmap.clone().expect("the view's rows");
    act(&mut app, &[Action::Top, Action::TextSearch]);
    typed(&mut app, "instr_range");
    app.update(Action::Submit);
    found(&mut app);
    let hit = app.cursor.number;
    let row = app.entry(hit).unwrap().row.clone();
    assert_eq!((row.trace_id, row.kind), (0x11, RowKind::Range), "{}", app.message);
    let hit_row = map.row_of(hit).expect("the hit is a row of the view");
    for r in 1..hit_row {
        let n = map.element_at(r).unwrap();
        assert_ne!(app.entry(n).map(|e| e.row.kind), Some(RowKind::Range), "row {r} (element {n}) is an earlier range of the view");
    }
    // Twenty rows down from the hit, exported as OpenCSD lines.
    let out = dir.parent().unwrap().join("view.txt");
    act(&mut app, &[Action::Anchor]);
    act(&mut app, &[Action::Down; 20]);
    settle(&mut app);
    let last = app.cursor.number;
    act(&mut app, &[Action::Export, Action::ClearLine]);
    typed(&mut app, out.to_str().unwrap());
    app.update(Action::Submit);
    assert!(app.message.contains("exporting 21 elements of view cpu:1"), "{}", app.message);
    wait(&mut app, "the export", |a| a.exporting.is_none());
    assert!(app.message.starts_with("exported 21 elements"), "{}", app.message);
    let text = std::fs::read_to_string(&out).unwrap();
    let idx: Vec<u64> = text.lines().filter_map(|l| l.strip_prefix("Idx:")).map(|l| l.split(';').next().unwrap().parse().unwrap()).collect();
    let ids: Vec<&str> = text.lines().filter_map(|l| l.split("; ID:").nth(1)).map(|l| l.split(';').next().unwrap()).collect();
    assert_eq!(ids.len(), 21, "one line per row:\n{text}");
    assert!(ids.iter().all(|id| *id == "11"), "another core's element in the export:\n{text}");
    assert!(idx.windows(2).all(|w| w[0] <= w[1]), "capture order");
    let span: Vec<u64> = (hit_row..=hit_row + 20).map(|r| map.element_at(r).unwrap()).collect();
    assert_eq!((span[0], span[20]), (hit, last));
    drop(app);
    let _ = std::fs::remove_dir_all(dir.parent().unwrap());
}

/// The cores of TC2 interleave in one buffer once they all run: `-` on a
/// call that other cores' elements run inside does not fold it (they would
/// be hidden with it) and names the core's view, where the same call folds.
#[test]
fn a_fold_never_hides_another_cores_rows() {
    let Some((mut app, dir)) = open_fixture("TC2", (160, 48)) else { return };
    wait(&mut app, "the call stacks", |a| a.calls.ready);
    settle(&mut app);
    let total = app.indexed.as_ref().unwrap().elements;
    let first_id = app.entry(0).unwrap().row.trace_id;
    let mut interleaved = false;
    let mut tried = std::collections::HashSet::new();
    // Rows inside a call (a frame a call entered), page by page, from where
    // a second core's elements start.
    let mut refused = None;
    'pages: for _ in 0..total / 20 {
        let rows: Vec<u64> = app.visible().iter().map(|p| p.number).collect();
        interleaved |= rows.iter().any(|n| app.entry(*n).is_some_and(|e| e.row.trace_id != first_id));
        let inside: Vec<(u64, u64)> = if interleaved {
            rows.iter()
                .filter_map(|n| {
                    let f = app.calls.row(*n)?.frames.last()?;
                    (f.call.is_some() && f.entry < *n).then_some((*n, f.entry))
                })
                .collect()
        } else {
            Vec::new()
        };
        for (n, entry) in inside {
            if !tried.insert(entry) {
                continue;
            }
            goto(&mut app, n);
            app.update(Action::Fold);
            wait(&mut app, "the fold", |a| a.calls.fold_pending.is_empty());
            if app.message.starts_with("not folded: ") {
                refused = Some((n, entry));
                break 'pages;
            }
            // A call folded: no other core's element inside it is loaded.
            if let Some(f) = app.calls.folds.values().next().cloned() {
                let own = app.entry(f.entry).unwrap().row.trace_id;
                for m in f.entry..=f.end {
                    if let Some(e) = app.entry(m) {
                        assert_eq!(e.row.trace_id, own, "element {m} of another core inside the fold {}..={}", f.entry, f.end);
                    }
                }
                goto(&mut app, f.entry);
                app.update(Action::Unfold);
                assert!(app.calls.folds.is_empty(), "{}", app.message);
            }
        }
        goto(&mut app, *rows.last().unwrap());
        if app.at_view_end(app.cursor) {
            break;
        }
        act(&mut app, &[Action::PageDown]);
        settle(&mut app);
    }
    let (n, entry) = refused.expect("a call with another core's elements inside");
    assert!(app.calls.folds.is_empty(), "nothing folded");
    let id = app.entry(n).unwrap().row.trace_id;
    let cpu = app.cores().iter().find(|c| c.0 == id).unwrap().1;
    assert!(app.message.contains(&format!("(f cpu:{cpu})")), "{}", app.message);
    // In that core's view the call folds: its rows after the entry go.
    set_view(&mut app, &format!("cpu:{cpu}"));
    goto(&mut app, n);
    app.update(Action::Fold);
    wait(&mut app, "the fold", |a| a.calls.fold_pending.is_empty());
    let fold = app.calls.folds.get(&entry).unwrap_or_else(|| panic!("not folded in the core's view: {}", app.message)).clone();
    settle(&mut app);
    assert_eq!(app.cursor.number, entry, "the cursor on the folded row");
    for p in app.visible() {
        assert!(p.number <= fold.entry || p.number > fold.end, "element {} shows inside the fold {}..={}", p.number, fold.entry, fold.end);
        assert_eq!(app.entry(p.number).unwrap().row.trace_id, id);
    }
    drop(app);
    let _ = std::fs::remove_dir_all(dir.parent().unwrap());
}

/// The filter prompt at 80x24 and errors it explains.
#[test]
fn the_filter_prompt_and_its_errors() {
    let Some((mut app, dir)) = open_fixture("juno_r1_1", (80, 24)) else { return };
    act(&mut app, &[Action::Filter]);
    typed(&mut app, "id:11");
    let (text, _) = screen(&app, PLAIN);
    assert!(text.contains("view: id:11▏"), "{text}");
    act(&mut app, &[Action::Submit]);
    wait(&mut app, "the view's rows", |a| !a.filtering());
    settle(&mut app);
    insta::assert_snapshot!("juno_filter_id11_80x24", screen(&app, PLAIN).0);
    set_view(&mut app, "cpu:9");
    assert!(app.message.contains("no trace from CPU 9"), "{}", app.message);
    assert_eq!(app.filter.trace_ids, vec![0x11], "a bad filter keeps the view");
    // The snapshot's cores name the CPUs: cpu_2 is traced by ETM_2, ID 0x12.
    set_view(&mut app, "cpu:2");
    assert_eq!(app.filter.trace_ids, vec![0x12]);
    assert_eq!(app.filter.label(app.cores()), "cpu:2");
    set_view(&mut app, "id:7f");
    assert!(app.message.starts_with("no element matches id:7f"), "{}", app.message);
    assert!(app.filter.is_all());
    drop(app);
    let _ = std::fs::remove_dir_all(dir.parent().unwrap());
}

/// `M` orders every stream by timestamp; each stream keeps its order and
/// elements without a timestamp of their own sort after the last one their
/// stream reported.
#[test]
fn the_merged_view_orders_streams_by_time() {
    let Some((mut app, dir)) = open_fixture("TC2", (160, 48)) else { return };
    let total = app.indexed.as_ref().unwrap().elements;
    act(&mut app, &[Action::ToggleMerge]);
    wait(&mut app, "the merged rows", |a| !a.filtering());
    let map = app.rowmap.clone().expect("merged rows");
    assert_eq!(map.rows(), total, "a merge keeps every element");
    // Walk the whole view a page at a time: per stream, element order; the
    // time each row sorts by never goes back.
    let mut last_of: std::collections::HashMap<u8, (u64, u64)> = Default::default();
    let mut key_before = 0u64;
    let mut rows = 0u64;
    let mut row = 0u64;
    while row < map.rows() {
        let n = map.element_at(row).unwrap();
        goto(&mut app, n);
        let end = (row + 40).min(map.rows());
        let mut next_row = row;
        for r in row..end {
            let n = map.element_at(r).unwrap();
            let e = match app.entry(n) {
                Some(e) => e.row.clone(),
                None => break,
            };
            // An element's timestamp is the last its stream reported.
            let key = e.timestamp.unwrap_or(0);
            if let Some((prev, _)) = last_of.get(&e.trace_id) {
                assert!(n > *prev, "stream {:02x} keeps its order at row {r}", e.trace_id);
            }
            assert!(key >= key_before, "row {r} (element {n}) sorts by {key} after {key_before}");
            key_before = key_before.max(key);
            last_of.insert(e.trace_id, (n, key));
            rows += 1;
            next_row = r + 1;
        }
        // A page not decoded yet stops the walk short: go on from there.
        row = next_row.max(row + 1);
        if rows > 3000 {
            break;
        }
    }
    assert!(rows > 100);
    let (text, _) = screen(&app, PLAIN);
    assert!(text.contains("· merge · row"), "{text}");
    act(&mut app, &[Action::ToggleMerge]);
    assert!(app.rowmap.is_none() && app.filter.is_all());
    drop(app);
    let _ = std::fs::remove_dir_all(dir.parent().unwrap());
}

/// More lanes than fit: the title says how many are hidden and ↑ ↓ on the
/// timeline scroll them.
#[test]
fn timeline_lanes_scroll_when_they_do_not_fit() {
    let Some((mut app, dir)) = open_fixture("juno_r1_1", (80, 24)) else { return };
    let lanes = app.lanes.len();
    let room = app.lanes_room();
    assert!(lanes > room, "{lanes} lanes, room for {room}");
    let (text, _) = screen(&app, PLAIN);
    let note = format!("lanes 1–{room} of {lanes}, {} hidden", lanes - room);
    assert!(text.contains(&note), "{note}:\n{text}");
    act(&mut app, &[Action::Timeline, Action::Down, Action::Down, Action::Down, Action::Down]);
    assert_eq!(app.lane_top, lanes - room, "scrolls to the last lane, no further");
    let (text, _) = screen(&app, PLAIN);
    let last = app.lanes.last().unwrap().trace_id;
    assert!(text.lines().any(|l| l.starts_with(&format!("│{last:02x}  "))), "the last lane shows:\n{text}");
    insta::assert_snapshot!("juno_lanes_scrolled_80x24", text);
    act(&mut app, &[Action::Up]);
    assert_eq!(app.lane_top, lanes - room - 1);
    drop(app);
    let _ = std::fs::remove_dir_all(dir.parent().unwrap());
}

/// A perf.data names its CPUs: `cpu:N` picks a CPU's trace ID; a CPU
/// without trace is refused.
#[test]
fn a_cpu_filter_on_perf_data() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/perf/simpleperf");
    if !src.is_dir() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("tracesight-tui-perf-cpu-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(src.join("perf_etm.data"), dir.join("perf_etm.data")).unwrap();
    let mut app = tracesight::tui::spawn(&dir.join("perf_etm.data"), &CaptureOptions::default(), (120, 40));
    wait(&mut app, "the index", |a| a.indexed.is_some());
    settle(&mut app);
    let total = app.indexed.as_ref().unwrap().elements;
    set_view(&mut app, "cpu:7");
    assert_eq!(app.filter.trace_ids, vec![0x1e]);
    assert_eq!(app.rowmap.as_ref().map(|m| m.rows()), Some(total), "every element is CPU 7's");
    let (text, _) = screen(&app, PLAIN);
    assert!(text.contains(" · cpu:7 · row 0 of "), "{text}");
    set_view(&mut app, "cpu:3");
    assert!(app.message.starts_with("no element matches cpu:3"), "CPU 3 has no trace: {}", app.message);
    assert!(app.filter.is_all() && app.rowmap.is_none(), "an empty view is not kept");
    drop(app);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Cycle counts are on the ranges they count: a count covers the ranges of
/// its trace ID since the previous count and shows on the last of them
/// (even when the count is on the next page), the others show `·`; the
/// count's own row is hidden until `y`.
#[test]
fn cycle_counts_fold_into_the_ranges_they_count() {
    let mut app = open((160, 48));
    goto(&mut app, 1_000_000);
    let row = |app: &App, n: u64| app.entry(n).unwrap().row.clone();
    assert!(row(&app, 1_000_004).text.starts_with("CYCLE_COUNT( [CC=106]"), "{}", row(&app, 1_000_004).text);
    assert_eq!(row(&app, 1_000_003).range_cycles, Some(106), "on the last range before the count");
    assert!(row(&app, 1_000_002).cycles_below && row(&app, 1_000_002).range_cycles.is_none());
    let vis: Vec<u64> = app.visible().iter().map(|p| p.number).collect();
    assert!(vis.contains(&1_000_003) && !vis.contains(&1_000_004), "the count's row is hidden");
    assert_eq!(app.next_elem(1_000_003), Some(1_000_005));
    assert_eq!(app.prev_elem(1_000_005), Some(1_000_003));
    let (text, _) = screen(&app, PLAIN);
    assert!(text.lines().any(|l| l.contains(" 1000003     106 10 ")), "the cycles column:\n{text}");
    act(&mut app, &[Action::ToggleCycleRows]);
    settle(&mut app);
    assert!(app.visible().iter().any(|p| p.number == 1_000_004), "y shows the count's row");
    assert_eq!(app.next_elem(1_000_003), Some(1_000_004));
    act(&mut app, &[Action::ToggleCycleRows]);
    // Over several pages, across their boundaries: every count is on the
    // range of its ID before it.
    let mut checked = 0;
    for page in 0..6u64 {
        goto(&mut app, page * 128 + 200);
        for n in page * 128 + 130..page * 128 + 256 {
            let (Some(e), Some(_)) = (app.entry(n), app.entry(n - 1)) else { continue };
            if !e.row.text.starts_with("CYCLE_COUNT") {
                continue;
            }
            let c: u64 = e.row.text.split("CC=").nth(1).unwrap().split(']').next().unwrap().parse().unwrap();
            let before = (n.saturating_sub(64)..n).rev().find(|k| app.entry(*k).is_some_and(|x| x.row.kind == RowKind::Range && x.row.trace_id == e.row.trace_id));
            if let Some(k) = before {
                assert_eq!(app.entry(k).unwrap().row.range_cycles, Some(c), "the count at {n} is on range {k}");
                checked += 1;
            }
        }
    }
    assert!(checked > 10, "{checked} counts checked");
}

/// PTM puts a count on the range itself: the column shows it, at 80x24.
#[test]
fn ptm_cycle_counts_in_the_column() {
    let Some((app, dir)) = open_fixture("TC2", (80, 24)) else { return };
    let (text, _) = screen(&app, PLAIN);
    assert!(text.contains(" cycles "), "{text}");
    insta::assert_snapshot!("tc2_cycles_80x24", text);
    drop(app);
    let _ = std::fs::remove_dir_all(dir.parent().unwrap());
}

/// `fn:` finds a function inlined into another (DWARF inlined instances):
/// the range it lands on runs into one of its instances, and `n` visits
/// the next. `/` lists such a function too.
#[test]
fn goto_fn_finds_inlined_functions() {
    let mut app = open((120, 40));
    wait(&mut app, "the function list", |a| a.functions.iter().any(|f| !f.inline.is_empty()));
    let f = app.functions.iter().find(|f| f.name == "count_word").cloned().expect("count_word in the function list");
    assert!(!f.inline.is_empty(), "count_word is inlined into count_words: {f:?}");
    let runs_into = |app: &App, n: u64| {
        let r = app.entry(n).unwrap().row.clone();
        r.kind == RowKind::Range && f.inline.iter().any(|a| r.addr.unwrap() <= *a && *a < r.end.unwrap()) || f.entries.contains(&r.addr.unwrap_or(u64::MAX))
    };
    app.update(Action::Goto);
    typed(&mut app, "fn:count_word");
    app.update(Action::Submit);
    found(&mut app);
    let first = app.cursor.number;
    assert!(runs_into(&app, first), "element {first} runs into count_word: {}", app.message);
    act(&mut app, &[Action::NextMatch]);
    found(&mut app);
    let second = app.cursor.number;
    assert!(second > first && runs_into(&app, second), "n: the next visit ({second}): {}", app.message);
    act(&mut app, &[Action::PrevMatch]);
    found(&mut app);
    assert_eq!(app.cursor.number, first, "N goes back");
    wait(&mut app, "the counts", |a| a.functions.iter().all(|f| f.count.is_some()));
    let counted = app.functions.iter().find(|f| f.name == "count_word").unwrap().count.unwrap();
    assert!(counted > 0, "visits of inlined code are counted");
}

/// `\` searches the elements' text (any case) from the cursor; `n` / `N`
/// repeat it; a count's row it lands on is shown.
#[test]
fn backslash_searches_element_text() {
    let mut app = open((160, 48));
    goto(&mut app, 999_990);
    act(&mut app, &[Action::TextSearch]);
    typed(&mut app, "cc=106");
    let (text, _) = screen(&app, PLAIN);
    assert!(text.contains("search text: cc=106▏"), "{text}");
    act(&mut app, &[Action::Submit]);
    found(&mut app);
    let hit = app.cursor.number;
    assert!(app.entry(hit).unwrap().row.text.contains("CC=106"), "landed on {hit}: {}", app.message);
    assert!(app.visible().iter().any(|p| p.number == hit), "the hit shows although a count");
    assert!(app.message.starts_with("text \"cc=106\": element"), "{}", app.message);
    act(&mut app, &[Action::NextMatch]);
    found(&mut app);
    let next = app.cursor.number;
    assert!(next > hit && app.entry(next).unwrap().row.text.contains("CC=106"), "n: {next}");
    act(&mut app, &[Action::PrevMatch]);
    found(&mut app);
    assert_eq!(app.cursor.number, hit, "N goes back");
    act(&mut app, &[Action::TextSearch]);
    typed(&mut app, "no such text anywhere");
    act(&mut app, &[Action::Submit]);
    found(&mut app);
    assert!(app.message.ends_with("not found"), "{}", app.message);
    assert_eq!(app.cursor.number, hit);
}

/// `D`: the range's instructions with their source lines between them.
#[test]
fn mixed_source_and_disassembly() {
    for size in [(80u16, 24u16), (160, 48)] {
        let mut app = open(size);
        goto(&mut app, 1_000_000);
        act(&mut app, &[Action::ToggleMixed]);
        let (text, _) = screen(&app, PLAIN);
        assert!(text.contains(" source + disassembly · main+0x29c "), "{text}");
        assert!(text.contains("demo.c:"), "a source line among the instructions:\n{text}");
        assert!(text.contains("0x4007cc  "), "the range's first instruction:\n{text}");
        insta::assert_snapshot!(format!("mixed_{}x{}", size.0, size.1), text);
        act(&mut app, &[Action::ToggleMixed]);
        assert!(!screen(&app, PLAIN).0.contains("source + disassembly"));
    }
}


/// In one core's view a call folds although other cores' elements run
/// inside it (the view hides them), and its span often ends on one of
/// those: the rows after the fold still follow it (they were gone: the
/// list ended at the folded row).
#[test]
fn a_fold_in_a_cores_view_is_followed_by_its_next_rows() {
    let Some((mut app, dir)) = open_fixture("TC2", (160, 48)) else { return };
    wait(&mut app, "the call stacks", |a| a.calls.ready);
    settle(&mut app);
    let id = 0x11;
    let cpu = app.cores().iter().find(|c| c.0 == id).expect("a core traced as ID 0x11").1;
    set_view(&mut app, &format!("cpu:{cpu}"));
    let map = app.rowmap.clone().expect("the view's rows");
    let mut tried = std::collections::HashSet::new();
    let mut checked = 0;
    for _ in 0..200 {
        let rows: Vec<u64> = app.visible().iter().map(|p| p.number).collect();
        let heads: Vec<(u64, u64)> = rows
            .iter()
            .filter_map(|n| Some((*n, app.calls.row(*n)?.frames.last()?.entry)))
            .filter(|(n, entry)| entry < n)
            .collect();
        for (n, entry) in heads {
            if !tried.insert(entry) {
                continue;
            }
            goto(&mut app, n);
            app.update(Action::Fold);
            wait(&mut app, "the fold", |a| a.calls.fold_pending.is_empty());
            let Some(f) = app.calls.folds.values().next().cloned() else { continue };
            settle(&mut app);
            if map.row_of(f.end).is_none() {
                // The fold ends on an element of another core.
                let after = map.next(f.end);
                let shown: Vec<u64> = app.visible().iter().map(|p| p.number).collect();
                let at = shown.iter().position(|&m| m == f.entry).expect("the folded row on screen");
                match after {
                    Some(next) => assert_eq!(shown.get(at + 1), Some(&next), "the row after the fold {}..={}", f.entry, f.end),
                    None => assert_eq!(shown.len(), at + 1),
                }
                assert!(shown.iter().all(|&m| m <= f.entry || m > f.end));
                checked += 1;
            }
            goto(&mut app, f.entry);
            app.update(Action::Unfold);
            assert!(app.calls.folds.is_empty(), "{}", app.message);
            goto(&mut app, n);
        }
        if checked >= 3 || app.at_view_end(app.cursor) {
            break;
        }
        goto(&mut app, *rows.last().unwrap());
        act(&mut app, &[Action::PageDown]);
        settle(&mut app);
    }
    assert!(checked > 0, "no fold in the view ended on another core's element");
    drop(app);
    let _ = std::fs::remove_dir_all(dir.parent().unwrap());
}

/// At 80x24 the help is one column that scrolls: every key's description
/// is read whole (two columns cut them at 80 columns), and the title says
/// which keys are shown.
#[test]
fn the_help_scrolls_at_80_columns_and_cuts_no_description() {
    let mut app = open((80, 24));
    act(&mut app, &[Action::Help]);
    let mut seen = std::collections::HashSet::new();
    let mut pages = 0;
    loop {
        let text = screen(&app, PLAIN).0;
        assert!(text.contains(" keys ") && text.contains(" of 36 ") || text.contains("keys (Esc closes)"), "{text}");
        for (k, d) in tracesight::tui::draw::KEYS {
            if text.lines().any(|l| l.contains(&format!(" {k:<9} {d}"))) {
                seen.insert(*k);
            }
        }
        pages += 1;
        if seen.len() == tracesight::tui::draw::KEYS.len() || pages > 10 {
            break;
        }
        act(&mut app, &[Action::PageDown]);
    }
    assert_eq!(seen.len(), tracesight::tui::draw::KEYS.len(), "keys never shown: {:?}", tracesight::tui::draw::KEYS.iter().filter(|(k, _)| !seen.contains(k)).collect::<Vec<_>>());
    assert!(pages >= 2, "one column does not hold 36 keys in 24 lines");
    // Back to the top, and Esc closes.
    act(&mut app, &[Action::Top]);
    assert!(screen(&app, PLAIN).0.contains("keys 1–"), "scrolled back to the first key");
    act(&mut app, &[Action::Cancel]);
    assert!(!screen(&app, PLAIN).0.contains("Esc closes"));
}
