//! Which engine class each kind of work occupies, and each class's busy time. A GPU has SMs
//! for kernels and copy engines for copies (an H100 has several, so copies in and out can run
//! at once); work of different classes can overlap, work of one class mostly queues.
use serde::Serialize;

use crate::lab::record::span::Work;

/// An engine class of the overlap report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Engine {
    /// Kernels, graph launches and memsets: the SMs. A memset of device memory is done by the
    /// SMs (the driver runs a fill), not by a copy engine, so it competes with kernels. A graph
    /// launch recorded as one span (the events recorder) may hold copies too; its span cannot
    /// say, so it counts as compute. Under CUPTI a graph's nodes arrive as their own spans.
    Compute,
    /// Copies host to device.
    CopyIn,
    /// Copies device to host.
    CopyOut,
    /// Copies within a device and between devices (peer).
    DeviceCopy,
    /// NCCL's collectives. They run on the SMs, beside kernels, but a program waits on them as
    /// on communication, so they are a class of their own (which makes the bound below
    /// optimistic where they compete with kernels: a bound may only err low).
    Collective,
}

impl Engine {
    pub const ALL: [Engine; 5] =
        [Engine::Compute, Engine::CopyIn, Engine::CopyOut, Engine::DeviceCopy, Engine::Collective];

    /// The class a kind of work occupies. A host function (`HostFn`) runs on the host, on the
    /// driver's thread: it occupies its stream but no engine of the GPU.
    pub fn of(kind: Work) -> Option<Engine> {
        match kind {
            Work::Kernel | Work::Graph | Work::Memset => Some(Engine::Compute),
            Work::CopyToDevice => Some(Engine::CopyIn),
            Work::CopyToHost => Some(Engine::CopyOut),
            Work::CopyOnDevice | Work::CopyPeer => Some(Engine::DeviceCopy),
            Work::Collective => Some(Engine::Collective),
            Work::HostFn => None,
        }
    }

    /// A copy engine's class (collectives are not copies here: they run on the SMs).
    pub fn is_copy(self) -> bool {
        matches!(self, Engine::CopyIn | Engine::CopyOut | Engine::DeviceCopy)
    }

    /// How the report names it.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Compute => "compute",
            Engine::CopyIn => "copy in",
            Engine::CopyOut => "copy out",
            Engine::DeviceCopy => "device and peer copies",
            Engine::Collective => "collectives",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_work_but_host_functions_has_an_engine() {
        let on_none: Vec<Work> =
            Work::ALL.into_iter().filter(|w| Engine::of(*w).is_none()).collect();
        assert_eq!(on_none, [Work::HostFn]);
        assert_eq!(Engine::of(Work::Memset), Some(Engine::Compute));
        assert_eq!(Engine::of(Work::CopyPeer), Some(Engine::DeviceCopy));
        assert!(!Engine::Collective.is_copy() && Engine::DeviceCopy.is_copy());
    }
}
