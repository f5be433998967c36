//! The library's layers are real: every module of `src/` uses only the modules declared before
//! it in `src/lib.rs` (the layer order, bottom up), sibling files of one module do not import
//! each other in a cycle, and the layer table of `docs/design.md` lists the same modules in the
//! same order. The checker reads the sources as text: `use` trees and every `crate::` /
//! `super::` / `self::` path in code (comments and string literals do not count), with paths
//! through the crate root's re-exports resolved to the module they come from.
//!
//! The checker is tested on small made-up crates first (an upward import, a sibling cycle, ...),
//! so a pass on the real tree means something.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

/// One violation, readable as it stands.
type Violations = Vec<String>;

// ---------------------------------------------------------------------------------------------
// Lexing: code tokens only.

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Ident(String),
    /// `::`
    Path,
    Punct(char),
}

/// The code tokens of `src`: comments, string / char / byte literals and lifetimes removed,
/// `$crate` read as `crate`, numbers and operators other than the ones paths use as `Punct`.
fn tokens(src: &str) -> Vec<Tok> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == b'r'
            && matches!(b.get(i + 1), Some(b'"') | Some(b'#'))
            && raw_string(b, i).is_some()
        {
            i = raw_string(b, i).unwrap();
        } else if c == b'b' && b.get(i + 1) == Some(&b'r') && raw_string(b, i + 1).is_some() {
            i = raw_string(b, i + 1).unwrap();
        } else if c == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
        } else if c == b'\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime / label ('a): skip either.
            if b.get(i + 1) == Some(&b'\\') {
                i += 3;
                while i < b.len() && b[i] != b'\'' {
                    i += 1;
                }
                i += 1;
            } else if b.get(i + 2) == Some(&b'\'') {
                i += 3;
            } else {
                i += 1;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
            }
        } else if c.is_ascii_alphabetic() || c == b'_' || c >= 0x80 {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] >= 0x80) {
                i += 1;
            }
            let word = &src[start..i];
            // `b'x'` and `b"..."` are byte literals: the prefix is not an identifier.
            if word == "b" && matches!(b.get(i), Some(b'\'') | Some(b'"')) {
                continue;
            }
            out.push(Tok::Ident(word.to_string()));
        } else if c.is_ascii_digit() {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Tok::Punct('0'));
        } else if c == b':' && b.get(i + 1) == Some(&b':') {
            out.push(Tok::Path);
            i += 2;
        } else if c == b'$' {
            // `$crate` is `crate`; other macro variables are not paths.
            i += 1;
        } else if c.is_ascii_whitespace() {
            i += 1;
        } else {
            out.push(Tok::Punct(c as char));
            i += 1;
        }
    }
    out
}

/// The end of a raw string literal starting at `i` (`r"..."`, `r#"..."#`, ...), if it is one.
fn raw_string(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    let mut hashes = 0;
    while b.get(j) == Some(&b'#') {
        hashes += 1;
        j += 1;
    }
    if b.get(j) != Some(&b'"') {
        return None;
    }
    j += 1;
    loop {
        if j >= b.len() {
            return Some(j);
        }
        if b[j] == b'"' && (0..hashes).all(|k| b.get(j + 1 + k) == Some(&b'#')) {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
}

// ---------------------------------------------------------------------------------------------
// Paths used by one file.

fn ident(t: Option<&Tok>) -> Option<&str> {
    match t {
        Some(Tok::Ident(s)) => Some(s),
        _ => None,
    }
}

/// Every path of a file that starts at `crate`, `super` or `self`, made absolute (segments from
/// the crate root). `module` is the file's module path; inline `mod x { ... }` blocks are
/// followed, so `super::` inside `mod tests` is the file's own module.
fn absolute_paths(src: &str, module: &[String]) -> Vec<Vec<String>> {
    let toks = tokens(src);
    let mut out = Vec::new();
    // Inline modules: (name, brace depth at which its block closes).
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let here = |inline: &Vec<(String, usize)>| -> Vec<String> {
        module
            .iter()
            .cloned()
            .chain(inline.iter().map(|(n, _)| n.clone()))
            .collect()
    };
    let mut i = 0;
    while i < toks.len() {
        match &toks[i] {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
            }
            Tok::Ident(w) if w == "mod" => {
                if let (Some(name), Some(Tok::Punct('{'))) =
                    (ident(toks.get(i + 1)), toks.get(i + 2))
                {
                    inline.push((name.to_string(), depth + 1));
                }
            }
            Tok::Ident(w) if w == "use" => {
                let end = (i..toks.len())
                    .find(|&j| toks[j] == Tok::Punct(';'))
                    .unwrap_or(toks.len());
                let mut flat = Vec::new();
                use_tree(&toks[i + 1..end], &mut Vec::new(), &mut flat);
                for p in flat {
                    if let Some(a) = absolute(&p, &here(&inline)) {
                        out.push(a);
                    }
                }
                i = end;
                continue;
            }
            Tok::Ident(w) if matches!(w.as_str(), "crate" | "super" | "self") => {
                let preceded_by_path = i > 0 && toks[i - 1] == Tok::Path;
                if !preceded_by_path && toks.get(i + 1) == Some(&Tok::Path) {
                    let mut p = vec![w.clone()];
                    let mut j = i + 1;
                    while toks.get(j) == Some(&Tok::Path) {
                        match ident(toks.get(j + 1)) {
                            Some(s) => p.push(s.to_string()),
                            None => break,
                        }
                        j += 2;
                    }
                    if let Some(a) = absolute(&p, &here(&inline)) {
                        out.push(a);
                    }
                    i = j;
                    continue;
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// Flattens a `use` tree (tokens after `use`, before `;`) into its paths; `self` inside braces
/// names the prefix itself.
fn use_tree(toks: &[Tok], prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    // Split at top-level commas.
    let mut parts: Vec<&[Tok]> = Vec::new();
    let (mut level, mut start) = (0, 0);
    for (k, t) in toks.iter().enumerate() {
        match t {
            Tok::Punct('{') => level += 1,
            Tok::Punct('}') => level -= 1,
            Tok::Punct(',') if level == 0 => {
                parts.push(&toks[start..k]);
                start = k + 1;
            }
            _ => {}
        }
    }
    parts.push(&toks[start..]);
    for part in parts {
        let mut segs = Vec::new();
        let mut k = 0;
        while k < part.len() {
            match &part[k] {
                Tok::Ident(w) if w == "as" => break,
                Tok::Ident(w) => segs.push(w.clone()),
                Tok::Path => {}
                Tok::Punct('{') => {
                    let close = part
                        .iter()
                        .rposition(|t| *t == Tok::Punct('}'))
                        .unwrap_or(part.len());
                    let n = prefix.len();
                    prefix.extend(segs.iter().cloned());
                    use_tree(&part[k + 1..close], prefix, out);
                    prefix.truncate(n);
                    segs.clear();
                    break;
                }
                _ => {}
            }
            k += 1;
        }
        // `pub use`, `pub(crate) use` leave `pub`/`crate` before `use`, never inside it.
        if segs.is_empty() {
            continue;
        }
        if segs == ["self"] && !prefix.is_empty() {
            out.push(prefix.clone());
        } else {
            out.push(prefix.iter().cloned().chain(segs).collect());
        }
    }
}

/// `p` made absolute from module `here`; `None` for paths into other crates.
fn absolute(p: &[String], here: &[String]) -> Option<Vec<String>> {
    let mut base: Vec<String>;
    let mut rest = p;
    match p.first().map(String::as_str) {
        Some("crate") => {
            base = Vec::new();
            rest = &p[1..];
        }
        Some("super") | Some("self") => {
            base = here.to_vec();
            while let Some(s) = rest.first() {
                match s.as_str() {
                    "super" => {
                        base.pop();
                    }
                    "self" => {}
                    _ => break,
                }
                rest = &rest[1..];
            }
        }
        _ => return None,
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

// ---------------------------------------------------------------------------------------------
// The crate: layer order from lib.rs, re-exports, files.

/// A crate's sources: paths relative to `src/` (`lib.rs`, `wire/mod.rs`, ...) and their text.
struct Crate {
    files: BTreeMap<String, String>,
}

impl Crate {
    fn read(dir: &Path) -> Self {
        let mut files = BTreeMap::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    let rel = p
                        .strip_prefix(dir)
                        .unwrap()
                        .to_string_lossy()
                        .replace('\\', "/");
                    files.insert(rel, std::fs::read_to_string(&p).unwrap());
                }
            }
        }
        Self { files }
    }

    fn from(files: &[(&str, &str)]) -> Self {
        Self {
            files: files
                .iter()
                .map(|(p, s)| (p.to_string(), s.to_string()))
                .collect(),
        }
    }

    /// The top-level modules in the order lib.rs declares them: the layers, bottom up.
    fn layers(&self) -> Vec<String> {
        let toks = tokens(&self.files["lib.rs"]);
        let mut out = Vec::new();
        let mut depth = 0;
        for (i, t) in toks.iter().enumerate() {
            match t {
                Tok::Punct('{') => depth += 1,
                Tok::Punct('}') => depth -= 1,
                Tok::Ident(w) if w == "mod" && depth == 0 => {
                    if let (Some(name), Some(Tok::Punct(';'))) =
                        (ident(toks.get(i + 1)), toks.get(i + 2))
                    {
                        // A module declared twice under `cfg`s (public with a feature,
                        // private without) is one layer.
                        if !out.iter().any(|m| m == name) {
                            out.push(name.to_string());
                        }
                    }
                }
                _ => {}
            }
        }
        out
    }

    /// Names lib.rs re-exports (`pub use module::{A, b::C}`), mapped to the module they come from.
    fn root_reexports(&self) -> HashMap<String, String> {
        let layers = self.layers();
        let toks = tokens(&self.files["lib.rs"]);
        let mut out = HashMap::new();
        for (i, t) in toks.iter().enumerate() {
            if *t != Tok::Ident("use".into()) {
                continue;
            }
            let end = (i..toks.len())
                .find(|&j| toks[j] == Tok::Punct(';'))
                .unwrap_or(toks.len());
            let mut paths = Vec::new();
            use_tree(&toks[i + 1..end], &mut Vec::new(), &mut paths);
            for mut p in paths {
                if p.first().is_some_and(|s| s == "crate") {
                    p.remove(0);
                }
                // At the crate root, `use wire::X` names the root's own module `wire`.
                if p.len() >= 2 && layers.contains(&p[0]) {
                    out.insert(p.last().unwrap().clone(), p[0].clone());
                }
            }
        }
        out
    }

    /// The module path of a file: `wire/mod.rs` -> [wire], `wire/reader.rs` -> [wire, reader].
    fn module_of(rel: &str) -> Vec<String> {
        let mut segs: Vec<String> = rel
            .trim_end_matches(".rs")
            .split('/')
            .map(String::from)
            .collect();
        if matches!(segs.last().map(String::as_str), Some("mod" | "lib")) {
            segs.pop();
        }
        segs
    }

    /// Whether `parent` has a child module `name` in its own file or folder.
    fn has_child(&self, parent: &str, name: &str) -> bool {
        self.files.contains_key(&format!("{parent}/{name}.rs"))
            || self.files.contains_key(&format!("{parent}/{name}/mod.rs"))
    }

    /// Every violation of the layer rules.
    fn check(&self) -> Violations {
        let layers = self.layers();
        let rank: HashMap<&str, usize> = layers
            .iter()
            .enumerate()
            .map(|(i, m)| (m.as_str(), i))
            .collect();
        let reexports = self.root_reexports();
        let mut bad = Vec::new();
        // Sibling edges per top-level module: (from child, to child) -> an example file.
        let mut siblings: BTreeMap<String, BTreeMap<(String, String), String>> = BTreeMap::new();
        for (rel, src) in &self.files {
            let module = Self::module_of(rel);
            let Some(top) = module.first() else { continue };
            let Some(&from) = rank.get(top.as_str()) else {
                bad.push(format!(
                    "src/{rel}: module `{top}` is not declared in lib.rs"
                ));
                continue;
            };
            for path in absolute_paths(src, &module) {
                let Some(first) = path.first() else { continue };
                let target = match rank.get(first.as_str()) {
                    Some(_) => first.clone(),
                    None => match reexports.get(first) {
                        Some(m) => m.clone(),
                        None => continue, // an item of lib.rs itself (macros, doc-test structs)
                    },
                };
                let to = rank[target.as_str()];
                if to > from {
                    bad.push(format!(
                        "src/{rel}: `crate::{}` is in layer `{target}`, above `{top}` (lib.rs \
                         declares the layers bottom up)",
                        path.join("::")
                    ));
                }
                if target == *top
                    && let (Some(a), Some(b)) = (module.get(1), path.get(1))
                    && a != b
                    && self.has_child(top, b)
                {
                    siblings
                        .entry(top.clone())
                        .or_default()
                        .entry((a.clone(), b.clone()))
                        .or_insert_with(|| format!("src/{rel}: {}", path.join("::")));
                }
            }
        }
        for (top, edges) in &siblings {
            if let Some(cycle) = find_cycle(edges.keys()) {
                let shown: Vec<String> = cycle
                    .windows(2)
                    .map(|w| edges[&(w[0].clone(), w[1].clone())].clone())
                    .collect();
                bad.push(format!(
                    "files of `{top}` import each other in a cycle {}: {}",
                    cycle.join(" -> "),
                    shown.join("; ")
                ));
            }
        }
        bad
    }
}

/// A cycle of the directed graph `edges` (first node repeated at the end), if there is one.
fn find_cycle<'a>(edges: impl Iterator<Item = &'a (String, String)>) -> Option<Vec<String>> {
    let mut next: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (a, b) in edges {
        next.entry(a).or_default().insert(b);
    }
    // 0 = unvisited, 1 = on the stack, 2 = done.
    fn dfs<'b>(
        n: &'b str,
        next: &BTreeMap<&'b str, BTreeSet<&'b str>>,
        state: &mut HashMap<&'b str, u8>,
        stack: &mut Vec<&'b str>,
    ) -> Option<Vec<String>> {
        state.insert(n, 1);
        stack.push(n);
        for &m in next.get(n).into_iter().flatten() {
            match state.get(m).copied().unwrap_or(0) {
                1 => {
                    let at = stack.iter().position(|&s| s == m).unwrap();
                    let mut c: Vec<String> = stack[at..].iter().map(|s| s.to_string()).collect();
                    c.push(m.to_string());
                    return Some(c);
                }
                0 => {
                    if let Some(c) = dfs(m, next, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(n, 2);
        None
    }
    let mut state = HashMap::new();
    let nodes: Vec<&str> = next.keys().copied().collect();
    for n in nodes {
        if state.get(n).copied().unwrap_or(0) == 0
            && let Some(c) = dfs(n, &next, &mut state, &mut Vec::new())
        {
            return Some(c);
        }
    }
    None
}

/// The module names of the first column of docs/design.md's layer table, in order.
fn design_layers(design: &str) -> Vec<String> {
    let section = design
        .split("\n## Layers\n")
        .nth(1)
        .expect("docs/design.md has a `## Layers` section");
    section
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2) // header and separator
        .flat_map(|l| {
            l.split('|')
                .nth(1)
                .unwrap_or("")
                .split(',')
                .map(|s| s.trim().to_string())
                .collect::<Vec<_>>()
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The real tree.

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn modules_use_only_the_layers_below_them() {
    let krate = Crate::read(&root().join("src"));
    let layers = krate.layers();
    assert!(layers.len() > 5, "lib.rs declares the layers: {layers:?}");
    let bad = krate.check();
    assert!(bad.is_empty(), "layer violations:\n{}", bad.join("\n"));
}

#[test]
fn design_md_lists_the_layers_of_lib_rs() {
    let krate = Crate::read(&root().join("src"));
    let design = std::fs::read_to_string(root().join("docs/design.md")).unwrap();
    assert_eq!(
        design_layers(&design),
        krate.layers(),
        "docs/design.md's layer table (first column, top to bottom) must list lib.rs's modules \
         in lib.rs's order"
    );
}

// ---------------------------------------------------------------------------------------------
// The checker on made-up crates: it must catch what it is for.

const LIB: &str = "pub mod low;\npub mod mid;\npub mod high;\npub use high::Top;\npub use low::{Base, deep::Deeper};\n";

fn check(files: &[(&str, &str)]) -> Violations {
    let mut all = vec![("lib.rs", LIB)];
    all.extend_from_slice(files);
    Crate::from(&all).check()
}

#[test]
fn checker_accepts_downward_imports() {
    let bad = check(&[
        ("low/mod.rs", "mod deep;\npub struct Base;"),
        ("low/deep.rs", "use super::Base; pub struct Deeper;"),
        (
            "mid.rs",
            "use crate::low::{self, Base};\nuse crate::Deeper;\nfn f() { let _ = crate::low::Base; }",
        ),
        (
            "high.rs",
            "use crate::{mid, low::deep::Deeper};\npub struct Top;",
        ),
    ]);
    assert!(bad.is_empty(), "{bad:?}");
}

#[test]
fn checker_flags_an_upward_import() {
    let bad = check(&[
        ("low/mod.rs", "use crate::high::Top;"),
        ("mid.rs", ""),
        ("high.rs", "pub struct Top;"),
    ]);
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert!(
        bad[0].contains("src/low/mod.rs") && bad[0].contains("crate::high::Top"),
        "{bad:?}"
    );
}

#[test]
fn checker_sees_nested_trees_inline_paths_and_root_reexports() {
    let nested = check(&[
        ("low/mod.rs", "pub use crate::{mid::{self, x::Y}};"),
        ("mid.rs", ""),
        ("high.rs", ""),
    ]);
    assert!(
        nested.len() == 2 && nested.iter().all(|v| v.contains("`mid`")),
        "{nested:?}"
    );
    let inline = check(&[
        ("low/mod.rs", "fn f() -> u32 { crate::high::answer() }"),
        ("mid.rs", ""),
        ("high.rs", ""),
    ]);
    assert_eq!(inline.len(), 1, "{inline:?}");
    let reexport = check(&[
        ("low/mod.rs", "fn f(_: crate::Top) {}"),
        ("mid.rs", ""),
        ("high.rs", ""),
    ]);
    assert!(
        reexport.len() == 1 && reexport[0].contains("layer `high`"),
        "{reexport:?}"
    );
    let macro_crate = check(&[
        ("low/mod.rs", "macro_rules! m { () => { $crate::mid::X }; }"),
        ("mid.rs", ""),
        ("high.rs", ""),
    ]);
    assert_eq!(macro_crate.len(), 1, "{macro_crate:?}");
    let supers = check(&[
        ("low/mod.rs", "mod deep;"),
        (
            "low/deep.rs",
            "mod tests { use super::super::super::high::Top; }",
        ),
        ("mid.rs", ""),
        ("high.rs", ""),
    ]);
    assert_eq!(
        supers.len(),
        1,
        "super:: counts from the inline module: {supers:?}"
    );
}

#[test]
fn checker_ignores_comments_strings_and_lifetimes() {
    let bad = check(&[
        (
            "low/mod.rs",
            "// use crate::high::Top;\n/// See [`crate::high::Top`].\n/* crate::mid::X /* nested */ crate::high */\n\
             fn f<'a>(s: &'a str) -> &'a str { let _ = \"crate::high::Top\"; let _ = r#\"use crate::mid;\"#; \
             let _ = '\"'; let _ = b'\\''; s }",
        ),
        ("mid.rs", ""),
        ("high.rs", ""),
    ]);
    assert!(bad.is_empty(), "{bad:?}");
}

#[test]
fn checker_flags_sibling_files_that_import_each_other() {
    let bad = check(&[
        ("low/mod.rs", "mod a;\nmod b;\nmod c;"),
        ("low/a.rs", "use super::b::B; pub struct A;"),
        ("low/b.rs", "use super::c::C; pub struct B;"),
        ("low/c.rs", "use super::a::A; pub struct C;"),
        ("mid.rs", ""),
        ("high.rs", ""),
    ]);
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert!(
        bad[0].contains("cycle") && bad[0].contains("a -> b -> c -> a"),
        "{bad:?}"
    );
}

#[test]
fn checker_reads_the_design_table() {
    let md = "# x\n\n## Layers\n| layer | where |\n|---|---|\n| low | a |\n| mid, high | b |\n\nAfter.\n";
    assert_eq!(design_layers(md), ["low", "mid", "high"]);
}

/// The names in the `[dependencies]` tables of a Cargo.toml (target-specific ones included).
fn dependencies_of(manifest: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_deps = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_deps = line == "[dependencies]" || line.ends_with(".dependencies]");
            continue;
        }
        if in_deps
            && let Some((name, _)) = line.split_once('=')
            && !line.starts_with('#')
        {
            out.push(name.trim().to_string());
        }
    }
    out
}

/// The library's dependencies are what the library uses: each is named in `src/` (the
/// command-line tool's argument parser and progress bars belong to the `cli/` crate).
#[test]
fn every_library_dependency_is_used_by_the_library() {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let deps = dependencies_of(&manifest);
    assert!(
        deps.len() >= 5 && deps.contains(&"ring".to_string()),
        "{deps:?}"
    );
    let src = Crate::read(&root().join("src"));
    let text: String = src.files.values().map(String::as_str).collect();
    let unused: Vec<&String> = deps
        .iter()
        .filter(|d| !text.contains(&format!("{}::", d.replace('-', "_"))))
        .collect();
    assert!(
        unused.is_empty(),
        "library dependencies not used in src/: {unused:?}"
    );
    for tool_only in ["clap", "indicatif"] {
        assert!(
            !deps.iter().any(|d| d == tool_only),
            "{tool_only} is a dependency of the library"
        );
    }
}

/// The files of `src/` outside `ffi/` that contain `unsafe`, as docs/design.md's "Where `unsafe`
/// is" table lists them (a cell may name several files, or a directory ending in `/`).
fn documented_unsafe_files(design: &str) -> Vec<String> {
    let section = design
        .split("\n## Where `unsafe` is\n")
        .nth(1)
        .expect("docs/design.md has a \"Where `unsafe` is\" section");
    let mut out = Vec::new();
    for line in section
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
    {
        let cell = line.split('|').nth(1).unwrap_or("");
        for name in cell.split('`').skip(1).step_by(2) {
            out.push(name.trim_start_matches("src/").to_string());
        }
    }
    out
}

#[test]
fn unsafe_outside_ffi_is_where_design_md_says() {
    let design = std::fs::read_to_string(root().join("docs/design.md")).unwrap();
    let listed = documented_unsafe_files(&design);
    let krate = Crate::read(&root().join("src"));
    let with_unsafe: Vec<&String> = krate
        .files
        .iter()
        .filter(|(rel, src)| {
            !rel.starts_with("ffi/")
                && tokens(src)
                    .iter()
                    .any(|t| matches!(t, Tok::Ident(w) if w == "unsafe"))
        })
        .map(|(rel, _)| rel)
        .collect();
    assert!(with_unsafe.len() > 5, "{with_unsafe:?}");
    let covered = |rel: &str| {
        listed
            .iter()
            .any(|l| l == rel || (l.ends_with('/') && rel.starts_with(l.as_str())))
    };
    let undocumented: Vec<_> = with_unsafe.iter().filter(|r| !covered(r)).collect();
    assert!(
        undocumented.is_empty(),
        "files with `unsafe` missing from docs/design.md's \"Where `unsafe` is\": {undocumented:?}"
    );
    let stale: Vec<_> = listed
        .iter()
        .filter(|l| {
            !with_unsafe
                .iter()
                .any(|r| *r == *l || (l.ends_with('/') && r.starts_with(l.as_str())))
        })
        .collect();
    assert!(
        stale.is_empty(),
        "listed in docs/design.md but without `unsafe`: {stale:?}"
    );
}

/// The calls that create, replace or link files in `src` (its code before its test modules,
/// which come last): `(what, line)`.
fn file_writers(src: &str) -> Vec<(String, usize)> {
    let lines: Vec<&str> = src.lines().collect();
    let code_end = (0..lines.len())
        .find(|&i| {
            lines[i].starts_with("#[cfg(")
                && lines[i].contains("test")
                && lines.get(i + 1).is_some_and(|l| l.starts_with("mod "))
        })
        .unwrap_or(lines.len());
    let mut out = Vec::new();
    for (n, line) in lines[..code_end].iter().enumerate() {
        let toks = tokens(line);
        let word = |i: usize| ident(toks.get(i));
        for i in 0..toks.len() {
            let found = match word(i) {
                Some(
                    w @ ("renameat" | "renameat2" | "MoveFileExW" | "MoveFileExA" | "ReplaceFileW"
                    | "linkat" | "CreateHardLinkW" | "create_new" | "O_CREAT" | "O_TMPFILE"),
                ) => Some(w.to_string()),
                Some("fs") if toks.get(i + 1) == Some(&Tok::Path) => match word(i + 2) {
                    Some(w @ ("rename" | "write" | "copy" | "hard_link")) => {
                        Some(format!("fs::{w}"))
                    }
                    _ => None,
                },
                Some("File")
                    if toks.get(i + 1) == Some(&Tok::Path) && word(i + 2) == Some("create") =>
                {
                    Some("File::create".into())
                }
                Some("create")
                    if i > 0
                        && toks[i - 1] == Tok::Punct('.')
                        && toks.get(i + 1) == Some(&Tok::Punct('('))
                        && word(i + 2) == Some("true") =>
                {
                    Some(".create(true)".into())
                }
                _ => None,
            };
            out.extend(found.map(|w| (w, n + 1)));
        }
    }
    out
}

#[test]
fn files_are_written_only_through_the_atomic_writer() {
    // The one writer of every file a save makes; the hard links of a re-save (link_over) in
    // the path-safe walk; the save lock's lock files.
    let allowed: &[(&str, &[&str])] = &[
        (
            "storage/atomic.rs",
            &[
                "renameat",
                "MoveFileExW",
                "create_new",
                "O_CREAT",
                "fs::rename",
            ],
        ),
        ("external/paths.rs", &["linkat", "fs::hard_link"]),
        ("storage/lock.rs", &[".create(true)"]),
    ];
    let krate = Crate::read(&root().join("src"));
    let mut seen = BTreeSet::new();
    let mut stray = Vec::new();
    for (rel, src) in &krate.files {
        // (the fuzz targets' fixtures, test-hooks only)
        if rel == "fuzzing.rs" {
            continue;
        }
        for (what, line) in file_writers(src) {
            match allowed.iter().find(|(f, _)| f == rel) {
                Some((_, ok)) if ok.contains(&what.as_str()) => {
                    seen.insert(what);
                }
                _ => stray.push(format!("src/{rel}:{line}: {what}")),
            }
        }
    }
    assert!(
        stray.is_empty(),
        "files written outside storage::atomic::AtomicFile: {stray:?}"
    );
    // (the check sees the writer's own calls, so it would see others)
    for w in ["renameat", "linkat", ".create(true)"] {
        assert!(seen.contains(w), "{w} not found: {seen:?}");
    }
    assert_eq!(
        file_writers("let f = std::fs::File::create(p)?;\nstd::fs::rename(a, b)?;"),
        [
            ("File::create".to_string(), 1),
            ("fs::rename".to_string(), 2)
        ]
    );
}

/// The import edges between the top-level modules of a crate's `src/` (one file per module, as
/// the Python binding has): `module -> crate::other` for every path in code, macros' `$crate`
/// paths included. Names that are not files of `src/` (exported macros) are not modules.
fn crate_module_edges(src_dir: &Path) -> BTreeMap<(String, String), String> {
    let mut modules = BTreeMap::new();
    for entry in std::fs::read_dir(src_dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "rs") {
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            modules.insert(name, std::fs::read_to_string(&path).unwrap());
        }
    }
    let mut edges = BTreeMap::new();
    for (name, src) in &modules {
        for path in absolute_paths(src, std::slice::from_ref(name)) {
            if let Some(to) = path
                .first()
                .filter(|t| *t != name && modules.contains_key(*t))
            {
                edges
                    .entry((name.clone(), to.clone()))
                    .or_insert_with(|| format!("{name}.rs: crate::{}", path.join("::")));
            }
        }
    }
    edges
}

#[test]
fn python_binding_modules_import_no_cycle() {
    let edges = crate_module_edges(&root().join("python/src"));
    assert!(edges.len() > 20, "the checker sees the imports: {edges:?}");
    if let Some(cycle) = find_cycle(edges.keys()) {
        let shown: Vec<&str> = cycle
            .windows(2)
            .map(|w| edges[&(w[0].clone(), w[1].clone())].as_str())
            .collect();
        panic!(
            "python/src modules import each other in a cycle {}: {}",
            cycle.join(" -> "),
            shown.join("; ")
        );
    }
}
