//! Two GPUs in one process: whether one can read the other's memory (peer access), what
//! links them, and turning peer access on. The peer copy itself is
//! [`Stream::copy_peer`](crate::runtime::Stream::copy_peer).
use cudarc::driver::sys::{self as cu, CUdevice_P2PAttribute as P2p};
use serde::Serialize;

use crate::runtime::context::Context;
use crate::runtime::driver;
use crate::runtime::error::{Named, Result};
use crate::runtime::nvml;

/// What the driver says about the path from one GPU to another.
#[derive(Debug, Clone, Serialize)]
pub struct Link {
    pub from: u32,
    pub to: u32,
    /// `cuDeviceCanAccessPeer`: kernels and copies on `from` can address `to`'s memory.
    pub access: bool,
    /// `CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK`: the driver's relative rank of this link
    /// (0 is the best it has).
    pub performance_rank: i32,
    /// `CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED`: atomics over the link are native
    /// (NVLink), not emulated.
    pub native_atomics: bool,
    /// NVLink links between the two that NVML reports active, direct or through NVSwitches;
    /// None when NVML is not there.
    pub nvlinks: Option<u32>,
    /// Those links go through NVSwitches (an HGX board), not GPU to GPU.
    pub nvswitch: bool,
}

impl Link {
    /// The link in words: "NVLink (18 links)", "PCIe or another non-NVLink path", ...
    pub fn kind(&self) -> String {
        match self.nvlinks {
            Some(n) if n > 0 => format!(
                "NVLink{} ({n} link{} active)",
                if self.nvswitch { " through NVSwitch" } else { "" },
                if n == 1 { "" } else { "s" }
            ),
            Some(_) => "PCIe (no active NVLink between them)".into(),
            None if self.native_atomics => "NVLink, by the native-atomics attribute".into(),
            None => "PCIe or another non-NVLink path (NVML not available to say more)".into(),
        }
    }
}

fn attribute(attr: P2p, from: &Context, to: &Context) -> Result<i32> {
    // Both devices exist: their contexts are retained.
    driver::device_get_p2p_attribute(attr, from.device(), to.device())
        .named("cuDeviceGetP2PAttribute")
}

/// The path from `from`'s GPU to `to`'s, as the driver and NVML describe it.
pub fn link(from: &Context, to: &Context) -> Result<Link> {
    let access = driver::device_can_access_peer(from.device(), to.device())
        .named("cuDeviceCanAccessPeer")?;
    let nvlinks = nvml::active_links(&from.pci_bus_id()?, &to.pci_bus_id()?);
    Ok(Link {
        from: from.ordinal(),
        to: to.ordinal(),
        access,
        performance_rank: attribute(P2p::CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK, from, to)?,
        native_atomics: attribute(P2p::CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED, from, to)?
            != 0,
        nvlinks: nvlinks.map(|l| l.total()),
        nvswitch: nvlinks.is_some_and(|l| l.switched > 0),
    })
}

/// Lets work in `from`'s context address `to`'s memory (`cudaDeviceEnablePeerAccess`).
/// Turning it on twice is not an error.
pub fn enable_access(from: &Context, to: &Context) -> Result<()> {
    from.bind()?;
    // SAFETY: `to` is a live context.
    match unsafe { driver::ctx_enable_peer_access(to.as_raw()) } {
        Err(cu::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) => Ok(()),
        enabled => enabled.named("cuCtxEnablePeerAccess"),
    }
}

/// Turns peer access from `from` to `to` off again (`cudaDeviceDisablePeerAccess`); off
/// already is not an error.
pub fn disable_access(from: &Context, to: &Context) -> Result<()> {
    from.bind()?;
    // SAFETY: `to` is a live context.
    match unsafe { driver::ctx_disable_peer_access(to.as_raw()) } {
        Err(cu::CUresult::CUDA_ERROR_PEER_ACCESS_NOT_ENABLED) => Ok(()),
        disabled => disabled.named("cuCtxDisablePeerAccess"),
    }
}

#[cfg(test)]
mod tests {
    use super::Link;

    fn link(nvlinks: Option<u32>, nvswitch: bool, native_atomics: bool) -> Link {
        Link {
            from: 0,
            to: 1,
            access: true,
            performance_rank: 0,
            native_atomics,
            nvlinks,
            nvswitch,
        }
    }

    #[test]
    fn the_link_is_named_by_what_nvml_and_the_driver_saw() {
        assert_eq!(link(Some(18), true, true).kind(), "NVLink through NVSwitch (18 links active)");
        assert_eq!(link(Some(1), false, true).kind(), "NVLink (1 link active)");
        assert!(link(Some(0), false, false).kind().starts_with("PCIe"));
        assert!(link(None, false, true).kind().contains("native-atomics"));
    }
}
