//! Pieces the fuzz targets share: trace unit configurations chosen by input
//! bytes, a small program image and a buffer plan built without a snapshot
//! directory. Each target includes this with `#[path]`, and so do the
//! integration tests that replay a finding (tests/state_robustness.rs,
//! tests/recover.rs), so a finding's input reads the same there; not every
//! user uses every piece.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::Arc;

use tracesight::element::MemSpace;
use tracesight::image::memory::MemoryImage;
use tracesight::input::{BufferFormat, TraceBuffer};
use tracesight::protocol::etm3::Etm3Config;
use tracesight::protocol::etm4::Etm4Config;
use tracesight::protocol::ptm::PtmConfig;
use tracesight::session::{BufferPlan, Source, SourceKind};

/// Where the image's code sits.
pub const CODE_BASE: u64 = 0x1000;

/// An ETE or ETMv4 unit with trace ID `id`: `c` bit 0 ETE, bit 1 cycle
/// counting, bit 2 return stack, bit 3 timestamps, bit 4 COMMOPT, bits 5-7 a
/// MAXSPEC of 0, 1, 2, 4, 8, 16, 32 or 78 (ETE's default).
pub fn etm4(c: u8, id: u8) -> Etm4Config {
    let ete = c & 1 != 0;
    let maxspec = [0u64, 1, 2, 4, 8, 16, 32, 78][(c >> 5) as usize];
    let idr0 = (1u64 << 5) | (1 << 9) | ((c as u64 >> 1) & 1) << 7 | ((c as u64 >> 4) & 1) << 29 | (0x8 << 24) | (3 << 15);
    let configr = (1u64 << 3) | ((c as u64 >> 1) & 1) << 4 | ((c as u64 >> 3) & 1) << 11 | ((c as u64 >> 2) & 1) << 12;
    let reg = |name: &str| -> Option<u64> {
        Some(match name {
            "TRCIDR0" => idr0,
            "TRCIDR1" => if ete { 0x4100_fff0 } else { 0x4100_f403 },
            "TRCIDR2" => 0x8 | (4 << 10) | (0xc << 25),
            "TRCIDR8" => maxspec,
            "TRCCONFIGR" => configr,
            "TRCTRACEIDR" => id as u64,
            "TRCDEVARCH" if ete => 0x4770_5a13,
            _ => return None,
        })
    };
    Etm4Config::from_registers(reg, ete, None).expect("every register is supplied")
}

/// A PTM unit (TC2's PTM_0 registers) with ETMCR bits from `c`: bit 0 cycle
/// accurate (ETMCR bit 12), bit 1 timestamps (bit 28), bit 2 return stack
/// (bit 29), bit 3 branch broadcast (bit 8), bit 4 context ID size 32.
pub fn ptm(c: u8, id: u8) -> PtmConfig {
    let c = c as u64;
    let etmcr = ((c & 1) << 12) | (((c >> 1) & 1) << 28) | (((c >> 2) & 1) << 29) | (((c >> 3) & 1) << 8) | (((c >> 4) & 1) * (3 << 14));
    let reg = |name: &str| -> Option<u64> {
        Some(match name {
            "ETMCR" => etmcr,
            "ETMIDR" => 0x411c_f312,
            "ETMCCER" => 0x34c0_1ac2,
            "ETMTRACEIDR" => id as u64,
            _ => return None,
        })
    };
    PtmConfig::from_registers(reg, None).expect("every register is supplied")
}

/// An ETMv3.5 unit (TC2's ETM_0 registers) with ETMCR bits from `c`: bit 0
/// cycle accurate (ETMCR bit 12), bit 1 timestamps (bit 28), bit 2 branch
/// output (bit 8), bit 3 context ID size 32 (bits 14-15), bit 4 data trace
/// (bits 2-3: the decoder refuses it, the parser reads it).
pub fn etm3(c: u8, id: u8) -> Etm3Config {
    let c = c as u64;
    let etmcr =
        0x800 | ((c & 1) << 12) | (((c >> 1) & 1) << 28) | (((c >> 2) & 1) << 8) | (((c >> 3) & 1) * (3 << 14)) | (((c >> 4) & 1) * 0xc);
    let reg = |name: &str| -> Option<u64> {
        Some(match name {
            "ETMCR" => etmcr,
            "ETMIDR" => 0x410c_f250,
            "ETMCCER" => 0x3440_08f2,
            "ETMTRACEIDR" => id as u64,
            _ => return None,
        })
    };
    Etm3Config::from_registers(reg, None).expect("every register is supplied")
}

/// A program image: `code` at [`CODE_BASE`] (any bytes: the decoders walk
/// whatever instructions they hold), followed by A64 `RET`s and A32/T32
/// branches so that walks find waypoints.
pub fn image(code: &[u8]) -> Arc<MemoryImage> {
    let mut bytes = code.to_vec();
    for _ in 0..16 {
        bytes.extend_from_slice(&0xd65f_03c0u32.to_le_bytes()); // RET
        bytes.extend_from_slice(&0xeaff_fffeu32.to_le_bytes()); // A32 B .
    }
    let mut im = MemoryImage::new();
    im.add_bytes(CODE_BASE, bytes, MemSpace::ANY);
    Arc::new(im)
}

/// A source of kind `k` (0 ETE/ETMv4, 1 PTM, 2 ETMv3) with `c` as its
/// configuration byte.
pub fn source(k: u8, c: u8, id: u8) -> Source {
    let (kind, device_type) = match k % 3 {
        0 => (SourceKind::Etm4(etm4(c, id)), if c & 1 != 0 { "ETE" } else { "ETM4" }),
        1 => (SourceKind::Ptm(ptm(c, id)), "PTM1.1"),
        _ => (SourceKind::Etm3(etm3(c, id)), "ETM3.5"),
    };
    Source { name: format!("SRC_{id:x}"), device_type: device_type.into(), trace_id: Some(id), kind, cpu: None }
}

/// A buffer plan over `sources`, formatted (CoreSight frames) or raw.
pub fn plan(sources: Vec<Source>, formatted: bool, image: Arc<MemoryImage>) -> BufferPlan {
    let format = if formatted { BufferFormat::CoreSight } else { BufferFormat::SourceData };
    BufferPlan {
        buffer: TraceBuffer {
            section: "buffer0".into(),
            name: "FUZZ".into(),
            file: "fuzz.bin".into(),
            format,
            path: PathBuf::from("fuzz.bin"),
            line: 0,
        },
        sources,
        notes: Vec::new(),
        image,
    }
}
