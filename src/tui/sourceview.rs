// PLACEHOLDER (not committed): replaced by the sourceview branch.
use crate::element::{Isa, MemSpace};
use crate::image::memory::MemoryImage;
use crate::symbols::{SourceResolver, Symbolizer};
#[derive(Clone, Debug, PartialEq)]
pub enum SourceStatus { Ok, NoSymbols, NoDebugInfo, SourceNotFound { file: String } }
#[derive(Clone, Debug, PartialEq)]
pub struct SourceLine { pub number: u32, pub text: String, pub count: u64, pub current: bool }
#[derive(Clone, Debug, PartialEq)]
pub struct InlineFrame { pub function: String, pub file: Option<String>, pub line: Option<u32> }
#[derive(Clone, Debug, PartialEq)]
pub struct SourceView { pub addr: u64, pub status: SourceStatus, pub function: Option<String>, pub file: Option<String>, pub line: Option<u32>, pub inline_chain: Vec<InlineFrame>, pub lines: Vec<SourceLine> }
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ExecutedRange { pub start: u64, pub end: u64, pub isa: Isa }
#[derive(Clone, Debug, PartialEq)]
pub struct DisasmLine { pub addr: u64, pub bytes: String, pub text: String, pub symbol: Option<String>, pub current: bool }
pub fn source_view(_sym: Option<&Symbolizer>, _r: &SourceResolver, addr: u64, _w: &[ExecutedRange], _c: usize) -> SourceView { SourceView { addr, status: SourceStatus::NoSymbols, function: None, file: None, line: None, inline_chain: vec![], lines: vec![] } }
pub fn disassemble(_i: &MemoryImage, _s: MemSpace, _sym: Option<&Symbolizer>, _r: &ExecutedRange, _c: Option<u64>, _m: usize) -> Vec<DisasmLine> { vec![] }
pub fn instruction_addresses(_i: &MemoryImage, _s: MemSpace, r: &ExecutedRange, _m: usize) -> Vec<u64> { (r.start..r.end).step_by(4).collect() }
pub fn default_resolver(_d: &std::path::Path) -> SourceResolver { SourceResolver::new() }
