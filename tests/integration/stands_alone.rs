//! The repository stands alone: its code, docs, tests and scripts name formats and behaviour by
//! their own names. A reader has no access to the project's planning material, so no text may
//! point at it — no relative links out of the repository, no planning "seed" numbers, no issue or
//! work-session numbers. And the two pages a newcomer reads first stay short: the README is an
//! overview, docs/benchmarks.md the method and the current tables (history lives in git).

use std::path::{Path, PathBuf};

/// Directories (and top-level files) whose text is checked.
const CHECKED: &[&str] = &[
    "README.md",
    "CMakeLists.txt",
    "Cargo.toml",
    "build.rs",
    "cbindgen.toml",
    "bench",
    "c_tests",
    "cli",
    "cmake",
    "codegen",
    "components",
    "docs",
    "examples",
    "fuzz",
    "include",
    "python",
    "scripts",
    "src",
    "tests",
];

/// Directory names never descended into (build output, environments, fetched corpora).
const SKIPPED_DIRS: &[&str] = &[
    "target",
    ".venv",
    "corpus",
    "artifacts",
    "__pycache__",
    "node_modules",
];

/// File extensions of text that is checked.
const TEXT_EXTENSIONS: &[&str] = &[
    "rs", "md", "sh", "py", "pyi", "h", "hpp", "c", "cpp", "txt", "toml", "cmake", "in", "json",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn collect(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if SKIPPED_DIRS.contains(&name) {
            return;
        }
        let mut entries: Vec<_> = std::fs::read_dir(path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
            .map(|e| e.expect("directory entry").path())
            .collect();
        entries.sort();
        for entry in entries {
            collect(&entry, out);
        }
    } else if path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| TEXT_EXTENSIONS.contains(&e))
    {
        out.push(path.to_path_buf());
    }
}

/// True when `word` (lower case, ending in a space) is followed by a number (optionally `#N`).
fn followed_by_number(line: &str, word: &str) -> bool {
    line.match_indices(word).any(|(at, _)| {
        let rest = line[at + word.len()..].trim_start_matches('#');
        rest.chars().next().is_some_and(|c| c.is_ascii_digit())
    })
}

/// Why `line` points outside the repository, if it does.
fn outside_reference(line: &str) -> Option<&'static str> {
    let lower = line.to_lowercase();
    // Built by concatenation so this file does not flag itself.
    let shared = ["..", "/shared"].concat();
    if lower.contains(&shared) || lower.contains(&["shared/", "reference"].concat()) {
        return Some("a path to planning material outside the repository");
    }
    for (word, why) in [
        ("seed ", "a planning seed number"),
        ("seeds ", "a planning seed number"),
        ("issue ", "an issue number"),
        ("session ", "a work-session number"),
        ("sessions ", "a work-session number"),
        ("session-", "a work-session number"),
    ] {
        if followed_by_number(&lower, word) {
            return Some(why);
        }
    }
    None
}

#[test]
fn no_text_points_outside_the_repository() {
    let root = root();
    let mut files = Vec::new();
    for entry in CHECKED {
        collect(&root.join(entry), &mut files);
    }
    assert!(
        files.len() > 100,
        "only {} files found under {}",
        files.len(),
        root.display()
    );
    let mut found = Vec::new();
    for file in &files {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue; // not UTF-8: not prose
        };
        for (n, line) in text.lines().enumerate() {
            if let Some(why) = outside_reference(line) {
                let rel = file.strip_prefix(&root).unwrap_or(file);
                found.push(format!(
                    "{}:{}: {why}: {}",
                    rel.display(),
                    n + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "text that points outside the repository (name the behaviour instead):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_check_catches_what_it_is_for() {
    assert!(outside_reference(&["see ..", "/sha", "red/reference/formats.md"].concat()).is_some());
    assert!(outside_reference(&["the table of se", "ed 000"].concat()).is_some());
    assert!(outside_reference(&["fixed in iss", "ue 12"].concat()).is_some());
    assert!(outside_reference(&["as iss", "ue #7 says"].concat()).is_some());
    assert!(outside_reference(&["numbers of sess", "ion 3"].concat()).is_some());
    assert!(outside_reference("ort.InferenceSession(path)").is_none());
    assert!(outside_reference("the random seed of the fuzzer").is_none());
    assert!(outside_reference("an issue with the header").is_none());
}

#[test]
fn the_overview_pages_stay_short() {
    for (page, limit) in [("README.md", 150), ("docs/benchmarks.md", 400)] {
        let lines = std::fs::read_to_string(root().join(page))
            .unwrap()
            .lines()
            .count();
        assert!(lines <= limit, "{page} has {lines} lines; at most {limit}");
    }
}
