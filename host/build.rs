//! Builds `kernels-gpu` to PTX in `$OUT_DIR/kernels.ptx`, which the host embeds, with the
//! `kernels-build` pipeline (rustc's NVPTX backend + libdevice + LLVM's tools).
//! `STREAMLAB_GPU_ARCH` picks the target (default `sm_75`); `STREAMLAB_LIBDEVICE` names libdevice.
//!
//! Also lists the recorded runs in `docs/recorded/*.json` for `--recorded` to embed
//! (`$OUT_DIR/recorded.rs`): the build works when there are none.

fn main() {
    kernels_build::PtxBuilder::new("../kernels-gpu")
        .arch_from_env("STREAMLAB_GPU_ARCH", "sm_75")
        .build_or_exit();
    embed_recorded_runs();
}

fn embed_recorded_runs() {
    let dir = std::path::Path::new("../docs/recorded");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut runs: Vec<(String, std::path::PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .filter_map(|p| {
            let lesson = p.file_stem()?.to_string_lossy().into_owned();
            Some((lesson, std::fs::canonicalize(&p).ok()?))
        })
        .collect();
    runs.sort();
    let mut list = String::from("/// (lesson, recorded run as JSON), from docs/recorded/.\npub static RECORDED: &[(&str, &str)] = &[\n");
    for (lesson, path) in runs {
        list.push_str(&format!(
            "    ({lesson:?}, include_str!({:?})),\n",
            path.display().to_string()
        ));
    }
    list.push_str("];\n");
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR is set by cargo"));
    std::fs::write(out.join("recorded.rs"), list).expect("writing $OUT_DIR/recorded.rs");
}
