//! Builds `kernels-gpu` to PTX in `$OUT_DIR/kernels.ptx`, which the host embeds, with the
//! `kernels-build` pipeline (rustc's NVPTX backend + libdevice + LLVM's tools), and lists the
//! recorded runs in `docs/recorded/*.json` for `--recorded` (`$OUT_DIR/recorded.rs`).
//! `STREAMLAB_GPU_ARCH` picks the target (default `sm_75`); `STREAMLAB_LIBDEVICE` names libdevice.
fn main() {
    kernels_build::PtxBuilder::new("../kernels-gpu")
        .arch_from_env("STREAMLAB_GPU_ARCH", "sm_75")
        .build_or_exit();
    if let Err(e) =
        kernels_build::embed_files("../docs/recorded", "json", "recorded.rs", "RECORDED")
    {
        eprintln!("error: streamlab build: recorded runs: {e}");
        std::process::exit(1);
    }
}
