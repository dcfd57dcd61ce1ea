//! The leading fields of each record kind read, transcribed field by field from
//! `cupti_activity.h` (the same in every version of each struct from CUDA 12.0 to 13.x).
//! CUPTI declares its records packed (`__attribute__((packed, aligned(8)))`), so these are
//! `repr(C, packed)`: the compiler lays out the offsets the header does, and the test below
//! check them against the header's numbers.
use std::mem::size_of;

pub const KIND_MEMCPY: u32 = 1;
pub const KIND_MEMSET: u32 = 2;
pub const KIND_CONCURRENT_KERNEL: u32 = 10;
pub const KIND_MEMCPY2: u32 = 22;

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

/// How many leading bytes of a record of `kind` are read; `None` for kinds skipped.
pub fn prefix_len(kind: u32) -> Option<usize> {
    match kind {
        KIND_CONCURRENT_KERNEL => Some(size_of::<Kernel>()),
        KIND_MEMCPY | KIND_MEMSET => Some(size_of::<Memcpy>()),
        KIND_MEMCPY2 => Some(size_of::<MemcpyPtoP>()),
        _ => None,
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
}
