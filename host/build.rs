//! Builds `kernels-gpu` to PTX, one module per GPU architecture (`$OUT_DIR/kernels.<arch>.ptx`,
//! listed in `$OUT_DIR/kernels_ptx.rs`), which the host embeds, with the `kernels-build`
//! pipeline (rustc's NVPTX backend + libdevice + LLVM's tools), and lists the recorded runs in
//! `docs/recorded/*.json` for `--recorded` (`$OUT_DIR/recorded.rs`). `STREAMLAB_PTX_ARCHS`
//! (comma-separated) replaces the default set, sm_75, sm_80 and sm_90; `STREAMLAB_LIBDEVICE`
//! names libdevice. Which PTX a GPU loads is decided at run time (`runtime::ptx`).
fn main() {
    kernels_build::PtxBuilder::new("../kernels-gpu")
        .archs_from_env("STREAMLAB_PTX_ARCHS", &kernels_build::DEFAULT_ARCHS)
        .build_or_exit();
    if let Err(e) =
        kernels_build::embed_files("../docs/recorded", "json", "recorded.rs", "RECORDED")
    {
        eprintln!("error: streamlab build: recorded runs: {e}");
        std::process::exit(1);
    }
}
