//! The GPUs a multi-GPU lesson drives from one process: the one `--device` names first, then
//! the lowest-numbered others. [`Plan::gpus`](crate::lab::Plan::gpus) has already checked
//! that there are enough.
use crate::runtime::context::device_count;
use crate::runtime::{Error, Gpu, Result};

/// `n` GPUs other than `gpu`, lowest ordinal first, each with its kernels loaded.
pub fn others(gpu: &Gpu, n: usize) -> Result<Vec<Gpu>> {
    let count = device_count()?;
    let ordinals: Vec<u32> = (0..count).filter(|&o| o != gpu.info.ordinal).take(n).collect();
    if ordinals.len() < n {
        return Err(Error::NotRun(format!("needs {} GPUs, found {count}", n + 1).into()));
    }
    ordinals.into_iter().map(Gpu::new).collect()
}
