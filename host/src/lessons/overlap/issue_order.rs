//! `--issue-order`: the order the host issues the K-stream version's work in. Each stream
//! gets the same three steps in the same order either way; what changes is how the calls
//! interleave across streams, which decided the overlap on GPUs with one hardware work queue
//! (before Kepler's Hyper-Q) and is the experiment to run on yours.
use serde::Serialize;

use crate::runtime::Result;

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IssueOrder {
    /// Each chunk's copy-in, kernel and copy-out, then the next chunk's.
    Depth,
    /// Every chunk's copy-in, then every kernel, then every copy-out.
    Breadth,
}

/// One of a chunk's three steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    CopyIn,
    Compute,
    CopyOut,
}

impl Step {
    pub const ALL: [Step; 3] = [Step::CopyIn, Step::Compute, Step::CopyOut];
}

impl IssueOrder {
    /// Calls `issue(chunk, step)` for every step of `chunks` chunks, in this order.
    pub fn issue(
        self,
        chunks: usize,
        mut issue: impl FnMut(usize, Step) -> Result<()>,
    ) -> Result<()> {
        match self {
            IssueOrder::Depth => (0..chunks)
                .try_for_each(|chunk| Step::ALL.iter().try_for_each(|&step| issue(chunk, step))),
            IssueOrder::Breadth => Step::ALL
                .iter()
                .try_for_each(|&step| (0..chunks).try_for_each(|chunk| issue(chunk, step))),
        }
    }

    /// The K-stream version's name.
    pub fn version_name(self, streams: usize) -> String {
        match self {
            IssueOrder::Depth => format!("{streams} streams"),
            IssueOrder::Breadth => format!("{streams} streams, breadth first"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(o: IssueOrder) -> Vec<(usize, Step)> {
        let mut seen = Vec::new();
        o.issue(2, |chunk, step| {
            seen.push((chunk, step));
            Ok(())
        })
        .unwrap();
        seen
    }

    #[test]
    fn depth_walks_chunk_by_chunk_and_breadth_step_by_step() {
        use Step::*;
        assert_eq!(
            order(IssueOrder::Depth),
            [(0, CopyIn), (0, Compute), (0, CopyOut), (1, CopyIn), (1, Compute), (1, CopyOut)]
        );
        assert_eq!(
            order(IssueOrder::Breadth),
            [(0, CopyIn), (1, CopyIn), (0, Compute), (1, Compute), (0, CopyOut), (1, CopyOut)]
        );
    }
}
