//! The Windows path rules of external data, end to end through loads, saves and the checker
//! (docs/external-data.md): drive letters, UNC and `\\?\` / `\\.\` paths, alternate data
//! streams, reserved device names (with extensions too), and case-insensitive names. Run under
//! Wine by the cross step (scripts/test.d/70-cross.sh). On other systems the same tests check the
//! rules that hold everywhere, and that the Windows-only names are ordinary names there.
//! Reparse points (junctions, symbolic links) are refused like symbolic links; Wine 8 cannot
//! create one (see the unit test `reparse_points_are_refused_by_their_attribute` in
//! src/external/paths.rs).

use crate::common;

use std::path::Path;

use common::TempDir;
use onnx_light::external::{
    DATA_LOCATION_EXTERNAL, check_external_data, load_external_data_for_model,
    save_model_with_external_data,
};
use onnx_light::proto::{ModelProto, StringStringEntryProto, TensorProto};
use onnx_light::{Error, LoadOptions, ParseOptions, SaveExternalOptions};

const LEN: usize = 4096;

/// A model whose one tensor `w` (UINT8, [`LEN`] bytes) is external at `location`.
fn model_at(location: &str) -> ModelProto {
    let mut t = TensorProto::new();
    t.set_name("w");
    t.set_data_type(2);
    t.add_dims(LEN as i64);
    t.set_data_location(DATA_LOCATION_EXTERNAL);
    t.mutable_external_data().push({
        let mut s = StringStringEntryProto::new();
        s.set_key("location");
        s.set_value(location);
        s
    });
    let mut m = ModelProto::new();
    m.set_ir_version(10);
    m.mutable_graph().mutable_initializer().push(t);
    m
}

/// A model with the tensors `names` (UINT8, [`LEN`] bytes each, filled with 1, 2, ...) in memory.
fn model_with(names: &[&str]) -> ModelProto {
    let mut m = ModelProto::new();
    m.set_ir_version(10);
    for (i, name) in names.iter().enumerate() {
        m.mutable_graph()
            .mutable_initializer()
            .push(common::uint8_tensor(name, LEN, i as u8 + 1));
    }
    m
}

/// Saves a model referencing `location` beside `dir/m.onnx`; the load (copy and no-copy), the
/// load after the fact and the checker all refuse it, naming the location and the tensor.
fn assert_load_refused(dir: &Path, location: &str, what: &str) {
    let path = dir.join("m.onnx");
    let m = model_at(location);
    onnx_light::save_model(&m, &path, &Default::default()).unwrap();
    for no_copy in [false, true] {
        let opts = ParseOptions {
            no_copy,
            ..Default::default()
        };
        let e = onnx_light::load_model(&path, &LoadOptions::from(opts.clone())).unwrap_err();
        assert!(
            matches!(e, Error::PathRefused { .. }),
            "{what} ({location:?}): {e}"
        );
        assert!(e.to_string().contains(location), "{what}: names it: {e}");
        assert!(
            e.to_string().contains("'w'"),
            "{what}: names the tensor: {e}"
        );
        let mut again = m.clone();
        let e = load_external_data_for_model(&mut again, dir, &LoadOptions::from(opts.clone()))
            .unwrap_err();
        assert!(matches!(e, Error::PathRefused { .. }), "{what}: {e}");
    }
    let r = check_external_data(&m, dir, &LoadOptions::default(), true, None);
    assert_eq!(r.problems.len(), 1, "{what}");
    assert!(matches!(r.problems[0], Error::PathRefused { .. }), "{what}");
    assert!(r.files.is_empty(), "{what}: no file opened");
}

/// A save with `location` as its weight file is refused, naming it, and writes nothing.
fn assert_save_refused(dir: &Path, location: &str, what: &str) {
    let before = names(dir);
    let opts = SaveExternalOptions {
        location: Some(location.into()),
        size_threshold: 0,
        ..Default::default()
    };
    let e =
        save_model_with_external_data(&model_with(&["w"]), dir.join("m.onnx"), &opts).unwrap_err();
    assert!(
        matches!(e, Error::PathRefused { .. }),
        "{what} ({location:?}): {e}"
    );
    assert!(e.to_string().contains(location), "{what}: names it: {e}");
    assert_eq!(names(dir), before, "{what}: nothing written");
}

/// A save with the absolute `location` (UNC, device or verbatim path) either is refused or
/// writes the weights inside `dir` under the location's last name (as every absolute location
/// is reduced), never at the path itself.
fn assert_save_stays_inside(dir: &Path, location: &str, what: &str) {
    let opts = SaveExternalOptions {
        location: Some(location.into()),
        size_threshold: 0,
        ..Default::default()
    };
    match save_model_with_external_data(&model_with(&["w"]), dir.join("m.onnx"), &opts) {
        Err(e) => {
            assert!(
                matches!(e, Error::PathRefused { .. }),
                "{what} ({location:?}): {e}"
            );
            assert!(e.to_string().contains(location), "{what}: names it: {e}");
        }
        Ok(r) => {
            let written = &r.files[0].location;
            assert!(
                !written.contains(['\\', '/', ':']),
                "{what} ({location:?}): written as {written}"
            );
            assert!(location.ends_with(written.as_str()), "{what}: {written}");
            assert!(dir.join(written).is_file(), "{what}: inside");
            std::fs::remove_file(dir.join(written)).unwrap();
        }
    }
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Loads `dir/m.onnx` (referencing `location`, which holds the right bytes) without error.
fn assert_loads(dir: &Path, location: &str) {
    std::fs::write(dir.join(location), common::pattern(LEN, 9)).unwrap();
    let path = dir.join("m.onnx");
    onnx_light::save_model(&model_at(location), &path, &Default::default()).unwrap();
    let m = onnx_light::load_model(&path, &LoadOptions::default()).unwrap();
    assert_eq!(
        m.graph().initializer()[0].raw_data(),
        common::pattern(LEN, 9)
    );
}

#[test]
fn drive_letters_are_refused() {
    let dir = TempDir::new("win-drive");
    // A file outside the model directory, by its absolute Windows path (drive Z: is the Unix
    // root under Wine; elsewhere the paths are refused all the same).
    let outside = TempDir::new("win-drive-out");
    std::fs::write(outside.path("secret.bin"), vec![0x5a; LEN]).unwrap();
    let absolute = std::path::absolute(outside.path("secret.bin")).unwrap();
    for (loc, what) in [
        (
            absolute.to_string_lossy().into_owned(),
            "this system's absolute path",
        ),
        ("C:\\secret.bin".into(), "drive letter, backslash"),
        ("c:/secret.bin".into(), "drive letter, slash"),
        ("Z:secret.bin".into(), "drive-relative"),
        ("sub/C:secret.bin".into(), "drive letter inside"),
        ("\\secret.bin".into(), "root of the current drive"),
    ] {
        assert_load_refused(&dir.0, &loc, what);
    }
    // A save reduces an absolute location to its file name (written inside the directory); a
    // drive-relative one is refused.
    let opts = SaveExternalOptions {
        location: Some("C:\\x\\w.bin".into()),
        size_threshold: 0,
        ..Default::default()
    };
    let r = save_model_with_external_data(&model_with(&["w"]), dir.path("m.onnx"), &opts).unwrap();
    assert_eq!(r.files[0].location, "w.bin");
    assert_eq!(
        std::fs::read(outside.path("secret.bin")).unwrap(),
        vec![0x5a; LEN]
    );
    assert_save_refused(&dir.0, "C:w.bin", "drive-relative");
}

#[test]
fn unc_and_device_paths_are_refused() {
    let dir = TempDir::new("win-unc");
    for (loc, what) in [
        ("\\\\server\\share\\w.bin", "UNC"),
        ("//server/share/w.bin", "UNC, slashes"),
        ("\\\\localhost\\C$\\w.bin", "UNC to this machine"),
        ("\\\\?\\C:\\w.bin", "verbatim"),
        ("\\\\?\\UNC\\server\\share\\w.bin", "verbatim UNC"),
        ("\\\\.\\NUL", "device namespace"),
        ("\\\\.\\PhysicalDrive0", "device namespace, a disk"),
        ("\\??\\C:\\w.bin", "NT object namespace"),
    ] {
        assert_load_refused(&dir.0, loc, what);
        assert_save_stays_inside(&dir.0, loc, what);
    }
}

#[test]
fn alternate_data_streams_are_refused() {
    let dir = TempDir::new("win-ads");
    std::fs::write(dir.path("w.bin"), vec![1u8; LEN]).unwrap();
    for (loc, what) in [
        ("w.bin:secret", "named stream"),
        ("w.bin::$DATA", "the default stream, spelled out"),
        ("w.bin:secret:$DATA", "named stream with its type"),
        ("sub:dir/w.bin", "stream in a parent"),
    ] {
        assert_load_refused(&dir.0, loc, what);
        assert_save_refused(&dir.0, loc, what);
    }
}

#[test]
fn reserved_device_names_are_refused_on_windows() {
    let dir = TempDir::new("win-reserved");
    let reserved = [
        "CON",
        "con",
        "NUL",
        "nul.bin",
        "Nul.tar.gz",
        "AUX",
        "PRN.txt",
        "COM1",
        "com1.bin",
        "COM9",
        "LPT1",
        "lpt9.data",
        "COM¹",
        "CONIN$",
        "CONOUT$.x",
        "NUL .bin",
        "d/CON",
        "d/aux.bin",
    ];
    for loc in reserved {
        if cfg!(windows) {
            // Never opened: CON would wait for console input, NUL read as empty.
            assert_load_refused(&dir.0, loc, "reserved device name");
            assert_save_refused(&dir.0, loc, "reserved device name");
        } else if !loc.starts_with("d/") {
            // Ordinary file names elsewhere.
            assert_loads(&dir.0, loc);
        }
    }
    // Names that only look like them are files on Windows too.
    for loc in ["CONSOLE.bin", "COM10", "nul_1.bin", "LPT", "auxiliary"] {
        assert_loads(&dir.0, loc);
    }
}

#[test]
fn names_that_windows_would_change_are_refused_on_windows() {
    let dir = TempDir::new("win-trailing");
    for loc in ["w.bin.", "w.bin ", "d./w.bin", "a<b", "a|b", "a?b", "a*b"] {
        if cfg!(windows) {
            assert_load_refused(&dir.0, loc, "a name Windows changes or refuses");
            assert_save_refused(&dir.0, loc, "a name Windows changes or refuses");
        }
    }
}

#[test]
fn case_insensitive_names() {
    let dir = TempDir::new("win-case");
    // One file per tensor: "w", "W" and "w_1" get three different files on every system
    // (unique case-insensitively), so none overwrites another on Windows.
    let m = model_with(&["w", "W", "w_1"]);
    let opts = SaveExternalOptions {
        all_tensors_to_one_file: false,
        size_threshold: 0,
        ..Default::default()
    };
    let r = save_model_with_external_data(&m, dir.path("m.onnx"), &opts).unwrap();
    let mut lower: Vec<_> = r.files.iter().map(|f| f.location.to_lowercase()).collect();
    lower.sort();
    lower.dedup();
    assert_eq!(lower.len(), 3, "{:?}", r.files);
    let loaded = onnx_light::load_model(dir.path("m.onnx"), &LoadOptions::default()).unwrap();
    for (a, b) in loaded
        .graph()
        .initializer()
        .iter()
        .zip(m.graph().initializer().iter())
    {
        assert_eq!((a.name(), a.raw_data()), (b.name(), b.raw_data()));
    }
    // A weight file named like the model file, in any case, is refused on save.
    for loc in ["m.onnx", "M.ONNX", "M.onnx"] {
        assert_save_refused(&dir.0, loc, "the model file itself");
    }
    // On Windows a location in another case names the same file.
    if cfg!(windows) {
        std::fs::write(dir.path("Weights.BIN"), common::pattern(LEN, 9)).unwrap();
        onnx_light::save_model(
            &model_at("weights.bin"),
            dir.path("m2.onnx"),
            &Default::default(),
        )
        .unwrap();
        let m = onnx_light::load_model(dir.path("m2.onnx"), &LoadOptions::default()).unwrap();
        assert_eq!(
            m.graph().initializer()[0].raw_data(),
            common::pattern(LEN, 9)
        );
    }
}
