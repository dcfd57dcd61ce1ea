//! The kernel module and one safe launcher per kernel.
//!
//! Each kernel is declared once, in `kernels-gpu` (`kernels!`): the declaration defines the
//! GPU function and a [`Signature`] whose `Params` tuple is the only argument list
//! `Kernels::launch` accepts for it. The safe launchers below check lengths and build that
//! tuple from device buffers, so an argument list cannot drift from the kernel it feeds;
//! `tests/ptx.rs` checks the same declarations against the PTX's `.param` lists.
//!
//! `gpu.compute(&stream, &data, iters)` is CUDA C++'s
//! `compute_kernel<<<(n + 255) / 256, 256, 0, stream>>>(data, n, iters)`.
use std::ffi::CString;
use std::ops::Range;
use std::path::Path;

use bytemuck::Pod;
use cudarc::driver::sys as cu;
use kernels_gpu::kernels::signatures as sig;
use kernels_gpu::Signature;

use crate::runtime::context::{AsContext, Context};
use crate::runtime::driver;
use crate::runtime::error::{Error, Named, Result};
use crate::runtime::in_flight::Access;
use crate::runtime::kernel_launch::{launch, KernelArgs, LaunchConfig};
use crate::runtime::memory::{DeviceView, HostView};
use crate::runtime::ptx::Ptx;
use crate::runtime::stream::Stream;
use crate::t;

/// A loaded module and its kernels' function handles, looked up once.
pub struct Kernels {
    module: cu::CUmodule,
    functions: Vec<(&'static str, cu::CUfunction)>,
    // Last: the module is unloaded before the context can go.
    _context: Context,
}

impl Drop for Kernels {
    fn drop(&mut self) {
        // SAFETY: we own the module; work using its functions completes first (driver docs).
        let _ = unsafe { driver::module_unload(self.module) };
    }
}

impl Kernels {
    /// Loads one of the embedded PTX modules (the driver JIT-compiles it for this GPU here).
    pub fn from_ptx(on: &impl AsContext, ptx: Ptx) -> Result<Kernels> {
        let image = CString::new(ptx.text)
            .map_err(|_| Error::Internal("the embedded PTX contains a NUL byte".into()))?;
        let module = driver::module_load_data(&image)
            .named(format!("cuModuleLoadData (JIT-compiling the embedded {} PTX)", ptx.arch))?;
        Self::look_up(on, module, false)
    }

    /// Loads `path` (a cubin, fatbin or PTX file, e.g. `cuda-reference/kernels.cu` built by
    /// nvcc) and checks that each kernel streamlab launches is there with the parameter sizes
    /// of its declaration (`cuFuncGetParamInfo`), so the launchers can trust it.
    pub fn from_file(on: &impl AsContext, path: &Path) -> Result<Kernels> {
        if !path.is_file() {
            let path = path.display().to_string();
            return Err(Error::InvalidInput(t!("error.runtime.no_module_file", path)));
        }
        let name = CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| Error::InvalidInput(t!("error.runtime.module_path_nul")))?;
        let module =
            driver::module_load(&name).named(format!("cuModuleLoad({})", path.display()))?;
        Self::look_up(on, module, true)
    }

    fn look_up(on: &impl AsContext, module: cu::CUmodule, verify: bool) -> Result<Kernels> {
        let mut kernels = Kernels { module, functions: Vec::new(), _context: on.context().clone() };
        for &(name, sizes) in sig::ALL {
            let c_name = CString::new(name).map_err(|_| Error::Internal(name.into()))?;
            // SAFETY: a live module (owned by `kernels` from here on).
            let function = unsafe { driver::module_get_function(module, &c_name) }
                .named(format!("cuModuleGetFunction({name})"))?;
            if verify {
                check_params(function, name, sizes)?;
            }
            kernels.functions.push((name, function));
        }
        Ok(kernels)
    }

    fn function(&self, name: &str) -> Result<cu::CUfunction> {
        self.functions
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, f)| *f)
            .ok_or_else(|| Error::Internal(format!("kernel {name} was not loaded")))
    }

    /// Launches kernel `K` with exactly its declared argument tuple.
    ///
    /// # Safety
    /// Every pointer in `args` must be valid for what the kernel accesses given the other
    /// arguments (the safe launchers below check the lengths that guarantee it).
    pub(crate) unsafe fn launch<K: Signature>(
        &self,
        stream: &Stream,
        config: LaunchConfig,
        args: K::Params,
    ) -> Result<()>
    where
        K::Params: KernelArgs,
    {
        let function = self.function(K::NAME)?;
        // SAFETY: the tuple type is the kernel's declared parameter list; pointer validity is
        // the caller's contract.
        unsafe { launch(function, K::NAME, config, stream, args) }
    }
}

/// The parameter sizes `function` reports must be `sizes`, and there must be no more.
fn check_params(function: cu::CUfunction, name: &str, sizes: &[usize]) -> Result<()> {
    // SAFETY: a function of a live module.
    let param = |i: usize| unsafe { driver::func_get_param_info(function, i) };
    for (i, &want) in sizes.iter().enumerate() {
        let size = param(i).named(format!("cuFuncGetParamInfo({name}, {i})"))?;
        if size != want {
            let name = name.to_string();
            return Err(Error::InvalidInput(t!("error.runtime.param_size", name, size, i, want)));
        }
    }
    if param(sizes.len()).is_ok() {
        let (name, count) = (name.to_string(), sizes.len());
        return Err(Error::InvalidInput(t!("error.runtime.too_many_params", name, count)));
    }
    Ok(())
}

fn element_count(n: usize, what: &str) -> Result<u32> {
    u32::try_from(n).map_err(|_| {
        Error::InvalidInput(t!("error.runtime.too_many_elements", what = what.to_string(), n))
    })
}

/// For a kernel with one thread per element over views that must hold the same number of
/// elements: that number `n` (checked to fit the kernels' u32 index), and the launch.
fn per_element(lens: &[usize], what: &str) -> Result<(u32, LaunchConfig)> {
    same_len(lens, what)?;
    let len = lens.first().copied().unwrap_or(0);
    Ok((element_count(len, what)?, LaunchConfig::for_elements(len)))
}

fn same_len(lens: &[usize], what: &str) -> Result<()> {
    if lens.windows(2).all(|w| w[0] == w[1]) {
        Ok(())
    } else {
        Err(Error::Internal(format!("{what}: buffers of different lengths {lens:?}")))
    }
}

fn mut_ptr<T: Pod>(view: &DeviceView<'_, T>) -> *mut T {
    view.device_ptr() as *mut T
}

fn const_ptr<T: Pod>(view: &DeviceView<'_, T>) -> *const T {
    view.device_ptr() as *const T
}

/// The 16-bit format a half-precision kernel computes in: its `format` parameter. It is also a
/// lesson flag's value: `lab::args` makes it one, and it is written in reports by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HalfFormat {
    /// bfloat16 (`__nv_bfloat16`): f32's range, 8 significant bits.
    Bf16,
    /// IEEE binary16 (`__half`): up to 65504, 11 significant bits.
    F16,
}

impl HalfFormat {
    /// Its name: `bf16` or `f16`.
    pub fn name(self) -> &'static str {
        match self {
            HalfFormat::Bf16 => "bf16",
            HalfFormat::F16 => "f16",
        }
    }

    /// A value of this format (its bits) as f32, exactly, on the host.
    pub fn widen(self, bits: u16) -> f32 {
        match self {
            HalfFormat::Bf16 => kernels_gpu::math::f32_from_bf16_bits(bits),
            HalfFormat::F16 => kernels_gpu::math::f32_from_f16_bits(bits),
        }
    }

    /// The code the kernels take (`kernels_gpu::math::FORMAT_BF16`, `FORMAT_F16`).
    pub fn code(self) -> u32 {
        match self {
            HalfFormat::Bf16 => kernels_gpu::math::FORMAT_BF16,
            HalfFormat::F16 => kernels_gpu::math::FORMAT_F16,
        }
    }
}

/// One safe launcher per kernel.
impl Kernels {
    /// `sleep_kernel`: every thread of `config` spins `cycles` SM clock ticks.
    pub fn sleep(&self, stream: &Stream, config: LaunchConfig, cycles: u64) -> Result<()> {
        // SAFETY: no pointers.
        unsafe { self.launch::<sig::sleep_kernel>(stream, config, (cycles,)) }
    }

    /// One block of one thread spins `cycles` ticks; `stamps[0..2]` get its GPU start and
    /// end times (`%globaltimer`, ns).
    pub fn sleep_stamped<'a>(
        &self,
        stream: &Stream,
        cycles: u64,
        stamps: impl Into<DeviceView<'a, u64>>,
    ) -> Result<()> {
        let stamps = stamps.into();
        if stamps.len() < 2 {
            return Err(Error::Internal("sleep_stamped needs room for 2 stamps".into()));
        }
        let config = LaunchConfig::new((1, 1, 1), (1, 1, 1));
        let ptr = stamps.device_ptr() as *mut u64;
        // SAFETY: the kernel writes stamps[0] and stamps[1], checked to exist.
        unsafe { self.launch::<sig::sleep_stamped_kernel>(stream, config, (cycles, ptr)) }
    }

    /// `compute_kernel`: `x = sin(x) * cos(x)`, `iters` times, on every element, in place.
    pub fn compute<'a>(
        &self,
        stream: &Stream,
        data: impl Into<DeviceView<'a, f32>>,
        iters: u32,
    ) -> Result<()> {
        let data = data.into();
        let (n, config) = per_element(&[data.len()], "compute")?;
        // SAFETY: the kernel touches data[0..n], the view's length.
        unsafe { self.launch::<sig::compute_kernel>(stream, config, (mut_ptr(&data), n, iters)) }
    }

    /// `chunk_kernel`: the compute work on `data[range]` only (the tutorials' processChunk).
    pub fn compute_chunk<'a>(
        &self,
        stream: &Stream,
        data: impl Into<DeviceView<'a, f32>>,
        range: Range<usize>,
        iters: u32,
    ) -> Result<()> {
        let data = data.into();
        if range.start > range.end || range.end > data.len() {
            return Err(Error::Internal(format!(
                "chunk {range:?} is outside a buffer of {}",
                data.len()
            )));
        }
        let offset = element_count(range.start, "chunk offset")?;
        let len = element_count(range.len(), "chunk")?;
        let config = LaunchConfig::for_elements(range.len());
        let args = (mut_ptr(&data), offset, len, iters);
        // SAFETY: the kernel touches data[offset..offset + len], inside the view (checked).
        unsafe { self.launch::<sig::chunk_kernel>(stream, config, args) }
    }

    /// `vector_add_kernel`: `c = a + b`.
    pub fn vector_add<'a, 'b, 'c>(
        &self,
        stream: &Stream,
        a: impl Into<DeviceView<'a, f32>>,
        b: impl Into<DeviceView<'b, f32>>,
        c: impl Into<DeviceView<'c, f32>>,
    ) -> Result<()> {
        let (a, b, c) = (a.into(), b.into(), c.into());
        let (n, config) = per_element(&[a.len(), b.len(), c.len()], "vector_add")?;
        let args = (const_ptr(&a), const_ptr(&b), mut_ptr(&c), n);
        // SAFETY: all three views hold n elements.
        unsafe { self.launch::<sig::vector_add_kernel>(stream, config, args) }
    }

    /// `produce_kernel`: `output = scale * sin(input) + 1`.
    pub fn produce<'a, 'b>(
        &self,
        stream: &Stream,
        input: impl Into<DeviceView<'a, f32>>,
        output: impl Into<DeviceView<'b, f32>>,
        scale: f32,
    ) -> Result<()> {
        let (input, output) = (input.into(), output.into());
        let (n, config) = per_element(&[input.len(), output.len()], "produce")?;
        let args = (const_ptr(&input), mut_ptr(&output), n, scale);
        // SAFETY: both views hold n elements.
        unsafe { self.launch::<sig::produce_kernel>(stream, config, args) }
    }

    /// `combine_kernel`: `out = a * b + a`.
    pub fn combine<'a, 'b, 'c>(
        &self,
        stream: &Stream,
        a: impl Into<DeviceView<'a, f32>>,
        b: impl Into<DeviceView<'b, f32>>,
        out: impl Into<DeviceView<'c, f32>>,
    ) -> Result<()> {
        let (a, b, out) = (a.into(), b.into(), out.into());
        let (n, config) = per_element(&[a.len(), b.len(), out.len()], "combine")?;
        let args = (const_ptr(&a), const_ptr(&b), mut_ptr(&out), n);
        // SAFETY: all three views hold n elements.
        unsafe { self.launch::<sig::combine_kernel>(stream, config, args) }
    }

    /// `scale_kernel`: `data = data * factor + offset`, in place.
    pub fn scale<'a>(
        &self,
        stream: &Stream,
        data: impl Into<DeviceView<'a, f32>>,
        factor: f32,
        offset: f32,
    ) -> Result<()> {
        let data = data.into();
        let (n, config) = per_element(&[data.len()], "scale")?;
        let args = (mut_ptr(&data), n, factor, offset);
        // SAFETY: the view holds n elements.
        unsafe { self.launch::<sig::scale_kernel>(stream, config, args) }
    }

    /// `slow_scale_kernel`: each thread spins `cycles` ticks, then `output = input * factor`.
    pub fn slow_scale<'a, 'b>(
        &self,
        stream: &Stream,
        input: impl Into<DeviceView<'a, f32>>,
        output: impl Into<DeviceView<'b, f32>>,
        factor: f32,
        cycles: u64,
    ) -> Result<()> {
        let (input, output) = (input.into(), output.into());
        let (n, config) = per_element(&[input.len(), output.len()], "slow_scale")?;
        let args = (const_ptr(&input), mut_ptr(&output), n, factor, cycles);
        // SAFETY: both views hold n elements.
        unsafe { self.launch::<sig::slow_scale_kernel>(stream, config, args) }
    }

    /// `half_layer_kernel`: `gradient = layer_gradient(weights, input, iters)` in `format`,
    /// on a grid of `blocks` blocks of 256 threads (0: one thread per element); the kernel's
    /// grid-stride loop covers every element with any grid.
    #[allow(clippy::too_many_arguments)]
    pub fn half_layer<'a, 'b, 'c>(
        &self,
        stream: &Stream,
        weights: impl Into<DeviceView<'a, u16>>,
        input: impl Into<DeviceView<'b, f32>>,
        gradient: impl Into<DeviceView<'c, u16>>,
        iters: u32,
        format: HalfFormat,
        blocks: u32,
    ) -> Result<()> {
        let (weights, input, gradient) = (weights.into(), input.into(), gradient.into());
        let (n, one_per_element) =
            per_element(&[weights.len(), input.len(), gradient.len()], "half_layer")?;
        let config = match blocks {
            0 => one_per_element,
            b => LaunchConfig::new((b, 1, 1), (256, 1, 1)),
        };
        let args =
            (const_ptr(&weights), const_ptr(&input), mut_ptr(&gradient), n, iters, format.code());
        // SAFETY: all three views hold n elements.
        unsafe { self.launch::<sig::half_layer_kernel>(stream, config, args) }
    }

    /// `master_update_kernel`: `master -= lr * gradient`, the gradient in `format`.
    pub fn master_update<'a, 'b>(
        &self,
        stream: &Stream,
        master: impl Into<DeviceView<'a, f32>>,
        gradient: impl Into<DeviceView<'b, u16>>,
        lr: f32,
        format: HalfFormat,
    ) -> Result<()> {
        let (master, gradient) = (master.into(), gradient.into());
        let (n, config) = per_element(&[master.len(), gradient.len()], "master_update")?;
        let args = (mut_ptr(&master), const_ptr(&gradient), n, lr, format.code());
        // SAFETY: both views hold n elements.
        unsafe { self.launch::<sig::master_update_kernel>(stream, config, args) }
    }

    /// `cast_to_half_kernel`: `weights = master` rounded to `format` (to nearest, ties to even).
    pub fn cast_to_half<'a, 'b>(
        &self,
        stream: &Stream,
        master: impl Into<DeviceView<'a, f32>>,
        weights: impl Into<DeviceView<'b, u16>>,
        format: HalfFormat,
    ) -> Result<()> {
        let (master, weights) = (master.into(), weights.into());
        let (n, config) = per_element(&[master.len(), weights.len()], "cast_to_half")?;
        let args = (const_ptr(&master), mut_ptr(&weights), n, format.code());
        // SAFETY: both views hold n elements.
        unsafe { self.launch::<sig::cast_to_half_kernel>(stream, config, args) }
    }

    /// `copy_kernel` from pinned host memory to the device: the SMs read the host's pages
    /// over the bus themselves, where `Stream::copy_to_device` would use a copy engine. The
    /// host buffer is tracked as by that copy (refused while the host writes it, in flight
    /// on `stream` afterwards); pageable memory is refused.
    pub fn copy_kernel_to_device<'h, 'd>(
        &self,
        stream: &Stream,
        src: impl Into<HostView<'h, f32>>,
        dst: impl Into<DeviceView<'d, f32>>,
    ) -> Result<()> {
        let (src, dst) = (src.into(), dst.into());
        let (n, config) = per_element(&[src.len(), dst.len()], "copy_kernel_to_device")?;
        let from = src.mapped(Access::DeviceReads)? as *const f32;
        // SAFETY: both hold n elements; the host memory is mapped, admitted for a device
        // read, and waits for the event it records after this launch before the host writes
        // or frees it.
        unsafe { self.launch::<sig::copy_kernel>(stream, config, (from, mut_ptr(&dst), n))? };
        src.in_flight_on(stream.share(), Access::DeviceReads);
        Ok(())
    }

    /// `copy_kernel` from the device to pinned host memory: the SMs write the host's pages
    /// themselves (see [`Kernels::copy_kernel_to_device`]).
    pub fn copy_kernel_to_host<'d, 'h>(
        &self,
        stream: &Stream,
        src: impl Into<DeviceView<'d, f32>>,
        dst: impl Into<HostView<'h, f32>>,
    ) -> Result<()> {
        let (src, dst) = (src.into(), dst.into());
        let (n, config) = per_element(&[src.len(), dst.len()], "copy_kernel_to_host")?;
        let to = dst.mapped(Access::DeviceWrites)? as *mut f32;
        // SAFETY: both hold n elements; the host memory is mapped, admitted for a device
        // write (no host borrow is live), and waits for the event it records after this
        // launch before it is read or freed.
        unsafe { self.launch::<sig::copy_kernel>(stream, config, (const_ptr(&src), to, n))? };
        dst.in_flight_on(stream.share(), Access::DeviceWrites);
        Ok(())
    }

    /// `empty_kernel` on one block of one thread: the launch and nothing else.
    pub fn empty(&self, stream: &Stream) -> Result<()> {
        let config = LaunchConfig::new((1, 1, 1), (1, 1, 1));
        // SAFETY: no arguments.
        unsafe { self.launch::<sig::empty_kernel>(stream, config, ()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_element_launches_check_lengths_then_the_index() {
        let (n, config) = per_element(&[1000, 1000, 1000], "combine").unwrap();
        assert_eq!((n, config.grid, config.block), (1000, (4, 1, 1), (256, 1, 1)));
        let e = per_element(&[1000, 999], "produce").unwrap_err().to_string();
        assert!(e.contains("produce: buffers of different lengths [1000, 999]"), "{e}");
        let big = u32::MAX as usize + 1;
        let e = per_element(&[big, big], "scale").unwrap_err().to_string();
        assert!(e.contains("scale: 4294967296 elements is more than"), "{e}");
        // Unequal lengths are named first, even when one is also too large.
        let e = per_element(&[big, 1], "scale").unwrap_err().to_string();
        assert!(e.contains("different lengths"), "{e}");
    }
}
