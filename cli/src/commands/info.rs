//! `onnx-light info`: a summary of a model.

use std::collections::BTreeMap;
use std::path::Path;

use onnx_light::external::{ExternalDataInfo, uses_external_data};
use onnx_light::proto::{GraphProto, ModelProto, ValueInfoProto};
use onnx_light::{Error, LoadOptions, ParseOptions, Result};

/// The sample model bundled in the binary (`samples/mlp.onnx`).
const SAMPLE_MODEL: &[u8] = include_bytes!("../../../samples/mlp.onnx");

fn value_line(v: &ValueInfoProto) -> String {
    format!("  {}: {}", v.name(), v.r#type())
}

/// External files referenced by tensors of the main graph's initializers.
fn external_files(g: &GraphProto) -> BTreeMap<String, u64> {
    let mut files = BTreeMap::new();
    for t in g.initializer() {
        if uses_external_data(t) {
            // An unreadable reference is summarized as `?` (loading the model reports it).
            let (loc, len) = match ExternalDataInfo::parse(t) {
                Ok(info) => (info.location, info.length.unwrap_or(0)),
                Err(_) => ("?".to_string(), 0),
            };
            *files.entry(loc).or_insert(0) += len;
        }
    }
    files
}

/// Renders the summary of `m` (with its pre-packed blobs, when it has any); without
/// `payloads` (a metadata-only load) the bytes of the payloads are not known.
pub fn summary(
    m: &ModelProto,
    blobs: &onnx_light::PrepackedBlobs,
    source: &str,
    file_size: u64,
    payloads: bool,
) -> String {
    let mut out = String::new();
    let g = m.graph();
    let line = |out: &mut String, s: String| {
        out.push_str(&s);
        out.push('\n');
    };
    line(&mut out, format!("model: {source} ({file_size} bytes)"));
    line(&mut out, format!("ir_version: {}", m.ir_version()));
    let opsets: Vec<String> = m
        .opset_import()
        .iter()
        .map(|o| {
            let d = o.domain().to_string();
            format!(
                "{}:{}",
                if d.is_empty() { "ai.onnx" } else { &d },
                o.version()
            )
        })
        .collect();
    line(&mut out, format!("opsets: {}", opsets.join(", ")));
    line(
        &mut out,
        format!("producer: {} {}", m.producer_name(), m.producer_version()),
    );
    line(&mut out, format!("graph: {}", g.name()));
    line(&mut out, format!("inputs ({}):", g.input().len()));
    for v in g.input() {
        line(&mut out, value_line(v));
    }
    line(&mut out, format!("outputs ({}):", g.output().len()));
    for v in g.output() {
        line(&mut out, value_line(v));
    }
    let mut ops: BTreeMap<String, usize> = BTreeMap::new();
    for n in g.node() {
        let d = n.domain().to_string();
        let key = if d.is_empty() {
            n.op_type().to_string()
        } else {
            format!("{d}::{}", n.op_type())
        };
        *ops.entry(key).or_default() += 1;
    }
    let mut hist: Vec<(String, usize)> = ops.into_iter().collect();
    hist.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let hist: Vec<String> = hist.iter().map(|(k, v)| format!("{k} x{v}")).collect();
    line(
        &mut out,
        format!("nodes: {} ({})", g.node().len(), hist.join(", ")),
    );
    let inline_bytes: u64 = g
        .initializer()
        .iter()
        .map(|t| t.raw_data().len() as u64)
        .sum();
    let inline = if payloads {
        format!("{inline_bytes} bytes inline")
    } else {
        "payloads not fetched".to_string()
    };
    line(
        &mut out,
        format!(
            "initializers: {} ({inline}), sparse initializers: {}",
            g.initializer().len(),
            g.sparse_initializer().len()
        ),
    );
    let ext = external_files(g);
    if ext.is_empty() {
        line(&mut out, "external files: none".to_string());
    } else {
        for (f, len) in ext {
            line(
                &mut out,
                format!("external file: {f} ({len} bytes referenced)"),
            );
        }
    }
    if !blobs.is_empty() {
        line(&mut out, format!("pre-packed blobs: {}", blobs.len()));
        for l in super::prepack::listing(blobs) {
            line(&mut out, l);
        }
    }
    if !m.functions().is_empty() {
        line(&mut out, format!("functions: {}", m.functions().len()));
    }
    if payloads {
        line(
            &mut out,
            format!(
                "tensors copied for alignment: {} (by a no-copy load, {}-byte alignment)",
                copied_for_alignment(m),
                ParseOptions::default().alignment
            ),
        );
    }
    for p in m.metadata_props() {
        line(&mut out, format!("metadata: {} = {}", p.key(), p.value()));
    }
    out
}

/// The tensors a no-copy load with the default options copies because their bytes are not
/// aligned in the file: of a model loaded with no alignment requirement (every large payload
/// borrowed where it is), those copied already and the borrowed ones that are misaligned.
fn copied_for_alignment(m: &ModelProto) -> usize {
    let d = ParseOptions::default();
    let mut n = 0;
    m.visit_tensors(&mut |t| {
        if let Some(r) = t.raw_data_opt() {
            let large = r.len() as u64 >= d.raw_data_threshold && !r.is_empty();
            let misaligned = r.as_ptr() as u64 % d.alignment != 0;
            n += usize::from(r.is_realigned() || (large && r.is_borrowed() && misaligned));
        }
    });
    n
}

/// Runs the subcommand.
pub fn run(path: Option<&Path>, threads: i32, key: &super::crypt::OptionalKeySource) -> Result<()> {
    // No-copy: the summary needs no tensor bytes, and it reports how many tensors a no-copy
    // load has to copy because they are not aligned in the file.
    let opts = LoadOptions {
        external_data_key: key.read()?,
        ..LoadOptions::from(ParseOptions {
            num_threads: threads,
            no_copy: true,
            alignment: 1,
            ..Default::default()
        })
    };
    let (model, blobs, source, size) = match path {
        Some(p) if super::remote::url(p).is_some() => {
            let url = super::remote::url(p).unwrap_or_default();
            let size = onnx_light::remote::object_size(
                url,
                &onnx_light::remote::RemoteOptions::from_env()?,
            )?;
            let mut opts = LoadOptions {
                load_external_data: false,
                ..opts
            };
            opts.parse.skip_raw_data = true;
            let m = super::remote::load(url, &opts)?;
            out!("{}", summary(&m, &Default::default(), url, size, false));
            return Ok(());
        }
        Some(p) => {
            let (m, blobs) =
                onnx_light::load_model_with_prepacked(p, &opts).map_err(|e| match e {
                    Error::ExternalData {
                        reason,
                        tensor,
                        path,
                    } if opts.external_data_key.is_none() && reason.contains("no passphrase") => {
                        Error::ExternalData {
                            reason: format!(
                                "{reason} (give it with --key-file PATH or --key-env VAR)"
                            ),
                            tensor,
                            path,
                        }
                    }
                    e => e,
                })?;
            let size = std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
            (m, blobs, p.display().to_string(), size)
        }
        None => {
            let m = onnx_light::load_model_from_bytes(SAMPLE_MODEL, &opts)?;
            (
                m,
                Default::default(),
                "<bundled sample mlp.onnx>".to_string(),
                SAMPLE_MODEL.len() as u64,
            )
        }
    };
    out!("{}", summary(&model, &blobs, &source, size, true));
    Ok(())
}
