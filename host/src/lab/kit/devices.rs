//! The GPUs a multi-GPU lesson drives from one process: the one `--device` names first, then
//! the lowest-numbered others. [`Plan::gpus`](crate::lab::Plan::gpus) has already checked
//! that there are enough.
use crate::runtime::context::device_count;
use crate::runtime::{Error, Gpu, Result};
use crate::t;

/// `n` GPUs other than `gpu`, lowest ordinal first, each with its kernels loaded.
pub fn others(gpu: &Gpu, n: usize) -> Result<Vec<Gpu>> {
    let count = device_count()?;
    let ordinals: Vec<u32> = (0..count).filter(|&o| o != gpu.info.ordinal).take(n).collect();
    if ordinals.len() < n {
        let (n, found) = (n + 1, count);
        return Err(Error::NotRun(t!("error.kit.needs_gpus", n, found)));
    }
    ordinals.into_iter().map(Gpu::new).collect()
}
