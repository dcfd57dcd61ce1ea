//! The rules over the times a device ran nothing: gaps a host wait explains
//! ([`Rule::HostSyncIdle`]), gaps an allocation or free explains ([`Rule::ImplicitSync`]),
//! short gaps between small kernels while the host was issuing ([`Rule::LaunchGaps`]), and long
//! gaps nothing recorded explains ([`Rule::IdleGap`]). A long gap is counted by one rule only.
//!
//! A launch gap between small kernels `a` and `b` of one stream is the time between them
//! minus what the device ran meanwhile: `(b.start − a.end) − U(a.end, b.start)`, where `U`
//! is the union of the window's work, asked by binary search; "the host was issuing" is a
//! call that started before `b` and ended after `a`, asked of the host index the same way.
use crate::lab::record::span::Work;
use crate::trace::inspect::findings::{by_row, earliest, Finding, Rule};
use crate::trace::inspect::scope::Scope;
use crate::trace::inspect::union::{intersection, Union};
use crate::trace::inspect::windows::Piece;
use crate::trace::read::model::Ns;

/// A time the device ran nothing: `[start, end)`.
type Gap = (Ns, Ns);

/// What the gap rules found in one window.
#[derive(Debug, Default)]
pub(super) struct GapFindings {
    pub host_sync_idle: Option<Finding>,
    pub implicit_sync: Option<Finding>,
    pub launch_gaps: Option<Finding>,
    pub idle_gap: Option<Finding>,
}

pub(super) fn find(scope: &Scope) -> GapFindings {
    let on_engine = scope.held.pieces.iter().filter(|piece| scope.on_engine(piece));
    let device = Union::of_sorted(on_engine.map(|piece| (piece.start, piece.end)));
    // Only the parts of a gap inside the window count (a range marked twice has a gap
    // between its occurrences that is not its own).
    let gaps: Vec<(Ns, Ns)> = device.gaps().collect();
    let inside = intersection(&gaps, &scope.held.intervals);
    let long = inside.into_iter().filter(|(s, e)| e - s > scope.limits.idle_gap);
    let (waited, rest): (Vec<Gap>, Vec<Gap>) =
        long.partition(|&(start, end)| scope.host.waited(scope.device, start, end));
    // A call that began while the device still had work and ran into the gap: the gap is the
    // device drained by it.
    let (allocating, unexplained): (Vec<Gap>, Vec<Gap>) =
        rest.into_iter().partition(|&(start, _)| scope.host.allocating_at(start));
    GapFindings {
        host_sync_idle: gap_finding(scope, Rule::HostSyncIdle, &waited),
        implicit_sync: gap_finding(scope, Rule::ImplicitSync, &allocating),
        launch_gaps: launch_gaps(scope, &device),
        idle_gap: gap_finding(scope, Rule::IdleGap, &unexplained),
    }
}

/// A finding of `gaps`: their count, their summed length, and the first work after the first
/// gap (a gap cut at a window's edge has no work starting right at its end: the next work of
/// the window, or the last before the gap where none follows).
fn gap_finding(scope: &Scope, rule: Rule, gaps: &[(Ns, Ns)]) -> Option<Finding> {
    let &(first_start, first_end) = gaps.first()?;
    let cost: Ns = gaps.iter().map(|(start, end)| end - start).sum();
    let pieces = &scope.held.pieces;
    // Pieces are by start: the first on an engine at or after the gap's end.
    let from = pieces.partition_point(|piece| piece.start < first_end);
    let after = pieces[from..].iter().find(|piece| scope.on_engine(piece));
    let before = || {
        let ended =
            pieces.iter().filter(|piece| scope.on_engine(piece) && piece.end <= first_start);
        ended.max_by_key(|piece| piece.end)
    };
    let example = after.or_else(before)?;
    Some(Finding::new(rule, gaps.len(), scope.ms(cost), scope.example(example)))
}

fn launch_gaps(scope: &Scope, device: &Union) -> Option<Finding> {
    let limits = &scope.limits;
    let is_small = |piece: &Piece| {
        scope.kind(piece) == Work::Kernel && piece.end - piece.start <= limits.small_kernel
    };
    let small = scope.held.pieces.iter().filter(|piece| is_small(piece)).count();
    if small == 0 || small < limits.many_small_kernels {
        return None;
    }
    let host_issuing =
        |from: Ns, to: Ns| !scope.host.calls_recorded || scope.host.issuing(from, to);
    let mut late: Vec<(Piece, Ns)> = Vec::new();
    for list in by_row(scope.p, &scope.held.pieces) {
        for pair in list.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            if !is_small(&a) || !is_small(&b) || b.start <= a.end {
                continue;
            }
            let between = b.start - a.end;
            if between > limits.idle_gap {
                continue;
            }
            let idle = between - device.covered(a.end, b.start);
            if idle > limits.launch_gap && host_issuing(a.end, b.start) {
                late.push((b, idle));
            }
        }
    }
    let cost: Ns = late.iter().map(|(_, idle)| idle).sum();
    let example = earliest(late.iter().map(|(piece, _)| piece))?;
    Some(Finding::new(Rule::LaunchGaps, late.len(), scope.ms(cost), scope.example(example)))
}
