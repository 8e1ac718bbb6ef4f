//! The call tree: one node per distinct call path, with calls, self
//! instructions and cycles; totals are a node's own plus its children's.
//! Written as JSON (`--format callgraph`) and as folded stacks
//! ([`super::folded`]).
//!
//! Instructions are counted at the innermost frame, and when the function
//! holding them (by address) is not that frame's, under a child node for it
//! (code reached without a call, such as a fall-through into the next
//! symbol), so that self instructions here equal those of the statistics.

use std::collections::HashMap;
use std::fmt::Write;

use super::callstack::{Closed, Entered, Frame, FrameKind, StackListener, ThreadKey};
use super::{add_saturating, function_name, CodeMap};

/// One node of the tree.
#[derive(Clone, Debug)]
pub struct Node {
    pub kind: FrameKind,
    pub parent: u32,
    pub children: HashMap<FrameKind, u32>,
    pub calls: u64,
    pub self_instructions: u64,
    pub self_cycles: u64,
}

/// The tree; node 0 is the root (no frame).
#[derive(Clone, Debug)]
pub struct CallTree {
    pub nodes: Vec<Node>,
    /// Per thread, the node of each open frame.
    paths: HashMap<ThreadKey, Vec<u32>>,
    pub saturated: bool,
}

impl Default for CallTree {
    fn default() -> Self {
        CallTree::new()
    }
}

impl CallTree {
    pub fn new() -> CallTree {
        CallTree {
            nodes: vec![Node {
                kind: FrameKind::Function(u64::MAX),
                parent: 0,
                children: HashMap::new(),
                calls: 0,
                self_instructions: 0,
                self_cycles: 0,
            }],
            paths: HashMap::new(),
            saturated: false,
        }
    }

    /// The child of `parent` for `kind`, made when new.
    pub fn child(&mut self, parent: u32, kind: FrameKind) -> u32 {
        if let Some(&c) = self.nodes[parent as usize].children.get(&kind) {
            return c;
        }
        let id = self.nodes.len() as u32;
        self.nodes.push(Node { kind, parent, children: HashMap::new(), calls: 0, self_instructions: 0, self_cycles: 0 });
        self.nodes[parent as usize].children.insert(kind, id);
        id
    }

    /// The node of the innermost frame of `stack`, rebuilding the thread's
    /// path when it does not match the stack.
    fn node_of(&mut self, thread: ThreadKey, stack: &[Frame]) -> u32 {
        let ok = self.paths.get(&thread).is_some_and(|p| p.len() == stack.len());
        if !ok {
            let mut path = Vec::with_capacity(stack.len());
            let mut at = 0;
            for f in stack {
                at = self.child(at, f.kind);
                path.push(at);
            }
            self.paths.insert(thread, path);
        }
        self.paths.get(&thread).and_then(|p| p.last().copied()).unwrap_or(0)
    }

    /// Node totals: (instructions, cycles) of each node and its subtree.
    pub fn totals(&self) -> Vec<(u64, u64)> {
        let mut t: Vec<(u64, u64)> = self.nodes.iter().map(|n| (n.self_instructions, n.self_cycles)).collect();
        // Children always come after their parent.
        for i in (1..self.nodes.len()).rev() {
            let p = self.nodes[i].parent as usize;
            t[p].0 = t[p].0.saturating_add(t[i].0);
            t[p].1 = t[p].1.saturating_add(t[i].1);
        }
        t
    }

    /// The names along the path from the root to `node` (the root excluded).
    pub fn path_names(&self, code: &dyn CodeMap, node: u32) -> Vec<String> {
        let mut names = Vec::new();
        let mut at = node;
        while at != 0 {
            let n = &self.nodes[at as usize];
            names.push(kind_name(code, n.kind));
            at = n.parent;
        }
        names.reverse();
        names
    }

    /// Add another tree (paths matched by their frames).
    pub fn merge(&mut self, other: &CallTree) {
        let mut map = vec![0u32; other.nodes.len()];
        for (i, n) in other.nodes.iter().enumerate().skip(1) {
            let me = self.child(map[n.parent as usize], n.kind);
            map[i] = me;
            let m = &mut self.nodes[me as usize];
            let sat = add_saturating(&mut m.calls, n.calls)
                | add_saturating(&mut m.self_instructions, n.self_instructions)
                | add_saturating(&mut m.self_cycles, n.self_cycles);
            self.saturated |= sat;
        }
    }
}

/// The name of a frame in stacks and the call graph.
pub fn kind_name(code: &dyn CodeMap, kind: FrameKind) -> String {
    match kind {
        FrameKind::Function(k) => function_name(code, k),
        FrameKind::Exception(n) => format!("[exception 0x{n:02x}]"),
    }
}

impl StackListener for CallTree {
    fn entered(&mut self, thread: ThreadKey, stack: &[Frame]) {
        let parent = self.node_of(thread, &stack[..stack.len().saturating_sub(1)]);
        let Some(top) = stack.last() else { return };
        let node = self.child(parent, top.kind);
        if matches!(top.entered, Entered::Call | Entered::TailCall | Entered::Exception) {
            let sat = add_saturating(&mut self.nodes[node as usize].calls, 1);
            self.saturated |= sat;
        }
        if let Some(p) = self.paths.get_mut(&thread) {
            p.push(node);
        }
    }

    fn left(&mut self, thread: ThreadKey, parents: &[Frame], _closed: &Closed) {
        if let Some(p) = self.paths.get_mut(&thread) {
            p.truncate(parents.len());
        }
    }

    fn executed(&mut self, thread: ThreadKey, stack: &[Frame], func: u64, count: u64) {
        let node = self.leaf(thread, stack, func);
        let sat = add_saturating(&mut self.nodes[node as usize].self_instructions, count);
        self.saturated |= sat;
    }

    fn cycles(&mut self, thread: ThreadKey, stack: &[Frame], func: u64, cycles: u64) {
        let node = self.leaf(thread, stack, func);
        let sat = add_saturating(&mut self.nodes[node as usize].self_cycles, cycles);
        self.saturated |= sat;
    }
}

impl CallTree {
    fn leaf(&mut self, thread: ThreadKey, stack: &[Frame], func: u64) -> u32 {
        let node = self.node_of(thread, stack);
        if self.nodes[node as usize].kind == FrameKind::Function(func) && node != 0 {
            node
        } else {
            self.child(node, FrameKind::Function(func))
        }
    }
}

/// The call tree as JSON: nested `{name, address, calls, self_instructions,
/// total_instructions, self_cycles, total_cycles, children}` objects under
/// a root named `all`.
pub fn write_json(tree: &CallTree, code: &dyn CodeMap) -> String {
    let totals = tree.totals();
    let mut out = String::new();
    // Depth-first without recursion: deep recursion in the trace must not
    // overflow the stack here. (node, next child index) pairs.
    let children_of = |i: usize| -> Vec<u32> {
        let mut c: Vec<u32> = tree.nodes[i].children.values().copied().collect();
        c.sort_by_key(|&n| (std::cmp::Reverse(totals[n as usize].0), n));
        c
    };
    let mut work: Vec<(usize, Vec<u32>, usize)> = vec![(0, children_of(0), 0)];
    open_node(&mut out, tree, code, &totals, 0);
    while let Some((node, kids, next)) = work.last_mut() {
        if *next < kids.len() {
            let c = kids[*next] as usize;
            if *next > 0 {
                out.push(',');
            }
            *next += 1;
            let _ = node;
            open_node(&mut out, tree, code, &totals, c);
            let ck = children_of(c);
            work.push((c, ck, 0));
        } else {
            out.push_str("]}");
            work.pop();
        }
    }
    out.push('\n');
    out
}

fn open_node(out: &mut String, tree: &CallTree, code: &dyn CodeMap, totals: &[(u64, u64)], i: usize) {
    let n = &tree.nodes[i];
    out.push_str("{\"name\":");
    let name = if i == 0 { "all".to_string() } else { kind_name(code, n.kind) };
    crate::element::write_json_string(out, &name);
    match n.kind {
        FrameKind::Function(a) if i != 0 && a != super::callstack::UNKNOWN => {
            let _ = write!(out, ",\"address\":\"0x{a:x}\"");
        }
        FrameKind::Exception(e) => {
            let _ = write!(out, ",\"exception\":{e}");
        }
        _ => {}
    }
    let _ = write!(
        out,
        ",\"calls\":{},\"self_instructions\":{},\"total_instructions\":{},\"self_cycles\":{},\"total_cycles\":{},\"children\":[",
        n.calls, n.self_instructions, totals[i].0, n.self_cycles, totals[i].1
    );
}
