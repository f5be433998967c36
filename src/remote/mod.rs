//! Models in object storage and behind HTTP(S): `s3://bucket/key`, `http://` and `https://`
//! URLs wherever a model path is accepted (the `remote` feature; see `docs/remote.md`).
//!
//! - `open`: a URL becomes an object of an [`object_store`] client (credentials and endpoints
//!   from the standard `AWS_*` environment and [`RemoteOptions::config`]), its size and ETag read
//!   once and pinned for the whole load (`fetch`);
//! - a full load fetches the `.onnx` in parallel ranged reads into one region and parses it
//!   there; a metadata-only load (`skip_raw_data`) reads the message structure with ranged reads
//!   and never fetches the payloads it drops (`sparse`);
//! - external data: every weight range fetched concurrently straight into its aligned home,
//!   locations under the path rules, relative to the model's prefix on the same store (`weights`);
//! - [`save_model`]: weight files uploaded first (multipart, in parallel), the `.onnx` last
//!   (`upload`).
//!
//! The client's asynchronous work runs on a small runtime private to this module: every function
//! here blocks, and callers never see the runtime.

mod fetch;
#[cfg(test)]
mod tests;
mod upload;
mod weights;

use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use object_store::ObjectStore;
use object_store::path::Path as ObjectPath;

use crate::codec::{SerializeOptions, parse_from_shared};
use crate::error::{Error, Result};
use crate::external::LoadOptions;
use crate::external::SaveExternalOptions;
use crate::proto::{Message, ModelProto};

pub use fetch::{bytes_fetched, requests_made};

/// How remote objects are read and written. Credentials, region and endpoint come from the
/// standard environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`,
/// `AWS_REGION`, `AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`, ...), overridden by [`Self::config`].
#[derive(Clone)]
pub struct RemoteOptions {
    /// Ranged requests in flight at once (default 8).
    pub concurrency: usize,
    /// Bytes per ranged request and per multipart part (default 8 MiB; at least 5 MiB for
    /// uploads to S3).
    pub part_size: u64,
    /// Retries of a failed request (5xx, dropped connection, timeout) with exponential backoff
    /// (default 5).
    pub retries: usize,
    /// Time limit of one request (default 60 s).
    pub timeout: Duration,
    /// Time limit of connecting (default 10 s).
    pub connect_timeout: Duration,
    /// `object_store` configuration keys and values, e.g. `("aws_endpoint", "http://...")`,
    /// `("aws_region", "eu-west-1")`, `("allow_http", "true")`; applied after the environment.
    pub config: Vec<(String, String)>,
    /// Called with the number of bytes of each piece received or sent.
    pub progress: Option<Arc<dyn Fn(u64) + Send + Sync>>,
}

impl Default for RemoteOptions {
    fn default() -> Self {
        Self {
            concurrency: 8,
            part_size: 8 << 20,
            retries: 5,
            timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(10),
            config: Vec::new(),
            progress: None,
        }
    }
}

impl std::fmt::Debug for RemoteOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // (config values may be secrets)
        f.debug_struct("RemoteOptions")
            .field("concurrency", &self.concurrency)
            .field("part_size", &self.part_size)
            .field("retries", &self.retries)
            .field("timeout", &self.timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field(
                "config_keys",
                &self.config.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl RemoteOptions {
    /// The defaults, with what the environment sets: `ONNXL_REMOTE_CONCURRENCY`,
    /// `ONNXL_REMOTE_PART_SIZE` (bytes), `ONNXL_REMOTE_RETRIES`, `ONNXL_REMOTE_TIMEOUT`
    /// (seconds). The loads and saves that take no options (a URL given to
    /// [`crate::load_model`], the C ABI, Python without `storage_options`) use these.
    pub fn from_env() -> Result<Self> {
        const VARS: [(&str, &str); 4] = [
            ("ONNXL_REMOTE_CONCURRENCY", "concurrency"),
            ("ONNXL_REMOTE_PART_SIZE", "part_size"),
            ("ONNXL_REMOTE_RETRIES", "retries"),
            ("ONNXL_REMOTE_TIMEOUT", "timeout"),
        ];
        let set = VARS
            .iter()
            .filter_map(|(var, key)| std::env::var(var).ok().map(|v| (*key, v)));
        Self::default().with_options(set)
    }

    /// `self` with per-call options, `(key, value)` pairs as strings: `concurrency`,
    /// `part_size` (bytes), `retries`, `timeout` and `connect_timeout` (seconds) set those
    /// fields; any other key is an `object_store` configuration key (e.g. `aws_endpoint`,
    /// `aws_region`, `aws_access_key_id`, `allow_http`), refused when the URL's store has no
    /// such key. Python's `storage_options` and the tool's options come through here.
    pub fn with_options<K: AsRef<str>, V: AsRef<str>>(
        mut self,
        options: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Self> {
        for (k, v) in options {
            let (k, v) = (k.as_ref(), v.as_ref());
            let number = |name: &'static str| -> Result<u64> {
                v.trim().parse().map_err(|_| Error::InvalidOption {
                    name,
                    reason: format!("{v:?} is not a non-negative integer"),
                })
            };
            match k {
                "concurrency" => {
                    self.concurrency = usize::try_from(number("concurrency")?).unwrap_or(usize::MAX)
                }
                "part_size" => self.part_size = number("part_size")?,
                "retries" => {
                    self.retries = usize::try_from(number("retries")?)
                        .unwrap_or(usize::MAX)
                        .min(100)
                }
                "timeout" => self.timeout = Duration::from_secs(number("timeout")?.max(1)),
                "connect_timeout" => {
                    self.connect_timeout = Duration::from_secs(number("connect_timeout")?.max(1))
                }
                _ => self.config.push((k.to_string(), v.to_string())),
            }
        }
        self.validate()?;
        Ok(self)
    }

    fn validate(&self) -> Result<()> {
        if self.concurrency == 0 || self.concurrency > 1024 {
            return Err(Error::InvalidOption {
                name: "concurrency",
                reason: format!("{} (give 1 ..= 1024)", self.concurrency),
            });
        }
        if self.part_size < 64 << 10 {
            return Err(Error::InvalidOption {
                name: "part_size",
                reason: format!("{} bytes is below the minimum 64 KiB", self.part_size),
            });
        }
        Ok(())
    }
}

/// The URL schemes read and written here.
const SCHEMES: [&str; 6] = [
    "s3://", "s3a://", "az://", "azure://", "http://", "https://",
];

/// Whether `path` is a URL of a remote model (`s3://`, `s3a://`, `az://`, `azure://`,
/// `http://`, `https://`).
pub fn is_url(path: &Path) -> bool {
    path.to_str().is_some_and(|s| {
        SCHEMES
            .iter()
            .any(|p| s.len() > p.len() && s[..p.len()].eq_ignore_ascii_case(p))
    })
}

/// A store and the key of one object in it, with the URL it came from (for messages).
#[derive(Clone)]
pub(crate) struct Location {
    store: Arc<dyn ObjectStore>,
    key: ObjectPath,
    url: String,
    /// The URL of the store's root (`s3://bucket`, `https://host:port`), before `key`.
    root: String,
}

impl Location {
    /// The object `rel` (a location already checked by the path rules) beside this one: under
    /// the same prefix of the same store, never elsewhere.
    fn sibling(&self, rel: &Path) -> Result<Location> {
        let mut parts: Vec<String> = self.key.parts().map(|p| p.as_ref().to_string()).collect();
        parts.pop();
        for c in rel.components() {
            match c {
                std::path::Component::Normal(s) => parts.push(s.to_string_lossy().into_owned()),
                _ => {
                    return Err(Error::PathRefused {
                        path: rel.to_path_buf(),
                        reason: "not a plain relative location".into(),
                    });
                }
            }
        }
        let key = ObjectPath::from_iter(parts);
        Ok(Location {
            store: self.store.clone(),
            url: format!("{}/{}", self.root, key),
            key,
            root: self.root.clone(),
        })
    }

    /// An error on this object: the URL, then what went wrong.
    fn err(&self, reason: impl std::fmt::Display) -> Error {
        Error::io(&self.url, std::io::Error::other(reason.to_string()))
    }
}

fn config_err(url: &str, e: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("{url}: {e}"))
}

/// The store of a cloud service from its builder `b` (already given the bucket or container
/// and the retry policy): `ro.config` keys go to the builder (`$Key` parses them, the store's
/// own keys starting with `$own`), client keys the environment set are carried into `client`,
/// which replaces the builder's client options.
macro_rules! cloud_store {
    ($b:expr, $Key:ident, $own:literal, $ro:expr, $client:expr, $url:expr) => {{
        let mut b = $b;
        let mut client = $client;
        for (k, v) in &$ro.config {
            match k.to_ascii_lowercase().parse::<$Key>() {
                Ok(key) => b = b.with_config(key, v),
                Err(e) => return Err(config_err($url, e)),
            }
        }
        // (the client options given below replace those the environment set: carry these)
        for key in [
            ClientConfigKey::AllowHttp,
            ClientConfigKey::AllowInvalidCertificates,
            ClientConfigKey::ProxyUrl,
            ClientConfigKey::ProxyCaCertificate,
            ClientConfigKey::ProxyExcludes,
        ] {
            if let Some(v) = b.get_config_value(&$Key::Client(key)) {
                client = client.with_config(key, v);
            }
        }
        let client = apply_client_config(client, &$ro.config, $own, $url)?;
        b.with_client_options(client)
            .build()
            .map_err(|e| config_err($url, e))?
    }};
}

/// The store and key of `url`.
pub(crate) fn open(url: &str, ro: &RemoteOptions) -> Result<Location> {
    use object_store::aws::AmazonS3ConfigKey;
    use object_store::azure::AzureConfigKey;
    use object_store::{BackoffConfig, ClientConfigKey, ClientOptions, RetryConfig};
    ro.validate()?;
    install_crypto_provider();
    let parsed = url::Url::parse(url).map_err(|e| config_err(url, e))?;
    let retry = RetryConfig {
        backoff: BackoffConfig {
            init_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
            base: 2.0,
        },
        max_retries: ro.retries,
        retry_timeout: ro.timeout.saturating_mul(ro.retries as u32 + 1),
    };
    let mut client = ClientOptions::new()
        .with_timeout(ro.timeout)
        .with_connect_timeout(ro.connect_timeout);
    if let Ok(bundle) = std::env::var("AWS_CA_BUNDLE") {
        let pem = std::fs::read(&bundle).map_err(|e| Error::io(&bundle, e))?;
        for cert in
            object_store::Certificate::from_pem_bundle(&pem).map_err(|e| config_err(&bundle, e))?
        {
            client = client.with_root_certificate(cert);
        }
    }
    let key = ObjectPath::from_url_path(parsed.path()).map_err(|e| config_err(url, e))?;
    let (store, root): (Arc<dyn ObjectStore>, String) = match parsed.scheme() {
        "s3" | "s3a" => {
            let bucket = parsed.host_str().unwrap_or_default().to_string();
            let b = object_store::aws::AmazonS3Builder::from_env()
                .with_bucket_name(&bucket)
                .with_retry(retry);
            let store = cloud_store!(b, AmazonS3ConfigKey, "aws_", ro, client, url);
            (Arc::new(store), format!("s3://{bucket}"))
        }
        "az" | "azure" => {
            let container = parsed.host_str().unwrap_or_default().to_string();
            let b = object_store::azure::MicrosoftAzureBuilder::from_env()
                .with_container_name(&container)
                .with_retry(retry);
            let store = cloud_store!(b, AzureConfigKey, "azure_", ro, client, url);
            (Arc::new(store), format!("az://{container}"))
        }
        scheme => {
            let origin = parsed.origin().ascii_serialization();
            let mut client = apply_client_config(client, &ro.config, "", url)?;
            if scheme == "http" {
                client = client.with_allow_http(true);
            }
            let store = object_store::http::HttpBuilder::new()
                .with_url(&origin)
                .with_retry(retry)
                .with_client_options(client)
                .build()
                .map_err(|e| config_err(url, e))?;
            (Arc::new(store), origin)
        }
    };
    Ok(Location {
        store,
        url: format!("{root}/{key}"),
        key,
        root,
    })
}

/// `config` keys that are client options (timeouts, TLS, proxies), for stores whose own keys
/// start with `own_prefix` (the others are refused by the store's builder).
fn apply_client_config(
    mut client: object_store::ClientOptions,
    config: &[(String, String)],
    own_prefix: &str,
    url: &str,
) -> Result<object_store::ClientOptions> {
    for (k, v) in config {
        let k = k.to_ascii_lowercase();
        if !own_prefix.is_empty() && k.starts_with(own_prefix) {
            continue;
        }
        match k.parse::<object_store::ClientConfigKey>() {
            Ok(key) => client = client.with_config(key, v),
            Err(_) if !own_prefix.is_empty() => {} // a store key: its builder checks it
            Err(e) => return Err(config_err(url, e)),
        }
    }
    Ok(client)
}

/// TLS needs a process-wide `rustls` crypto provider: `ring`'s, unless the program installed
/// one of its own.
fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // (a concurrent install of another provider wins; either serves)
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// The runtime of the client: a few worker threads, started on first use.
fn runtime() -> Result<&'static tokio::runtime::Runtime> {
    static RT: OnceLock<std::result::Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(crate::storage::cores().clamp(1, 4))
            .thread_name("onnxl-remote")
            .enable_all()
            .build()
            .map_err(|e| e.to_string())
    })
    .as_ref()
    .map_err(|e| Error::Unsupported(format!("cannot start the remote client's runtime: {e}")))
}

/// Runs `f` to completion on the private runtime, blocking the calling thread (also when the
/// caller runs inside a runtime of its own: then on a scoped thread).
pub(crate) fn block_on<F: std::future::Future + Send>(f: F) -> Result<F::Output>
where
    F::Output: Send,
{
    let rt = runtime()?;
    if tokio::runtime::Handle::try_current().is_err() {
        return Ok(rt.block_on(f));
    }
    std::thread::scope(|s| {
        s.spawn(|| rt.block_on(f))
            .join()
            .map_err(|_| Error::Unsupported("the remote client's thread panicked".into()))
    })
}

/// Parses the object at `url` as an `M` (see the module doc). A `ModelProto`'s external data is
/// then loaded from the same store, relative to the model's prefix, unless
/// `opts.external_data_dir` or `opts.external_data_location` names local files.
pub fn parse<M: Message>(url: &str, opts: &LoadOptions, ro: &RemoteOptions) -> Result<M> {
    opts.validate()?;
    parse_at(&open(url, ro)?, opts, ro)
}

/// [`parse`] of the object at `loc`.
fn parse_at<M: Message>(loc: &Location, opts: &LoadOptions, ro: &RemoteOptions) -> Result<M> {
    let obj = fetch::Object::head(loc)?;
    let image = if opts.parse.skip_raw_data {
        obj.metadata_image(M::NAME, &opts.parse, ro)?
    } else {
        obj.read_whole(ro)?
    };
    let mut m: M = parse_from_shared(Arc::new(image), &opts.parse)?;
    if let Some(model) = (&mut m as &mut dyn std::any::Any).downcast_mut::<ModelProto>() {
        weights_after_parse(model, loc, opts, ro)?;
    }
    Ok(m)
}

/// The external data of `model`, parsed from `loc` (see [`parse`]).
fn weights_after_parse(
    model: &mut ModelProto,
    loc: &Location,
    opts: &LoadOptions,
    ro: &RemoteOptions,
) -> Result<()> {
    if !opts.load_external_data || opts.parse.skip_raw_data {
        return Ok(());
    }
    if opts.external_data_dir.is_some() || opts.external_data_location.is_some() {
        crate::external::load_after_parse(model, None, opts)?;
        return Ok(());
    }
    weights::load(model, loc, opts, ro)
}

/// Loads the external data of `model`, a model read from `url` by other means (an encrypted
/// model, decrypted), as [`parse`] does.
pub fn load_weights(
    model: &mut ModelProto,
    url: &str,
    opts: &LoadOptions,
    ro: &RemoteOptions,
) -> Result<()> {
    weights_after_parse(model, &open(url, ro)?, opts, ro)
}

/// Loads a model from `url` (see [`parse`]).
pub fn load_model(url: &str, opts: &LoadOptions, ro: &RemoteOptions) -> Result<ModelProto> {
    parse(url, opts, ro)
}

/// Loads an encrypted model from `url` (any format, by its magic; see
/// [`crate::load_encrypted_model`]): the object is read whole, decrypted, and its external data
/// read from beside it.
pub fn load_encrypted_model(
    url: &str,
    key: &[u8],
    opts: &LoadOptions,
    ro: &RemoteOptions,
) -> Result<ModelProto> {
    let data = zeroize::Zeroizing::new(read_object(url, ro)?);
    let mut model = crate::crypto::decrypt_model_from_bytes(
        &data,
        key,
        &opts.parse,
        opts.reject_unauthenticated,
    )?;
    load_weights(&mut model, url, opts, ro)?;
    Ok(model)
}

/// The size in bytes of the object at `url`.
pub fn object_size(url: &str, ro: &RemoteOptions) -> Result<u64> {
    Ok(fetch::Object::head(&open(url, ro)?)?.size)
}

/// The bytes of the object at `url` (for tools that need a whole remote file: an encrypted
/// model, a params file).
pub fn read_object(url: &str, ro: &RemoteOptions) -> Result<Vec<u8>> {
    let loc = open(url, ro)?;
    let obj = fetch::Object::head(&loc)?;
    Ok(obj.read_whole(ro)?.as_ref().to_vec())
}

/// Saves `model` to `url`. With `external` the large tensors go to weight files beside it
/// (see [`crate::save_model_with_external_data`]): they are uploaded first, in parallel
/// multipart uploads, and the `.onnx` last, so a reader never finds a model whose weights are
/// missing. Without it the model is one object.
pub fn save_model(
    model: &ModelProto,
    url: &str,
    opts: &SerializeOptions,
    external: Option<&SaveExternalOptions>,
    ro: &RemoteOptions,
) -> Result<()> {
    let loc = open(url, ro)?;
    upload::save(model, &loc, opts, external, ro)
}
