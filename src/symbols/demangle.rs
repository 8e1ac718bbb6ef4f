//! Demangling of C++ (Itanium ABI) and Rust (legacy and v0) symbol names.
//!
//! C++ names go through our own demangler ([`super::itanium`]), whose output
//! equals binutils' `c++filt`; Rust names through `rustc_demangle`.
//!
//! Follows binutils' `bfd_demangle` around the demangler itself: leading
//! dots are kept aside, a version or `@plt` suffix (`name@GLIBC_2.17`) is
//! cut off before demangling and put back after it, and GCC clone suffixes
//! (`.constprop.0`, `.isra.0`, `.cold`) are shown as `[clone .constprop.0]`.

use std::borrow::Cow;

use super::itanium;
pub use super::itanium::Style as CppStyle;

/// Which mangling scheme a name follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mangling {
    /// Itanium C++ ABI (`_Z...`).
    Cpp,
    /// Rust legacy (`_ZN...17h<hash>E`) or v0 (`_R...`).
    Rust,
}

/// The scheme `name` appears to be mangled with, if any.
pub fn mangling(name: &str) -> Option<Mangling> {
    let core = core_name(name).1;
    if core.starts_with("_R") || core.starts_with("__R") {
        return Some(Mangling::Rust);
    }
    if core.starts_with("_Z") || core.starts_with("__Z") {
        if rustc_demangle::try_demangle(core).is_ok() && is_rust_legacy(core) {
            return Some(Mangling::Rust);
        }
        return Some(Mangling::Cpp);
    }
    None
}

/// A Rust legacy symbol ends with a `17h<16 hex digits>E` hash component.
fn is_rust_legacy(name: &str) -> bool {
    let b = name.as_bytes();
    b.len() > 20
        && b.ends_with(b"E")
        && &b[b.len() - 20..b.len() - 17] == b"17h"
        && b[b.len() - 17..b.len() - 1].iter().all(u8::is_ascii_hexdigit)
}

/// Split `name` into leading dots, the name proper and an `@...` suffix.
fn core_name(name: &str) -> (&str, &str, &str) {
    let start = name.len() - name.trim_start_matches('.').len();
    let rest = &name[start..];
    let end = rest.find('@').unwrap_or(rest.len());
    (&name[..start], &rest[..end], &rest[end..])
}

/// Demangle a C++ or Rust symbol name. Returns `None` when `name` is not
/// mangled or cannot be demangled. C++ names read as `c++filt` prints them
/// ([`CppStyle::Verbose`]).
pub fn demangle(name: &str) -> Option<String> {
    demangle_with(name, CppStyle::Verbose)
}

/// [`demangle`] with a choice of how C++ standard substitutions are spelled:
/// [`CppStyle::Short`] gives `std::string` as `nm -C` and `addr2line -C` do.
pub fn demangle_with(name: &str, style: CppStyle) -> Option<String> {
    let (pre, core, suf) = core_name(name);
    let d = match mangling(name) {
        Some(Mangling::Rust) => demangle_rust(core)?,
        Some(Mangling::Cpp) => demangle_cpp(core, style)?,
        // `_GLOBAL__I_<name>`: binutils names these "global constructors
        // keyed to <name>".
        None if core.starts_with("_GLOBAL_") => itanium::demangle(core, style)?,
        None => return None,
    };
    Some(format!("{pre}{d}{suf}"))
}

/// Demangle if possible, else the name itself.
pub fn demangle_or_raw(name: &str) -> Cow<'_, str> {
    match demangle(name) {
        Some(d) => Cow::Owned(d),
        None => Cow::Borrowed(name),
    }
}

fn demangle_rust(core: &str) -> Option<String> {
    let d = rustc_demangle::try_demangle(core).ok()?;
    // `{:#}` leaves out the hash (legacy) and crate disambiguators (v0), as
    // binutils does.
    Some(format!("{d:#}"))
}

fn demangle_cpp(core: &str, style: CppStyle) -> Option<String> {
    // Mach-O style names carry one more leading underscore.
    let core = if core.starts_with("__Z") { &core[1..] } else { core };
    itanium::demangle(core, style)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(demangle("main"), None);
        assert_eq!(demangle("_ZN3geo4Rect4areaEv").as_deref(), Some("geo::Rect::area()"));
        assert_eq!(demangle("_Z3fooi@plt").as_deref(), Some("foo(int)@plt"));
        assert_eq!(demangle("_ZTVN3geo4RectE").as_deref(), Some("vtable for geo::Rect"));
        assert_eq!(demangle("_ZTTN3geo4RectE").as_deref(), Some("VTT for geo::Rect"));
        assert_eq!(demangle("_ZThn8_N3geo4RectD1Ev").as_deref(), Some("non-virtual thunk to geo::Rect::~Rect()"));
        assert_eq!(demangle("_ZTv0_n24_N3geo4RectD0Ev").as_deref(), Some("virtual thunk to geo::Rect::~Rect()"));
        assert_eq!(
            demangle("_ZTch0_h16_N3geo4Rect5cloneEv").as_deref(),
            Some("covariant return thunk to geo::Rect::clone()")
        );
        assert_eq!(mangling("_ZN4core3ptr13drop_in_place17h0123456789abcdefE"), Some(Mangling::Rust));
        assert_eq!(
            demangle("_ZN4core3ptr13drop_in_place17h0123456789abcdefE").as_deref(),
            Some("core::ptr::drop_in_place")
        );
    }
}
