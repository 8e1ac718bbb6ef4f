//! The viewer's state and how actions change it. Nothing here decodes or
//! touches the terminal: requests go to the worker threads and their answers
//! come back as [`Response`]s, so the app can be driven headless in tests.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;

use crate::export::{ExportFormat, ExportRequest};
use crate::index::SeekTarget;
use crate::symbols::{FuzzyMatcher, SkimMatcher};

use super::model::{Entry, RowKind, View, PAGE};
use super::sourceview::{DisasmLine, ExecutedRange, SourceView};
use super::worker::{CaptureInfo, Dir, FindWhat, FunctionInfo, Indexed, Progress, Request, Response};

/// Pages kept in memory (each holds [`PAGE`] elements).
const PAGE_CACHE: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Up,
    Down,
    PageUp,
    PageDown,
    Top,
    Bottom,
    /// Expand or collapse the selected range into its instructions.
    Expand,
    ToggleView,
    ToggleDisasm,
    Goto,
    Search,
    NextMatch,
    PrevMatch,
    NextException,
    PrevException,
    NextGap,
    PrevGap,
    NextSpec,
    PrevSpec,
    /// From a call to its return.
    CallReturn,
    /// Count the delta column from the cursor's element (again: from the
    /// element before each row).
    ZeroMark,
    /// The next execution of the address under the cursor.
    NextVisit,
    /// The previous execution of the address under the cursor.
    PrevVisit,
    /// Then a letter: set a mark.
    SetMark,
    /// Then a letter: jump to a mark.
    JumpMark,
    Back,
    Forward,
    /// Anchor (or drop) a selection at the cursor.
    Anchor,
    Export,
    Help,
    Quit,
    ZoomIn,
    ZoomOut,
    PanLeft,
    PanRight,
    ZoomReset,
    /// Scroll the list by lines (mouse wheel).
    Scroll(i32),
    /// Click at a terminal cell.
    Click(u16, u16),
    Input(char),
    Backspace,
    /// Ctrl-U in a text field: delete what is before the caret.
    ClearLine,
    /// Tab inside a dialog.
    NextField,
    Submit,
    Cancel,
    Resize(u16, u16),
    /// Give the timeline the keyboard (or take it back).
    Timeline,
    Left,
    Right,
    /// Fold the call under the cursor (in the timeline: zoom out).
    Fold,
    /// Unfold the folded call or loop under the cursor (in the timeline:
    /// zoom in).
    Unfold,
    /// Fold every call deeper than the cursor's (again: unfold all).
    FoldBelow,
    /// The function statistics pane.
    Stats,
    /// The timeline's function chart / density.
    Chart,
    ChartDeeper,
    ChartShallower,
    /// Open the view filter prompt (CPU / trace ID, context ID, VMID, merge).
    Filter,
    /// The time-merged view of every stream on / off.
    ToggleMerge,
    /// Open the prompt of a search over the elements' text.
    TextSearch,
    /// The source pane's mixed source and disassembly on / off.
    ToggleMixed,
    /// Cycle count elements as rows of their own, or only as the cycles
    /// column of the ranges they count.
    ToggleCycleRows,
}

/// A line of the list: speculation record `sub < pre` of an element, the
/// element itself, or one of its instructions when expanded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Pos {
    pub number: u64,
    pub sub: u32,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Mode {
    Normal,
    Goto { input: String },
    Search { input: String, hits: Vec<Hit>, selected: usize },
    /// Waiting for the letter of a mark to set or jump to.
    Mark { set: bool },
    Export { format: ExportFormat, file: String, from: u64, to: u64 },
    Help,
    /// The function statistics pane.
    Stats,
    /// The view filter prompt.
    Filter { input: String },
    /// The prompt of a search over the elements' text.
    TextSearch { input: String },
}

#[derive(Clone, Debug, PartialEq)]
pub struct Hit {
    pub function: usize,
    pub positions: Vec<usize>,
}

/// What n / N repeat.
#[derive(Clone, Debug, PartialEq)]
pub struct LastSearch {
    pub what: FindWhat,
    pub label: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Axis {
    Timestamp,
    Cycles,
    Elements,
}

impl Axis {
    pub fn name(self) -> &'static str {
        match self {
            Axis::Timestamp => "timestamp",
            Axis::Cycles => "cycles",
            Axis::Elements => "element",
        }
    }
}

pub struct Channels {
    pub pager: Sender<Request>,
    pub finder: Sender<Request>,
    pub rx: Receiver<Response>,
}

/// What a timeline line was binned for: columns, the zoomed axis span (as
/// bits), the axis, bins per segment and the lane (`None`: all of them).
pub type DensityKey = (usize, u64, u64, u8, usize, Option<u8>);
/// A column of the timeline: instructions, exceptions, gaps, speculation.
pub type DensityBin = (f64, u64, u64, u64);

pub struct App {
    pub chans: Channels,
    pub progress: Arc<Progress>,
    pub info: Option<CaptureInfo>,
    pub indexed: Option<Indexed>,
    /// The timeline's density columns of the last frames, by what they were
    /// binned for: binning walks every segment's bins (131,072 per lane on
    /// 1 GiB), too much to redo every frame. Emptied when the index or the
    /// lanes change.
    pub density: std::cell::RefCell<HashMap<DensityKey, Arc<Vec<DensityBin>>>>,
    pub error: Option<String>,
    pub view: View,
    pub pages: HashMap<(View, u64), Arc<Vec<Entry>>>,
    page_order: VecDeque<(View, u64)>,
    pending: HashSet<(View, u64)>,
    pub top: Pos,
    pub cursor: Pos,
    /// The expanded element and its instruction lines.
    pub expanded: Option<(u64, Vec<DisasmLine>)>,
    /// The element the time delta column counts from (`z`); without one it
    /// counts from the element before.
    pub zero: Option<u64>,
    /// Timestamp ticks per second (`--ts-freq`): deltas of timestamps are
    /// shown as time.
    pub ts_freq: Option<f64>,
    expand_wanted: Option<u64>,
    pub show_disasm: bool,
    pub source: Option<(SourceView, Vec<DisasmLine>)>,
    source_asked: Option<u64>,
    source_pending: bool,
    pub mode: Mode,
    pub marks: HashMap<char, u64>,
    back: Vec<u64>,
    forward: Vec<u64>,
    pub anchor: Option<u64>,
    pub last_search: Option<LastSearch>,
    pub functions: Vec<FunctionInfo>,
    /// Per trace ID activity, once the background pass has run.
    pub lanes: Vec<super::worker::Lane>,
    /// The search in flight: generation and what it looks for.
    pub finding: Option<(u64, String)>,
    /// Whether the search in flight starts from the cursor (x, n, ...):
    /// then the same keys pressed meanwhile wait in `find_queue` and each
    /// starts where the previous one landed, instead of restarting it.
    finding_rel: bool,
    find_queue: VecDeque<(Dir, FindWhat, String)>,
    /// `g addr:`: the search from the start to run when the one from the
    /// cursor reaches the end without a hit, and whether it is running.
    find_wrap: Option<FindWhat>,
    find_wrapped: bool,
    pub exporting: Option<PathBuf>,
    /// Before the index exists: how far the trace is known to go.
    pub provisional: Option<u64>,
    pub message: String,
    pub size: (u16, u16),
    /// Timeline zoom: the visible part of the axis, as fractions of the whole.
    pub zoom: (f64, f64),
    /// The timeline's own cursor (a fraction of the visible part) while the
    /// timeline has the keyboard.
    pub timeline_cursor: Option<f64>,
    /// The caret in the text field of a prompt (a char index).
    pub text_at: usize,
    /// The first key the help overlay shows when it scrolls.
    pub help_top: usize,
    /// The export file that exists and that a second Enter overwrites.
    pub export_confirm: Option<PathBuf>,
    /// Call depth, folds, the statistics pane and the function chart.
    pub calls: super::calls::CallView,
    /// What the list shows (all elements unless filtered or merged).
    pub filter: super::rowmap::Filter,
    /// The rows of a filtered or merged view, once the finder built them.
    pub rowmap: Option<Arc<super::rowmap::RowMap>>,
    /// The generation of the row map asked for last.
    pub map_generation: u64,
    /// The first timeline lane shown when there are more than fit.
    pub lane_top: usize,
    /// The source pane shows source lines among the instructions (`D`).
    pub mixed: bool,
    /// Cycle count elements as rows of their own (`y`); by default their
    /// counts are only in the cycles column of the ranges they count.
    pub show_cycle_rows: bool,
    pub quit: bool,
}

impl App {
    pub fn new(chans: Channels, progress: Arc<Progress>, size: (u16, u16)) -> App {
        App {
            zero: None,
            ts_freq: None,
            chans,
            progress,
            info: None,
            indexed: None,
            error: None,
            view: View::Committed,
            pages: HashMap::new(),
            page_order: VecDeque::new(),
            pending: HashSet::new(),
            top: Pos { number: 0, sub: 0 },
            cursor: Pos { number: 0, sub: 0 },
            expanded: None,
            expand_wanted: None,
            show_disasm: false,
            source: None,
            source_asked: None,
            source_pending: false,
            mode: Mode::Normal,
            marks: HashMap::new(),
            back: Vec::new(),
            forward: Vec::new(),
            anchor: None,
            last_search: None,
            functions: Vec::new(),
            lanes: Vec::new(),
            density: Default::default(),
            finding: None,
            finding_rel: false,
            find_queue: VecDeque::new(),
            find_wrap: None,
            find_wrapped: false,
            exporting: None,
            provisional: None,
            message: String::new(),
            size,
            zoom: (0.0, 1.0),
            timeline_cursor: None,
            text_at: 0,
            help_top: 0,
            export_confirm: None,
            calls: Default::default(),
            filter: Default::default(),
            rowmap: None,
            map_generation: 0,
            lane_top: 0,
            show_cycle_rows: false,
            mixed: false,
            quit: false,
        }
    }

    /// Elements in the trace; while the index builds, those known so far
    /// (plus one, so that moving on asks for the next page).
    pub fn total(&self) -> Option<u64> {
        match &self.indexed {
            Some(i) => Some(i.elements),
            None => self.provisional,
        }
    }

    pub fn layout(&self) -> super::layout::Areas {
        super::layout::areas(ratatui::layout::Rect::new(0, 0, self.size.0, self.size.1), self.lanes_shown())
    }

    /// Timeline lanes shown: one per trace ID (at most six), or one for all.
    pub fn lanes_shown(&self) -> u16 {
        // Six, or more on a tall terminal (the timeline takes up to a third).
        let most = (self.size.1 as usize / 3).saturating_sub(4).max(6);
        self.indexed.as_ref().map_or(1, |ix| ix.ids.len().clamp(1, most)) as u16
    }

    /// Lines the timeline has for lanes (besides its marks and viewport).
    pub fn lanes_room(&self) -> usize {
        (self.layout().timeline.height as usize).saturating_sub(4).max(1)
    }

    /// Columns inside the list pane's border.
    pub fn list_inner_width(&self) -> usize {
        self.layout().list.width.saturating_sub(2) as usize
    }

    /// Rows of the list pane.
    pub fn list_height(&self) -> usize {
        (self.layout().list.height.saturating_sub(3) as usize).max(1)
    }

    // ---- pages --------------------------------------------------------------

    pub fn entry(&self, number: u64) -> Option<&Entry> {
        let page = self.pages.get(&(self.view, number / PAGE))?;
        page.get((number % PAGE) as usize)
    }

    fn page_exists(&self, page: u64) -> bool {
        self.total().is_some_and(|t| page * PAGE < t)
    }

    fn page_missing(&self, page: u64) -> bool {
        let key = (self.view, page);
        self.page_exists(page) && !self.pages.contains_key(&key) && !self.pending.contains(&key)
    }

    /// Ask for the missing pages among `pages`, contiguous ones in one
    /// request (decoded in one pass).
    fn want_pages(&mut self, pages: impl Iterator<Item = u64>) {
        let mut run: Option<(u64, u64)> = None;
        let mut runs = Vec::new();
        for p in pages {
            if !self.page_missing(p) {
                continue;
            }
            self.pending.insert((self.view, p));
            run = match run {
                Some((a, n)) if a + n == p => Some((a, n + 1)),
                Some(r) => {
                    runs.push(r);
                    Some((p, 1))
                }
                None => Some((p, 1)),
            };
        }
        runs.extend(run);
        for (first, count) in runs {
            let _ = self.chans.pager.send(Request::Pages { view: self.view, first, count });
        }
    }

    /// Ask for the pages the screen needs and the one after.
    pub fn request_visible(&mut self) {
        let Some(total) = self.total() else { return };
        if total == 0 {
            return;
        }
        if let Some(mut pages) = self.view_pages() {
            // A fold hides rows the view's row numbers count: the rows shown
            // after it are further on.
            pages.extend(self.visible().iter().map(|p| p.number / PAGE));
            pages.sort_unstable();
            pages.dedup();
            self.want_pages(pages.into_iter());
            self.request_calls();
            self.ask_source();
            return;
        }
        let h = self.list_height() as u64;
        let first = self.top.number / PAGE;
        let last = (self.top.number + h).min(total - 1) / PAGE;
        let cursor = self.cursor.number / PAGE;
        // The page after the screen comes in the same pass, nearly free; the
        // one before may start at an earlier checkpoint, so it waits until
        // scrolling up needs it.
        // Folded rows hide elements: the pages of the rows shown too.
        let shown: Vec<u64> = self.visible().iter().map(|p| p.number / PAGE).collect();
        self.want_pages((first..=last + 1).chain(std::iter::once(cursor)).chain(shown));
        self.request_calls();
        self.ask_source();
    }

    /// Whether an answer from the workers is expected soon (the event loop
    /// then looks for it more often).
    pub fn waiting(&self) -> bool {
        !self.pending.is_empty() || self.source_pending || self.expand_wanted.is_some() || self.finding.is_some()
    }

    /// Lines an element occupies in the list.
    pub fn lines_of(&self, number: u64) -> u32 {
        let instrs = match &self.expanded {
            Some((n, lines)) if *n == number => lines.len() as u32,
            _ => 0,
        };
        self.elem_sub(number) + 1 + instrs
    }

    /// The sub-line of the element row itself: after the decoder messages
    /// and, in the speculation view, the speculation records before it.
    pub fn elem_sub(&self, number: u64) -> u32 {
        let Some(e) = self.entry(number) else { return 0 };
        let spec = if self.view == View::Speculation { e.pre.len() } else { 0 };
        (e.notes.len() + spec) as u32
    }

    pub fn next_pos(&self, p: Pos) -> Option<Pos> {
        if p.sub + 1 < self.lines_of(p.number) {
            return Some(Pos { number: p.number, sub: p.sub + 1 });
        }
        // Past a folded call, then to the next row the view shows.
        let end = self.calls.row_end(p.number);
        self.next_elem(end).map(|number| Pos { number, sub: 0 })
    }

    pub fn prev_pos(&self, p: Pos) -> Option<Pos> {
        if p.sub > 0 {
            return Some(Pos { number: p.number, sub: p.sub - 1 });
        }
        let n = self.calls.row_start(self.prev_elem(p.number)?);
        Some(Pos { number: n, sub: self.lines_of(n) - 1 })
    }

    /// The positions of the visible lines, from the top.
    pub fn visible(&self) -> Vec<Pos> {
        let h = self.list_height();
        let mut out = Vec::with_capacity(h);
        let mut p = Some(self.top);
        while let Some(q) = p {
            if out.len() >= h || self.total().is_none_or(|t| q.number >= t) {
                break;
            }
            out.push(q);
            p = self.next_pos(q);
        }
        out
    }

    fn keep_cursor_visible(&mut self) {
        if self.row_order(self.cursor) < self.row_order(self.top) {
            self.top = self.cursor;
            return;
        }
        let h = self.list_height();
        let vis = self.visible();
        if vis.len() >= h && vis.last().is_some_and(|l| self.row_order(self.cursor) > self.row_order(*l)) {
            // Put the cursor on the last line.
            let mut t = self.cursor;
            for _ in 1..h {
                match self.prev_pos(t) {
                    Some(p) => t = p,
                    None => break,
                }
            }
            self.top = t;
        }
    }

    /// Put the cursor on element `n` (its element line), near the top third.
    pub fn jump_to(&mut self, n: u64, record: bool) {
        let Some(total) = self.total() else { return };
        if total == 0 {
            return;
        }
        // A filtered view goes to the element, or the next one it shows.
        let Some(n) = self.in_view(n.min(total - 1)) else { return };
        self.calls.reveal(n);
        if record && n != self.cursor.number {
            self.back.push(self.cursor.number);
            self.forward.clear();
        }
        self.cursor = Pos { number: n, sub: self.elem_sub(n) };
        self.top = Pos { number: self.top_for(n, total), sub: 0 };
        self.keep_cursor_visible();
        self.request_visible();
    }

    /// `g N`: past the end (or past what is known while indexing) goes to
    /// the last element and says so.
    fn goto_element(&mut self, n: u64) {
        let Some(total) = self.total() else {
            self.message = "the capture is not open yet".into();
            return;
        };
        self.jump_to(n, true);
        if n >= total {
            let last = total.saturating_sub(1);
            self.message = if self.indexed.is_none() {
                format!("element {n} is not decoded yet (indexing): at element {last}, the last known so far")
            } else {
                format!("element {n} is past the end: at the last element, {last}")
            };
        }
    }

    fn move_by(&mut self, lines: i64) {
        for _ in 0..lines.unsigned_abs() {
            let next = if lines > 0 { self.next_pos(self.cursor) } else { self.prev_pos(self.cursor) };
            match next {
                Some(p) => self.cursor = p,
                None => break,
            }
        }
        self.keep_cursor_visible();
        self.request_visible();
    }

    fn scroll_by(&mut self, lines: i32) {
        for _ in 0..lines.unsigned_abs() {
            let next = if lines > 0 { self.next_pos(self.top) } else { self.prev_pos(self.top) };
            match next {
                Some(p) => self.top = p,
                None => break,
            }
        }
        let vis = self.visible();
        if let (Some(f), Some(l)) = (vis.first(), vis.last()) {
            if self.row_order(self.cursor) < self.row_order(*f) {
                self.cursor = *f;
            } else if self.row_order(self.cursor) > self.row_order(*l) {
                self.cursor = *l;
            }
        }
        self.request_visible();
    }

    // ---- source -------------------------------------------------------------

    /// The address the source pane follows: the selected instruction of an
    /// expanded range, else the element's address.
    pub fn cursor_addr(&self) -> Option<u64> {
        let e = self.entry(self.cursor.number)?;
        if let Some((n, lines)) = &self.expanded {
            let base = self.elem_sub(*n);
            if *n == self.cursor.number && self.cursor.sub > base {
                return lines.get((self.cursor.sub - base - 1) as usize).map(|l| l.addr);
            }
        }
        e.row.addr
    }

    fn ask_source(&mut self) {
        if self.source_pending {
            return;
        }
        let Some(addr) = self.cursor_addr() else { return };
        if self.source_asked == Some(addr) {
            return;
        }
        let window: Vec<ExecutedRange> = self
            .visible()
            .iter()
            .filter_map(|p| self.entry(p.number))
            .filter(|e| e.row.kind == RowKind::Range)
            .filter_map(|e| Some(ExecutedRange { start: e.row.addr?, end: e.row.end?, isa: e.row.isa }))
            .collect();
        let disasm = self.entry(self.cursor.number).and_then(|e| {
            Some(ExecutedRange { start: e.row.addr?, end: e.row.end.filter(|_| e.row.kind == RowKind::Range)?, isa: e.row.isa })
        });
        self.source_asked = Some(addr);
        self.source_pending = true;
        let _ = self.chans.pager.send(Request::Source { addr, window, disasm });
    }

    // ---- searches -----------------------------------------------------------

    pub(crate) fn start_find(&mut self, from: u64, dir: Dir, what: FindWhat, label: String) {
        self.finding_rel = false;
        self.find_queue.clear();
        self.find_wrap = None;
        self.find_wrapped = false;
        let generation = self.progress.find_generation.fetch_add(1, Ordering::Relaxed) + 1;
        self.finding = Some((generation, label.clone()));
        self.progress.request_waiting.store(true, Ordering::Relaxed);
        let _ = self.chans.finder.send(Request::Find { generation, from, dir, what, label, view: self.rowmap.clone() });
    }

    fn find_rel(&mut self, dir: Dir, what: FindWhat, label: &str) {
        if self.finding.is_some() && self.finding_rel {
            self.find_queue.push_back((dir, what, label.to_string()));
            return;
        }
        let from = self.cursor.number;
        self.start_find(from, dir, what, label.to_string());
        self.finding_rel = true;
    }

    fn repeat_search(&mut self, dir: Dir) {
        match self.last_search.clone() {
            Some(s) => {
                let what = match s.what {
                    FindWhat::Target(SeekTarget::Entry(a)) => FindWhat::Entry(a),
                    FindWhat::Target(SeekTarget::Address(a)) => FindWhat::Address(a),
                    w => w,
                };
                self.find_rel(dir, what, &s.label)
            }
            None => self.message = "no search yet: / searches functions, g goes to an address".into(),
        }
    }

    pub fn search_hits(&self, pattern: &str) -> Vec<Hit> {
        let m = SkimMatcher::new();
        let mut hits: Vec<(i64, Hit)> = self
            .functions
            .iter()
            .enumerate()
            .filter_map(|(i, f)| {
                if pattern.is_empty() {
                    return Some((0, Hit { function: i, positions: Vec::new() }));
                }
                let fm = m.fuzzy_match(&f.name, pattern)?;
                Some((fm.score, Hit { function: i, positions: fm.positions }))
            })
            .collect();
        // Best match first; among equals, the most entered.
        hits.sort_by(|a, b| {
            b.0.cmp(&a.0)
                .then_with(|| self.functions[b.1.function].count.cmp(&self.functions[a.1.function].count))
                .then_with(|| self.functions[a.1.function].name.cmp(&self.functions[b.1.function].name))
        });
        hits.into_iter().take(200).map(|(_, h)| h).collect()
    }

    fn parse_goto(&self, input: &str) -> Result<(FindWhat, String), super::TuiError> {
        let s = input.trim();
        let (kind, value) = s.split_once(':').unwrap_or(("", s));
        let num = || crate::capture::parse_number(value);
        let t = match kind {
            "" => return Ok((FindWhat::Target(SeekTarget::Element(num()?)), format!("element {value}"))),
            "instr" => SeekTarget::Instruction(num()?),
            "ts" => SeekTarget::Timestamp(num()?),
            "cc" => SeekTarget::Cycles(num()?),
            "off" => SeekTarget::Offset(num()?),
            "addr" => SeekTarget::Address(crate::symbols::parse_address(value)?),
            "fn" => {
                let f = self
                    .functions
                    .iter()
                    .find(|f| f.name == value)
                    .or_else(|| self.search_hits(value).first().map(|h| &self.functions[h.function]))
                    .ok_or_else(|| super::TuiError::NoFunction { name: value.to_string() })?;
                return Ok((super::search::function_target(f), f.name.clone()));
            }
            _ => return Err(super::TuiError::BadGoto { input: s.to_string() }),
        };
        Ok((FindWhat::Target(t), s.to_string()))
    }

    // ---- selection and export ----------------------------------------------

    /// The selected element range `[from, to)`: anchor to cursor, else marks a
    /// and b.
    /// Whether the capture names the CPU of its trace IDs (a perf.data).
    pub fn has_cpus(&self) -> bool {
        self.info.as_ref().is_some_and(|i| !i.cpus.is_empty())
    }

    /// The CPUs a view can filter by, with their trace IDs.
    pub fn cores(&self) -> &[(u8, u32)] {
        self.info.as_ref().map_or(&[][..], |i| &i.cores[..])
    }

    /// The CPU whose trace `trace_id` is, when the capture says.
    pub fn cpu_of(&self, trace_id: u8) -> Option<u32> {
        self.info.as_ref()?.cpus.iter().find(|(id, _)| *id == trace_id).map(|&(_, c)| c)
    }

    /// The two elements that end the selection: the anchor and the
    /// cursor, or marks `a` and `b`.
    fn selection_ends(&self) -> Option<(u64, u64)> {
        match self.anchor {
            Some(a) => Some((a, self.cursor.number)),
            None => Some((*self.marks.get(&'a')?, *self.marks.get(&'b')?)),
        }
    }

    pub fn selection(&self) -> Option<(u64, u64)> {
        let (a, b) = self.selection_ends()?;
        Some((a.min(b), a.max(b) + 1))
    }

    /// In a filtered or merged view, the elements of the selection's rows
    /// as runs sorted by element number (`None` in the plain list).
    pub fn selection_runs(&self) -> Option<Vec<(u64, u64)>> {
        let m = self.rowmap.as_ref()?;
        let (a, b) = self.selection_ends()?;
        Some(m.elements_between(m.nearest_row(a)?, m.nearest_row(b)?))
    }

    fn open_export(&mut self) {
        let Some((mut from, mut to)) = self.selection() else {
            self.message = "select first: v anchors a selection (or set marks a and b)".into();
            return;
        };
        if let Some(runs) = self.selection_runs() {
            from = runs.first().map_or(from, |r| r.0);
            to = runs.last().map_or(to, |r| r.0 + r.1);
        }
        let format = ExportFormat::Opencsd;
        let file = default_export_name(from, to, format);
        self.text_at = file.chars().count();
        self.export_confirm = None;
        self.mode = Mode::Export { format, file, from, to };
    }

    // ---- responses ----------------------------------------------------------

    /// Take what the workers answered. Returns true when something changed.
    pub fn pump(&mut self) -> bool {
        let mut changed = false;
        while let Ok(r) = self.chans.rx.try_recv() {
            self.on_response(r);
            changed = true;
        }
        changed
    }

    pub fn on_response(&mut self, r: Response) {
        match r {
            Response::Opened(info) => {
                // What `decode` prints on stderr (missing memory images,
                // unused files): the status line says it instead.
                match info.warnings.as_slice() {
                    [] => {}
                    [w] => self.message = format!("warning: {w}"),
                    [w, rest @ ..] => self.message = format!("warning: {w} (and {} more: see `tracesight info`)", rest.len()),
                }
                self.info = Some(info);
                self.provisional = Some(1);
                self.request_visible();
            }
            Response::Indexed(ix) => {
                let mut notes = Vec::new();
                if let Some(stop) = &ix.stop {
                    notes.push(format!("the decode stopped before the end of the trace: {stop}"));
                }
                if let Some(why) = &ix.unsaved {
                    notes.push(format!("index kept in memory (not saved: {why}); it is rebuilt next time"));
                }
                if !notes.is_empty() {
                    self.message = notes.join("; ");
                }
                self.indexed = Some(ix);
                self.density.borrow_mut().clear();
                self.request_visible();
            }
            Response::Page { view, page, entries } => {
                self.pending.remove(&(view, page));
                if self.indexed.is_none() {
                    let end = page * PAGE + entries.len() as u64;
                    let known = if entries.len() as u64 == PAGE { end + 1 } else { end };
                    self.provisional = Some(self.provisional.unwrap_or(0).max(known));
                }
                // A page asked for again after eviction moves to the back.
                self.page_order.retain(|k| *k != (view, page));
                self.pages.insert((view, page), Arc::new(entries));
                self.page_order.push_back((view, page));
                while self.page_order.len() > PAGE_CACHE {
                    if let Some(old) = self.page_order.pop_front() {
                        self.pages.remove(&old);
                    }
                }
                if self.cursor.number / PAGE == page && view == self.view {
                    let sub = self.elem_sub(self.cursor.number);
                    if self.cursor.sub < sub && self.top.number < self.cursor.number {
                        self.cursor.sub = sub;
                    }
                    self.ask_expand();
                }
                // Rows now known to be hidden (cycle counts) may bring
                // more rows on screen: ask for their pages too.
                self.settle_top();
                self.request_visible();
            }
            Response::Source(view, lines) => {
                self.source_pending = false;
                self.source = Some((view, lines));
                self.ask_source();
            }
            Response::Expanded { number, lines } => {
                if self.expand_wanted == Some(number) {
                    self.expanded = Some((number, lines));
                    self.expand_wanted = None;
                }
            }
            Response::Found { generation, result, label } => {
                if self.finding.as_ref().is_some_and(|f| f.0 == generation) {
                    self.finding = None;
                    match result {
                        Some(n) => {
                            let wrapped = if self.find_wrapped { " (wrapped: none after the cursor, the first from the start)" } else { "" };
                            self.message = format!("{label}: element {n}{wrapped}");
                            self.find_wrapped = false;
                            self.jump_to(n, true);
                            // The next queued search starts from here.
                            if let Some((dir, what, label)) = self.find_queue.pop_front() {
                                let rest = std::mem::take(&mut self.find_queue);
                                self.find_rel(dir, what, &label);
                                self.find_queue = rest;
                            }
                        }
                        None => match self.find_wrap.take() {
                            Some(what) => {
                                self.start_find(0, Dir::Forward, what, label);
                                self.find_wrapped = true;
                            }
                            None => {
                                self.message = format!("{label}: not found");
                                self.find_queue.clear();
                                self.find_wrapped = false;
                            }
                        },
                    }
                }
            }
            Response::Functions(f) => {
                self.functions = f;
                if let Mode::Search { input, .. } = &self.mode {
                    let input = input.clone();
                    let hits = self.search_hits(&input);
                    if let Mode::Search { hits: h, selected, .. } = &mut self.mode {
                        *h = hits;
                        *selected = 0;
                    }
                }
            }
            Response::Lanes(l) => {
                self.lanes = l;
                self.density.borrow_mut().clear();
            }
            Response::Map { generation, map } => self.on_map(generation, map),
            Response::Exported(r) => {
                self.exporting = None;
                self.message = match r {
                    Ok(s) => format!("exported {} elements to {}", s.elements, s.path.display()),
                    Err(e) => format!("export failed: {e}"),
                };
            }
            Response::Calls(r) => self.on_calls_response(r),
            Response::Error(e) => {
                self.message = e.clone();
                if self.indexed.is_none() {
                    self.error = Some(e);
                }
            }
        }
    }

    fn ask_expand(&mut self) {
        if let Some(n) = self.expand_wanted {
            if let Some(e) = self.entry(n) {
                if let (Some(start), Some(end)) = (e.row.addr, e.row.end) {
                    let range = ExecutedRange { start, end, isa: e.row.isa };
                    let _ = self.chans.pager.send(Request::Expand { number: n, range });
                }
            }
        }
    }

    // ---- actions ------------------------------------------------------------

    /// Edit the text of a prompt at the caret: typing, Backspace, Ctrl-U,
    /// ← →, Home End. False when `a` is not an edit.
    fn edit(&mut self, text: &mut String, a: Action) -> bool {
        let len = text.chars().count();
        let at = self.text_at.min(len);
        let byte = |i: usize| text.char_indices().nth(i).map_or(text.len(), |(b, _)| b);
        match a {
            Action::Input(c) => {
                text.insert(byte(at), c);
                self.text_at = at + 1;
            }
            Action::Backspace if at > 0 => {
                text.remove(byte(at - 1));
                self.text_at = at - 1;
            }
            Action::Backspace => {}
            Action::ClearLine => {
                text.replace_range(..byte(at), "");
                self.text_at = 0;
            }
            Action::Left => self.text_at = at.saturating_sub(1),
            Action::Right => self.text_at = (at + 1).min(len),
            Action::Top => self.text_at = 0,
            Action::Bottom => self.text_at = len,
            _ => return false,
        }
        true
    }

    pub fn update(&mut self, a: Action) {
        if let Action::Resize(w, h) = a {
            self.size = (w, h);
            self.keep_cursor_visible();
            self.request_visible();
            return;
        }
        match self.mode.clone() {
            Mode::Normal => self.update_normal(a),
            Mode::Stats => self.stats_update(a),
            Mode::Help => {
                let (_, shown) = super::style::help_layout(self.size);
                let last = super::style::KEYS.len().saturating_sub(shown);
                match a {
                    Action::Cancel | Action::Help | Action::Quit | Action::Submit => self.mode = Mode::Normal,
                    Action::Down => self.help_top = (self.help_top + 1).min(last),
                    Action::Up => self.help_top = self.help_top.saturating_sub(1),
                    Action::PageDown => self.help_top = (self.help_top + shown.max(1)).min(last),
                    Action::PageUp => self.help_top = self.help_top.saturating_sub(shown.max(1)),
                    Action::Top => self.help_top = 0,
                    Action::Bottom => self.help_top = last,
                    _ => {}
                }
            }
            Mode::Mark { set } => {
                if let Action::Input(c) = a {
                    if c.is_ascii_alphanumeric() {
                        if set {
                            self.marks.insert(c, self.cursor.number);
                            self.message = format!("mark {c} at element {}", self.cursor.number);
                        } else if let Some(&n) = self.marks.get(&c) {
                            self.jump_to(n, true);
                        } else {
                            self.message = format!("no mark {c}");
                        }
                    }
                }
                self.mode = Mode::Normal;
            }
            Mode::TextSearch { mut input } => match a {
                _ if self.edit(&mut input, a) => self.mode = Mode::TextSearch { input },
                Action::Cancel => self.mode = Mode::Normal,
                Action::Submit => {
                    self.mode = Mode::Normal;
                    if input.trim().is_empty() {
                        return;
                    }
                    // From the cursor on, as n goes on from there.
                    let what = FindWhat::Text(input.trim().to_lowercase());
                    let label = format!("text \"{}\"", input.trim());
                    self.last_search = Some(LastSearch { what: what.clone(), label: label.clone() });
                    self.find_rel(Dir::Forward, what, &label);
                }
                _ => {}
            },
            Mode::Filter { mut input } => match a {
                _ if self.edit(&mut input, a) => self.mode = Mode::Filter { input },
                Action::Cancel => self.mode = Mode::Normal,
                Action::Submit => {
                    self.mode = Mode::Normal;
                    match super::rowmap::Filter::parse(&input, self.cores()) {
                        Ok(f) => self.set_filter(f),
                        Err(e) => self.message = e.to_string(),
                    }
                }
                _ => {}
            },
            Mode::Goto { mut input } => match a {
                _ if self.edit(&mut input, a) => self.mode = Mode::Goto { input },
                Action::Cancel => self.mode = Mode::Normal,
                Action::Submit => {
                    self.mode = Mode::Normal;
                    self.message.clear();
                    match self.parse_goto(&input) {
                        Ok((FindWhat::Target(SeekTarget::Element(n)), _)) => self.goto_element(n),
                        Ok((FindWhat::Target(SeekTarget::Address(a)), label)) => {
                            // The next execution after the cursor, wrapping
                            // to the start (as n does after it).
                            self.last_search = Some(LastSearch { what: FindWhat::Target(SeekTarget::Address(a)), label: label.clone() });
                            self.start_find(self.cursor.number, Dir::Forward, FindWhat::Address(a), label);
                            self.find_wrap = Some(FindWhat::Target(SeekTarget::Address(a)));
                        }
                        Ok((what, label)) => {
                            self.last_search = Some(LastSearch { what: what.clone(), label: label.clone() });
                            self.start_find(0, Dir::Forward, what, label);
                        }
                        Err(e) => self.message = e.to_string(),
                    }
                }
                _ => {}
            },
            Mode::Search { mut input, selected, hits } => match a {
                _ if self.edit(&mut input, a) => {
                    let (hits, selected) = if matches!(a, Action::Left | Action::Right | Action::Top | Action::Bottom) {
                        (hits, selected)
                    } else {
                        (self.search_hits(&input), 0)
                    };
                    self.mode = Mode::Search { input, hits, selected };
                }
                Action::Down | Action::NextField => {
                    let s = (selected + 1).min(hits.len().saturating_sub(1));
                    self.mode = Mode::Search { input, hits, selected: s };
                }
                Action::Up => {
                    let s = selected.saturating_sub(1);
                    self.mode = Mode::Search { input, hits, selected: s };
                }
                Action::Cancel => self.mode = Mode::Normal,
                Action::Submit => {
                    self.mode = Mode::Normal;
                    if let Some(h) = hits.get(selected) {
                        let f = &self.functions[h.function];
                        let what = super::search::function_target(f);
                        let label = f.name.clone();
                        self.last_search = Some(LastSearch { what: what.clone(), label: label.clone() });
                        self.start_find(0, Dir::Forward, what, label);
                    } else {
                        self.message = "no function matches".into();
                    }
                }
                _ => {}
            },
            Mode::Export { format, mut file, from, to } => match a {
                _ if self.edit(&mut file, a) => {
                    self.export_confirm = None;
                    self.mode = Mode::Export { format, file, from, to };
                }
                Action::NextField => {
                    let all = ExportFormat::ALL;
                    let next = all[(all.iter().position(|f| *f == format).unwrap_or(0) + 1) % all.len()];
                    // Keep a name the user typed; follow the format otherwise.
                    if file == default_export_name(from, to, format) {
                        file = default_export_name(from, to, next);
                        self.text_at = file.chars().count();
                    }
                    self.export_confirm = None;
                    self.mode = Mode::Export { format: next, file, from, to };
                }
                Action::Cancel => {
                    self.export_confirm = None;
                    self.mode = Mode::Normal;
                }
                Action::Submit => {
                    let path = PathBuf::from(file.trim());
                    // An existing file is replaced only on a second Enter.
                    if path.exists() && self.export_confirm.as_ref() != Some(&path) {
                        self.export_confirm = Some(path);
                        self.mode = Mode::Export { format, file, from, to };
                        return;
                    }
                    self.export_confirm = None;
                    self.mode = Mode::Normal;
                    self.exporting = Some(path.clone());
                    // A view exports the elements it shows, in capture order.
                    let keep = self.selection_runs();
                    let count = keep.as_ref().map_or(to - from, |k| k.iter().map(|r| r.1).sum());
                    let of_view = if keep.is_some() { format!(" of view {}", self.filter.label(self.cores())) } else { String::new() };
                    self.message = format!("exporting {count} elements{of_view} to {}", path.display());
                    self.progress.request_waiting.store(true, Ordering::Relaxed);
                    let request = ExportRequest { from, to, format, path, speculation: self.view == View::Speculation, keep };
                    let _ = self.chans.finder.send(Request::Export { request });
                }
                _ => {}
            },
        }
    }

    fn update_normal(&mut self, a: Action) {
        // A message answers the key before: the next key that acts makes it
        // stale (the timeline cursor keeps its hint while it has the keys).
        if self.timeline_cursor.is_none() && !matches!(a, Action::Input(_) | Action::Backspace | Action::NextField) {
            self.message.clear();
        }
        // + and - fold in the list and zoom in the timeline.
        let a = match (a, self.timeline_cursor.is_some()) {
            (Action::Unfold, true) => Action::ZoomIn,
            (Action::Fold, true) => Action::ZoomOut,
            (a, _) => a,
        };
        if let Some(tc) = self.timeline_cursor {
            let (lo, hi) = self.zoom;
            let step = 1.0 / (self.size.0.saturating_sub(2).max(1)) as f64;
            // ↑ ↓ scroll the lanes when not all fit, else move as ← →.
            let hidden = self.lanes.len().saturating_sub(self.lanes_room());
            match a {
                Action::Up if hidden > 0 => return self.lane_top = self.lane_top.min(hidden).saturating_sub(1),
                Action::Down if hidden > 0 => return self.lane_top = (self.lane_top + 1).min(hidden),
                Action::Left | Action::Up => return self.timeline_cursor = Some((tc - step).max(0.0)),
                Action::Right | Action::Down => return self.timeline_cursor = Some((tc + step).min(1.0)),
                Action::PageUp => return self.timeline_cursor = Some((tc - 10.0 * step).max(0.0)),
                Action::PageDown => return self.timeline_cursor = Some((tc + 10.0 * step).min(1.0)),
                Action::Submit | Action::Expand => {
                    self.timeline_cursor = None;
                    return self.timeline_jump(lo + tc * (hi - lo));
                }
                Action::Cancel | Action::Timeline => return self.timeline_cursor = None,
                _ => {}
            }
        }
        let h = self.list_height() as i64;
        match a {
            Action::Quit => self.quit = true,
            Action::Cancel => {
                if self.exporting.is_some() {
                    self.progress.export_cancel.store(true, Ordering::Relaxed);
                    self.message = "cancelling the export".into();
                } else if self.finding.take().is_some() {
                    self.find_queue.clear();
                    self.progress.find_generation.fetch_add(1, Ordering::Relaxed);
                    self.message = "search cancelled".into();
                } else {
                    self.anchor = None;
                }
            }
            Action::Down => self.move_by(1),
            Action::Up => self.move_by(-1),
            Action::PageDown => self.move_by(h - 1),
            Action::PageUp => self.move_by(-(h - 1)),
            Action::Top => self.jump_to(self.first_elem(), true),
            Action::Bottom => {
                if let Some(n) = self.last_elem() {
                    self.jump_to(n, true)
                }
            }
            Action::Filter => {
                let input = self.filter.label(self.cores());
                self.text_at = input.chars().count();
                self.mode = Mode::Filter { input };
            }
            Action::ToggleCycleRows => self.toggle_cycle_rows(),
            Action::ToggleMixed => {
                self.mixed = !self.mixed;
                self.message = if self.mixed { "source and disassembly mixed (D again: off)".into() } else { String::new() };
            }
            Action::TextSearch => {
                self.text_at = 0;
                self.mode = Mode::TextSearch { input: String::new() };
            }
            Action::ToggleMerge => {
                let mut f = self.filter.clone();
                f.merge = !f.merge;
                self.set_filter(f);
            }
            Action::Scroll(n) => self.scroll_by(n),
            Action::Expand => {
                let n = self.cursor.number;
                if self.expanded.as_ref().is_some_and(|e| e.0 == n) || self.expand_wanted == Some(n) {
                    self.expanded = None;
                    self.expand_wanted = None;
                    self.cursor.sub = self.elem_sub(n);
                } else if self.entry(n).is_some_and(|e| e.row.kind == RowKind::Range) {
                    self.expanded = None;
                    self.expand_wanted = Some(n);
                    self.ask_expand();
                } else {
                    self.message = "only instruction ranges expand".into();
                }
            }
            Action::ToggleView => {
                self.view = match self.view {
                    View::Committed => View::Speculation,
                    View::Speculation => View::Committed,
                };
                let n = self.cursor.number;
                self.cursor = Pos { number: n, sub: self.elem_sub(n) };
                self.top.sub = 0;
                self.keep_cursor_visible();
                self.request_visible();
                self.message = match self.view {
                    View::Committed => "committed view".into(),
                    View::Speculation => "speculation view: canceled, corrected, discarded and lost elements shown".into(),
                };
            }
            Action::ToggleDisasm => self.show_disasm = !self.show_disasm,
            Action::Goto => {
                self.text_at = 0;
                self.mode = Mode::Goto { input: String::new() };
            }
            Action::Search => {
                let hits = self.search_hits("");
                self.text_at = 0;
                self.mode = Mode::Search { input: String::new(), hits, selected: 0 };
            }
            Action::NextMatch => self.repeat_search(Dir::Forward),
            Action::PrevMatch => self.repeat_search(Dir::Backward),
            Action::NextException => self.find_rel(Dir::Forward, FindWhat::Exception, "next exception"),
            Action::PrevException => self.find_rel(Dir::Backward, FindWhat::Exception, "previous exception"),
            Action::NextGap => self.find_rel(Dir::Forward, FindWhat::Gap, "next gap"),
            Action::PrevGap => self.find_rel(Dir::Backward, FindWhat::Gap, "previous gap"),
            Action::NextSpec => self.find_rel(Dir::Forward, FindWhat::Speculation, "next speculation event"),
            Action::PrevSpec => self.find_rel(Dir::Backward, FindWhat::Speculation, "previous speculation event"),
            Action::NextVisit | Action::PrevVisit => match self.cursor_addr() {
                Some(addr) => {
                    let (dir, which) =
                        if a == Action::NextVisit { (Dir::Forward, "next") } else { (Dir::Backward, "previous") };
                    self.find_rel(dir, FindWhat::Address(addr), &format!("{which} execution of {addr:#x}"))
                }
                None => self.message = "no address here: p and P work on instruction ranges".into(),
            },
            Action::CallReturn => match self.entry(self.cursor.number).map(|e| (e.row.call_return, e.row.trace_id)) {
                Some((Some(addr), trace_id)) => self.find_rel(Dir::Forward, FindWhat::Return { trace_id, addr }, "return"),
                _ if self.return_to_call() => {}
                _ => self.message = "not a call or a return (with its call known): % works on ranges ending in either".into(),
            },
            Action::ZeroMark => {
                let n = self.cursor.number;
                if self.zero == Some(n) {
                    self.zero = None;
                    self.message = "Δ counts from the element before each row".into();
                } else {
                    self.zero = Some(n);
                    self.message = format!("Δ counts from element {n} (z again: from the row before)");
                }
            }
            Action::SetMark => self.mode = Mode::Mark { set: true },
            Action::JumpMark => self.mode = Mode::Mark { set: false },
            Action::Back => {
                if let Some(n) = self.back.pop() {
                    self.forward.push(self.cursor.number);
                    self.jump_to(n, false);
                }
            }
            Action::Forward => {
                if let Some(n) = self.forward.pop() {
                    self.back.push(self.cursor.number);
                    self.jump_to(n, false);
                }
            }
            Action::Anchor => {
                self.anchor = match self.anchor {
                    Some(_) => None,
                    None => Some(self.cursor.number),
                };
            }
            Action::Export => self.open_export(),
            Action::Help => {
                self.help_top = 0;
                self.mode = Mode::Help;
            }
            Action::ZoomIn | Action::ZoomOut => {
                let (lo, hi) = self.zoom;
                let centre = self.cursor_fraction().unwrap_or((lo + hi) / 2.0);
                let w = if a == Action::ZoomIn { (hi - lo) / 2.0 } else { ((hi - lo) * 2.0).min(1.0) };
                let w = w.max(1e-9);
                let lo = (centre - w / 2.0).clamp(0.0, 1.0 - w);
                self.zoom = (lo, lo + w);
            }
            Action::PanLeft | Action::PanRight => {
                // The span is taken before `lo` moves: panning keeps it.
                let (lo, hi) = self.zoom;
                let w = hi - lo;
                let d = if a == Action::PanLeft { -w / 4.0 } else { w / 4.0 };
                let lo = (lo + d).clamp(0.0, 1.0 - w);
                self.zoom = (lo, lo + w);
            }
            Action::ZoomReset => self.zoom = (0.0, 1.0),
            Action::Timeline => {
                let (lo, hi) = self.zoom;
                let at = self.cursor_fraction().map_or(0.5, |f| ((f - lo) / (hi - lo)).clamp(0.0, 1.0));
                self.timeline_cursor = Some(at);
                self.message = "timeline: ← → move, Enter jumps, Esc returns to the list".into();
            }
            Action::Left | Action::Right => {}
            Action::Fold | Action::Unfold | Action::FoldBelow | Action::Chart | Action::ChartDeeper | Action::ChartShallower => {
                self.on_calls_action(a)
            }
            Action::Stats => self.open_stats(),
            Action::Click(x, y) => self.click(x, y),
            Action::Submit => {
                // Enter on the list expands, as `e` does in other viewers.
                self.update_normal(Action::Expand);
            }
            Action::Input(_) | Action::Backspace | Action::ClearLine | Action::NextField | Action::Resize(..) => {}
        }
    }

    fn click(&mut self, x: u16, y: u16) {
        let areas = self.layout();
        let inside = |r: ratatui::layout::Rect| x >= r.x && x < r.x + r.width && y >= r.y && y < r.y + r.height;
        if inside(areas.timeline) {
            let inner_x = areas.timeline.x + 1;
            let width = areas.timeline.width.saturating_sub(2).max(1);
            let f = (x.saturating_sub(inner_x) as f64 + 0.5) / width as f64;
            let (lo, hi) = self.zoom;
            self.timeline_jump(lo + f * (hi - lo));
        } else if inside(areas.list) {
            let row = y.saturating_sub(areas.list.y + 2) as usize;
            if let Some(p) = self.visible().get(row) {
                self.cursor = *p;
                self.request_visible();
            }
        }
    }

    /// The axis the timeline uses.
    pub fn axis(&self) -> Axis {
        match &self.indexed {
            Some(ix) if ix.segments.iter().any(|s| s.ts.is_some()) => Axis::Timestamp,
            Some(ix) if ix.segments.iter().any(|s| s.cc.is_some()) => Axis::Cycles,
            _ => Axis::Elements,
        }
    }

    /// The axis range of the whole capture.
    pub fn axis_range(&self) -> Option<(u64, u64)> {
        let ix = self.indexed.as_ref()?;
        // Once, not per segment: finding the axis scans every segment when
        // the capture has no timestamps, and per segment that is quadratic.
        let axis = self.axis();
        let pick = |s: &super::worker::Segment| match axis {
            Axis::Timestamp => s.ts,
            Axis::Cycles => s.cc,
            Axis::Elements => Some((s.elements_before, s.elements_before + s.elements)),
        };
        let lo = ix.segments.iter().filter_map(pick).map(|r| r.0).min()?;
        let hi = ix.segments.iter().filter_map(pick).map(|r| r.1).max()?;
        Some((lo, hi.max(lo + 1)))
    }

    /// Where element `n` sits on the axis, as a fraction of the whole
    /// (interpolated inside its index segment).
    pub fn fraction_of(&self, n: u64) -> Option<f64> {
        let ix = self.indexed.as_ref()?;
        let (lo, hi) = self.axis_range()?;
        let k = ix.segments.partition_point(|s| s.elements_before <= n).saturating_sub(1);
        let s = ix.segments.get(k)?;
        let within = if s.elements == 0 { 0.0 } else { (n - s.elements_before) as f64 / s.elements as f64 };
        let (a, b) = match self.axis() {
            Axis::Timestamp => s.ts?,
            Axis::Cycles => s.cc?,
            Axis::Elements => (s.elements_before, s.elements_before + s.elements),
        };
        let v = a as f64 + within * (b - a) as f64;
        Some(((v - lo as f64) / (hi - lo) as f64).clamp(0.0, 1.0))
    }

    fn cursor_fraction(&self) -> Option<f64> {
        self.fraction_of(self.cursor.number)
    }

    /// Jump to the element at a fraction of the axis.
    pub fn timeline_jump(&mut self, f: f64) {
        let Some((lo, hi)) = self.axis_range() else { return };
        let v = lo + ((hi - lo) as f64 * f.clamp(0.0, 1.0)) as u64;
        match self.axis() {
            Axis::Elements => self.jump_to(v, true),
            Axis::Timestamp => self.start_find(0, Dir::Forward, FindWhat::Target(SeekTarget::Timestamp(v)), format!("timestamp {v}")),
            Axis::Cycles => self.start_find(0, Dir::Forward, FindWhat::Target(SeekTarget::Cycles(v)), format!("cycle {v}")),
        }
    }
}

pub fn default_export_name(from: u64, to: u64, format: ExportFormat) -> String {
    format!("tracesight-{from}-{to}.{}", format.extension())
}
