//! `onnx-light check MODEL`: the model parses, passes onnx's own checker (full check: built with
//! the `onnx` feature), and every external reference is resolvable under the path rules, lies
//! inside its file, matches its tensor's size, and matches its checksum. `--infer-shapes OUT`
//! writes the model with the types onnx's shape inference found.

use std::path::PathBuf;

use onnx_light::external::{check_external_data, model_dir};
use onnx_light::proto::ModelProto;
use onnx_light::{Error, LoadOptions, Result};

/// Arguments of `check`.
#[derive(clap::Args)]
pub struct Args {
    /// Model to check (.onnx).
    model: PathBuf,
    /// Base directory of the weight files (default: the model's directory).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Do not verify checksums (they read every byte of the weight files).
    #[arg(long)]
    no_checksum: bool,
    /// The passphrase of encrypted weight files.
    #[command(flatten)]
    key: super::crypt::OptionalKeySource,
    /// Write the model with onnx's inferred shapes (strict inference) to this file.
    #[arg(long, value_name = "OUT")]
    infer_shapes: Option<PathBuf>,
}

/// Runs the subcommand.
pub fn run(args: &Args) -> Result<()> {
    let opts = LoadOptions {
        load_external_data: false,
        external_data_key: args.key.read()?,
        ..Default::default()
    };
    let mut model = onnx_light::load_model(&args.model, &opts)?;
    let dir = args
        .data_dir
        .clone()
        .unwrap_or_else(|| model_dir(&args.model));
    let mut tensors = 0usize;
    model.visit_tensors(&mut |_| tensors += 1);
    outln!(
        "{}: parses ({} tensors, {} nodes in the main graph)",
        args.model.display(),
        tensors,
        model.graph().node().len()
    );
    let mut basics = onnx_basics(&model);
    for p in &basics {
        outln!("problem: {p}");
    }
    if basics.is_empty() {
        basics.extend(onnx_checker(&mut model, args)?);
    } else if args.infer_shapes.is_some() {
        return Err(Error::InvalidArgument(format!(
            "{}: not a usable ONNX model: {}",
            args.model.display(),
            basics[0]
        )));
    }
    if let Some(url) = super::remote::url(&args.model) {
        return check_remote(url, &model, basics, args);
    }
    // Size of the checksum work, for the progress bar.
    let pre = check_external_data(&model, &dir, &opts, false, None);
    let hashed: u64 = pre.files.iter().map(|f| f.size).sum();
    let bar = if args.no_checksum {
        None
    } else {
        super::convert::progress_bar(hashed, "verifying")
    };
    let tick = |n: u64| {
        if let Some(b) = &bar {
            b.inc(n);
        }
    };
    let report = check_external_data(&model, &dir, &opts, !args.no_checksum, Some(&tick));
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    outln!(
        "external data: {} tensors, {} bytes, {} file(s), {} checksum(s) verified",
        report.tensors,
        report.bytes,
        report.files.len(),
        report.checksums_verified
    );
    for f in &report.files {
        let enc = if f.encrypted { ", encrypted" } else { "" };
        outln!("  {} ({} bytes{enc})", f.location, f.size);
    }
    if report.problems.is_empty() && basics.is_empty() {
        outln!("OK");
        return Ok(());
    }
    for p in &report.problems {
        outln!("problem: {p}");
    }
    outln!("{} problem(s)", report.problems.len() + basics.len());
    let mut problems = report.problems;
    if let Some(first) = basics.into_iter().next() {
        return Err(Error::InvalidArgument(format!(
            "{}: not a usable ONNX model: {first}",
            args.model.display()
        )));
    }
    Err(problems.remove(0))
}

/// The external data of a remote model: loaded from the store (every location under the path
/// rules, every range inside its object, checksums verified unless `--no-checksum`).
fn check_remote(url: &str, model: &ModelProto, basics: Vec<String>, args: &Args) -> Result<()> {
    let (mut tensors, mut bytes) = (0usize, 0u64);
    model.visit_tensors(&mut |t| {
        if onnx_light::external::uses_external_data(t) {
            tensors += 1;
            bytes += onnx_light::external::ExternalDataInfo::parse(t)
                .ok()
                .and_then(|i| i.length)
                .unwrap_or(0);
        }
    });
    if tensors > 0 {
        let opts = LoadOptions {
            verify_external_checksums: !args.no_checksum,
            external_data_dir: args.data_dir.clone(),
            ..Default::default()
        };
        super::remote::load(url, &opts)?;
    }
    outln!(
        "external data: {tensors} tensors, {bytes} bytes, all read{}",
        if args.no_checksum {
            ""
        } else {
            ", recorded checksums verified"
        }
    );
    if let Some(first) = basics.into_iter().next() {
        outln!("problem: {first}");
        return Err(Error::InvalidArgument(format!(
            "{url}: not a usable ONNX model: {first}"
        )));
    }
    outln!("OK");
    Ok(())
}

/// What a usable ONNX model must have beyond a valid protobuf encoding (an empty file is a
/// valid, empty `ModelProto`): an IR version, a graph, and opset imports (required from IR
/// version 3 on).
fn onnx_basics(m: &ModelProto) -> Vec<String> {
    let mut problems = Vec::new();
    match m.ir_version_opt() {
        None | Some(0) => problems.push("ir_version is not set".to_string()),
        Some(v) if v < 0 => problems.push(format!("ir_version {v} is negative")),
        _ => {}
    }
    if !m.has_graph() {
        problems.push("no graph".into());
    }
    if m.opset_import().is_empty() && m.ir_version_opt().is_none_or(|v| v >= 3) {
        problems.push("no opset_import (required from IR version 3 on)".into());
    }
    problems
}

/// onnx's own checker (full check, which includes strict shape inference), and with
/// `--infer-shapes` the model with the inferred shapes written there (inferred into `model`
/// itself: the checks after this one read nothing inference adds). Returns the checker's
/// problem, if any.
///
/// onnx's checker looks for the file of every tensor stored externally relative to the
/// directory it is given, which for a model in memory is the working directory: a model with
/// external data is checked as onnx checks a loaded one, with its external data read in (from
/// `--data-dir`, the model's directory or the model's URL). When that read fails the checker is
/// not run; the external-data checks below report why.
#[cfg(feature = "onnx")]
fn onnx_checker(model: &mut ModelProto, args: &Args) -> Result<Vec<String>> {
    use onnx_light_onnx::{CheckOptions, ShapeInferenceOptions};
    let full = CheckOptions {
        full_check: true,
        ..Default::default()
    };
    let version = onnx_light_onnx::onnx_version();
    let mut external = false;
    model.visit_tensors(&mut |t| external |= onnx_light::external::uses_external_data(t));
    let mut with_data = None;
    if external {
        let opts = LoadOptions {
            external_data_dir: args.data_dir.clone(),
            external_data_key: args.key.read()?,
            ..Default::default()
        };
        match onnx_light::load_model(&args.model, &opts) {
            Ok(m) => with_data = Some(m),
            Err(e) => {
                outln!("onnx {version} checker: not run (reading the external data: {e})");
                return Ok(Vec::new());
            }
        }
    }
    let target = with_data.as_mut().unwrap_or(model);
    let checked = onnx_light_onnx::check_model(target, &full);
    // The payload copies onnx's reads made go back before the external-data checks run.
    onnx_light_onnx::release_cxx_copies(target);
    drop(with_data);
    let problems = match checked {
        Ok(()) => {
            outln!("onnx {version} checker (full check): valid");
            Vec::new()
        }
        Err(e) => {
            outln!("onnx {version} checker (full check): {e}");
            vec![format!("onnx's checker: {e}")]
        }
    };
    if let Some(out) = args.infer_shapes.as_deref() {
        let strict = ShapeInferenceOptions {
            strict_mode: true,
            ..Default::default()
        };
        onnx_light_onnx::infer_shapes_in_place(model, &strict)
            .map_err(|e| Error::InvalidArgument(format!("shape inference: {e}")))?;
        onnx_light::save_model(model, out, &onnx_light::SerializeOptions::default())?;
        outln!(
            "inferred shapes: {} value_info entries, written to {}",
            model.graph().value_info().len(),
            out.display()
        );
    }
    Ok(problems)
}

/// Without onnx's C++ library only the checks above run; `--infer-shapes` needs it.
#[cfg(not(feature = "onnx"))]
fn onnx_checker(_model: &mut ModelProto, args: &Args) -> Result<Vec<String>> {
    if args.infer_shapes.is_some() {
        return Err(Error::Unsupported(
            "--infer-shapes needs onnx's C++ library: build onnx-light with `--features onnx` \
             (docs/cpp.md)"
                .into(),
        ));
    }
    outln!("onnx checker: not built in (build onnx-light with `--features onnx`)");
    Ok(Vec::new())
}
