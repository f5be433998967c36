//! Saves to a remote store. A model with external data is first written as a local directory
//! by the ordinary save (a private temporary directory, removed afterwards), then its weight
//! files are uploaded (multipart, `concurrency` parts in flight, several files at once) and the
//! `.onnx` last: a reader that finds the new `.onnx` finds its weights. A model without
//! external data is serialized in memory and uploaded as one object.

use std::io::Read;
use std::path::{Path, PathBuf};

use futures_util::StreamExt;
use object_store::{ObjectStoreExt, PutPayload, WriteMultipart};

use super::{Location, RemoteOptions, block_on};
use crate::codec::{SerializeOptions, serialize_to_vec};
use crate::error::{Error, Result};
use crate::external::{SaveExternalOptions, normalize_location, save_model_with_external_data};
use crate::proto::ModelProto;

/// A temporary directory, removed with its files when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Result<Self> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "onnxl-upload-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir(&dir).map_err(|e| Error::io(&dir, e))?;
        Ok(Self(dir))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Uploads the local file `src` to `dst` (see [`upload`]).
async fn upload_file(src: &Path, dst: &Location, ro: &RemoteOptions) -> Result<()> {
    let file = std::fs::File::open(src).map_err(|e| Error::io(src, e))?;
    let size = file.metadata().map_err(|e| Error::io(src, e))?.len();
    upload(file, size, src, dst, ro).await
}

/// Uploads the `size` bytes of `file` (read from `src`, for messages) to `dst`: one request
/// when they fit in a part, else a multipart upload with `ro.concurrency` parts in flight.
async fn upload(
    mut file: impl Read,
    size: u64,
    src: &Path,
    dst: &Location,
    ro: &RemoteOptions,
) -> Result<()> {
    let part = usize::try_from(ro.part_size).unwrap_or(usize::MAX);
    let send_err = |e: object_store::Error| dst.err(format_args!("upload failed: {e}"));
    if size <= part as u64 {
        let mut buf = Vec::with_capacity(size as usize);
        file.read_to_end(&mut buf).map_err(|e| Error::io(src, e))?;
        let n = buf.len() as u64;
        dst.store
            .put(&dst.key, PutPayload::from(buf))
            .await
            .map_err(send_err)?;
        if let Some(p) = &ro.progress {
            p(n);
        }
        return Ok(());
    }
    let upload = dst.store.put_multipart(&dst.key).await.map_err(send_err)?;
    let mut w = WriteMultipart::new_with_chunk_size(upload, part);
    let mut buf = vec![0u8; part];
    loop {
        let n = read_full(&mut file, &mut buf).map_err(|e| Error::io(src, e))?;
        if n == 0 {
            break;
        }
        if let Err(e) = w.wait_for_capacity(ro.concurrency).await {
            let _ = w.abort().await;
            return Err(send_err(e));
        }
        w.write(&buf[..n]);
        if let Some(p) = &ro.progress {
            p(n as u64);
        }
    }
    w.finish().await.map_err(send_err)?;
    Ok(())
}

/// Reads until `buf` is full or the file ends; the number of bytes read.
fn read_full(file: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// See [`super::save_model`].
pub(crate) fn save(
    model: &ModelProto,
    loc: &Location,
    opts: &SerializeOptions,
    external: Option<&SaveExternalOptions>,
    ro: &RemoteOptions,
) -> Result<()> {
    let Some(ext) = external else {
        let bytes = serialize_to_vec(model, opts)?;
        let size = bytes.len() as u64;
        let src = std::io::Cursor::new(bytes);
        return block_on(upload(src, size, Path::new("<model>"), loc, ro))?;
    };
    let name = loc.key.filename().unwrap_or("model.onnx").to_string();
    let tmp = TempDir::new()?;
    let model_path = tmp.0.join(&name);
    let report = save_model_with_external_data(model, &model_path, ext)?;
    // Weight files first (several at once), the model last.
    let mut weights = Vec::new();
    for f in &report.files {
        let rel = normalize_location(&f.location).map_err(|reason| Error::PathRefused {
            path: f.location.clone().into(),
            reason,
        })?;
        weights.push((tmp.0.join(&rel), loc.sibling(&rel)?));
    }
    let uploads: Vec<_> = weights
        .iter()
        .map(|(src, dst)| upload_file(src, dst, ro))
        .collect();
    block_on(async {
        let mut running =
            futures_util::stream::iter(uploads).buffer_unordered(ro.concurrency.clamp(1, 4));
        while let Some(r) = running.next().await {
            r?;
        }
        upload_file(&model_path, loc, ro).await
    })?
}
