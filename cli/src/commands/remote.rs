//! Models given as `s3://`, `az://`, `http://` or `https://` URLs: loads and saves through the library's
//! remote client, with a progress line (bytes, rate) on a terminal and a summary on stderr.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use onnx_light::proto::ModelProto;
use onnx_light::remote::{self, RemoteOptions};
use onnx_light::{LoadOptions, Result, SaveExternalOptions, SerializeOptions};

/// `path` as a URL, when it is one.
pub fn url(path: &Path) -> Option<&str> {
    remote::is_url(path).then(|| path.to_str()).flatten()
}

/// Runs `job` with options whose progress callback draws a spinner (bytes, rate) on a terminal,
/// then prints what moved and how fast.
fn with_progress<T>(
    verb: &str,
    url: &str,
    job: impl FnOnce(&RemoteOptions) -> Result<T>,
) -> Result<T> {
    use std::io::IsTerminal;
    let bar = std::io::stderr().is_terminal().then(|| {
        let b = indicatif::ProgressBar::new_spinner();
        b.set_style(
            indicatif::ProgressStyle::with_template("{msg} {bytes} ({bytes_per_sec})")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
        );
        b.set_message(format!("{verb} {url}"));
        b
    });
    let moved = Arc::new(AtomicU64::new(0));
    let ro = RemoteOptions {
        progress: Some({
            let moved = moved.clone();
            let bar = bar.clone();
            Arc::new(move |n| {
                moved.fetch_add(n, Ordering::Relaxed);
                if let Some(b) = &bar {
                    b.inc(n);
                }
            })
        }),
        ..RemoteOptions::from_env()?
    };
    let start = Instant::now();
    let out = job(&ro);
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let secs = start.elapsed().as_secs_f64();
    let bytes = moved.load(Ordering::Relaxed);
    if out.is_ok() {
        errln!(
            "{verb} {bytes} bytes {} {url} in {secs:.2} s ({:.1} MB/s)",
            if verb == "fetched" { "from" } else { "to" },
            bytes as f64 / secs.max(1e-9) / 1e6
        );
    }
    out
}

/// Loads the model at `url`.
pub fn load(url: &str, opts: &LoadOptions) -> Result<ModelProto> {
    with_progress("fetched", url, |ro| remote::load_model(url, opts, ro))
}

/// Saves `model` to `url` (with external data when `external` is given).
pub fn save(
    model: &ModelProto,
    url: &str,
    opts: &SerializeOptions,
    external: Option<&SaveExternalOptions>,
) -> Result<()> {
    with_progress("sent", url, |ro| {
        remote::save_model(model, url, opts, external, ro)
    })
}
