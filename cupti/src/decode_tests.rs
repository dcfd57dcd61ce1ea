//! Golden records: each is built at the offsets `cupti_activity.h` gives (numbers written
//! here, not `layout`'s names), as long as CUDA 13.0's version of its struct, and decoded.
use std::collections::HashMap;

use super::*;

/// A record of `len` zero bytes with `fields` written at their offsets.
fn record(len: usize, fields: &[(usize, &[u8])]) -> Vec<u8> {
    let mut b = vec![0u8; len];
    for (at, bytes) in fields {
        b[*at..*at + bytes.len()].copy_from_slice(bytes);
    }
    b
}

fn u32s(values: &[u32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_ne_bytes()).collect()
}

/// Strings by made-up pointer, and the kept calls by (domain, cbid).
#[derive(Default)]
struct Table {
    strings: HashMap<u64, &'static str>,
    calls: HashMap<(ApiDomain, u32), &'static str>,
}

impl Lookup for Table {
    fn string(&mut self, pointer: u64) -> String {
        self.strings.get(&pointer).map_or_else(|| format!("?{pointer:x}"), |s| s.to_string())
    }
    fn call(&mut self, domain: ApiDomain, cbid: u32) -> Option<String> {
        self.calls.get(&(domain, cbid)).map(|s| s.to_string())
    }
}

fn table() -> Table {
    let mut t = Table::default();
    t.strings.extend([
        (0x1000, "_Z5scalePfi"),
        (0x2000, "forward"),
        (0x3000, "torch"),
        (0x4000, "copy-stream"),
        (0x5000, "NVIDIA H200"),
    ]);
    t.calls.insert((ApiDomain::Driver, 27), "cuMemAlloc_v2");
    t.calls.insert((ApiDomain::Runtime, 131), "cudaStreamSynchronize_v3020");
    t
}

fn line(bytes: &[u8]) -> Line {
    match decode(bytes, &mut table()) {
        Decoded::Line(l) => l,
        other => panic!("not a line: {other:?}"),
    }
}

#[test]
fn a_kernel_record() {
    // CUpti_ActivityKernel10 and later are 256 bytes or more; the prefix ends at 112.
    let b = record(
        256,
        &[
            (0, &10u32.to_ne_bytes()),
            (16, &1_000u64.to_ne_bytes()),
            (24, &3_500u64.to_ne_bytes()),
            (40, &u32s(&[1, 3, 13])), // deviceId, contextId, streamId
            (52, &u32s(&[4096, 1, 1, 256, 1, 1])),
            (92, &77u32.to_ne_bytes()),
            (104, &0x1000u64.to_ne_bytes()),
        ],
    );
    let expected = Line::Kernel {
        device: 1,
        context: 3,
        stream: 13,
        start: 1_000,
        end: 3_500,
        correlation: 77,
        name: "_Z5scalePfi".into(),
        grid: [4096, 1, 1],
        block: [256, 1, 1],
    };
    assert_eq!(line(&b), expected);
}

#[test]
fn copy_peer_and_memset_records() {
    // Shared by the three: bytes (8), start (16), end (24), deviceId, contextId, streamId (32).
    let common = |kind: u32, head: [u8; 4], len: usize, tail: &[(usize, u32)]| {
        let mut b = record(
            len,
            &[
                (0, &kind.to_ne_bytes()),
                (4, &head),
                (8, &(8u64 << 20).to_ne_bytes()),
                (16, &10u64.to_ne_bytes()),
                (24, &20u64.to_ne_bytes()),
                (32, &u32s(&[2, 4, 7])),
            ],
        );
        for (at, v) in tail {
            b[*at..*at + 4].copy_from_slice(&v.to_ne_bytes());
        }
        line(&b)
    };
    // A pageable host-to-device copy (copyKind 1, srcKind 1, dstKind 3); Memcpy6: 88 bytes.
    let copy = common(1, [1, 1, 3, 0], 88, &[(44, 5)]);
    let expected = Line::Copy {
        device: 2,
        context: 4,
        stream: 7,
        start: 10,
        end: 20,
        correlation: 5,
        bytes: 8 << 20,
        direction: Direction::HostToDevice,
        src: Memory::Pageable,
        dst: Memory::Device,
    };
    assert_eq!(copy, expected);
    // Device to pinned host; static device memory (6) reads as device.
    let Line::Copy { direction, src, dst, .. } = common(1, [2, 6, 2, 0], 88, &[]) else { panic!() };
    assert_eq!((direction, src, dst), (Direction::DeviceToHost, Memory::Device, Memory::Pinned));
    // MemcpyPtoP4: srcDeviceId 44, dstDeviceId 52, correlationId 60.
    let peer = common(22, [10, 3, 3, 0], 80, &[(44, 0), (52, 1), (60, 9)]);
    let expected = Line::Peer {
        device: 2,
        context: 4,
        stream: 7,
        start: 10,
        end: 20,
        correlation: 9,
        bytes: 8 << 20,
        src_device: 0,
        dst_device: 1,
    };
    assert_eq!(peer, expected);
    // A memset's bytes 4..8 are its value; Memset4: 56 bytes.
    let memset = common(2, 0xFFu32.to_ne_bytes(), 56, &[(44, 6)]);
    let expected = Line::Memset {
        device: 2,
        context: 4,
        stream: 7,
        start: 10,
        end: 20,
        correlation: 6,
        bytes: 8 << 20,
    };
    assert_eq!(memset, expected);
}

#[test]
fn synchronization_records() {
    // Synchronization2 (CUDA 13): 48 bytes; type 4, start 8, end 16, correlationId 24,
    // contextId 28, streamId 32, cudaEventId 36.
    let sync = |ty: u32, stream: u32| {
        let b = record(
            48,
            &[
                (0, &38u32.to_ne_bytes()),
                (4, &ty.to_ne_bytes()),
                (8, &100u64.to_ne_bytes()),
                (16, &900u64.to_ne_bytes()),
                (24, &u32s(&[31, 1, stream, u32::MAX])),
            ],
        );
        line(&b)
    };
    let expected = Line::Sync {
        kind: SyncKind::Stream,
        context: 1,
        stream: Some(14),
        start: 100,
        end: 900,
        correlation: 31,
    };
    assert_eq!(sync(3, 14), expected);
    // cuCtxSynchronize names no stream: CUPTI_SYNCHRONIZATION_INVALID_VALUE.
    let Line::Sync { kind, stream, .. } = sync(4, u32::MAX) else { panic!() };
    assert_eq!((kind, stream), (SyncKind::Context, None));
    let Line::Sync { kind, .. } = sync(1, u32::MAX) else { panic!() };
    assert_eq!(kind, SyncKind::Event);
}

#[test]
fn nvtx_markers_start_end_and_instant() {
    // Marker2: flags 4, timestamp 8, id 16, objectKind 20, objectId 24 (pt: processId,
    // threadId), name 40, domain 48; 56 bytes.
    let marker = |flags: u32, name: u64, domain: u64| {
        let b = record(
            56,
            &[
                (0, &12u32.to_ne_bytes()),
                (4, &flags.to_ne_bytes()),
                (8, &5_000u64.to_ne_bytes()),
                (16, &42u32.to_ne_bytes()),
                (20, &2u32.to_ne_bytes()), // CUPTI_ACTIVITY_OBJECT_THREAD
                (24, &u32s(&[4321, 777])),
                (40, &name.to_ne_bytes()),
                (48, &domain.to_ne_bytes()),
            ],
        );
        decode(&b, &mut table())
    };
    let start = Line::Marker {
        phase: MarkerPhase::Start,
        id: 42,
        thread: 777,
        time: 5_000,
        name: "forward".into(),
        domain: "torch".into(),
    };
    assert_eq!(marker(2, 0x2000, 0x3000), Decoded::Line(start));
    // An end has no name; the default domain has no domain string.
    let Decoded::Line(Line::Marker { phase, name, domain, id, .. }) = marker(4, 0, 0) else {
        panic!()
    };
    assert_eq!((phase, name.as_str(), domain.as_str(), id), (MarkerPhase::End, "", "", 42));
    let Decoded::Line(Line::Marker { phase, .. }) = marker(1, 0x2000, 0) else { panic!() };
    assert_eq!(phase, MarkerPhase::Instant);
    // NVTX's synchronization markers (SYNC_ACQUIRE: 8) are not ranges: skipped.
    assert_eq!(marker(8, 0, 0), Decoded::Skipped(12));
}

#[test]
fn api_records_are_named_or_left_out() {
    // CUpti_ActivityAPI: cbid 4, start 8, end 16, processId 24, threadId 28,
    // correlationId 32, returnValue 36; 40 bytes.
    let api = |kind: u32, cbid: u32| {
        let b = record(
            40,
            &[
                (0, &kind.to_ne_bytes()),
                (4, &cbid.to_ne_bytes()),
                (8, &300u64.to_ne_bytes()),
                (16, &450u64.to_ne_bytes()),
                (24, &u32s(&[4321, 99, 12, 2])),
            ],
        );
        decode(&b, &mut table())
    };
    let alloc = Line::Api {
        domain: ApiDomain::Driver,
        name: "cuMemAlloc_v2".into(),
        thread: 99,
        start: 300,
        end: 450,
        correlation: 12,
        status: 2,
    };
    assert_eq!(api(4, 27), Decoded::Line(alloc));
    let Decoded::Line(Line::Api { domain, name, .. }) = api(5, 131) else { panic!() };
    assert_eq!((domain, name.as_str()), (ApiDomain::Runtime, "cudaStreamSynchronize_v3020"));
    // The same cbid in the other domain is another call, not kept.
    assert_eq!(api(5, 27), Decoded::Unkept);
}

#[test]
fn names_contexts_streams_and_devices() {
    // CUpti_ActivityName: objectKind 4, objectId 8 (dcs: deviceId, contextId, streamId),
    // name 24; 32 bytes.
    let b = record(
        32,
        &[
            (0, &11u32.to_ne_bytes()),
            (4, &5u32.to_ne_bytes()), // CUPTI_ACTIVITY_OBJECT_STREAM
            (8, &u32s(&[0, 1, 14])),
            (24, &0x4000u64.to_ne_bytes()),
        ],
    );
    assert_eq!(
        line(&b),
        Line::Name { object: "stream".into(), id: 14, name: "copy-stream".into() }
    );
    // Context3 (CUDA 13): contextId 4, deviceId 8, computeApiKind 12, nullStreamId 14; 32 bytes.
    let b = record(
        32,
        &[
            (0, &9u32.to_ne_bytes()),
            (4, &u32s(&[1, 0])),
            (12, &1u16.to_ne_bytes()),
            (14, &7u16.to_ne_bytes()),
        ],
    );
    assert_eq!(line(&b), Line::Context { context: 1, device: 0, null_stream: 7 });
    // CUpti_ActivityStream: contextId 4, streamId 8, priority 12, flag 16, correlationId 20.
    let stream = |priority: i32, flag: u32| {
        let b = record(
            24,
            &[
                (0, &37u32.to_ne_bytes()),
                (4, &u32s(&[1, 14])),
                (12, &priority.to_ne_bytes()),
                (16, &u32s(&[flag, 3])),
            ],
        );
        line(&b)
    };
    let expected = Line::Stream { context: 1, stream: 14, priority: -5, non_blocking: true };
    assert_eq!(stream(-5, 2), expected);
    let Line::Stream { non_blocking, priority, .. } = stream(0, 1) else { panic!() };
    assert_eq!((non_blocking, priority), (false, 0));
    // Device5 (CUDA 13): numMemcpyEngines 40, numMultiprocessors 44, computeCapability 104,
    // id 112, name 136; 184 bytes.
    let b = record(
        184,
        &[
            (0, &8u32.to_ne_bytes()),
            (40, &u32s(&[3, 132])),
            (104, &u32s(&[9, 0, 0])),
            (136, &0x5000u64.to_ne_bytes()),
        ],
    );
    let expected = Line::Device {
        id: 0,
        name: "NVIDIA H200".into(),
        compute_capability: [9, 0],
        multiprocessors: 132,
        copy_engines: 3,
    };
    assert_eq!(line(&b), expected);
}

#[test]
fn a_skipped_kind_and_cut_records() {
    // CUPTI_ACTIVITY_KIND_OVERHEAD (17) is not read; KERNEL (3) is never enabled.
    assert_eq!(
        decode(&record(40, &[(0, &17u32.to_ne_bytes())]), &mut table()),
        Decoded::Skipped(17)
    );
    assert_eq!(decode(&record(64, &[(0, &3u32.to_ne_bytes())]), &mut table()), Decoded::Skipped(3));
    // Cut short: a kernel record of 100 bytes (its prefix is 112), an API record of 39, a
    // device record that ends before its name, and two bytes of a kind.
    assert_eq!(
        decode(&record(100, &[(0, &10u32.to_ne_bytes())]), &mut table()),
        Decoded::Short(10)
    );
    assert_eq!(decode(&record(39, &[(0, &4u32.to_ne_bytes())]), &mut table()), Decoded::Short(4));
    assert_eq!(decode(&record(136, &[(0, &8u32.to_ne_bytes())]), &mut table()), Decoded::Short(8));
    assert_eq!(decode(&[10, 0], &mut table()), Decoded::Short(0));
}

#[test]
fn decoded_lines_survive_the_file() {
    // What the recorder writes is what the trace command reads back.
    let b = record(
        56,
        &[(0, &12u32.to_ne_bytes()), (4, &2u32.to_ne_bytes()), (40, &0x2000u64.to_ne_bytes())],
    );
    let l = line(&b);
    assert_eq!(Line::parse(&l.to_json_line()), Some(l));
}
