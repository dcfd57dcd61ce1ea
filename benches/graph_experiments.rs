//! Experiments behind docs/measurements.md's answers on CUDA graphs; each prints its figures
//! as lines of text. Not a criterion bench: some need a fresh process per run.
//!
//! - `node-cost <perturbation>`: GPU time per kernel node of a graph of 100 empty kernels,
//!   before and after one kind of other GPU work in the same process (run it once per
//!   perturbation, each in a fresh process). Perturbations: `none`, `idle` (the host sleeps
//!   0.2 s), `streams` (3 new streams, no work), `empty-same` (100 empty kernels on the
//!   graph's stream), `empty-other` (one empty kernel on each of 3 new streams), `copies`
//!   (a copy in and out on the graph's stream), `produce` (one real kernel there), `alloc`
//!   (256 MiB of device memory), `dag-build` (the DAG's buffers and graph, nothing run),
//!   `dag-streams` (then the DAG once by stream), `dag-graph` (then the DAG's graph once).
//! - `node-alternate`: the same graph's GPU time per node when each launch follows one kind
//!   of other activity (nothing, the host idle for 20 µs to 20 ms, a sleeping kernel
//!   elsewhere, launches by stream, another graph, the DAG, a kernel that sweeps the L2
//!   cache), interleaved, 20 rounds.
//! - `node-why`: the two explanations left for `node-alternate`'s slow launches, each able to
//!   fail. In blocks of 21 rounds after nothing, or the host idle for 2, 20 or 100 ms: the
//!   launch on an idle stream (as the lesson times it); the same launch queued behind a 50 µs
//!   sleeping kernel, so its start event and its nodes are on the GPU before it gets there;
//!   and the SM clock, from a kernel that spins a known number of clock ticks and stamps
//!   `%globaltimer` at both ends.
//! - `edges`: GPU time between two stamping kernels (`%globaltimer`) with one operation
//!   between them: nothing, a 4 KB memcpy either way, a copy kernel, a wait on another
//!   stream's event; queued behind a sleeping kernel by stream, or replayed as a graph.
//! - `variants`: what `cuGraphUpload` and `CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY`
//!   change, on the DAG and on a graph captured at high priority behind low-priority work.
//! - `breakdown`: one replay of a few DAG shapes by stream and as a graph, recorded with
//!   CUPTI: where the GPU time goes (device spans and host calls, µs from the first call).
use std::time::{Duration, Instant};

use streamlab::lab::harness::stats::Stats;
use streamlab::lab::record::recorder::Recorder;
use streamlab::lessons::graph::replay::Rounds;
use streamlab::lessons::graph::sweep::{build, Copies, Shape, Sweep};
use streamlab::runtime::graph::{capture, CaptureMode, GraphExec, Instantiate};
use streamlab::runtime::{DeviceBuffer, Gpu, HostBuffer, LaunchConfig, Result, Stream};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let Ok(gpu) = Gpu::new(0) else {
        println!("graph_experiments: no CUDA GPU, nothing run");
        return;
    };
    let outcome = match args.first().map(String::as_str) {
        Some("node-cost") => node_cost(&gpu, args.get(1).map_or("none", String::as_str)),
        Some("variants") => variants(&gpu),
        Some("node-alternate") => node_alternate(&gpu),
        Some("node-why") => node_why(&gpu),
        Some("edges") => edges(&gpu),
        Some("breakdown") => breakdown(&gpu),
        _ => {
            println!("usage: graph_experiments node-cost <perturbation> | node-alternate | node-why | edges | variants | breakdown");
            Ok(())
        }
    };
    if let Err(e) = outcome {
        eprintln!("graph_experiments: {e}");
        std::process::exit(1);
    }
}

const SEED: Shape = Shape { elements: 65536, chain: 1, copies: Copies::Memcpy };

/// 100 empty kernels on `s`: what the node experiments' graphs hold.
fn empties(gpu: &Gpu, s: &Stream) -> Result<()> {
    (0..100).try_for_each(|_| gpu.empty(s))
}

/// [`empties`] captured on `s`, instantiated and uploaded.
fn empty_graph(gpu: &Gpu, s: &Stream) -> Result<GraphExec> {
    Ok(build(s, Instantiate::Plain, true, || capture(s, CaptureMode::Global, |s| empties(gpu, s)))?
        .0)
}

/// GPU µs per node of one launch of the 100-node `exec`, timed alone on `s`.
fn node_us(rounds: &Rounds, s: &Stream, exec: &GraphExec) -> Result<f64> {
    Ok(rounds.run(1, s, || exec.launch(s))?.value("gpu") * 1e3 / 100.0)
}

/// Median GPU µs per node of 30 single launches of the 100-node `exec`.
fn per_node(rounds: &Rounds, s: &Stream, exec: &GraphExec) -> Result<Stats> {
    let us = (0..30).map(|_| node_us(rounds, s, exec)).collect::<Result<Vec<_>>>()?;
    Ok(Stats::of(&us))
}

fn node_cost(gpu: &Gpu, perturbation: &str) -> Result<()> {
    let s = Stream::non_blocking(gpu, "empties")?;
    let rounds = Rounds::new(gpu)?;
    let exec = empty_graph(gpu, &s)?;
    for _ in 0..5 {
        rounds.run(1, &s, || exec.launch(&s))?;
    }
    let before = per_node(&rounds, &s, &exec)?;
    let started = Instant::now();
    // Kept alive until the second measurement: what they hold stays allocated.
    let mut keep: Vec<Box<dyn std::any::Any>> = Vec::new();
    match perturbation {
        "none" => {}
        "idle" => std::thread::sleep(Duration::from_millis(200)),
        "streams" => {
            for i in 0..3 {
                keep.push(Box::new(Stream::non_blocking(gpu, format!("other-{i}"))?));
            }
        }
        "empty-same" => {
            empties(gpu, &s)?;
            s.synchronize()?;
        }
        "empty-other" => {
            for i in 0..3 {
                let o = Stream::non_blocking(gpu, format!("other-{i}"))?;
                gpu.empty(&o)?;
                o.synchronize()?;
                keep.push(Box::new(o));
            }
        }
        "copies" | "produce" => {
            let host = HostBuffer::<f32>::pinned(gpu, 65536)?;
            let (a, b) = (DeviceBuffer::zeroed(gpu, 65536)?, DeviceBuffer::zeroed(gpu, 65536)?);
            if perturbation == "copies" {
                s.copy_to_device(&host, &a)?;
                s.copy_to_host(&a, &host)?;
            } else {
                gpu.produce(&s, &a, &b, 0.5)?;
            }
            s.synchronize()?;
            keep.push(Box::new((host, a, b)));
        }
        "alloc" => keep.push(Box::new(DeviceBuffer::<f32>::zeroed(gpu, 64 << 20)?)),
        "dag-build" | "dag-streams" | "dag-graph" => {
            let sweep = Sweep::new(gpu, vec![SEED], 1, 1)?;
            match perturbation {
                "dag-streams" => drop(sweep.run(gpu, 0)?),
                "dag-graph" => drop(sweep.run(gpu, 1)?),
                _ => {}
            }
            keep.push(Box::new(sweep));
        }
        other => {
            return Err(streamlab::Error::InvalidInput(
                format!("unknown perturbation {other}").into(),
            ))
        }
    }
    let took = started.elapsed().as_secs_f64() * 1e3;
    let after = per_node(&rounds, &s, &exec)?;
    println!(
        "node-cost {perturbation:<12} before {:.3} us/node [{:.3}..{:.3}]  after {:.3} us/node [{:.3}..{:.3}]  after/before {:.3}  (perturbation took {took:.1} ms)",
        before.median, before.min, before.max, after.median, after.min, after.max,
        after.median / before.median
    );
    drop(keep);
    Ok(())
}

/// Median wall, GPU and issue µs per replay of `n` replays, 15 times.
fn steady(sweep: &Sweep, exec: &GraphExec) -> Result<[f64; 3]> {
    let mut runs = Vec::new();
    for _ in 0..15 {
        runs.push(sweep.time(exec, 20)?);
    }
    Ok([
        Stats::of_each(&runs, |s| s.ms).median * 1e3,
        Stats::of_each(&runs, |s| s.value("gpu")).median * 1e3,
        Stats::of_each(&runs, |s| s.value("issue")).median * 1e3,
    ])
}

fn variants(gpu: &Gpu) -> Result<()> {
    let shapes = vec![
        SEED,
        Shape { chain: 16, ..SEED },
        Shape { elements: 1024, chain: 64, copies: Copies::None },
    ];
    let sweep = Sweep::new(gpu, shapes.clone(), 1, 1)?;
    let c = sweep.launch_stream();
    for (k, shape) in shapes.iter().enumerate() {
        // The first launch of a fresh executable graph, uploaded first or not (10 each).
        let mut first = [Vec::new(), Vec::new()];
        for _ in 0..10 {
            for (i, upload) in [false, true].into_iter().enumerate() {
                let (exec, _) = build(c, Instantiate::Plain, upload, || sweep.capture(gpu, k))?;
                c.synchronize()?;
                first[i].push(sweep.time(&exec, 1)?.ms * 1e3);
            }
        }
        let [no, up] = first.map(|f| Stats::of(&f).median);
        println!(
            "variants {}: first launch wall {no:.1} us without cuGraphUpload, {up:.1} us after it",
            shape.label()
        );
        for (name, how, upload) in [
            ("plain+upload", Instantiate::Plain, true),
            ("plain, no upload", Instantiate::Plain, false),
            ("use-node-priority+upload", Instantiate::UseNodePriority, true),
        ] {
            let (exec, _) = build(c, how, upload, || sweep.capture(gpu, k))?;
            let [wall, g, issue] = steady(&sweep, &exec)?;
            println!("variants {}: {name:<26} steady wall {wall:.2} us, GPU {g:.2} us, issue {issue:.2} us per replay", shape.label());
        }
    }
    priority(gpu)
}

/// A graph of 8 short kernels captured on a high-priority stream and launched on a
/// low-priority one while low-priority sleep kernels fill the GPU: its time from launch to
/// end, instantiated without and with USE_NODE_PRIORITY.
fn priority(gpu: &Gpu) -> Result<()> {
    let (lo, hi) = gpu.info.priority_range;
    let high = Stream::non_blocking_with_priority(gpu, "captured-high", hi)?;
    let launch = Stream::non_blocking_with_priority(gpu, "launch-low", lo)?;
    let background = Stream::non_blocking_with_priority(gpu, "background-low", lo)?;
    let data = DeviceBuffer::<f32>::zeroed(gpu, 65536)?;
    let chain = |s: &Stream| (0..8).try_for_each(|_| gpu.scale(s, &data, 0.5, 0.75));
    let rounds = Rounds::new(gpu)?;
    // 40 waves of 20 µs blocks: about 0.8 ms of low-priority work ahead of the graph.
    let waves = 40 * gpu.info.multiprocessors as u32 * gpu.info.resident_blocks_per_sm(256);
    let cycles = (20e-6 * gpu.info.clock_khz as f64 * 1e3) as u64;
    for (name, how) in
        [("plain", Instantiate::Plain), ("use-node-priority", Instantiate::UseNodePriority)]
    {
        let (exec, _) = build(&launch, how, true, || capture(&high, CaptureMode::Global, chain))?;
        let mut us = Vec::new();
        for _ in 0..10 {
            gpu.sleep(&background, LaunchConfig::new((waves, 1, 1), (256, 1, 1)), cycles)?;
            std::thread::sleep(Duration::from_micros(50));
            us.push(rounds.run(1, &launch, || exec.launch(&launch))?.value("gpu") * 1e3);
            background.synchronize()?;
        }
        let alone = rounds.run(1, &launch, || exec.launch(&launch))?.value("gpu") * 1e3;
        println!("variants priority {name:<18}: graph behind low-priority work {:.1} us (median of 10), alone {alone:.1} us", Stats::of(&us).median);
    }
    Ok(())
}

fn breakdown(gpu: &Gpu) -> Result<()> {
    let shapes = vec![
        SEED,
        Shape { copies: Copies::Kernels, ..SEED },
        Shape { copies: Copies::None, ..SEED },
        Shape { elements: 1024, ..SEED },
        Shape { chain: 16, ..SEED },
    ];
    let sweep = Sweep::new(gpu, shapes.clone(), 1, 1)?;
    let streams = sweep.streams();
    let mut recorder = Recorder::new();
    for (k, shape) in shapes.iter().enumerate() {
        for v in [2 * k, 2 * k + 1] {
            recorder.record(gpu, &streams, || sweep.run(gpu, v))?;
            let (sample, rec) = recorder.record(gpu, &streams, || sweep.run(gpu, v))?;
            let how = if v % 2 == 0 { "streams" } else { "graph" };
            let origin = rec.host.iter().map(|h| h.start_ms).fold(f64::INFINITY, f64::min);
            let us = |ms: f64| (ms - origin) * 1e3;
            let (first, last) = rec
                .spans
                .iter()
                .fold((f64::INFINITY, 0f64), |(a, b), s| (a.min(s.start_ms), b.max(s.end_ms)));
            println!(
                "breakdown {} {how}: events GPU {:.2} us, wall {:.2} us, issue {:.2} us; device spans from {:.2} to {:.2} us ({:.2} us), recorder {:?}",
                shape.label(),
                sample.value("gpu") * 1e3,
                sample.ms * 1e3,
                sample.value("issue") * 1e3,
                us(first),
                us(last),
                (last - first) * 1e3,
                rec.source
            );
            for s in &rec.spans {
                println!(
                    "  device {:<8} {:<24} {:>9.2} .. {:>9.2} us ({:>7.2} us)",
                    s.stream,
                    s.label,
                    us(s.start_ms),
                    us(s.end_ms),
                    s.ms() * 1e3
                );
            }
            for h in &rec.host {
                println!(
                    "  host   {:<40} {:>9.2} .. {:>9.2} us",
                    h.name,
                    us(h.start_ms),
                    us(h.end_ms)
                );
            }
        }
    }
    Ok(())
}

/// Spins the host for `us` microseconds (thread::sleep is too coarse below a millisecond).
fn spin(us: u64) -> Result<()> {
    let until = Instant::now() + Duration::from_micros(us);
    while Instant::now() < until {}
    Ok(())
}

type Activity<'a> = (&'static str, Box<dyn Fn() -> Result<()> + 'a>);

fn node_alternate(gpu: &Gpu) -> Result<()> {
    let s = Stream::non_blocking(gpu, "empties")?;
    let other = Stream::non_blocking(gpu, "other")?;
    let rounds = Rounds::new(gpu)?;
    let (exec, exec2) = (empty_graph(gpu, &s)?, empty_graph(gpu, &s)?);
    let sweep = Sweep::new(gpu, vec![SEED], 1, 1)?;
    let (a, b) = (DeviceBuffer::zeroed(gpu, 16 << 20)?, DeviceBuffer::zeroed(gpu, 16 << 20)?);
    let one = LaunchConfig::new((1, 1, 1), (1, 1, 1));
    let ms2 = (2e-3 * gpu.info.clock_khz as f64 * 1e3) as u64;
    let activities: Vec<Activity<'_>> = vec![
        ("back-to-back", Box::new(|| Ok(()))),
        ("host idle 20 us", Box::new(|| spin(20))),
        ("host idle 200 us", Box::new(|| spin(200))),
        ("host idle 2 ms", Box::new(|| spin(2000))),
        ("host idle 20 ms", Box::new(|| spin(20_000))),
        (
            "1 block sleeps 2 ms elsewhere",
            Box::new(|| {
                gpu.sleep(&other, one, ms2)?;
                other.synchronize()
            }),
        ),
        (
            "100 empty kernels by stream",
            Box::new(|| {
                empties(gpu, &s)?;
                s.synchronize()
            }),
        ),
        (
            "another 100-node graph",
            Box::new(|| {
                exec2.launch(&s)?;
                s.synchronize()
            }),
        ),
        ("the DAG's graph (other streams)", Box::new(|| sweep.run(gpu, 1).map(drop))),
        (
            "a 16M-element kernel (L2 swept)",
            Box::new(|| {
                gpu.produce(&other, &a, &b, 0.5)?;
                other.synchronize()
            }),
        ),
    ];
    for _ in 0..10 {
        rounds.run(1, &s, || exec.launch(&s))?;
    }
    let mut samples: Vec<Vec<(f64, f64)>> = vec![Vec::new(); activities.len()];
    for _ in 0..20 {
        for (i, (_, before)) in activities.iter().enumerate() {
            before()?;
            let t = rounds.run(1, &s, || exec.launch(&s))?;
            samples[i].push((t.value("gpu") * 1e3 / 100.0, t.value("issue") * 1e3));
        }
    }
    for ((name, _), xs) in activities.iter().zip(&samples) {
        let node = Stats::of_each(xs, |x| x.0);
        let issue = Stats::of_each(xs, |x| x.1);
        println!(
            "node-alternate {name:<34} {:.3} us/node [{:.3}..{:.3}], cuGraphLaunch {:.2} us",
            node.median, node.min, node.max, issue.median
        );
    }
    Ok(())
}

fn node_why(gpu: &Gpu) -> Result<()> {
    let s = Stream::non_blocking(gpu, "empties")?;
    let rounds = Rounds::new(gpu)?;
    let exec = empty_graph(gpu, &s)?;
    let one = LaunchConfig::new((1, 1, 1), (1, 1, 1));
    let ticks_per_us = gpu.info.clock_khz as f64 / 1e3;
    let (queue, probe) = ((50.0 * ticks_per_us) as u64, (20.0 * ticks_per_us) as u64);
    let stamps = DeviceBuffer::<u64>::zeroed(gpu, 2)?;
    println!("node-why rated SM clock {:.0} MHz", ticks_per_us);
    for _ in 0..10 {
        rounds.run(1, &s, || exec.launch(&s))?;
    }
    for (name, idle_us) in [
        ("back-to-back", 0),
        ("host idle 2 ms", 2000),
        ("host idle 20 ms", 20_000),
        ("host idle 100 ms", 100_000),
    ] {
        let (mut alone, mut queued, mut mhz) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..21 {
            spin(idle_us)?;
            alone.push(node_us(&rounds, &s, &exec)?);
        }
        for _ in 0..21 {
            spin(idle_us)?;
            gpu.sleep(&s, one, queue)?;
            queued.push(node_us(&rounds, &s, &exec)?);
        }
        for _ in 0..21 {
            spin(idle_us)?;
            gpu.sleep_stamped(&s, probe, &stamps)?;
            s.synchronize()?;
            let v = stamps.to_vec()?;
            mhz.push(probe as f64 * 1e3 / (v[1] as f64 - v[0] as f64));
        }
        let (a, q, c) = (Stats::of(&alone), Stats::of(&queued), Stats::of(&mhz));
        println!(
            "node-why {name:<17} alone {:.3} us/node [{:.3}..{:.3}], queued {:.3} us/node [{:.3}..{:.3}], SM clock {:.0} MHz [{:.0}..{:.0}]",
            a.median, a.min, a.max, q.median, q.min, q.max, c.median, c.min, c.max
        );
    }
    Ok(())
}

fn edges(gpu: &Gpu) -> Result<()> {
    let s = Stream::non_blocking(gpu, "edges")?;
    let t = Stream::non_blocking(gpu, "edges-other")?;
    let stamps = DeviceBuffer::<u64>::zeroed(gpu, 4)?;
    let host = HostBuffer::<f32>::pinned(gpu, 1024)?;
    let (dev, dev2) = (DeviceBuffer::<f32>::zeroed(gpu, 1024)?, DeviceBuffer::zeroed(gpu, 1024)?);
    let (e1, e2) = (
        streamlab::runtime::Event::without_timing(gpu)?,
        streamlab::runtime::Event::without_timing(gpu)?,
    );
    let one = LaunchConfig::new((1, 1, 1), (1, 1, 1));
    let queue_us = (100e-6 * gpu.info.clock_khz as f64 * 1e3) as u64;
    let middles = [
        "nothing (kernel -> kernel)",
        "memcpy HtoD 4 KB",
        "memcpy DtoH 4 KB",
        "memcpy DtoD 4 KB",
        "copy kernel HtoD 4 KB",
        "copy kernel DtoH 4 KB",
        "event wait, other stream",
    ];
    let enqueue = |m: usize, queued: bool| -> Result<()> {
        if queued {
            gpu.sleep(&s, one, queue_us)?;
        }
        gpu.sleep_stamped(&s, 0, stamps.slice(0..2)?)?;
        match m {
            0 => {}
            1 => s.copy_to_device(&host, &dev)?,
            2 => s.copy_to_host(&dev, &host)?,
            3 => s.copy_on_device(&dev, &dev2)?,
            4 => gpu.copy_kernel_to_device(&s, &host, &dev)?,
            5 => gpu.copy_kernel_to_host(&s, &dev, &host)?,
            _ => {
                streamlab::runtime::stream::fork(&e1, &s, &[&t])?;
                gpu.sleep_stamped(&t, 0, stamps.slice(2..4)?)?;
                return streamlab::runtime::stream::join(std::slice::from_ref(&e2), &s, &[&t]);
            }
        }
        gpu.sleep_stamped(&s, 0, stamps.slice(2..4)?)
    };
    let gap = || -> Result<f64> {
        let v = stamps.to_vec()?;
        Ok((v[2] as f64 - v[1] as f64) / 1e3)
    };
    for (m, name) in middles.iter().enumerate() {
        let (mut by_stream, mut in_graph) = (Vec::new(), Vec::new());
        let (exec, _) = build(&s, Instantiate::Plain, true, || {
            capture(&s, CaptureMode::Global, |_| enqueue(m, false))
        })?;
        for _ in 0..21 {
            enqueue(m, true)?;
            s.synchronize()?;
            by_stream.push(gap()?);
            exec.launch(&s)?;
            s.synchronize()?;
            in_graph.push(gap()?);
        }
        let (a, b) = (Stats::of(&by_stream[1..]), Stats::of(&in_graph[1..]));
        println!(
            "edges {name:<28} by stream (queued) {:.2} us [{:.2}..{:.2}], in a graph {:.2} us [{:.2}..{:.2}]",
            a.median, a.min, a.max, b.median, b.min, b.max
        );
    }
    Ok(())
}
