//! Searches beyond function entries: inlined functions (`fn:`, `/`) and
//! the text of elements (`\`).

use crate::element::Element;
use crate::index::SeekTarget;

/// Something to search for, from an element number.
#[derive(Clone, Debug, PartialEq)]
pub enum FindWhat {
    /// A `g` position (element, ts:, cc:, off:, addr:, fn:).
    Target(SeekTarget),
    Exception,
    Gap,
    /// A speculative element that did not simply commit.
    Speculation,
    /// A range starting at one of these addresses (a function's entries).
    Entry(Vec<u64>),
    /// A range executing this address.
    Address(u64),
    /// A range starting at one of `entries` or running into one of
    /// `inline` (sorted): a function called or inlined.
    Visit { entries: Vec<u64>, inline: Vec<u64> },
    /// An element whose text contains this (lower case).
    Text(String),
    /// The return of the call made by element `from` (same trace ID,
    /// back at `addr` at the same call depth).
    Return { trace_id: u8, addr: u64 },
}

/// A function the `/` search lists.
#[derive(Clone, Debug, PartialEq)]
pub struct FunctionInfo {
    pub name: String,
    pub entries: Vec<u64>,
    /// Times the trace enters it (`None` until counted).
    pub count: Option<u64>,
    /// Where its inlined instances start (DWARF), sorted: code reached by
    /// running on, not by a branch to an entry.
    pub inline: Vec<u64>,
}


/// Add the inlined instances `(name, start)` to the functions of those
/// names, and a function of its own for a name only ever inlined.
pub fn add_inline_instances(list: &mut Vec<FunctionInfo>, instances: Vec<(String, u64)>) {
    let mut by_name: std::collections::HashMap<String, usize> = list.iter().enumerate().map(|(i, f)| (f.name.clone(), i)).collect();
    for (name, start) in instances {
        let i = *by_name.entry(name.clone()).or_insert_with(|| {
            list.push(FunctionInfo { name, entries: Vec::new(), count: None, inline: Vec::new() });
            list.len() - 1
        });
        list[i].inline.push(start);
    }
    for f in list.iter_mut() {
        f.inline.sort_unstable();
        f.inline.dedup();
    }
}

/// What finds a function's executions: its entries, and where it was
/// inlined when it was.
pub fn function_target(f: &FunctionInfo) -> FindWhat {
    if f.inline.is_empty() {
        FindWhat::Target(crate::index::SeekTarget::Entry(f.entries.clone()))
    } else {
        FindWhat::Visit { entries: f.entries.clone(), inline: f.inline.clone() }
    }
}

/// Whether a range `[start, end)` runs over one of the sorted addresses.
pub fn runs_into(sorted: &[u64], start: u64, end: u64) -> bool {
    let i = sorted.partition_point(|a| *a < start);
    sorted.get(i).is_some_and(|a| *a < end)
}

/// Whether the element's text (as the list shows it) contains `lower`,
/// ignoring case.
pub fn text_has(e: &Element, lower: &str) -> bool {
    let mut text = String::with_capacity(128);
    crate::element::write_opencsd_element(&mut text, e);
    text.to_lowercase().contains(lower)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_run_into_inlined_code() {
        let s = [0x100, 0x200];
        assert!(runs_into(&s, 0x100, 0x104));
        assert!(runs_into(&s, 0xf0, 0x104));
        assert!(!runs_into(&s, 0x104, 0x200), "end is exclusive");
        assert!(!runs_into(&s, 0x204, 0x300));
        assert!(!runs_into(&[], 0, 10));
    }

    #[test]
    fn inline_instances_join_their_function_or_make_one() {
        let mut list = vec![FunctionInfo { name: "f".into(), entries: vec![0x10], count: None, inline: Vec::new() }];
        add_inline_instances(&mut list, vec![("g".into(), 0x40), ("f".into(), 0x30), ("g".into(), 0x20), ("g".into(), 0x40)]);
        assert_eq!(list.len(), 2);
        assert_eq!(list[0].inline, vec![0x30]);
        assert_eq!((list[1].name.as_str(), list[1].entries.len(), list[1].inline.clone()), ("g", 0, vec![0x20, 0x40]));
        assert!(matches!(function_target(&list[1]), FindWhat::Visit { .. }));
        let plain = FunctionInfo { name: "h".into(), entries: vec![1], count: None, inline: Vec::new() };
        assert!(matches!(function_target(&plain), FindWhat::Target(_)));
    }
}
