//! # Peer copies between two GPUs
//!
//! Two GPUs in one machine can copy each other's memory directly, over NVLink or PCIe,
//! once peer access is on. Without it the bytes go down to host memory and back up: two
//! copies, each limited by the host link, one after the other.
//!
//! The seed (cuda-samples' `simpleP2P`, and the multi-GPU part of the LLM-training notes):
//!
//! ```text
//! cudaSetDevice(0);  cudaDeviceEnablePeerAccess(1, 0);
//! cudaMemcpyPeerAsync(d1, 1, d0, 0, bytes, s0);           // GPU 0 -> GPU 1 over the link
//! // staged: cudaMemcpyAsync(h, d0, bytes, D2H, s0); cudaEventRecord(e, s0);
//! //         cudaStreamWaitEvent(s1, e);  cudaMemcpyAsync(d1, h, bytes, H2D, s1);
//! ```
//!
//! In Rust: `peer::enable_access(&gpu0, &gpu1)`, `s0.copy_peer(&d0, &d1)`; staged,
//! `s0.copy_to_host(&d0, &host)`, `e.record(&s0)`, `s1.wait_event(&e)`,
//! `s1.copy_to_device(&host, &d1)`. `peer::link` reports what joins the GPUs:
//! `cuDeviceCanAccessPeer`, `cuDeviceGetP2PAttribute`, and NVML's count of NVLink links.
//!
//! The bound of the staged path is its two copies back to back (each measured here); the
//! peer copy's is the link, which the two directions share only if it is half-duplex.
use serde::Serialize;

use crate::lab::harness::data::random_inputs;
use crate::lab::harness::lesson::no_such_version;
use crate::lab::kit::devices;
use crate::lab::kit::stream_pipeline::Bracket;
use crate::lab::{args, fixed, t, Checks, Lesson, Measured, Plan, Report, Sample, Text, WorkModel};
use crate::runtime::memory::copy_to_device_landed;
use crate::runtime::peer::{self, Link};
use crate::runtime::{AsContext, DeviceBuffer, Event, Gpu, HostBuffer, Result, Stream};

#[derive(clap::Args, Debug, Clone, Serialize)]
pub struct Args {
    /// MiB copied each way [1..=16384]. Try 4: each copy's fixed cost starts to show.
    #[arg(long, default_value_t = 256, value_parser = args::whole(1usize..=16384))]
    pub mib: usize,
}

/// GPU 0 to host, then host to GPU 1: the path without peer access.
pub const STAGED: usize = 0;
/// One `cuMemcpyPeerAsync`, GPU 0 to GPU 1.
pub const PEER_ONE_WAY: usize = 1;
/// Both directions at once, one stream on each GPU.
pub const PEER_BOTH_WAYS: usize = 2;
/// The versions' names, indexed by the constants above.
pub const VERSIONS: [&str; 3] =
    ["staged through pinned host memory", "peer copy, one way", "peer copies, both ways at once"];
/// Parts of the staged version: its two copies, timed on their own GPUs.
pub const TO_HOST_MS: &str = "GPU 0 to host, ms";
pub const TO_PEER_MS: &str = "host to GPU 1, ms";

pub struct P2p {
    /// The second GPU, kept open (its kernels and context) for as long as the lesson.
    _peer: Gpu,
    /// GPU 0 to GPU 1, and back.
    pub links: [Link; 2],
    /// A stream on each GPU.
    streams: [Stream; 2],
    inputs: [Vec<f32>; 2],
    /// Each GPU's data, and where the other GPU's lands on it.
    src: [DeviceBuffer<f32>; 2],
    pub dst: [DeviceBuffer<f32>; 2],
    staging: HostBuffer<f32>,
    /// Around the staged path's two copies: two events on each GPU, and the hand-over.
    marks: [Event; 4],
    handover: Event,
    bracket: Bracket,
}

fn elements(a: &Args) -> usize {
    a.mib << 18
}

impl P2p {
    fn staged(&self) -> Result<Sample> {
        let [s0, s1] = &self.streams;
        let [m0, m1, m2, m3] = &self.marks;
        let ms = self.bracket.time(&self.streams, || {
            m0.record(s0)?;
            s0.copy_to_host(&self.src[0], &self.staging)?;
            m1.record(s0)?;
            self.handover.record(s0)?;
            s1.wait_event(&self.handover)?;
            m2.record(s1)?;
            s1.copy_to_device(&self.staging, &self.dst[0])?;
            m3.record(s1)
        })?;
        Ok(Sample::ms(ms).part(TO_HOST_MS, m1.elapsed_ms(m0)?).part(TO_PEER_MS, m3.elapsed_ms(m2)?))
    }

    fn peer_copies(&self, both: bool) -> Result<Sample> {
        let [s0, s1] = &self.streams;
        let ms = self.bracket.time(&self.streams, || {
            s0.copy_peer(&self.src[0], &self.dst[0])?;
            if both {
                s1.copy_peer(&self.src[1], &self.dst[1])?;
            }
            Ok(())
        })?;
        Ok(Sample::ms(ms))
    }

    fn bytes(&self) -> f64 {
        (self.inputs[0].len() * 4) as f64
    }
}

impl Lesson for P2p {
    const NAME: &'static str = "p2p";
    const SUMMARY: &'static str =
        "two GPUs: a copy staged through host memory vs a peer copy over the link, one way and both";
    type Args = Args;

    fn versions(_: &Args) -> Vec<String> {
        VERSIONS.iter().map(|v| v.to_string()).collect()
    }

    fn plan(a: &Args, model: &WorkModel) -> Result<Plan> {
        let n = elements(a);
        Ok(Plan::new()
            .gpus(2)
            .host::<f32>(n, 3)? // two inputs and the staging buffer
            .device::<f32>(n, 2)? // per GPU: its data and the other's
            .work(6.0 * model.copy_ms(n), "--mib"))
    }

    fn setup(gpu: &Gpu, a: &Args, seed: u64) -> Result<P2p> {
        let n = elements(a);
        let peer = devices::others(gpu, 1)?.remove(0);
        let links = [
            peer::link(gpu.context(), peer.context())?,
            peer::link(peer.context(), gpu.context())?,
        ];
        if links[0].access && links[1].access {
            peer::enable_access(gpu.context(), peer.context())?;
            peer::enable_access(peer.context(), gpu.context())?;
        }
        let inputs = [random_inputs(n, seed), random_inputs(n, seed ^ 0x9e37)];
        let streams =
            [Stream::non_blocking(gpu, "copies")?, Stream::non_blocking(&peer, "copies")?];
        Ok(P2p {
            src: [
                DeviceBuffer::from_slice(gpu, &inputs[0])?,
                DeviceBuffer::from_slice(&peer, &inputs[1])?,
            ],
            dst: [DeviceBuffer::zeroed(&peer, n)?, DeviceBuffer::zeroed(gpu, n)?],
            staging: HostBuffer::pinned(gpu, n)?,
            marks: [Event::new(gpu)?, Event::new(gpu)?, Event::new(&peer)?, Event::new(&peer)?],
            handover: Event::without_timing(gpu)?,
            bracket: Bracket::for_streams(&streams)?,
            streams,
            inputs,
            links,
            _peer: peer,
        })
    }

    fn version(&mut self, _gpu: &Gpu, v: usize) -> Result<Sample> {
        match v {
            STAGED => self.staged(),
            PEER_ONE_WAY => self.peer_copies(false),
            PEER_BOTH_WAYS => self.peer_copies(true),
            _ => no_such_version::<Self>(v),
        }
    }

    fn streams(&self) -> Vec<&Stream> {
        self.streams.iter().collect()
    }

    /// Each version again with the destinations cleared first, then every byte compared
    /// with what was sent.
    fn verify(&mut self, gpu: &Gpu, _m: &Measured, checks: &mut Checks) -> Result<()> {
        let zeros = vec![0f32; self.inputs[0].len()];
        for (v, name) in VERSIONS.iter().enumerate() {
            self.dst.iter().try_for_each(|d| copy_to_device_landed(&zeros, d))?;
            self.version(gpu, v)?;
            checks.bitwise(
                &format!("{name}: GPU 1 got GPU 0's bytes"),
                &self.dst[0].to_vec()?,
                &self.inputs[0],
            );
            if v == PEER_BOTH_WAYS {
                checks.bitwise(
                    &format!("{name}: GPU 0 got GPU 1's bytes"),
                    &self.dst[1].to_vec()?,
                    &self.inputs[1],
                );
            }
        }
        Ok(())
    }

    fn explain(&self, m: &Measured, r: &mut Report) {
        let gbs = |ms: f64| self.bytes() / ms / 1e6;
        let staged = m.version(STAGED);
        let one = m.version(PEER_ONE_WAY).time.median;
        let both = m.version(PEER_BOTH_WAYS).time.median;
        let (down, up) = (staged.part(TO_HOST_MS), staged.part(TO_PEER_MS));
        r.figure("staged, GB/s", gbs(staged.time.median), "GB/s");
        r.figure("peer copy one way, GB/s", gbs(one), "GB/s");
        r.figure("peer copies both ways, GB/s (sum)", 2.0 * gbs(both), "GB/s");
        r.figure("bound of the staged path (its two copies back to back)", down + up, "ms");
        let link = &self.links[0];
        let (kind, rank) = (Text::label(link.kind()), link.performance_rank);
        let access = if link.access { t!("p2p.access_on") } else { t!("p2p.no_access") };
        r.explain(t!("p2p.link", kind, access, rank));
        let (staged, [down, up]) =
            (fixed(gbs(staged.time.median), 1), [down, up].map(|v| fixed(v, 3)));
        r.explain(t!("p2p.staged", down, up, staged));
        if !link.access {
            r.explain(t!("p2p.driver_staged"));
        } else {
            let (gb, x) = (fixed(gbs(one), 1), fixed(m.speedup(), 1));
            r.explain(t!("p2p.peer", ms = fixed(one, 3), gb, x));
            let ratio = 2.0 * gbs(both) / gbs(one);
            let (sum, x) = (fixed(2.0 * gbs(both), 1), fixed(ratio, 2));
            r.explain(if ratio > 1.5 {
                t!("p2p.duplex", sum, x)
            } else {
                t!("p2p.shared", sum, x)
            });
        }
        r.explain(t!("p2p.training"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::harness::args_from;

    #[test]
    fn flags_are_checked_before_the_gpu() {
        let plan = |f: &[&str]| P2p::plan(&args_from::<P2p>(f)?, &WorkModel::H100)?.admit(None);
        assert!(plan(&[]).is_ok());
        let e = args_from::<P2p>(&["--mib", "0"]).unwrap_err().to_string();
        assert!(e.contains("whole number from 1 to 16384"), "{e}");
        let p = P2p::plan(&args_from::<P2p>(&[]).unwrap(), &WorkModel::H100).unwrap();
        assert_eq!((p.gpus, p.nccl), (2, false));
    }
}
