//! The leading fields of each record kind read, transcribed field by field from
//! `cupti_activity.h` (the same in every version of each struct from CUDA 12.0 to 13.x).
//! The lessons' recorder reads the first four kinds; the injected recorder (`decode`) reads
//! them all.
//! CUPTI declares its records packed (`__attribute__((packed, aligned(8)))`), so these are
//! `repr(C, packed)`: the compiler lays out the offsets the header does, and the test below
//! check them against the header's numbers.
use std::mem::size_of;

pub const KIND_MEMCPY: u32 = 1;
pub const KIND_MEMSET: u32 = 2;
pub const KIND_CONCURRENT_KERNEL: u32 = 10;
pub const KIND_MEMCPY2: u32 = 22;
pub const KIND_DRIVER: u32 = 4;
pub const KIND_RUNTIME: u32 = 5;
pub const KIND_DEVICE: u32 = 8;
pub const KIND_CONTEXT: u32 = 9;
pub const KIND_NAME: u32 = 11;
pub const KIND_MARKER: u32 = 12;
pub const KIND_STREAM: u32 = 37;
pub const KIND_SYNCHRONIZATION: u32 = 38;

/// `CUpti_ActivityKernel4`…`13`, up to the `name` pointer.
#[repr(C, packed)]
#[derive(Clone, Copy)]
pub struct Kernel {
    pub kind: u32,
    pub cache_config: u8,
    pub shared_memory_config: u8,
    pub registers_per_thread: u16,
    /// `partitionedGlobalCacheRequested`, `…Executed`.
    pub partitioned_global_cache: [u32; 2],
    pub start: u64,
    pub end: u64,
    pub completed: u64,
    pub device_id: u32,
    pub context_id: u32,
    pub stream_id: u32,
    /// `gridX`, `gridY`, `gridZ` (`int32_t`, never negative).
    pub grid: [u32; 3],
    pub block: [u32; 3],
    /// `staticSharedMemory`, `dynamicSharedMemory`.
    pub shared_memory: [i32; 2],
    /// `localMemoryPerThread`, `localMemoryTotal`.
    pub local_memory: [u32; 2],
    pub correlation_id: u32,
    pub grid_id: i64,
    /// `const char *name` (64-bit targets only, as is CUPTI).
    pub name: u64,
}

/// What every copy and memset record starts with, up to `streamId`.
#[repr(C, packed)]
#[derive(Clone, Copy)]
pub struct Transfer {
    pub kind: u32,
    /// A copy's `copyKind`, `srcKind`, `dstKind`, `flags`; a memset's `uint32_t value`.
    pub head: [u8; 4],
    pub bytes: u64,
    pub start: u64,
    pub end: u64,
    pub device_id: u32,
    pub context_id: u32,
    pub stream_id: u32,
}

/// `CUpti_ActivityMemcpy`…`Memcpy7` and `CUpti_ActivityMemset`…`Memset5`, up to
/// `correlationId`: the two layouts are the same there but for bytes 4..8.
#[repr(C, packed)]
#[derive(Clone, Copy)]
pub struct Memcpy {
    pub transfer: Transfer,
    pub correlation_id: u32,
}

/// `CUpti_ActivityMemcpyPtoP`…`PtoP4`, up to `correlationId`.
#[repr(C, packed)]
#[derive(Clone, Copy)]
pub struct MemcpyPtoP {
    pub transfer: Transfer,
    pub src_device_id: u32,
    pub src_context_id: u32,
    pub dst_device_id: u32,
    pub dst_context_id: u32,
    pub correlation_id: u32,
}

/// `CUpti_ActivitySynchronization` and `…Synchronization2` (CUDA 13), up to `cudaEventId`.
#[repr(C, packed)]
#[derive(Clone, Copy)]
pub struct Synchronization {
    pub kind: u32,
    /// `CUpti_ActivitySynchronizationType`.
    pub sync_type: u32,
    pub start: u64,
    pub end: u64,
    pub correlation_id: u32,
    pub context_id: u32,
    /// `CUPTI_SYNCHRONIZATION_INVALID_VALUE` where the call names no stream.
    pub stream_id: u32,
    pub cuda_event_id: u32,
}

/// `CUpti_ActivityMarker2`, whole (CUDA 12.0 to 13.x write this version).
#[repr(C, packed)]
#[derive(Clone, Copy)]
pub struct Marker {
    pub kind: u32,
    /// `CUpti_ActivityFlag`: `MARKER_INSTANTANEOUS`, `MARKER_START` or `MARKER_END`.
    pub flags: u32,
    pub timestamp: u64,
    pub id: u32,
    /// `CUpti_ActivityObjectKind` of `object_id`.
    pub object_kind: u32,
    /// `CUpti_ActivityObjectKindId`, a union: `{processId, threadId}` or
    /// `{deviceId, contextId, streamId}`.
    pub object_id: [u32; 3],
    pub pad: u32,
    /// `const char *name`: null on a range's end.
    pub name: u64,
    /// `const char *domain`: null for the default domain.
    pub domain: u64,
}

/// `CUpti_ActivityAPI`, whole: a driver (`KIND_DRIVER`) or runtime (`KIND_RUNTIME`) call.
#[repr(C, packed)]
#[derive(Clone, Copy)]
pub struct Api {
    pub kind: u32,
    /// `CUpti_CallbackId` in the call's domain (`cupti_driver_cbid.h`, `cupti_runtime_cbid.h`).
    pub cbid: u32,
    pub start: u64,
    pub end: u64,
    pub process_id: u32,
    pub thread_id: u32,
    pub correlation_id: u32,
    pub return_value: u32,
}

/// `CUpti_ActivityName`, whole (64-bit: with its `pad`).
#[repr(C, packed)]
#[derive(Clone, Copy)]
pub struct Name {
    pub kind: u32,
    pub object_kind: u32,
    pub object_id: [u32; 3],
    pub pad: u32,
    /// `const char *name`.
    pub name: u64,
}

/// `CUpti_ActivityContext`, `…Context2` and `…Context3` (CUDA 13), up to `nullStreamId`.
#[repr(C, packed)]
#[derive(Clone, Copy)]
pub struct Context {
    pub kind: u32,
    pub context_id: u32,
    pub device_id: u32,
    pub compute_api_kind: u16,
    /// The stream id of the context's legacy default (NULL) stream.
    pub null_stream_id: u16,
}

/// `CUpti_ActivityStream`, whole.
#[repr(C, packed)]
#[derive(Clone, Copy)]
pub struct Stream {
    pub kind: u32,
    pub context_id: u32,
    pub stream_id: u32,
    /// The clamped priority, a C `int` stored as `uint32_t` (greatest priority is negative).
    pub priority: u32,
    /// `CUpti_ActivityStreamFlag`.
    pub flag: u32,
    pub correlation_id: u32,
}

/// `CUpti_ActivityDevice4` (CUDA 12.x) and `…Device5` (12.x, 13.x), up to the `name` pointer:
/// both versions lay these fields out alike; `Device5` only appends (`isNumaNode`, `numaId`).
#[repr(C, packed)]
#[derive(Clone, Copy)]
pub struct Device {
    pub kind: u32,
    pub flags: u32,
    pub global_memory_bandwidth: u64,
    pub global_memory_size: u64,
    pub constant_memory_size: u32,
    pub l2_cache_size: u32,
    pub threads_per_warp: u32,
    pub core_clock_rate: u32,
    /// `numMemcpyEngines`.
    pub memcpy_engines: u32,
    pub multiprocessors: u32,
    /// `maxIPC` … `maxGridDimZ`, not read.
    pub limits: [u32; 14],
    /// `computeCapabilityMajor`, `computeCapabilityMinor`.
    pub compute_capability: [u32; 2],
    pub id: u32,
    pub ecc_enabled: u32,
    pub uuid: [u8; 16],
    /// `const char *name`.
    pub name: u64,
}

/// `CUpti_ActivitySynchronizationType`.
pub const SYNC_EVENT: u32 = 1;
pub const SYNC_STREAM_WAIT_EVENT: u32 = 2;
pub const SYNC_STREAM: u32 = 3;
pub const SYNC_CONTEXT: u32 = 4;
/// `CUPTI_SYNCHRONIZATION_INVALID_VALUE`: a field that does not apply.
pub const SYNC_INVALID: u32 = u32::MAX;
/// `CUpti_ActivityFlag` of a marker.
pub const MARKER_INSTANTANEOUS: u32 = 1 << 0;
pub const MARKER_START: u32 = 1 << 1;
pub const MARKER_END: u32 = 1 << 2;
/// `CUpti_ActivityObjectKind`.
pub const OBJECT_PROCESS: u32 = 1;
pub const OBJECT_THREAD: u32 = 2;
pub const OBJECT_DEVICE: u32 = 3;
pub const OBJECT_CONTEXT: u32 = 4;
pub const OBJECT_STREAM: u32 = 5;
/// `CUPTI_ACTIVITY_STREAM_CREATE_FLAG_NON_BLOCKING`.
pub const STREAM_NON_BLOCKING: u32 = 2;

/// Lets `bytemuck` copy these structs out of a record's bytes (they are only ever read).
macro_rules! plain_old_data {
    ($($record:ty),*) => {$(
        // SAFETY: every field is an integer or an array of them: all zeros is valid.
        unsafe impl bytemuck::Zeroable for $record {}
        // SAFETY: `repr(C, packed)` leaves no padding, every field is an integer or an
        // array of them (every bit pattern valid), and the struct is `Copy + 'static`.
        unsafe impl bytemuck::Pod for $record {}
    )*};
}
plain_old_data!(Kernel, Transfer, Memcpy, MemcpyPtoP);
plain_old_data!(Synchronization, Marker, Api, Name, Context, Stream, Device);

/// How many leading bytes of a record of `kind` are read; `None` for kinds skipped.
pub fn prefix_len(kind: u32) -> Option<usize> {
    match kind {
        KIND_CONCURRENT_KERNEL => Some(size_of::<Kernel>()),
        KIND_MEMCPY | KIND_MEMSET => Some(size_of::<Memcpy>()),
        KIND_MEMCPY2 => Some(size_of::<MemcpyPtoP>()),
        _ => None,
    }
}

/// How many leading bytes of a record of `kind` the injected recorder's decoder reads; `None`
/// for kinds it skips.
pub fn trace_prefix_len(kind: u32) -> Option<usize> {
    match kind {
        KIND_SYNCHRONIZATION => Some(size_of::<Synchronization>()),
        KIND_MARKER => Some(size_of::<Marker>()),
        KIND_DRIVER | KIND_RUNTIME => Some(size_of::<Api>()),
        KIND_NAME => Some(size_of::<Name>()),
        KIND_CONTEXT => Some(size_of::<Context>()),
        KIND_STREAM => Some(size_of::<Stream>()),
        KIND_DEVICE => Some(size_of::<Device>()),
        other => prefix_len(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_match_cupti_activity_h() {
        use std::mem::{offset_of, size_of};
        let kernel = [
            offset_of!(Kernel, start),
            offset_of!(Kernel, end),
            offset_of!(Kernel, device_id),
            offset_of!(Kernel, stream_id),
            offset_of!(Kernel, grid),
            offset_of!(Kernel, block),
            offset_of!(Kernel, correlation_id),
            offset_of!(Kernel, name),
        ];
        assert_eq!(kernel, [16, 24, 40, 48, 52, 64, 92, 104]);
        assert_eq!(size_of::<Kernel>(), 112);
        let transfer = [
            offset_of!(Transfer, head),
            offset_of!(Transfer, bytes),
            offset_of!(Transfer, start),
            offset_of!(Transfer, end),
            offset_of!(Transfer, device_id),
            offset_of!(Transfer, stream_id),
        ];
        assert_eq!(transfer, [4, 8, 16, 24, 32, 40]);
        assert_eq!((offset_of!(Memcpy, correlation_id), size_of::<Memcpy>()), (44, 48));
        let peer = [
            offset_of!(MemcpyPtoP, src_device_id),
            offset_of!(MemcpyPtoP, dst_device_id),
            offset_of!(MemcpyPtoP, correlation_id),
        ];
        assert_eq!(peer, [44, 52, 60]);
        assert_eq!(size_of::<MemcpyPtoP>(), 64);
    }

    /// The offsets gdb prints for CUDA 13.0's structs (`ptype /o`), field by field.
    #[test]
    fn the_traced_kinds_match_cupti_activity_h() {
        use std::mem::{offset_of, size_of};
        let sync = [
            offset_of!(Synchronization, sync_type),
            offset_of!(Synchronization, start),
            offset_of!(Synchronization, end),
            offset_of!(Synchronization, correlation_id),
            offset_of!(Synchronization, context_id),
            offset_of!(Synchronization, stream_id),
            offset_of!(Synchronization, cuda_event_id),
        ];
        assert_eq!(sync, [4, 8, 16, 24, 28, 32, 36]);
        assert_eq!(size_of::<Synchronization>(), 40);
        let marker = [
            offset_of!(Marker, flags),
            offset_of!(Marker, timestamp),
            offset_of!(Marker, id),
            offset_of!(Marker, object_kind),
            offset_of!(Marker, object_id),
            offset_of!(Marker, pad),
            offset_of!(Marker, name),
            offset_of!(Marker, domain),
        ];
        assert_eq!(marker, [4, 8, 16, 20, 24, 36, 40, 48]);
        assert_eq!(size_of::<Marker>(), 56);
        let api = [
            offset_of!(Api, cbid),
            offset_of!(Api, start),
            offset_of!(Api, end),
            offset_of!(Api, process_id),
            offset_of!(Api, thread_id),
            offset_of!(Api, correlation_id),
            offset_of!(Api, return_value),
        ];
        assert_eq!(api, [4, 8, 16, 24, 28, 32, 36]);
        assert_eq!(size_of::<Api>(), 40);
        let name = [
            offset_of!(Name, object_kind),
            offset_of!(Name, object_id),
            offset_of!(Name, pad),
            offset_of!(Name, name),
        ];
        assert_eq!((name, size_of::<Name>()), ([4, 8, 20, 24], 32));
        let context = [
            offset_of!(Context, context_id),
            offset_of!(Context, device_id),
            offset_of!(Context, compute_api_kind),
            offset_of!(Context, null_stream_id),
        ];
        assert_eq!((context, size_of::<Context>()), ([4, 8, 12, 14], 16));
        let stream = [
            offset_of!(Stream, context_id),
            offset_of!(Stream, stream_id),
            offset_of!(Stream, priority),
            offset_of!(Stream, flag),
            offset_of!(Stream, correlation_id),
        ];
        assert_eq!((stream, size_of::<Stream>()), ([4, 8, 12, 16, 20], 24));
        let device = [
            offset_of!(Device, global_memory_bandwidth),
            offset_of!(Device, constant_memory_size),
            offset_of!(Device, core_clock_rate),
            offset_of!(Device, memcpy_engines),
            offset_of!(Device, multiprocessors),
            offset_of!(Device, limits),
            offset_of!(Device, compute_capability),
            offset_of!(Device, id),
            offset_of!(Device, uuid),
            offset_of!(Device, name),
        ];
        assert_eq!(device, [8, 24, 36, 40, 44, 48, 104, 112, 120, 136]);
        assert_eq!(size_of::<Device>(), 144);
    }
}
