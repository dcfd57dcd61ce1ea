//! What the recorder's integration tests share.
use std::path::PathBuf;

/// `libstreamlab_inject.so` as cargo built it for this test: in `target/<profile>/deps/`
/// beside the test (or one folder up, where `cargo build` puts it).
pub fn built_library() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    let beside = deps.join("libstreamlab_inject.so");
    if beside.is_file() {
        return beside;
    }
    deps.parent().unwrap().join("libstreamlab_inject.so")
}
