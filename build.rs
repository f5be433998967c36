//! Build script: sets the SONAME of the shared library on ELF targets, and `cfg(onnxl_small)` in
//! size-optimized builds.
//!
//! The exported symbols need no help here: for a `cdylib` rustc itself hands the linker a version
//! script that exports the crate graph's C-level symbols (the `#[unsafe(no_mangle)]` `onnxl_*`
//! functions) and makes everything else local, including the C and assembly objects of
//! dependencies. A second anonymous version script would be refused by GNU ld ("anonymous version
//! tag cannot be combined with other version tags"), which links for every target but the host's
//! default (rust-lld); scripts/test.d/10-c-header.sh and 70-cross.sh check that only `onnxl_*` is
//! exported.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    // `cfg(onnxl_small)` in a size-optimized build (`opt-level` "s" or "z": the profile
    // `dist-min` of the minimal library): the decoder's string and sub-message readers and the
    // encoder's byte and varint writers, inlined by force into every field's code otherwise,
    // are out of line there, and a push into a repeated field always takes its slow path
    // (docs/benchmarks.md, "Library size": ~100 KB less; parse and serialize slower, measured
    // there).
    let small = matches!(std::env::var("OPT_LEVEL").as_deref(), Ok("s" | "z"));
    if small {
        println!("cargo:rustc-cfg=onnxl_small");
    }
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    // The size-optimized shared library on GNU/Linux packs its relative relocations (DT_RELR,
    // `-z pack-relative-relocs`: GNU ld 2.38+, lld; an older GNU ld ignores the option): the
    // ~1 800 relocations of its vtables and tables take ~1 KB instead of ~43 KB. Such a library
    // needs glibc 2.36 or later to load (an older one refuses it with a version error naming
    // GLIBC_ABI_DT_RELR); the full build keeps the classic relocations.
    if small && os == "linux" && env == "gnu" {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-z,pack-relative-relocs");
    }
    // ...and folds identical functions (`--icf=all`: the monomorphized copies whose code came
    // out the same, ~24 KB; functions only, not data: lld folds read-only data only with
    // `--ignore-data-address-equality`) when the linker is rustc's own lld, the default of
    // x86_64-unknown-linux-gnu since Rust 1.90 (GNU ld has no such option).
    if small && default_lld() {
        println!("cargo:rustc-cdylib-link-arg=-Wl,--icf=all");
    }
    // GNU ld, gold, lld and mold all accept `-soname` on these targets.
    if matches!(
        os.as_str(),
        "linux"
            | "android"
            | "freebsd"
            | "netbsd"
            | "openbsd"
            | "dragonfly"
            | "solaris"
            | "illumos"
    ) {
        // SONAME as cargo-c sets it: lib<name>.so.<major>, or .so.0.<minor> before 1.0 (the CMake
        // package installs libonnx_light.so.0.2.0 with the .so.0.2 and .so links).
        let major = std::env::var("CARGO_PKG_VERSION_MAJOR").expect("cargo sets the version");
        let minor = std::env::var("CARGO_PKG_VERSION_MINOR").expect("cargo sets the version");
        let soversion = if major == "0" {
            format!("0.{minor}")
        } else {
            major
        };
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libonnx_light.so.{soversion}");
    }
}

/// True when this build links with the lld that rustc ships: the target is
/// x86_64-unknown-linux-gnu, the compiler Rust 1.90 or later, and neither a configured linker
/// (`RUSTC_LINKER`) nor a `-C` flag about the linker (`linker`, `linker-flavor`,
/// `link-self-contained`, `-fuse-ld` in a `link-arg`) changes that.
fn default_lld() -> bool {
    if std::env::var("TARGET").as_deref() != Ok("x86_64-unknown-linux-gnu")
        || std::env::var_os("RUSTC_LINKER").is_some()
    {
        return false;
    }
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    if flags.contains("linker")
        || flags.contains("link-self-contained")
        || flags.contains("fuse-ld")
    {
        return false;
    }
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let Ok(out) = std::process::Command::new(rustc).arg("--version").output() else {
        return false;
    };
    // "rustc 1.95.0 (59807616e 2026-04-14)"
    let version = String::from_utf8_lossy(&out.stdout);
    let mut parts = version
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .split('.')
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= (1, 90)
}
