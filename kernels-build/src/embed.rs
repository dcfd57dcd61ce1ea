//! Embedding a folder's files in the crate being built: what `--recorded` needs of
//! `docs/recorded/*.json`, kept beside the PTX pipeline so `build.rs` stays a few lines.
use std::path::{Path, PathBuf};

/// Writes `$OUT_DIR/<out_file>`, Rust source declaring `pub static <name>: &[(&str, &str)]`:
/// one `(file stem, include_str!(file))` per file in `dir` whose name ends in `.<extension>`,
/// sorted by stem. A missing folder gives an empty list. `dir` is relative to the calling
/// crate's manifest folder. Prints the `rerun-if-changed` line for the folder.
pub fn embed_files(dir: &str, extension: &str, out_file: &str, name: &str) -> Result<(), String> {
    let manifest =
        std::env::var("CARGO_MANIFEST_DIR").map_err(|_| "CARGO_MANIFEST_DIR is not set")?;
    let dir = Path::new(&manifest).join(dir);
    println!("cargo:rerun-if-changed={}", dir.display());
    let out = PathBuf::from(std::env::var("OUT_DIR").map_err(|_| "OUT_DIR is not set")?);
    let source = list_source(&dir, extension, name);
    std::fs::write(out.join(out_file), source)
        .map_err(|e| format!("writing {}: {e}", out.join(out_file).display()))
}

fn list_source(dir: &Path, extension: &str, name: &str) -> String {
    let mut files: Vec<(String, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == extension))
        .filter_map(|p| {
            Some((p.file_stem()?.to_string_lossy().into_owned(), p.canonicalize().ok()?))
        })
        .collect();
    files.sort();
    let mut source = format!(
        "/// (file stem, contents), from {}.\npub static {name}: &[(&str, &str)] = &[\n",
        dir.display()
    );
    for (stem, path) in files {
        source.push_str(&format!(
            "    ({stem:?}, include_str!({:?})),\n",
            path.display().to_string()
        ));
    }
    source + "];\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_the_matching_files_sorted_and_nothing_for_a_missing_folder() {
        let dir = std::env::temp_dir().join(format!("kernels-build-embed-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for f in ["b.json", "a.json", "notes.md"] {
            std::fs::write(dir.join(f), "{}").unwrap();
        }
        let source = list_source(&dir, "json", "RUNS");
        let a = source.find("(\"a\", include_str!").unwrap();
        let b = source.find("(\"b\", include_str!").unwrap();
        assert!(a < b && !source.contains("notes"), "{source}");
        assert!(source.starts_with("/// (file stem") && source.contains("pub static RUNS"));
        let empty = list_source(&dir.join("missing"), "json", "RUNS");
        assert!(empty.ends_with("= &[\n];\n"), "{empty}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
