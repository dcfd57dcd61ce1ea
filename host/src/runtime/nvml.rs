//! NVML, the driver's management library (`libnvidia-ml.so.1`), opened at run time for one
//! question the CUDA driver API does not answer: how many NVLink links join two GPUs. It
//! ships with the driver; where it is missing the answer is None, never an error.
//!
//! On an NVSwitch machine (HGX boards) a GPU's links end at the switches, not at the other
//! GPU: NVML then names a switch as the far end of every link, and the two GPUs talk
//! through the switches over as many links as the narrower of them has.
use std::ffi::{c_char, c_int, c_uint, c_void, CString};
use std::sync::OnceLock;

use libloading::Library;

/// NVLink links per GPU that NVML can describe (`NVML_NVLINK_MAX_LINKS` on Hopper).
const MAX_LINKS: c_uint = 18;

/// `nvmlPciInfo_t`: the fields before `busId` are what we compare.
#[repr(C)]
struct PciInfo {
    bus_id_legacy: [c_char; 16],
    domain: c_uint,
    bus: c_uint,
    device: c_uint,
    pci_device_id: c_uint,
    pci_subsystem_id: c_uint,
    bus_id: [c_char; 32],
}

type Init = unsafe extern "C" fn() -> c_int;
type HandleByBusId = unsafe extern "C" fn(*const c_char, *mut *mut c_void) -> c_int;
type LinkState = unsafe extern "C" fn(*mut c_void, c_uint, *mut c_int) -> c_int;
type RemotePci = unsafe extern "C" fn(*mut c_void, c_uint, *mut PciInfo) -> c_int;
type RemoteType = unsafe extern "C" fn(*mut c_void, c_uint, *mut c_uint) -> c_int;

/// `NVML_NVLINK_DEVICE_TYPE_SWITCH` (`nvmlIntNvLinkDeviceType_t`).
const REMOTE_IS_SWITCH: c_uint = 2;

struct Nvml {
    handle: HandleByBusId,
    state: LinkState,
    remote: RemotePci,
    /// `nvmlDeviceGetNvLinkRemoteDeviceType`, where the driver has it.
    remote_type: Option<RemoteType>,
    _lib: Library,
}

fn nvml() -> Option<&'static Nvml> {
    static NVML: OnceLock<Option<Nvml>> = OnceLock::new();
    NVML.get_or_init(|| {
        // SAFETY: loading the driver's NVML runs its initialisers, which have no preconditions.
        let lib = unsafe { Library::new("libnvidia-ml.so.1") }.ok()?;
        // SAFETY: each type is the function's C signature from nvml.h.
        let nvml = unsafe {
            let init: Init = *lib.get(b"nvmlInit_v2\0").ok()?;
            if init() != 0 {
                return None;
            }
            Nvml {
                handle: *lib.get(b"nvmlDeviceGetHandleByPciBusId_v2\0").ok()?,
                state: *lib.get(b"nvmlDeviceGetNvLinkState\0").ok()?,
                remote: *lib.get(b"nvmlDeviceGetNvLinkRemotePciInfo_v2\0").ok()?,
                remote_type: lib.get(b"nvmlDeviceGetNvLinkRemoteDeviceType\0").ok().map(|f| *f),
                _lib: lib,
            }
        };
        Some(nvml)
    })
    .as_ref()
}

/// (domain, bus, device) of a PCI address such as "0000:19:00.0" or "00000000:19:00.0".
pub fn parse_bus_id(id: &str) -> Option<(u32, u32, u32)> {
    let (domain, rest) = id.split_once(':')?;
    let (bus, rest) = rest.split_once(':')?;
    let device = rest.split('.').next()?;
    let hex = |s: &str| u32::from_str_radix(s, 16).ok();
    Some((hex(domain)?, hex(bus)?, hex(device)?))
}

/// The active NVLink links between two GPUs: `direct` ones, GPU to GPU, and `switched`
/// ones, through NVSwitches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NvLinks {
    pub direct: u32,
    pub switched: u32,
}

impl NvLinks {
    /// From `from`'s links that end at `to` and each GPU's links that end at a switch: a
    /// path through the switches is as wide as the GPU with fewer switch links.
    pub fn between(direct: u32, from_switch_links: u32, to_switch_links: u32) -> NvLinks {
        NvLinks { direct, switched: from_switch_links.min(to_switch_links) }
    }

    pub fn total(&self) -> u32 {
        self.direct + self.switched
    }
}

/// The active NVLink links of the GPU at `from` that lead to the GPU at `to` (PCI bus ids),
/// directly or through NVSwitches; None when NVML is missing or cannot tell.
pub fn active_links(from: &str, to: &str) -> Option<NvLinks> {
    let nvml = nvml()?;
    let (direct, from_switch) = scan(nvml, from, Some(parse_bus_id(to)?))?;
    let to_switch = if from_switch > 0 { scan(nvml, to, None)?.1 } else { 0 };
    Some(NvLinks::between(direct, from_switch, to_switch))
}

/// The GPU at `bus_id`'s active links: how many end at the GPU at `target`, and how many at
/// an NVSwitch.
fn scan(nvml: &Nvml, bus_id: &str, target: Option<(u32, u32, u32)>) -> Option<(u32, u32)> {
    let id = CString::new(bus_id).ok()?;
    let mut device = std::ptr::null_mut();
    // SAFETY: NUL-terminated id and a valid out-pointer.
    if unsafe { (nvml.handle)(id.as_ptr(), &mut device) } != 0 {
        return None;
    }
    let (mut count, mut switched) = (0, 0);
    for link in 0..MAX_LINKS {
        let mut active = 0;
        // SAFETY: a device handle from NVML and a valid out-pointer; a link the GPU does
        // not have returns an error, which ends the count.
        if unsafe { (nvml.state)(device, link, &mut active) } != 0 {
            break;
        }
        if active == 0 {
            continue;
        }
        if let Some(remote_type) = nvml.remote_type {
            let mut kind: c_uint = 0;
            // SAFETY: a device handle from NVML and a valid out-pointer to the enum.
            if unsafe { remote_type(device, link, &mut kind) } == 0 && kind == REMOTE_IS_SWITCH {
                switched += 1;
                continue;
            }
        }
        // SAFETY: all-zero bytes are a valid `PciInfo` (integers and char arrays).
        let mut remote: PciInfo = unsafe { std::mem::zeroed() };
        // SAFETY: a device handle from NVML and a valid out-pointer to a `nvmlPciInfo_t`.
        if unsafe { (nvml.remote)(device, link, &mut remote) } != 0 {
            continue;
        }
        if Some((remote.domain, remote.bus, remote.device)) == target {
            count += 1;
        }
    }
    Some((count, switched))
}

#[cfg(test)]
mod tests {
    use super::{parse_bus_id, NvLinks};

    #[test]
    fn links_through_nvswitches_count_as_wide_as_the_narrower_gpu() {
        // HGX: every link ends at a switch, none at the other GPU.
        let hgx = NvLinks::between(0, 18, 18);
        assert_eq!((hgx.direct, hgx.switched, hgx.total()), (0, 18, 18));
        assert_eq!(NvLinks::between(0, 18, 12).total(), 12);
        // A bridge between two GPUs: direct links only.
        assert_eq!(NvLinks::between(4, 0, 0), NvLinks { direct: 4, switched: 0 });
        assert_eq!(NvLinks::between(0, 18, 0).total(), 0);
    }

    #[test]
    fn bus_ids_parse_in_both_widths() {
        assert_eq!(parse_bus_id("0000:19:00.0"), Some((0, 0x19, 0)));
        assert_eq!(parse_bus_id("00000001:3B:1f.0"), Some((1, 0x3b, 0x1f)));
        assert_eq!(parse_bus_id("garbage"), None);
    }
}
