//! What a run leaves behind, and everything that draws or writes it: the recorders (CUPTI's
//! activity records, else events: [`recorder`]; CUPTI's records turned into spans:
//! [`cupti_spans`], NCCL's kernels given to their collectives: [`nccl_groups`]), their spans
//! ([`span`]), the terminal's [`timeline`], a Perfetto [`trace`] (its tracks:
//! [`trace_tracks`]), an SVG [`picture`] (what it shows: [`drawing`]; a traced program's
//! panels and NVTX rows: [`nvtx_rows`]) and a sweep's [`plot`], the [`report`] as text or
//! JSON, the files [`output`] writes, and the runs recorded on a real GPU that ship in the
//! binary ([`recorded_runs`]).
pub mod cupti_spans;
pub mod drawing;
pub mod nccl_groups;
pub mod nvtx_rows;
pub mod output;
pub mod picture;
pub mod plot;
pub mod recorded_runs;
pub mod recorder;
pub mod report;
pub mod span;
pub mod timeline;
pub mod trace;
pub mod trace_tracks;
