//! Fuzz target bodies, NOT public API: shared by the cargo-fuzz project (`fuzz/`) and the
//! regression replay (`tests/integration/fuzz_regressions.rs`), so a failing input found by the
//! fuzzer replays with a plain `cargo test`.
//!
//! Every target takes arbitrary bytes and must never panic, abort, hang or allocate without
//! bound: errors are values. Where the input parses, the target also checks an oracle (panicking
//! when it fails, which the fuzzer reports as a crash):
//! - re-serializing and re-parsing gives the same bytes (the codec's round trip),
//! - every load mode (copy, no-copy, parallel) gives the same message,
//! - external data loads the bytes of the file range named, from inside the base directory only,
//! - decrypting what was encrypted gives the plaintext back, and a modified ciphertext of an
//!   authenticated format is refused,
//! - a params list saved and loaded again gives the same tensors.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use crate::codec::ParseOptions;
use crate::crypto::{ChunkCipher, EncryptionFormat, EncryptionOptions, StreamDecryptor};
use crate::error::Error;
use crate::external::LoadOptions;
use crate::external::{ExternalDataInfo, parse_prepacked};
use crate::proto::{Message, ModelProto, TensorProto};

/// Names of the targets, as used for `fuzz/fuzz_targets/<name>.rs`, `fuzz/corpus/<name>/` and
/// `fuzz/regressions/<name>/`.
pub const TARGETS: &[&str] = &[
    "parse_model",
    "parse_tensor",
    "external_data",
    "decrypt",
    "params",
    "prepacked",
];

/// Runs target `name` on `data` (panics on an unknown name).
pub fn run(name: &str, data: &[u8]) {
    match name {
        "parse_model" => parse_model(data),
        "parse_tensor" => parse_tensor(data),
        "external_data" => external_data(data),
        "decrypt" => decrypt(data),
        "params" => params(data),
        "prepacked" => prepacked(data),
        other => panic!("unknown fuzz target {other}"),
    }
}

/// Options of the fuzz parses: default limits, plus a metadata budget small enough that the
/// fuzzer's memory limit (2 GiB) is never the one that trips.
fn fuzz_opts() -> ParseOptions {
    ParseOptions {
        max_metadata_bytes: 256 << 20,
        ..Default::default()
    }
}

/// Parses `data` as `M` in copy mode, no-copy mode, (for models) in parallel with a tiny
/// `min_parallel_block_size`, and through a sparse image whose payloads are read back from the
/// input (`ParseFromIstream`'s path); all must agree (accepted or refused alike, same message);
/// an accepted message must re-serialize to bytes that parse back to the same bytes.
fn parse_all_modes<M: Message + PartialEq + std::fmt::Debug>(data: &[u8]) {
    let base = fuzz_opts();
    let copy = crate::parse_from_bytes::<M>(data, &base);
    let no_copy = crate::parse_from_shared::<M, Vec<u8>>(
        Arc::new(data.to_vec()),
        &ParseOptions {
            no_copy: true,
            raw_data_threshold: 0,
            ..base.clone()
        },
    );
    let parallel = crate::parse_from_bytes::<M>(
        data,
        &ParseOptions {
            num_threads: 2,
            min_parallel_block_size: 0,
            ..base.clone()
        },
    );
    // The path of the C++ classes' ParseFromIstream: the structure read into a sparse image,
    // every payload read back from the input.
    let sparse = crate::codec::parse_through_sparse_image::<M>(data, &base, 1);
    match (&copy, &sparse) {
        (Ok(a), Ok(b)) => assert_eq!(
            a.serialize_to_vec(),
            b.serialize_to_vec(),
            "copy and sparse-image parses differ"
        ),
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "sparse-image error differs"),
        _ => panic!(
            "copy {:?} and sparse-image {:?} parses disagree",
            copy.as_ref().err().map(ToString::to_string),
            sparse.as_ref().err().map(ToString::to_string)
        ),
    }
    match (&copy, &no_copy, &parallel) {
        (Ok(a), Ok(b), Ok(c)) => {
            let s1 = a.serialize_to_vec();
            assert_eq!(s1, b.serialize_to_vec(), "copy and no-copy parses differ");
            assert_eq!(s1, c.serialize_to_vec(), "copy and parallel parses differ");
            let again = crate::parse_from_bytes::<M>(&s1, &base)
                .unwrap_or_else(|e| panic!("re-parse of the serialized message failed: {e}"));
            assert_eq!(again.serialize_to_vec(), s1, "round trip changed the bytes");
        }
        (Err(a), Err(b), Err(c)) => {
            // Same failure whatever the mode (the parallel path may find a different first
            // error inside an initializer, but it must be a decode error too).
            assert_eq!(
                a.to_string(),
                b.to_string(),
                "copy and no-copy errors differ"
            );
            assert!(
                matches!(a, Error::Decode(_) | Error::LimitExceeded(_))
                    && matches!(c, Error::Decode(_) | Error::LimitExceeded(_)),
                "unexpected error kinds: {a} / {c}"
            );
        }
        _ => panic!(
            "load modes disagree: copy {:?}, no-copy {:?}, parallel {:?}",
            copy.as_ref().err().map(ToString::to_string),
            no_copy.as_ref().err().map(ToString::to_string),
            parallel.as_ref().err().map(ToString::to_string)
        ),
    }
}

/// `ModelProto` from bytes, in every load mode, with the round-trip oracle.
pub fn parse_model(data: &[u8]) {
    parse_all_modes::<ModelProto>(data);
}

/// `TensorProto` from bytes, with the round-trip oracle.
pub fn parse_tensor(data: &[u8]) {
    parse_all_modes::<TensorProto>(data);
}

/// Reads fuzz input as a stream of small decisions.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((b, rest)) => {
                self.0 = rest;
                *b
            }
            None => 0,
        }
    }
    fn u64(&mut self) -> u64 {
        let mut v = 0u64;
        for _ in 0..8 {
            v = v << 8 | self.u8() as u64;
        }
        v
    }
    fn str(&mut self) -> String {
        let n = (self.u8() % 24) as usize;
        let n = n.min(self.0.len());
        let (s, rest) = self.0.split_at(n);
        self.0 = rest;
        String::from_utf8_lossy(s).into_owned()
    }
}

/// Bytes of the file `w.bin` in the external-data fixture directory.
fn weight_bytes(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 % 251) as u8).collect()
}

/// The external-data fixture: a private temporary directory `model/` holding `w.bin` (4096
/// bytes), `sub/x.bin` (100 bytes), a directory `d`, a symbolic link `link` to a file outside
/// (`../outside.bin`) and `inlink` to `w.bin`; `outside.bin` sits next to `model/`.
pub fn external_fixture() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let root = std::env::temp_dir().join(format!("onnx_light_fuzz_{}", std::process::id()));
        let dir = root.join("model");
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(dir.join("sub")).expect("fixture directory");
        std::fs::create_dir_all(dir.join("d")).expect("fixture directory");
        std::fs::write(dir.join("w.bin"), weight_bytes(4096)).expect("fixture file");
        std::fs::write(dir.join("sub/x.bin"), [0x5a; 100]).expect("fixture file");
        std::fs::write(root.join("outside.bin"), [0xee; 64]).expect("fixture file");
        #[cfg(unix)]
        {
            let _ = std::os::unix::fs::symlink("../outside.bin", dir.join("link"));
            let _ = std::os::unix::fs::symlink("w.bin", dir.join("inlink"));
        }
        dir
    })
}

const LOCATIONS: &[&str] = &[
    "w.bin",
    "sub/x.bin",
    "./w.bin",
    "sub/../w.bin",
    "../outside.bin",
    "link",
    "inlink",
    "d",
    "missing.bin",
    "",
    "/etc/hostname",
    "w.bin.1",
    "sub",
    "..",
    "w.bin\0x",
    "C:\\w.bin",
    "\\\\server\\share",
];

/// External-data resolution of hostile `external_data` entries against the fixture directory,
/// in copy and no-copy mode, plus `check_external_data`. Oracle: a load that succeeds gives
/// every tensor exactly the bytes of the range it names in `w.bin` or `sub/x.bin` (nothing
/// outside the directory is ever read).
pub fn external_data(data: &[u8]) {
    let dir = external_fixture();
    let mut b = Bytes(data);
    let mut model = ModelProto::new();
    let n = b.u8() % 4 + 1;
    let mut expected = Vec::new();
    for i in 0..n {
        let t = model.mutable_graph().add_initializer();
        t.set_name(format!("t{i}"));
        t.set_data_type((b.u8() % 17) as i32);
        for _ in 0..b.u8() % 3 {
            t.add_dims(match b.u8() % 4 {
                0 => -1,
                1 => i64::MAX,
                _ => (b.u8() % 64) as i64,
            });
        }
        t.set_data_location(if b.u8() % 8 == 0 { 0 } else { 1 });
        let sel = b.u8() as usize;
        let location = if sel < LOCATIONS.len() * 8 {
            LOCATIONS[sel % LOCATIONS.len()].to_string()
        } else {
            b.str()
        };
        let mut offset = None;
        let mut length = None;
        let push = |t: &mut TensorProto, k: &str, v: String| {
            let e = t.add_external_data();
            e.set_key(k);
            e.set_value(v);
        };
        push(t, "location", location.clone());
        for _ in 0..b.u8() % 4 {
            match b.u8() % 6 {
                0 => {
                    let v = match b.u8() % 4 {
                        0 => b.u64(),
                        1 => u64::MAX - (b.u8() as u64),
                        _ => (b.u8() as u64) * 16,
                    };
                    offset = Some(v);
                    push(t, "offset", v.to_string());
                }
                1 => {
                    let v = match b.u8() % 4 {
                        0 => b.u64(),
                        1 => u64::MAX - (b.u8() as u64),
                        _ => b.u8() as u64 * 4,
                    };
                    length = Some(v);
                    push(t, "length", v.to_string());
                }
                2 => push(t, "checksum", b.str()),
                3 => push(t, "basepath", "/".into()),
                4 => push(t, "prepacked_x", b.str()),
                _ => {
                    let (k, v) = (b.str(), b.str());
                    push(t, &k, v);
                }
            }
        }
        expected.push((location, offset, length));
    }
    let copy =
        crate::load_external_data_for_model(&mut model.clone(), dir, &LoadOptions::default());
    let mut borrowed = model.clone();
    let no_copy = crate::load_external_data_for_model(
        &mut borrowed,
        dir,
        &LoadOptions::from(ParseOptions {
            no_copy: true,
            ..Default::default()
        }),
    );
    let _ = crate::check_external_data(&model, dir, &LoadOptions::default(), true, None);
    assert_eq!(
        copy.is_ok(),
        no_copy.is_ok(),
        "copy and no-copy external loads disagree: {:?} / {:?}",
        copy.as_ref().err().map(ToString::to_string),
        no_copy.as_ref().err().map(ToString::to_string)
    );
    if no_copy.is_ok() {
        for (t, (location, offset, length)) in borrowed.graph().initializer.iter().zip(&expected) {
            if t.rare.external_data.is_empty() && t.data_location() == 0 && t.raw_data.is_some() {
                let file = match location.trim_start_matches("./") {
                    "w.bin" | "sub/../w.bin" | "inlink" => weight_bytes(4096),
                    "sub/x.bin" => vec![0x5a; 100],
                    other => panic!("external data loaded from '{other}'"),
                };
                let start = offset.unwrap_or(0) as usize;
                let end = length.map_or(file.len(), |l| start + l as usize);
                assert_eq!(
                    t.raw_data(),
                    &file[start..end],
                    "wrong bytes for {location}"
                );
            }
        }
    }
}

/// Fixed key of the decryption target.
const KEY: &[u8] = b"fuzz key";

/// Decryption of every format: the input as ciphertext (every format, dispatching on the
/// magic, and as a chunked stream), and — when its first byte says so — as a plaintext that is
/// encrypted, decrypted back (must be equal) and then modified at a fuzz-chosen byte (must be
/// refused by the authenticated formats).
///
/// Under `cfg(fuzzing)` the key derivation runs 1 PBKDF2 iteration instead of 100 000 (see
/// `crypto::kdf`), so the fuzzer is not bound by the KDF.
pub fn decrypt(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode & 1 == 0 {
        let _ = crate::crypto::decrypt_bytes(rest, KEY);
        if let Ok(d) = StreamDecryptor::new(rest, KEY) {
            let _ = d.decrypt_to(&mut std::io::sink(), Path::new("<fuzz>"));
        }
        let _ = crate::load_encrypted_model_from_bytes(rest, KEY, &fuzz_opts().into());
        return;
    }
    let mut b = Bytes(rest);
    let format = match b.u8() % 4 {
        0 => EncryptionFormat::AesCbc,
        1 => EncryptionFormat::ChaCha20Poly1305,
        2 => EncryptionFormat::AesGcm,
        _ => EncryptionFormat::Chunked,
    };
    let chunk_cipher = if b.u8() & 1 == 0 {
        ChunkCipher::AesGcm
    } else {
        ChunkCipher::ChaCha20Poly1305
    };
    let chunk_size = 64 + (b.u8() as u32 % 4) * 37;
    let flip_at = b.u64();
    let flip = b.u8() | 1;
    let plaintext = b.0;
    let opts = EncryptionOptions {
        format,
        chunk_cipher,
        chunk_size,
        ..Default::default()
    };
    let Ok(ct) =
        crate::crypto::testing::encrypt_bytes_with(plaintext, KEY, &opts, [1; 16], [2; 16])
    else {
        // Only ONNXCRY1 refuses plaintexts (those that are not models).
        assert_eq!(format, EncryptionFormat::AesCbc);
        return;
    };
    let back = crate::crypto::decrypt_bytes(&ct, KEY)
        .unwrap_or_else(|e| panic!("decrypting what was just encrypted failed: {e}"));
    assert_eq!(
        back.as_slice(),
        plaintext,
        "decryption changed the plaintext"
    );
    if format == EncryptionFormat::Chunked {
        let mut out = Vec::new();
        StreamDecryptor::new(ct.as_slice(), KEY)
            .and_then(|d| d.decrypt_to(&mut out, Path::new("<fuzz>")))
            .unwrap_or_else(|e| panic!("stream decryption failed: {e}"));
        assert_eq!(out, plaintext, "stream decryption changed the plaintext");
    }
    let mut bad = ct.clone();
    let at = (flip_at % bad.len() as u64) as usize;
    bad[at] ^= flip;
    let r = crate::crypto::decrypt_bytes(&bad, KEY);
    if format != EncryptionFormat::AesCbc {
        assert!(
            r.is_err(),
            "a modified {format:?} ciphertext was accepted (byte {at})"
        );
    }
    let _ = crate::crypto::decrypt_bytes(&ct, b"other key");
}

/// Params-dictionary load (copied and shared); oracle: what loads saves and loads back to the
/// same tensors and the same bytes.
pub fn params(data: &[u8]) {
    let copied = crate::params::load_params(data);
    let shared = crate::params::load_params_shared(Arc::new(data.to_vec()));
    assert_eq!(
        copied.as_ref().map_err(ToString::to_string),
        shared.as_ref().map_err(ToString::to_string),
        "copied and shared params loads differ"
    );
    if let Ok(tensors) = copied {
        let refs: Vec<&TensorProto> = tensors.iter().collect();
        let saved = crate::params::save_tensors(&refs)
            .unwrap_or_else(|e| panic!("saving loaded params failed: {e}"));
        let again = crate::params::load_params(&saved)
            .unwrap_or_else(|e| panic!("loading saved params failed: {e}"));
        assert_eq!(again, tensors, "params round trip changed the tensors");
        let refs: Vec<&TensorProto> = again.iter().collect();
        assert_eq!(
            crate::params::save_tensors(&refs).ok(),
            Some(saved),
            "params save is not stable"
        );
    }
}

/// Pre-packed entry parsing and `external_data` entries: `parse_prepacked` of the input as text,
/// and the input as `key\x00value\x00...` entries of a tensor; oracle: parsed entries written
/// back and parsed again give the same info.
pub fn prepacked(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(Some((key, buffers))) = parse_prepacked(&text) {
        assert!(!key.is_empty() && !buffers.is_empty());
        assert!(buffers.len() <= text.matches('|').count());
        // Written back in the canonical form, the entry parses to the same blob (when the key
        // and checksums hold no separators, which the canonical form cannot express).
        let clean = |s: &str| !s.is_empty() && !s.contains(['|', ';']);
        if clean(&key) && buffers.iter().all(|b| clean(&b.checksum)) {
            let mut value = key.clone();
            for b in &buffers {
                value.push_str(&format!("|{};{};{}", b.offset, b.length, b.checksum));
            }
            let again = parse_prepacked(&value)
                .unwrap_or_else(|e| panic!("canonical pre-packed entry {value:?} refused: {e}"));
            assert_eq!(again, Some((key, buffers)), "pre-packed entry round trip");
        }
    }
    let mut t = TensorProto::new();
    let mut parts = data.split(|&b| b == 0);
    while let (Some(k), Some(v)) = (parts.next(), parts.next()) {
        let e = t.add_external_data();
        e.set_key(k.to_vec());
        e.set_value(v.to_vec());
    }
    if let Ok(info) = ExternalDataInfo::parse(&t) {
        let mut u = TensorProto::new();
        info.apply_to(&mut u);
        let again = ExternalDataInfo::parse(&u)
            .unwrap_or_else(|e| panic!("written external_data entries do not parse: {e}"));
        assert_eq!(
            ExternalDataInfo {
                basepath: None,
                ..info
            },
            again,
            "external_data entries round trip"
        );
    }
}
