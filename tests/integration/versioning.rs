//! One version for everything the project ships, from one place: `[workspace.package]` of the
//! top-level Cargo.toml. The crate, the tool, the onnx component's binding and the Python package
//! inherit it, pyproject.toml declares it dynamic (maturin takes it from python/Cargo.toml), the
//! CMake package and the SONAME read it (cmake/OnnxLightCargo.cmake), and CHANGELOG.md names it.

use std::path::Path;

fn read(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The lines of one `[section]` of a TOML file.
fn section<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
    let header = format!("[{name}]");
    text.lines()
        .skip_while(|l| l.trim() != header)
        .skip(1)
        .take_while(|l| !l.starts_with('['))
        .collect()
}

#[test]
fn the_workspace_holds_the_one_version() {
    let manifest = read("Cargo.toml");
    let version = section(&manifest, "workspace.package")
        .into_iter()
        .find_map(|l| l.strip_prefix("version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .expect("a version in [workspace.package]");
    assert_eq!(version, env!("CARGO_PKG_VERSION"));
    for member in [
        "Cargo.toml",
        "cli/Cargo.toml",
        "python/Cargo.toml",
        "components/onnx/rust/Cargo.toml",
    ] {
        let manifest = read(member);
        let package = section(&manifest, "package")
            .into_iter()
            .filter(|l| l.starts_with("version"))
            .collect::<Vec<_>>();
        assert_eq!(
            package,
            ["version.workspace = true"],
            "{member}: the version is inherited"
        );
    }
    let pyproject = read("python/pyproject.toml");
    let project = section(&pyproject, "project");
    assert!(
        project.contains(&"dynamic = [\"version\"]"),
        "pyproject.toml: a dynamic version"
    );
    assert!(
        !project.iter().any(|l| l.starts_with("version")),
        "pyproject.toml: no version of its own"
    );
    let init = read("python/onnx_light/__init__.py");
    assert!(
        init.contains("__version__: str = _native.__version__"),
        "__version__ from the extension"
    );
}

#[test]
fn the_changelog_names_the_version() {
    let changelog = read("CHANGELOG.md");
    let heading = format!("## {}", env!("CARGO_PKG_VERSION"));
    assert!(
        changelog.lines().any(|l| l == heading),
        "CHANGELOG.md has no section `{heading}`"
    );
}

#[test]
fn the_readme_names_the_artifacts_of_this_version() {
    let readme = read("README.md");
    let wheel = format!(
        "onnx_light-{}-cp39-abi3-manylinux_2_34_x86_64.whl",
        env!("CARGO_PKG_VERSION")
    );
    let sdk = format!(
        "onnx_light-{}-linux-x86_64.tar.gz",
        env!("CARGO_PKG_VERSION")
    );
    assert!(readme.contains(&wheel), "README.md does not name {wheel}");
    assert!(readme.contains(&sdk), "README.md does not name {sdk}");
}
