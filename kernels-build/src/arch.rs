//! The set of GPU architectures to build PTX for: named, checked, put in order, and the
//! index file through which the host embeds one PTX per architecture.
use std::path::Path;

use crate::BuildError;

/// The architectures built when none are named: Turing (the oldest CUDA 13 supports, and
/// the floor every GPU streamlab runs on), Ampere (`cvt.rn.bf16.f32`, `cp.async`) and
/// Hopper. A GPU loads the newest that is not newer than itself (sm_86 and sm_89 load sm_80,
/// Blackwell loads sm_90), as the CUDA runtime picks PTX from a fatbin.
pub const DEFAULT_ARCHS: [&str; 3] = ["sm_75", "sm_80", "sm_90"];

/// `sm_NN` or `sm_NNa` with NN at least 75 (what CUDA 13 can compile for): its NN.
pub(crate) fn sm_number(arch: &str) -> Option<u32> {
    let digits = arch.strip_prefix("sm_")?;
    let digits = digits.strip_suffix('a').unwrap_or(digits);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u32>().ok().filter(|&n| n >= 75)
}

/// The architectures in `list` (separated by commas or spaces), each checked, oldest first,
/// each once. `origin` starts an error's line: where the list came from (`""`, `"default "`,
/// `"STREAMLAB_PTX_ARCHS=\"…\": "`).
pub(crate) fn parse_list(list: &[String], origin: &str) -> Result<Vec<String>, BuildError> {
    let mut archs: Vec<(u32, String)> = Vec::new();
    for arch in list.iter().flat_map(|a| a.split([',', ' '])).filter(|a| !a.is_empty()) {
        let Some(n) = sm_number(arch) else {
            return Err(BuildError::new(format!(
                "{origin}architecture {arch:?} is not a GPU architecture CUDA 13 supports: use sm_75, sm_80, sm_86, sm_89, sm_90, ..."
            )));
        };
        if !archs.iter().any(|(_, a)| a == arch) {
            archs.push((n, arch.to_string()));
        }
    }
    if archs.is_empty() {
        return Err(BuildError::new(format!(
            "{origin}no architecture given: name one, e.g. sm_75"
        )));
    }
    archs.sort();
    Ok(archs.into_iter().map(|(_, a)| a).collect())
}

/// Rust source declaring `pub static PTX_BY_ARCH: &[(&str, &str)]`: `(arch, PTX text)` for
/// every file of `ptx`, in the order given (oldest first).
pub(crate) fn index_source(ptx: &[(String, &Path)]) -> String {
    let mut source = String::from(
        "/// (architecture, PTX), oldest first: the PTX built for each GPU architecture.\n\
         pub static PTX_BY_ARCH: &[(&str, &str)] = &[\n",
    );
    for (arch, path) in ptx {
        source.push_str(&format!(
            "    ({arch:?}, include_str!({:?})),\n",
            path.display().to_string()
        ));
    }
    source + "];\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn supported_architectures() {
        for (ok, n) in
            [("sm_75", 75), ("sm_80", 80), ("sm_90a", 90), ("sm_100a", 100), ("sm_120", 120)]
        {
            assert_eq!(sm_number(ok), Some(n), "{ok}");
        }
        for bad in ["sm_70", "sm_52", "compute_90", "90", "sm_", "sm_9x", "sm_+90", "sm_90f", ""] {
            assert_eq!(sm_number(bad), None, "{bad}");
        }
    }

    #[test]
    fn lists_are_checked_sorted_and_deduplicated() {
        let list = |s: &[&str]| s.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        let archs = parse_list(&list(&["sm_90, sm_75", "sm_80,sm_75"]), "").unwrap();
        assert_eq!(archs, ["sm_75", "sm_80", "sm_90"]);
        assert_eq!(parse_list(&list(&["sm_100", "sm_90a"]), "").unwrap(), ["sm_90a", "sm_100"]);
        let err = parse_list(&list(&["sm_75,sm_61"]), "STREAMLAB_PTX_ARCHS=\"sm_75,sm_61\": ");
        assert_eq!(
            err.unwrap_err().message(),
            "STREAMLAB_PTX_ARCHS=\"sm_75,sm_61\": architecture \"sm_61\" is not a GPU architecture CUDA 13 supports: use sm_75, sm_80, sm_86, sm_89, sm_90, ..."
        );
        let err = parse_list(&list(&[" , "]), "").unwrap_err();
        assert_eq!(err.message(), "no architecture given: name one, e.g. sm_75");
    }

    #[test]
    fn the_index_lists_each_ptx_with_its_arch() {
        let (a, b) = (Path::new("/o/kernels.sm_75.ptx"), Path::new("/o/kernels.sm_90.ptx"));
        let source = index_source(&[("sm_75".into(), a), ("sm_90".into(), b)]);
        assert!(source.contains("pub static PTX_BY_ARCH: &[(&str, &str)] = &[\n"), "{source}");
        let first = source.find("(\"sm_75\", include_str!(\"/o/kernels.sm_75.ptx\")),").unwrap();
        let second = source.find("(\"sm_90\", include_str!(\"/o/kernels.sm_90.ptx\")),").unwrap();
        assert!(first < second && source.ends_with("];\n"), "{source}");
    }
}
