//! The PTX this binary embeds, one module per GPU architecture (built by `build.rs` with
//! `kernels-build`), and which one a GPU loads: the newest that is not newer than the
//! device, as the CUDA runtime picks PTX from a fatbin, unless `STREAMLAB_GPU_ARCH` names
//! one. The choice is a pure function of the set, the device's compute capability and the
//! variable, so it is tested without a GPU.
use std::fmt;

use serde::Serialize;

use crate::runtime::error::{Error, Result};
use crate::t;

include!(concat!(env!("OUT_DIR"), "/kernels_ptx.rs"));

/// The variable that forces one of the embedded architectures at run time.
pub const ARCH_ENV: &str = "STREAMLAB_GPU_ARCH";

/// One embedded module: its architecture (`sm_90`) and its PTX text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ptx {
    pub arch: &'static str,
    pub text: &'static str,
}

/// Every embedded module, oldest architecture first.
pub fn embedded() -> Vec<Ptx> {
    PTX_BY_ARCH.iter().map(|&(arch, text)| Ptx { arch, text }).collect()
}

/// The embedded architectures, oldest first: "sm_75, sm_80, sm_90".
pub fn embedded_archs() -> String {
    PTX_BY_ARCH.iter().map(|(arch, _)| *arch).collect::<Vec<_>>().join(", ")
}

/// An architecture's number and whether it is architecture-specific (`sm_90a`: PTX that only
/// a device of exactly that compute capability runs). `None` for anything else.
fn sm_of(arch: &str) -> Option<(u32, bool)> {
    let digits = arch.strip_prefix("sm_")?;
    let (digits, specific) = match digits.strip_suffix('a') {
        Some(d) => (d, true),
        None => (digits, false),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((digits.parse().ok()?, specific))
}

/// Whether a device of compute capability `cc` (major, minor) can run PTX for `arch`.
pub fn device_runs(arch: &str, cc: (i32, i32)) -> bool {
    runs_on(arch, capability(cc))
}

/// (major, minor) as one number: 90 for 9.0, 86 for 8.6.
fn capability(cc: (i32, i32)) -> u32 {
    (cc.0.max(0) * 10 + cc.1.max(0)) as u32
}

/// Whether a device of compute capability `cc` (as [`capability`]) can run PTX for `arch`.
fn runs_on(arch: &str, cc: u32) -> bool {
    match sm_of(arch) {
        Some((n, false)) => n <= cc,
        Some((n, true)) => n == cc,
        None => false,
    }
}

/// Why a module was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Why {
    /// The newest embedded architecture not newer than the device.
    Newest,
    /// Named by `STREAMLAB_GPU_ARCH`.
    Forced,
}

/// The module a device loads, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub ptx: Ptx,
    pub why: Why,
    /// The device's compute capability, as `major * 10 + minor` (90 for 9.0).
    pub cc: u32,
    /// The architectures it was chosen from, oldest first: "sm_75, sm_80, sm_90".
    pub embedded: String,
}

impl fmt::Display for Choice {
    /// "sm_90 (of sm_75, sm_80, sm_90: the newest this GPU runs)", or "sm_75 (of sm_75,
    /// sm_80, sm_90: forced by STREAMLAB_GPU_ARCH=sm_75)".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (arch, set) = (self.ptx.arch, &self.embedded);
        match self.why {
            Why::Newest => write!(f, "{arch} (of {set}: the newest this GPU runs)"),
            Why::Forced => write!(f, "{arch} (of {set}: forced by {ARCH_ENV}={arch})"),
        }
    }
}

/// The module of `set` that `forced` (the value of `STREAMLAB_GPU_ARCH`; empty counts as
/// unset) names, if it names one; an error where it names none of them. Needs no device, so
/// a wrong name is refused before the driver is touched.
pub fn forced(set: &[Ptx], forced: Option<&str>) -> Result<Option<Ptx>> {
    let Some(name) = forced.map(str::trim).filter(|f| !f.is_empty()) else {
        return Ok(None);
    };
    match set.iter().find(|p| p.arch == name) {
        Some(&ptx) => Ok(Some(ptx)),
        None => {
            let (var, name, set) = (ARCH_ENV.to_string(), name.to_string(), listed(set));
            Err(Error::InvalidInput(if sm_of(&name).is_some() {
                t!("error.runtime.arch_not_embedded", var, name, set)
            } else {
                t!("error.runtime.arch_unknown", var, name, set)
            }))
        }
    }
}

fn listed(set: &[Ptx]) -> String {
    set.iter().map(|p| p.arch).collect::<Vec<_>>().join(", ")
}

/// The module of `set` (oldest first) that a device of compute capability `cc` (major,
/// minor) loads: the one `forced` names ([`forced`]), which must not be newer than the
/// device; else the newest that the device runs.
pub fn choose(set: &[Ptx], cc: (i32, i32), forced_arch: Option<&str>) -> Result<Choice> {
    let cc = capability(cc);
    let listed = listed(set);
    let (var, shown) = (ARCH_ENV.to_string(), format!("{}.{}", cc / 10, cc % 10));
    if let Some(ptx) = forced(set, forced_arch)? {
        if !runs_on(ptx.arch, cc) {
            let arch = ptx.arch.to_string();
            return Err(Error::InvalidInput(t!(
                "error.runtime.arch_too_new",
                var,
                arch,
                cc = shown,
                set = listed
            )));
        }
        return Ok(Choice { ptx, why: Why::Forced, cc, embedded: listed });
    }
    match set.iter().rev().find(|p| runs_on(p.arch, cc)) {
        Some(&ptx) => Ok(Choice { ptx, why: Why::Newest, cc, embedded: listed }),
        None => Err(Error::NoDevice(t!("error.runtime.gpu_too_old", cc = shown, set = listed))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SET: [Ptx; 3] = [
        Ptx { arch: "sm_75", text: "75" },
        Ptx { arch: "sm_80", text: "80" },
        Ptx { arch: "sm_90", text: "90" },
    ];

    fn newest(cc: (i32, i32)) -> &'static str {
        let choice = choose(&SET, cc, None).unwrap();
        assert_eq!(choice.why, Why::Newest);
        choice.ptx.arch
    }

    #[test]
    fn each_gpu_loads_the_newest_ptx_not_newer_than_itself() {
        assert_eq!(newest((7, 5)), "sm_75"); // Turing
        assert_eq!(newest((8, 0)), "sm_80"); // A100
        assert_eq!(newest((8, 6)), "sm_80"); // RTX 30xx
        assert_eq!(newest((8, 9)), "sm_80"); // RTX 40xx, L4
        assert_eq!(newest((9, 0)), "sm_90"); // H100, H200
        assert_eq!(newest((12, 0)), "sm_90"); // Blackwell
        let old = choose(&SET, (7, 0), None).unwrap_err();
        assert_eq!(old.exit_code(), 3);
        assert!(old.to_string().contains("this GPU (compute capability 7.0) is older than every PTX this build carries (sm_75, sm_80, sm_90)"), "{old}");
    }

    #[test]
    fn the_variable_forces_an_embedded_arch_the_gpu_runs() {
        for (forced, cc) in
            [("sm_75", (9, 0)), ("sm_80", (9, 0)), ("sm_75", (7, 5)), (" sm_80 ", (8, 6))]
        {
            let choice = choose(&SET, cc, Some(forced)).unwrap();
            assert_eq!((choice.ptx.arch, choice.why), (forced.trim(), Why::Forced));
        }
        // Empty is unset.
        assert_eq!(choose(&SET, (9, 0), Some("")).unwrap().why, Why::Newest);
        let refused = |forced: &str, cc| {
            let e = choose(&SET, cc, Some(forced)).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{e}");
            let line = e.to_string();
            assert!(!line.contains('\n'), "{line}");
            line
        };
        let e = refused("sm_86", (9, 0));
        assert!(e.contains("STREAMLAB_GPU_ARCH=sm_86 is not embedded in this build, which carries sm_75, sm_80, sm_90 (unset it"), "{e}");
        let e = refused("sm_90", (8, 6));
        assert!(e.contains("STREAMLAB_GPU_ARCH=sm_90 is newer than this GPU (compute capability 8.6), which cannot run its PTX"), "{e}");
        let e = refused("ampere", (9, 0));
        assert!(
            e.contains("STREAMLAB_GPU_ARCH=ampere is not an architecture of this build"),
            "{e}"
        );
    }

    #[test]
    fn arch_specific_ptx_runs_only_on_its_own_capability() {
        let set = [SET[0], Ptx { arch: "sm_90a", text: "90a" }];
        assert_eq!(choose(&set, (9, 0), None).unwrap().ptx.arch, "sm_90a");
        assert_eq!(choose(&set, (10, 0), None).unwrap().ptx.arch, "sm_75");
        assert_eq!(sm_of("sm_100a"), Some((100, true)));
        assert!(device_runs("sm_90a", (9, 0)) && !device_runs("sm_90a", (10, 0)));
        assert!(device_runs("sm_80", (8, 6)) && !device_runs("sm_90", (8, 9)));
        assert_eq!(sm_of("sm_9x"), None);
    }

    #[test]
    fn the_choice_says_why() {
        let newest = choose(&SET, (8, 6), None).unwrap().to_string();
        assert_eq!(newest, "sm_80 (of sm_75, sm_80, sm_90: the newest this GPU runs)");
        let forced = choose(&SET, (9, 0), Some("sm_75")).unwrap().to_string();
        assert_eq!(forced, "sm_75 (of sm_75, sm_80, sm_90: forced by STREAMLAB_GPU_ARCH=sm_75)");
    }

    /// What build.rs embedded: the architectures it announced, oldest first, each PTX
    /// built for its own (the default set is sm_75, sm_80, sm_90; `STREAMLAB_PTX_ARCHS`
    /// at build time changes it).
    #[test]
    fn this_build_embeds_one_ptx_per_announced_arch_oldest_first() {
        let set = embedded();
        let archs: Vec<&str> = set.iter().map(|p| p.arch).collect();
        assert_eq!(archs.join(","), env!("STREAMLAB_PTX_ARCHS"));
        assert_eq!(embedded_archs(), archs.join(", "));
        let numbers: Vec<u32> = archs.iter().map(|a| sm_of(a).unwrap().0).collect();
        assert!(numbers.windows(2).all(|w| w[0] < w[1]), "{archs:?}");
        for p in &set {
            assert!(p.text.contains(&format!("\n.target {}\n", p.arch)), "{}", p.arch);
        }
    }
}
