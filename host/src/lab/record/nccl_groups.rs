//! NCCL's collectives in a recording: which operation each kernel NCCL launches belongs to.
//!
//! Collectives issued inside a group are enqueued only in `ncclGroupEnd`, where NCCL
//! launches their kernels under correlation ids of their own (see
//! [`crate::lab::record::recorder`]). The recorder runs `ncclGroupEnd` under the group's tag
//! ([`group_tag`]); [`grouped`] then gives each kernel launched under it to a collective of
//! the group, so that [`crate::lab::record::cupti_spans`] names its span as the all-reduce.
use std::collections::HashMap;

use crate::lab::record::timeline::OpNote;
use crate::runtime::cupti::{self, ApiCall, Collected};

/// The op tag the driver calls of `ncclGroupEnd` number `group` are noted with: apart from
/// the operations' tags (their index in the notes), by its top bit.
pub fn group_tag(group: usize) -> u64 {
    GROUP_TAG | group as u64
}

const GROUP_TAG: u64 = 1 << 63;

/// The group number of a [`group_tag`].
pub(super) fn group_of(tag: u64) -> Option<usize> {
    (tag & GROUP_TAG != 0).then_some((tag & !GROUP_TAG) as usize)
}

/// The op tags of the kernels NCCL launched in each group's `ncclGroupEnd`, by their
/// records' correlation ids. `groups` holds each group's collectives (their tags, in issue
/// order), by group number ([`group_tag`]). A group's kernels on a device go to its
/// collectives on that device in launch order: the n-th kernel to the n-th collective, and
/// any more to the last (NCCL may split one collective into several launches; when it fuses
/// several into one kernel, the kernel is named by the first).
///
/// Where a collective got no kernel that way (CUPTI saw no launch under the group's tag:
/// none traced, or one made on a thread of NCCL's, where the tag is not set), NCCL's kernels
/// (named `nccl...`) launched by no tagged call are given to such collectives, device by
/// device, in start order and issue order.
pub fn grouped(collected: &Collected, ops: &[OpNote], groups: &[Vec<u64>]) -> HashMap<u32, u64> {
    let launch: HashMap<u32, &ApiCall> =
        collected.calls.iter().map(|c| (c.correlation, c)).collect();
    let kernels =
        || collected.activities.iter().filter(|a| matches!(a.work, cupti::Work::Kernel { .. }));
    let on_device = |members: &[u64], device: u32| -> Vec<u64> {
        let mine = |t: &&u64| ops.get(**t as usize).is_some_and(|n| n.device == device);
        members.iter().filter(mine).copied().collect()
    };
    let mut out = HashMap::new();
    for (g, members) in groups.iter().enumerate() {
        let tag = Some(group_tag(g));
        let mut launched: Vec<(u64, &cupti::Activity)> = kernels()
            .filter_map(|a| {
                launch.get(&a.correlation).filter(|c| c.tag == tag).map(|c| (c.start_ns, a))
            })
            .collect();
        launched.sort_by_key(|(at, a)| (*at, a.correlation));
        let mut count: HashMap<u32, usize> = HashMap::new();
        for (_, a) in launched {
            let mine = on_device(members, a.device);
            let n = count.entry(a.device).or_default();
            if let Some(t) = mine.get(*n).or(mine.last()) {
                out.insert(a.correlation, *t);
            }
            *n += 1;
        }
    }
    let mut waiting: Vec<u64> =
        groups.iter().flatten().filter(|t| !out.values().any(|v| v == *t)).copied().collect();
    waiting.sort_unstable();
    let mut orphans: Vec<&cupti::Activity> = kernels()
        .filter(|a| !launch.get(&a.correlation).is_some_and(|c| c.tag.is_some()))
        .filter(|a| matches!(&a.work, cupti::Work::Kernel { name, .. } if name.starts_with("nccl")))
        .collect();
    orphans.sort_by_key(|a| (a.start_ns, a.correlation));
    let mut devices: Vec<u32> = orphans.iter().map(|a| a.device).collect();
    devices.sort_unstable();
    devices.dedup();
    for device in devices {
        let kernels = orphans.iter().filter(|a| a.device == device);
        for (a, t) in kernels.zip(on_device(&waiting, device)) {
            out.insert(a.correlation, t);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_tags_stay_apart_from_operation_tags() {
        assert_eq!(group_of(group_tag(7)), Some(7));
        assert_eq!(group_of(7), None);
        assert_ne!(group_tag(0), 0);
    }
}
