//! Typed launches of the kernels in `kernels-gpu`: one method per kernel, taking device
//! slices and scalars, checking lengths, and enqueuing on a [`Stream`]. Demo code never
//! writes a raw argument list.
//!
//! `gpu.compute(&stream, &data, iters)` is CUDA C++'s
//! `compute_kernel<<<(n + 255) / 256, 256, 0, stream>>>(data, n, iters)`, and cust's
//! `launch!(module.compute_kernel<<<grid, 256, 0, stream>>>(data.as_device_ptr(), n, iters))`.
use std::ffi::c_void;
use std::ops::Range;

use cust::memory::{DeviceCopy, DeviceSlice};
use cust::module::Module;
use cust::sys as cu;

use crate::error::{Context, Error, Result};
use crate::gpu::{launch_raw, Gpu, LaunchConfig};
use crate::stream::Stream;
use crate::timeline::OpKind;

/// Function handles, looked up once when the module is loaded.
pub(crate) struct Kernels {
    sleep: cu::CUfunction,
    sleep_stamped: cu::CUfunction,
    compute: cu::CUfunction,
    chunk: cu::CUfunction,
    vector_add: cu::CUfunction,
    produce: cu::CUfunction,
    combine: cu::CUfunction,
    scale: cu::CUfunction,
    slow_scale: cu::CUfunction,
    empty: cu::CUfunction,
}

impl Kernels {
    pub(crate) fn load(module: &Module) -> Result<Kernels> {
        let get = |name: &str| -> Result<cu::CUfunction> {
            let f = module
                .get_function(name)
                .context(&format!("cuModuleGetFunction({name})"))?;
            Ok(f.to_raw())
        };
        Ok(Kernels {
            sleep: get("sleep_kernel")?,
            sleep_stamped: get("sleep_stamped_kernel")?,
            compute: get("compute_kernel")?,
            chunk: get("chunk_kernel")?,
            vector_add: get("vector_add_kernel")?,
            produce: get("produce_kernel")?,
            combine: get("combine_kernel")?,
            scale: get("scale_kernel")?,
            slow_scale: get("slow_scale_kernel")?,
            empty: get("empty_kernel")?,
        })
    }
}

/// A pointer to a kernel argument, as `cuLaunchKernel` wants it.
fn arg<T>(value: &mut T) -> *mut c_void {
    value as *mut T as *mut c_void
}

fn device_ptr<T: DeviceCopy>(slice: &DeviceSlice<T>) -> u64 {
    slice.as_device_ptr().as_raw()
}

fn element_count(n: usize, what: &str) -> Result<u32> {
    u32::try_from(n).map_err(|_| {
        Error::InvalidInput(format!(
            "{what}: {n} elements is more than a kernel's u32 index allows"
        ))
    })
}

fn same_len(lens: &[usize], what: &str) -> Result<()> {
    if lens.windows(2).all(|w| w[0] == w[1]) {
        Ok(())
    } else {
        Err(Error::Internal(format!(
            "{what}: buffers of different lengths {lens:?}"
        )))
    }
}

impl Gpu {
    fn launch(
        &self,
        stream: &Stream,
        function: cu::CUfunction,
        name: &str,
        config: LaunchConfig,
        args: &mut [*mut c_void],
    ) -> Result<()> {
        stream.enqueue(OpKind::Kernel, name, || {
            // SAFETY: every caller below builds `args` to match its kernel's signature in
            // kernels-gpu/src/kernels.rs, from device slices whose lengths it has checked.
            unsafe { launch_raw(function, config, stream, args, name) }
        })
    }

    /// `sleep_kernel`: every thread of `config` spins `cycles` SM clock ticks.
    pub fn sleep(&self, stream: &Stream, config: LaunchConfig, cycles: u64) -> Result<()> {
        let mut cycles = cycles;
        self.launch(
            stream,
            self.kernels.sleep,
            "sleep_kernel",
            config,
            &mut [arg(&mut cycles)],
        )
    }

    /// One block of one thread spins `cycles` ticks; `stamps[0..2]` get its GPU start and
    /// end times (`%globaltimer`, ns).
    pub fn sleep_stamped(
        &self,
        stream: &Stream,
        cycles: u64,
        stamps: &DeviceSlice<u64>,
    ) -> Result<()> {
        if stamps.len() < 2 {
            return Err(Error::Internal(
                "sleep_stamped needs room for 2 stamps".into(),
            ));
        }
        let (mut cycles, mut ptr) = (cycles, device_ptr(stamps));
        let config = LaunchConfig::new((1, 1, 1), (1, 1, 1));
        self.launch(
            stream,
            self.kernels.sleep_stamped,
            "sleep_stamped_kernel",
            config,
            &mut [arg(&mut cycles), arg(&mut ptr)],
        )
    }

    /// `compute_kernel`: `x = sin(x) * cos(x)`, `iters` times, on every element, in place.
    pub fn compute(&self, stream: &Stream, data: &DeviceSlice<f32>, iters: u32) -> Result<()> {
        let (mut ptr, mut n, mut iters) = (
            device_ptr(data),
            element_count(data.len(), "compute")?,
            iters,
        );
        let config = LaunchConfig::for_elements(data.len());
        self.launch(
            stream,
            self.kernels.compute,
            "compute_kernel",
            config,
            &mut [arg(&mut ptr), arg(&mut n), arg(&mut iters)],
        )
    }

    /// `chunk_kernel`: the compute work on `data[range]` only.
    pub fn compute_chunk(
        &self,
        stream: &Stream,
        data: &DeviceSlice<f32>,
        range: Range<usize>,
        iters: u32,
    ) -> Result<()> {
        if range.start > range.end || range.end > data.len() {
            return Err(Error::Internal(format!(
                "chunk {range:?} is outside a buffer of {}",
                data.len()
            )));
        }
        let mut ptr = device_ptr(data);
        let mut offset = element_count(range.start, "chunk offset")?;
        let mut len = element_count(range.len(), "chunk")?;
        let mut iters = iters;
        let config = LaunchConfig::for_elements(range.len());
        let args = &mut [
            arg(&mut ptr),
            arg(&mut offset),
            arg(&mut len),
            arg(&mut iters),
        ];
        self.launch(stream, self.kernels.chunk, "chunk_kernel", config, args)
    }

    /// `vector_add_kernel`: `c = a + b`.
    pub fn vector_add(
        &self,
        stream: &Stream,
        a: &DeviceSlice<f32>,
        b: &DeviceSlice<f32>,
        c: &DeviceSlice<f32>,
    ) -> Result<()> {
        same_len(&[a.len(), b.len(), c.len()], "vector_add")?;
        let (mut pa, mut pb, mut pc) = (device_ptr(a), device_ptr(b), device_ptr(c));
        let mut n = element_count(a.len(), "vector_add")?;
        let config = LaunchConfig::for_elements(a.len());
        let args = &mut [arg(&mut pa), arg(&mut pb), arg(&mut pc), arg(&mut n)];
        self.launch(
            stream,
            self.kernels.vector_add,
            "vector_add_kernel",
            config,
            args,
        )
    }

    /// `produce_kernel`: `output = scale * sin(input) + 1`.
    pub fn produce(
        &self,
        stream: &Stream,
        input: &DeviceSlice<f32>,
        output: &DeviceSlice<f32>,
        scale: f32,
    ) -> Result<()> {
        same_len(&[input.len(), output.len()], "produce")?;
        let (mut pi, mut po, mut scale) = (device_ptr(input), device_ptr(output), scale);
        let mut n = element_count(input.len(), "produce")?;
        let config = LaunchConfig::for_elements(input.len());
        let args = &mut [arg(&mut pi), arg(&mut po), arg(&mut n), arg(&mut scale)];
        self.launch(stream, self.kernels.produce, "produce_kernel", config, args)
    }

    /// `combine_kernel`: `out = a * b + a`.
    pub fn combine(
        &self,
        stream: &Stream,
        a: &DeviceSlice<f32>,
        b: &DeviceSlice<f32>,
        out: &DeviceSlice<f32>,
    ) -> Result<()> {
        same_len(&[a.len(), b.len(), out.len()], "combine")?;
        let (mut pa, mut pb, mut po) = (device_ptr(a), device_ptr(b), device_ptr(out));
        let mut n = element_count(a.len(), "combine")?;
        let config = LaunchConfig::for_elements(a.len());
        let args = &mut [arg(&mut pa), arg(&mut pb), arg(&mut po), arg(&mut n)];
        self.launch(stream, self.kernels.combine, "combine_kernel", config, args)
    }

    /// `scale_kernel`: `data = data * factor + offset`, in place.
    pub fn scale(
        &self,
        stream: &Stream,
        data: &DeviceSlice<f32>,
        factor: f32,
        offset: f32,
    ) -> Result<()> {
        let (mut ptr, mut factor, mut offset) = (device_ptr(data), factor, offset);
        let mut n = element_count(data.len(), "scale")?;
        let config = LaunchConfig::for_elements(data.len());
        let args = &mut [
            arg(&mut ptr),
            arg(&mut n),
            arg(&mut factor),
            arg(&mut offset),
        ];
        self.launch(stream, self.kernels.scale, "scale_kernel", config, args)
    }

    /// `slow_scale_kernel`: each thread spins `cycles` ticks, then `output = input * factor`.
    pub fn slow_scale(
        &self,
        stream: &Stream,
        input: &DeviceSlice<f32>,
        output: &DeviceSlice<f32>,
        factor: f32,
        cycles: u64,
    ) -> Result<()> {
        same_len(&[input.len(), output.len()], "slow_scale")?;
        let (mut pi, mut po, mut factor, mut cycles) =
            (device_ptr(input), device_ptr(output), factor, cycles);
        let mut n = element_count(input.len(), "slow_scale")?;
        let config = LaunchConfig::for_elements(input.len());
        let args = &mut [
            arg(&mut pi),
            arg(&mut po),
            arg(&mut n),
            arg(&mut factor),
            arg(&mut cycles),
        ];
        self.launch(
            stream,
            self.kernels.slow_scale,
            "slow_scale_kernel",
            config,
            args,
        )
    }

    /// `empty_kernel` on one block of one thread: the launch and nothing else.
    pub fn empty(&self, stream: &Stream) -> Result<()> {
        let config = LaunchConfig::new((1, 1, 1), (1, 1, 1));
        self.launch(stream, self.kernels.empty, "empty_kernel", config, &mut [])
    }
}
