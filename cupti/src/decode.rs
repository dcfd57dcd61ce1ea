//! Activity records as trace-file lines: what the injected recorder writes of each record
//! CUPTI hands it. A record is read from its leading bytes ([`layout::trace_prefix_len`]);
//! the strings its pointers name and the names of driver and runtime calls come from a
//! [`Lookup`], so the decoder itself reads no memory but the record's bytes (and the tests
//! feed it byte buffers built from the header's offsets).
use crate::layout;
use crate::trace_file::{ApiDomain, Direction, Line, MarkerPhase, Memory, SyncKind};

/// What one record became.
#[derive(Debug, Clone, PartialEq)]
pub enum Decoded {
    Line(Line),
    /// A driver or runtime call the recorder does not keep ([`Lookup::call`] gave no name).
    Unkept,
    /// A record of a kind not read, or a marker that is neither a range's end nor an instant
    /// (NVTX's synchronization markers), with its kind.
    Skipped(u32),
    /// Fewer bytes than its kind's prefix: with its kind (0 when even the kind is cut).
    Short(u32),
}

/// What the decoder needs from outside a record.
pub trait Lookup {
    /// The NUL-terminated string at `pointer` (never 0: the decoder gives "" for null).
    fn string(&mut self, pointer: u64) -> String;
    /// The name of call `cbid` in `domain`, or `None` when the recorder does not keep it.
    fn call(&mut self, domain: ApiDomain, cbid: u32) -> Option<String>;
}

fn read<T: bytemuck::Pod>(bytes: &[u8]) -> Option<T> {
    bytes.get(..std::mem::size_of::<T>()).map(bytemuck::pod_read_unaligned)
}

fn text(lookup: &mut impl Lookup, pointer: u64) -> String {
    if pointer == 0 {
        String::new()
    } else {
        lookup.string(pointer)
    }
}

/// `CUpti_ActivityMemcpyKind`.
fn direction(raw: u8) -> Direction {
    match raw {
        1 => Direction::HostToDevice,
        2 => Direction::DeviceToHost,
        8 => Direction::DeviceToDevice,
        9 => Direction::HostToHost,
        10 => Direction::PeerToPeer,
        _ => Direction::Other,
    }
}

/// `CUpti_ActivityMemoryKind` (`DEVICE_STATIC` and `MANAGED_STATIC` as their plain kinds).
fn memory(raw: u8) -> Memory {
    match raw {
        1 => Memory::Pageable,
        2 => Memory::Pinned,
        3 | 6 => Memory::Device,
        4 => Memory::Array,
        5 | 7 => Memory::Managed,
        _ => Memory::Unknown,
    }
}

fn sync_kind(raw: u32) -> SyncKind {
    match raw {
        layout::SYNC_EVENT => SyncKind::Event,
        layout::SYNC_STREAM_WAIT_EVENT => SyncKind::StreamWaitEvent,
        layout::SYNC_STREAM => SyncKind::Stream,
        layout::SYNC_CONTEXT => SyncKind::Context,
        _ => SyncKind::Unknown,
    }
}

/// A `CUpti_ActivityObjectKindId` as (object, id): a thread's id is `pt.threadId`, a
/// context's `dcs.contextId`, and so on. `None` for kinds without a name here.
fn object(kind: u32, id: [u32; 3]) -> Option<(&'static str, u32)> {
    Some(match kind {
        layout::OBJECT_PROCESS => ("process", id[0]),
        layout::OBJECT_THREAD => ("thread", id[1]),
        layout::OBJECT_DEVICE => ("device", id[0]),
        layout::OBJECT_CONTEXT => ("context", id[1]),
        layout::OBJECT_STREAM => ("stream", id[2]),
        _ => return None,
    })
}

/// Decodes one record from its leading bytes (at least [`layout::trace_prefix_len`] of its
/// kind; more are ignored).
pub fn decode(bytes: &[u8], lookup: &mut impl Lookup) -> Decoded {
    use layout::*;
    let Some(kind) = read::<u32>(bytes) else { return Decoded::Short(0) };
    let Some(len) = trace_prefix_len(kind) else { return Decoded::Skipped(kind) };
    if bytes.len() < len {
        return Decoded::Short(kind);
    }
    // Each `read` below has `len` bytes to read from, its kind's prefix.
    let line = match kind {
        KIND_CONCURRENT_KERNEL => {
            let Some(k) = read::<Kernel>(bytes) else { return Decoded::Short(kind) };
            Line::Kernel {
                device: k.device_id,
                context: k.context_id,
                stream: k.stream_id,
                start: k.start,
                end: k.end,
                correlation: k.correlation_id,
                name: text(lookup, k.name),
                grid: k.grid,
                block: k.block,
            }
        }
        KIND_MEMCPY | KIND_MEMSET => {
            let Some(c) = read::<Memcpy>(bytes) else { return Decoded::Short(kind) };
            let t = c.transfer;
            let [copy, src, dst, _flags] = t.head;
            if kind == KIND_MEMSET {
                Line::Memset {
                    device: t.device_id,
                    context: t.context_id,
                    stream: t.stream_id,
                    start: t.start,
                    end: t.end,
                    correlation: c.correlation_id,
                    bytes: t.bytes,
                }
            } else {
                Line::Copy {
                    device: t.device_id,
                    context: t.context_id,
                    stream: t.stream_id,
                    start: t.start,
                    end: t.end,
                    correlation: c.correlation_id,
                    bytes: t.bytes,
                    direction: direction(copy),
                    src: memory(src),
                    dst: memory(dst),
                }
            }
        }
        KIND_MEMCPY2 => {
            let Some(p) = read::<MemcpyPtoP>(bytes) else { return Decoded::Short(kind) };
            let t = p.transfer;
            Line::Peer {
                device: t.device_id,
                context: t.context_id,
                stream: t.stream_id,
                start: t.start,
                end: t.end,
                correlation: p.correlation_id,
                bytes: t.bytes,
                src_device: p.src_device_id,
                dst_device: p.dst_device_id,
            }
        }
        KIND_SYNCHRONIZATION => {
            let Some(s) = read::<Synchronization>(bytes) else { return Decoded::Short(kind) };
            Line::Sync {
                kind: sync_kind(s.sync_type),
                context: s.context_id,
                stream: (s.stream_id != SYNC_INVALID).then_some(s.stream_id),
                start: s.start,
                end: s.end,
                correlation: s.correlation_id,
            }
        }
        KIND_MARKER => {
            let Some(m) = read::<Marker>(bytes) else { return Decoded::Short(kind) };
            let phase = if m.flags & MARKER_START != 0 {
                MarkerPhase::Start
            } else if m.flags & MARKER_END != 0 {
                MarkerPhase::End
            } else if m.flags & MARKER_INSTANTANEOUS != 0 {
                MarkerPhase::Instant
            } else {
                return Decoded::Skipped(kind);
            };
            let thread = match object(m.object_kind, m.object_id) {
                Some(("thread", id)) => u64::from(id),
                _ => 0,
            };
            Line::Marker {
                phase,
                id: m.id,
                thread,
                time: m.timestamp,
                name: text(lookup, m.name),
                domain: text(lookup, m.domain),
            }
        }
        KIND_DRIVER | KIND_RUNTIME => {
            let Some(a) = read::<Api>(bytes) else { return Decoded::Short(kind) };
            let domain = if kind == KIND_DRIVER { ApiDomain::Driver } else { ApiDomain::Runtime };
            let Some(name) = lookup.call(domain, a.cbid) else { return Decoded::Unkept };
            Line::Api {
                domain,
                name,
                thread: u64::from(a.thread_id),
                start: a.start,
                end: a.end,
                correlation: a.correlation_id,
                status: a.return_value,
            }
        }
        KIND_NAME => {
            let Some(n) = read::<Name>(bytes) else { return Decoded::Short(kind) };
            let Some((object, id)) = object(n.object_kind, n.object_id) else {
                return Decoded::Skipped(kind);
            };
            Line::Name { object: object.into(), id, name: text(lookup, n.name) }
        }
        KIND_CONTEXT => {
            let Some(c) = read::<Context>(bytes) else { return Decoded::Short(kind) };
            Line::Context {
                context: c.context_id,
                device: c.device_id,
                null_stream: u32::from(c.null_stream_id),
            }
        }
        KIND_STREAM => {
            let Some(s) = read::<Stream>(bytes) else { return Decoded::Short(kind) };
            Line::Stream {
                context: s.context_id,
                stream: s.stream_id,
                // The header's `uint32_t` holds a C `int`: -5 is the greatest priority.
                priority: s.priority as i32,
                non_blocking: s.flag == STREAM_NON_BLOCKING,
            }
        }
        KIND_DEVICE => {
            let Some(d) = read::<Device>(bytes) else { return Decoded::Short(kind) };
            Line::Device {
                id: d.id,
                name: text(lookup, d.name),
                compute_capability: d.compute_capability,
                multiprocessors: d.multiprocessors,
                copy_engines: d.memcpy_engines,
            }
        }
        _ => return Decoded::Skipped(kind),
    };
    Decoded::Line(line)
}

#[cfg(test)]
#[path = "decode_tests.rs"]
mod tests;
