//! The CPU ahead of the GPU ([`Rule::CpuAhead`]), in a range's window: how long after each
//! occurrence ended the work it launched was still running. PyTorch's host code returns
//! from a step long before its kernels have run; that is what keeps a GPU busy, and it is
//! only a problem when the launch queue fills and launches start to block (then the launch
//! calls' time grows to the kernels'), which the finding puts beside it.
use crate::trace::inspect::findings::{earliest, Ahead, Finding, Rule};
use crate::trace::inspect::scope::Scope;
use crate::trace::inspect::windows::Occurrence;
use crate::trace::read::model::{CallKind, Ns};

/// The median of `values` (the lower of the two middle ones); `None` when empty.
fn median(mut values: Vec<Ns>) -> Option<Ns> {
    values.sort_unstable();
    values.get(values.len().saturating_sub(1) / 2).copied()
}

/// The finding for a range window's `occurrences` whose work was launched in them.
pub fn cpu_ahead(scope: &Scope, occurrences: &[Occurrence]) -> Option<Finding> {
    let leads: Vec<Ns> = occurrences
        .iter()
        .filter_map(|o| o.work.map(|(_, last)| last.saturating_sub(o.end)))
        .collect();
    let median_lead = median(leads.clone())?;
    if median_lead <= scope.limits.cpu_ahead {
        return None;
    }
    let max_lead = leads.iter().copied().max().unwrap_or(0);
    let periods: Vec<Ns> =
        occurrences.windows(2).map(|w| w[1].start.saturating_sub(w[0].start)).collect();
    let steps = median(periods).filter(|p| *p > 0).map(|p| median_lead as f64 / p as f64);
    // The launch calls made inside the occurrences: how long the host spent in each.
    let calls = &scope.p.calls;
    let mut launch_ns = Vec::new();
    for o in occurrences {
        let from = calls.start.partition_point(|s| *s < o.start);
        let to = calls.start.partition_point(|s| *s < o.end);
        for i in from..to {
            if calls.kind[i] == CallKind::Launch {
                launch_ns.push(calls.end[i] - calls.start[i]);
            }
        }
    }
    let ahead = Ahead {
        median_ms: scope.ms(median_lead),
        max_ms: scope.ms(max_lead),
        steps,
        launch_call_us: median(launch_ns).map(|ns| ns as f64 / 1e3),
    };
    let example = earliest(&scope.held.pieces)?;
    let mut finding =
        Finding::new(Rule::CpuAhead, leads.len(), ahead.median_ms, scope.example(example));
    finding.ahead = Some(ahead);
    Some(finding)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_is_the_lower_middle() {
        assert_eq!(median(vec![5, 1, 3]), Some(3));
        assert_eq!(median(vec![4, 1, 3, 2]), Some(2));
        assert_eq!(median(Vec::new()), None);
    }
}
