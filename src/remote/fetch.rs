//! Ranged reads of one remote object, pinned to the version seen first: every request carries
//! `If-Match` with the ETag (and the version id where the store has versions), every response
//! is checked for its length, and a body cut short is resumed where it stopped, so a load never
//! mixes two versions of an object and never returns fewer bytes than asked for.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

use futures_util::StreamExt;
use object_store::{GetOptions, GetRange, ObjectStoreExt};

use super::{Location, RemoteOptions, block_on};
use crate::codec::ParseOptions;
use crate::codec::sparse::{Image, sparse_image};
use crate::error::{Error, Result};

static FETCHED: AtomicU64 = AtomicU64::new(0);
static REQUESTS: AtomicU64 = AtomicU64::new(0);

/// Body bytes received by remote reads of this process so far.
pub fn bytes_fetched() -> u64 {
    FETCHED.load(Ordering::Relaxed)
}

/// Ranged read requests of this process so far (retries and resumptions included).
pub fn requests_made() -> u64 {
    REQUESTS.load(Ordering::Relaxed)
}

/// A remote object of known size and version.
pub(crate) struct Object {
    pub(crate) loc: Location,
    pub(crate) size: u64,
    etag: Option<String>,
    version: Option<String>,
}

/// The reason of a failed request, for a message that already names the URL and the range.
fn reason(e: &object_store::Error) -> String {
    use object_store::Error as E;
    match e {
        E::NotFound { .. } => "not found (HTTP 404)".into(),
        E::Precondition { .. } => {
            "the object changed while it was being read (its ETag no longer matches): \
             load it again"
                .into()
        }
        E::PermissionDenied { source, .. } => format!("access denied (HTTP 403): {source}"),
        E::Unauthenticated { source, .. } => format!("not authenticated (HTTP 401): {source}"),
        e => {
            // The causes too: "error sending request" alone does not say that a certificate
            // was refused.
            let mut text = e.to_string();
            let mut cause = std::error::Error::source(e);
            let mut timed_out = false;
            while let Some(c) = cause {
                let more = c.to_string();
                if !text.contains(&more) {
                    text = format!("{text}: {more}");
                }
                timed_out |= c
                    .downcast_ref::<reqwest::Error>()
                    .is_some_and(|r| r.is_timeout());
                cause = c.source();
            }
            if timed_out {
                text.push_str(" (timed out: see RemoteOptions::timeout, ONNXL_REMOTE_TIMEOUT)");
            }
            text
        }
    }
}

impl Object {
    /// The size and version of the object at `loc`.
    pub(crate) fn head(loc: &Location) -> Result<Self> {
        block_on(Self::head_async(loc))?
    }

    /// [`Self::head`], on the runtime.
    pub(crate) async fn head_async(loc: &Location) -> Result<Self> {
        let meta = loc
            .store
            .head(&loc.key)
            .await
            .map_err(|e| loc.err(reason(&e)))?;
        Ok(Self {
            loc: loc.clone(),
            size: meta.size,
            etag: meta.e_tag,
            version: meta.version,
        })
    }

    fn range_err(&self, r: &Range<u64>, why: impl std::fmt::Display) -> Error {
        self.loc.err(format_args!(
            "bytes {}..{} of {}: {why}",
            r.start, r.end, self.size
        ))
    }

    /// Reads `start..start + dst.len()` into `dst`, resuming a body cut short (up to
    /// `ro.retries` times) from where it stopped.
    async fn read_into(&self, start: u64, dst: &mut [u8], ro: &RemoteOptions) -> Result<()> {
        let want = start..start + dst.len() as u64;
        if want.end > self.size {
            return Err(self.range_err(&want, "past the end of the object"));
        }
        let mut done = 0usize;
        let mut resumes = 0usize;
        while done < dst.len() {
            let range = start + done as u64..want.end;
            let opts = GetOptions {
                if_match: self.etag.clone(),
                version: self.version.clone(),
                range: Some(GetRange::Bounded(range.clone())),
                ..Default::default()
            };
            REQUESTS.fetch_add(1, Ordering::Relaxed);
            let got = self.loc.store.get_opts(&self.loc.key, opts).await;
            let got = got.map_err(|e| self.range_err(&range, reason(&e)))?;
            if let (Some(pinned), Some(now)) = (&self.etag, &got.meta.e_tag)
                && pinned != now
            {
                return Err(self.range_err(
                    &range,
                    format!(
                        "the object changed while it was being read (ETag {pinned} became {now})"
                    ),
                ));
            }
            if got.range != range {
                return Err(self.range_err(
                    &range,
                    format!(
                        "the server sent bytes {}..{}",
                        got.range.start, got.range.end
                    ),
                ));
            }
            let mut body = got.into_stream();
            let mut cut: Option<String> = None;
            while let Some(piece) = body.next().await {
                match piece {
                    Ok(b) => {
                        let Some(to) = dst.get_mut(done..done + b.len()) else {
                            return Err(self.range_err(&range, "the server sent more bytes"));
                        };
                        to.copy_from_slice(&b);
                        done += b.len();
                        FETCHED.fetch_add(b.len() as u64, Ordering::Relaxed);
                        if let Some(p) = &ro.progress {
                            p(b.len() as u64);
                        }
                    }
                    Err(e) => {
                        cut = Some(reason(&e));
                        break;
                    }
                }
            }
            if done < dst.len() {
                resumes += 1;
                if resumes > ro.retries {
                    let got = start + done as u64;
                    return Err(self.range_err(
                        &want,
                        format!(
                            "the body stopped after byte {got} ({}), {} retries",
                            cut.as_deref().unwrap_or("truncated"),
                            ro.retries
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Reads `range` into `dst` (one piece).
    pub(crate) fn read_range(&self, start: u64, dst: &mut [u8], ro: &RemoteOptions) -> Result<()> {
        read_many(vec![(self, start, dst)], ro)
    }

    /// The region of the object with every byte a `skip_raw_data` parse of a `message` (its
    /// schema name) reads: a sparse image (`codec::sparse`) without the payloads that parse
    /// drops (`TensorProto.raw_data` of at least `raw_data_threshold` bytes, the parser's own
    /// rule), which are never fetched.
    pub(crate) fn metadata_image(
        &self,
        message: &str,
        opts: &ParseOptions,
        ro: &RemoteOptions,
    ) -> Result<Image> {
        sparse_image(
            message,
            Image::new(self.size, &self.loc.url)?,
            opts.raw_data_threshold,
            opts.max_recursion_depth,
            &mut |start, dst| self.read_range(start, dst, ro),
        )
    }

    /// The whole object, read in parallel ranges.
    pub(crate) fn read_whole(&self, ro: &RemoteOptions) -> Result<Image> {
        let mut image = Image::new(self.size, &self.loc.url)?;
        read_many(vec![(self, 0, image.bytes_mut())], ro)?;
        Ok(image)
    }
}

/// Reads every `(object, offset, destination)` piece, cut into requests of at most
/// `ro.part_size` bytes, `ro.concurrency` at a time; stops at the first error.
pub(crate) fn read_many(pieces: Vec<(&Object, u64, &mut [u8])>, ro: &RemoteOptions) -> Result<()> {
    let part = usize::try_from(ro.part_size).unwrap_or(usize::MAX);
    let mut tasks = Vec::new();
    for (obj, mut off, dst) in pieces {
        for chunk in dst.chunks_mut(part) {
            let n = chunk.len() as u64;
            tasks.push((obj, off, chunk));
            off += n;
        }
    }
    // (the futures are made outside the async block: a closure there trips the `Send` check)
    let reads: Vec<_> = tasks
        .into_iter()
        .map(|(obj, off, dst)| obj.read_into(off, dst, ro))
        .collect();
    block_on(async {
        let mut running = futures_util::stream::iter(reads).buffer_unordered(ro.concurrency);
        while let Some(r) = running.next().await {
            r?;
        }
        Ok(())
    })?
}
