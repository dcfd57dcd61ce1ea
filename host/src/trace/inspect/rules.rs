//! The rules over one window's records and host calls, and [`find`], which runs every rule of
//! a window (the gap rules included) in [`Rule`]'s order. Each rule is O(n log n) in the
//! window's records: pairs of records ask the unions and the host index, which answer by
//! binary search.
use crate::lab::record::span::Work;
use crate::trace::inspect::engines::Engine;
use crate::trace::inspect::findings::{by_row, earliest, Example, Finding, Rule};
use crate::trace::inspect::gap_rules;
use crate::trace::inspect::measure::busy_union;
use crate::trace::inspect::scope::Scope;
use crate::trace::inspect::union::Union;
use crate::trace::inspect::windows::Piece;
use crate::trace::read::model::{ms_since, CallKind, HostMemory, Ns};

/// The findings of one window, in [`Rule`]'s order (all but the late rank and the CPU
/// running ahead, which read more than one window's records).
pub fn find(scope: &Scope) -> Vec<Finding> {
    let gaps = gap_rules::find(scope);
    [
        pageable_copies(scope),
        legacy_default_stream(scope),
        gaps.host_sync_idle,
        gaps.implicit_sync,
        sync_copies(scope),
        gaps.launch_gaps,
        copy_kernel_one_stream(scope),
        alloc_between_work(scope),
        gaps.idle_gap,
    ]
    .into_iter()
    .flatten()
    .collect()
}

fn is_host_copy(kind: Work) -> bool {
    matches!(kind, Work::CopyToDevice | Work::CopyToHost)
}

fn pageable_copies(scope: &Scope) -> Option<Finding> {
    let memory = &scope.p.gpu.memory;
    let pageable: Vec<&Piece> = scope
        .held
        .pieces
        .iter()
        .filter(|piece| {
            is_host_copy(scope.kind(piece)) && memory[piece.index as usize] == HostMemory::Pageable
        })
        .collect();
    let cost: Ns = pageable.iter().map(|piece| piece.end - piece.start).sum();
    let example = earliest(pageable.iter().copied())?;
    Some(Finding::new(Rule::PageableCopy, pageable.len(), scope.ms(cost), scope.example(example)))
}

fn legacy_default_stream(scope: &Scope) -> Option<Finding> {
    // Only blocking streams wait for the legacy one (and it for them); a stream created
    // non-blocking, or one whose flags the records do not give, is not claimed.
    let rows = &scope.p.rows;
    let row = |piece: &Piece| &rows[scope.p.gpu.row[piece.index as usize] as usize];
    let on_engine = scope.held.pieces.iter().filter(|piece| scope.on_engine(piece));
    let legacy: Vec<&Piece> = on_engine.clone().filter(|piece| row(piece).legacy).collect();
    let blocking = on_engine.filter(|piece| row(piece).blocking);
    let blocking = Union::of_sorted(blocking.map(|piece| (piece.start, piece.end)));
    if legacy.is_empty() || blocking.is_empty() {
        return None;
    }
    let legacy_busy = Union::of_sorted(legacy.iter().map(|piece| (piece.start, piece.end)));
    let alone = legacy_busy.length() - legacy_busy.overlap(&blocking);
    let example = earliest(legacy.iter().copied())?;
    let finding = Finding::new(
        Rule::LegacyDefaultStream,
        legacy.len(),
        scope.ms(alone),
        scope.example(example),
    );
    Some(finding)
}

fn copy_kernel_one_stream(scope: &Scope) -> Option<Finding> {
    let compute = busy_union(scope.p, scope.held, |e| e == Engine::Compute);
    let copies = busy_union(scope.p, scope.held, Engine::is_copy);
    let mut pairs: Vec<(Piece, Ns)> = Vec::new();
    for list in by_row(scope.p, &scope.held.pieces) {
        for pair in list.windows(2) {
            let (first, second) = (pair[0], pair[1]);
            let (copy, kernel) = match (scope.kind(&first), scope.kind(&second)) {
                (c, Work::Kernel) if is_host_copy(c) => (first, second),
                (Work::Kernel, c) if is_host_copy(c) => (second, first),
                _ => continue,
            };
            let back_to_back = second.start.saturating_sub(first.end) <= scope.limits.back_to_back;
            let copy_alone = compute.covered(copy.start, copy.end) == 0;
            let kernel_alone = copies.covered(kernel.start, kernel.end) == 0;
            if back_to_back && copy_alone && kernel_alone {
                let shorter = (copy.end - copy.start).min(kernel.end - kernel.start);
                pairs.push((first, shorter));
            }
        }
    }
    let cost: Ns = pairs.iter().map(|(_, ns)| ns).sum();
    let example = earliest(pairs.iter().map(|(piece, _)| piece))?;
    let finding = Finding::new(
        Rule::CopyKernelOneStream,
        pairs.len(),
        scope.ms(cost),
        scope.example(example),
    );
    Some(finding)
}

/// Whether a call is a synchronous copy or memset: a copy or memset call without `Async`.
fn synchronous_call(name: &str) -> bool {
    let copies = ["cuMemcpy", "cudaMemcpy", "cuMemset", "cudaMemset"];
    copies.iter().any(|c| name.starts_with(c)) && !name.contains("Async")
}

fn sync_copies(scope: &Scope) -> Option<Finding> {
    let (gpu, calls) = (&scope.p.gpu, &scope.p.calls);
    let mut matched: Vec<&Piece> = Vec::new();
    let mut blocked: Vec<u32> = Vec::new();
    for piece in &scope.held.pieces {
        let i = piece.index as usize;
        let copy_or_memset = is_host_copy(gpu.kind[i])
            || matches!(gpu.kind[i], Work::CopyOnDevice | Work::CopyPeer | Work::Memset);
        let call = scope.projection.call[i];
        if !copy_or_memset || call == crate::trace::inspect::projection::NONE {
            continue;
        }
        let c = call as usize;
        let name = scope.p.names.get(calls.name[c]);
        // The driver makes an asynchronous copy of pageable memory hold the host: seen as the
        // call returning only once the copy had ended.
        let staged = gpu.memory[i] == HostMemory::Pageable && calls.end[c] >= gpu.end[i];
        if synchronous_call(name) || staged {
            matched.push(piece);
            blocked.push(call);
        }
    }
    blocked.sort_unstable();
    blocked.dedup();
    let cost: Ns = blocked.iter().map(|&c| calls.end[c as usize] - calls.start[c as usize]).sum();
    let example = earliest(matched.iter().copied())?;
    Some(Finding::new(Rule::SyncCopy, matched.len(), scope.ms(cost), scope.example(example)))
}

/// Whether `[start, end)` overlaps one of `intervals` (sorted, disjoint).
fn overlaps(start: Ns, end: Ns, intervals: &[(Ns, Ns)]) -> bool {
    let n = intervals.partition_point(|(from, _)| *from < end);
    n.checked_sub(1).is_some_and(|i| intervals[i].1 > start)
}

fn alloc_between_work(scope: &Scope) -> Option<Finding> {
    let on_engine = scope.held.pieces.iter().filter(|piece| scope.on_engine(piece));
    let first_end = on_engine.clone().map(|piece| piece.end).min()?;
    let last_start = on_engine.map(|piece| piece.start).max()?;
    let calls = &scope.p.calls;
    let between: Vec<usize> = (0..calls.len())
        .filter(|&i| matches!(calls.kind[i], CallKind::Alloc | CallKind::Free))
        .filter(|&i| overlaps(calls.start[i], calls.end[i], &scope.held.intervals))
        .filter(|&i| first_end <= calls.start[i] && last_start >= calls.end[i])
        .collect();
    let &first = between.first()?;
    let cost: Ns = between.iter().map(|&i| calls.end[i] - calls.start[i]).sum();
    let example = Example {
        stream: format!("host {}", scope.p.thread_name(calls.thread[first])),
        label: scope.p.names.get(calls.name[first]).to_string(),
        start_ms: ms_since(scope.origin, calls.start[first]),
    };
    Some(Finding::new(Rule::AllocBetweenWork, between.len(), scope.ms(cost), example))
}
