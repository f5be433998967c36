//! Encrypted models: ONNXCRY1/2/3 byte for byte with the C++ library, and the chunked
//! streaming format ONNXCRYS.
//!
//! - round trips of real models in every format, through files and bytes, the two forms
//!   interchangeable;
//! - known-answer vectors (fixed salt / IV / nonce through the test hooks), also decrypted
//!   independently by Python's `cryptography` in `tests/compat/test_encryption.py`, which reads
//!   the `KAT_*` constants below (keep them one per line, as `const KAT_X: &str = "hex";`);
//! - every single-byte modification detected (ONNXCRY2/3/S), wrong keys always refused (all
//!   formats, ONNXCRY1 included), truncation at every length, bad magic, empty input, empty key;
//! - a > 2 GB model encrypted and decrypted by the CLI with the chunked format, with peak memory
//!   (VmHWM of the child process) far under the model size, and loaded in memory at ~1x its size.

use crate::common;
use common::TempDir;

use std::path::{Path, PathBuf};

use onnx_light::crypto::{
    self, ChunkCipher, EncryptedFile, EncryptionFormat, EncryptionOptions, StreamDecryptor,
    StreamEncryptor, testing,
};
use onnx_light::proto::{Message, ModelProto};
use onnx_light::{Error, LoadOptions, ParseOptions, SerializeOptions};

// ---------------------------------------------------------------------------------------------
// Known-answer vectors. Plaintext: `kat_model()` serialized. Key: PBKDF2-HMAC-SHA256 of
// KAT_PASSPHRASE with KAT_SALT, 100 000 iterations. IV: KAT_IV (ONNXCRY1: all 16 bytes;
// ONNXCRY2/3: the first 12 as the nonce; ONNXCRYS: the first 4 as the nonce prefix, chunk size
// 64).

const KAT_PASSPHRASE: &str = "onnx_light known-answer passphrase";
const KAT_SALT: &str = "000102030405060708090a0b0c0d0e0f";
const KAT_IV: &str = "a0a1a2a3a4a5a6a7a8a9aaabacadaeaf";
const KAT_PLAINTEXT: &str = "080a120e6f6e6e785f6c696768742d6b61743a2e0a0c0a0178120179220452656c7512036b61742a19080410014201774a10000102030405060708090a0b0c0d0e0f42021015";
const KAT_ONNXCRY1: &str = "4f4e4e5843525931000102030405060708090a0b0c0d0e0fa0a1a2a3a4a5a6a7a8a9aaabacadaeafe267428f4d5c994014bf4bd5fbd42c1ef2674122961a1b260334484cfd668e7523f7cee4ce79d31f417c855b75e88032afee494f8ccd17e9b99c0c048e01b290a84754dbf5ec929db622b66b48a48b40";
const KAT_ONNXCRY2: &str = "4f4e4e5843525932000102030405060708090a0b0c0d0e0fa0a1a2a3a4a5a6a7a8a9aaabbaa1cdf45c694560ff796fa8e010c569e474f74d67bc5c20e190bb962098d94a8b11f3c2c683e7b80c406f56e3d8c993264b38d3cc41b2f52e79bf1452f25610e7b1262eac632cc8f8b3cf878837e2113d5e5d83c576";
const KAT_ONNXCRY3: &str = "4f4e4e5843525933000102030405060708090a0b0c0d0e0fa0a1a2a3a4a5a6a7a8a9aaabdd953f55bee06f958a72c98ecd8aea38448345c221553e65898828a5da8fe5a8fcb00eba45adc1ccf6cd145ec0b1a05b12db76319c6ceda564ecc9a7e9d02393d7b816bad68d93971d756f6994f011cf06a538f34ef6";
const KAT_ONNXCRY3_EMPTY_KEY: &str = "4f4e4e5843525933000102030405060708090a0b0c0d0e0fa0a1a2a3a4a5a6a7a8a9aaab0355dd5928606fba6e2d08945fb9a9d6327494171f02c406e215eb48824f84292afddf22403095e5c832b6bcbccd206e020505a554eba7eb00261741dfefa9f9c1a5b67ba70be91e27c002a0b3b7f440941ff70e90ac";
const KAT_ONNXCRYS_AES_GCM_64: &str = "4f4e4e58435259530103000040000000000102030405060708090a0b0c0d0e0fa0a1a2a3edfeece43b3aaa7ac502ee4e307502cf74667f4fc8eee4c1d1e4a878132265aa19330010a51a61bf932bad40df7e263716c6a0026f67a73823f24b549c8a9ea727f1a0ece38414d5ae75edcd95192d2b3b4ac7c1e32957568dfa5d1dad69bc23f216a5d80cf0";
const KAT_ONNXCRYS_CHACHA20_POLY1305_64: &str = "4f4e4e58435259530102000040000000000102030405060708090a0b0c0d0e0fa0a1a2a303a9a9779870e0f89a1c9bcf70a52e9c8b7ad1ca127c70042c99e389fdc7c5713362839e43373bcc8a20c725aa3946322c8e87675b690234891e5c413b220e69829dd8eeea4d6415740861b9132882cda9d129cd61019998137d5f282f56e0e6f1abf69e7118";

// ---------------------------------------------------------------------------------------------
// Helpers

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    assert!(s.len() % 2 == 0, "odd hex length");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn arr16(s: &str) -> [u8; 16] {
    unhex(s).try_into().unwrap()
}

/// xorshift64*: a small deterministic generator (no dependency).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// Runs `f(i)` for `i in 0..n` on two threads (PBKDF2 dominates these loops), each deriving
/// keys with the calling thread's PBKDF2 count.
fn par_for(n: usize, f: impl Fn(usize) + Sync) {
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 4));
    let count = testing::pbkdf2_iterations();
    std::thread::scope(|s| {
        for t in 0..threads {
            let f = &f;
            s.spawn(move || {
                testing::with_pbkdf2_iterations(count, || {
                    for i in (t..n).step_by(threads) {
                        f(i);
                    }
                })
            });
        }
    });
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn bytes_of(m: &ModelProto) -> Vec<u8> {
    onnx_light::serialize_to_vec(m, &SerializeOptions::default()).unwrap()
}

/// The small model of the known-answer vectors.
fn kat_model() -> ModelProto {
    let mut m = ModelProto::new();
    m.set_ir_version(10);
    m.set_producer_name("onnx_light-kat");
    m.add_opset_import().set_version(21);
    let g = m.mutable_graph();
    g.set_name("kat");
    let n = g.add_node();
    n.set_op_type("Relu");
    n.add_input("x");
    n.add_output("y");
    let t = g.add_initializer();
    t.set_name("w");
    t.set_data_type(1);
    t.add_dims(4);
    t.set_raw_data((0u8..16).collect::<Vec<u8>>());
    m
}

/// The bundled sample model.
fn mlp() -> ModelProto {
    onnx_light::load_model(root().join("samples/mlp.onnx"), &LoadOptions::default()).unwrap()
}

/// A generated model: nodes with attributes and a 2.5 MiB initializer (several 1 MiB chunks,
/// and large enough for the bulk-copy parse path).
fn generated() -> ModelProto {
    let mut m = ModelProto::new();
    m.set_ir_version(9);
    m.set_producer_name("encryption-test");
    m.add_opset_import().set_version(19);
    let g = m.mutable_graph();
    g.set_name("generated");
    for i in 0..20 {
        let n = g.add_node();
        n.set_op_type("Gemm");
        n.set_name(format!("gemm{i}"));
        n.add_input(format!("x{i}"));
        n.add_input(format!("w{i}"));
        n.add_output(format!("x{}", i + 1));
        let a = n.add_attribute();
        a.set_name("alpha");
        a.set_type(1);
        a.set_f(0.5 + i as f32);
        let t = g.add_initializer();
        t.set_name(format!("w{i}"));
        t.set_data_type(1);
        t.add_dims(8);
        t.add_dims(8);
        t.set_raw_data(Rng(i as u64 + 1).bytes(256));
    }
    let big = g.add_initializer();
    big.set_name("big");
    big.set_data_type(2);
    big.add_dims(5 << 19);
    big.set_raw_data(Rng(99).bytes(5 << 19));
    m
}

/// Every way to write: the four formats, the chunked one with both ciphers and a small chunk.
fn all_options() -> Vec<EncryptionOptions> {
    let mut v: Vec<EncryptionOptions> = [
        EncryptionFormat::AesCbc,
        EncryptionFormat::ChaCha20Poly1305,
        EncryptionFormat::AesGcm,
        EncryptionFormat::Chunked,
    ]
    .into_iter()
    .map(EncryptionOptions::with_format)
    .collect();
    v.push(EncryptionOptions {
        format: EncryptionFormat::Chunked,
        chunk_cipher: ChunkCipher::ChaCha20Poly1305,
        chunk_size: 4096,
        ..Default::default()
    });
    v
}

fn chunked64(cipher: ChunkCipher) -> EncryptionOptions {
    EncryptionOptions {
        format: EncryptionFormat::Chunked,
        chunk_cipher: cipher,
        chunk_size: 64,
        ..Default::default()
    }
}

fn is_crypto(e: &Error) -> bool {
    matches!(e, Error::Crypto(_))
}

fn is_auth(e: &Error) -> bool {
    matches!(e, Error::Authentication(_))
}

// ---------------------------------------------------------------------------------------------
// Round trips

#[test]
fn round_trip_real_models_in_every_format_file_and_bytes() {
    let dir = TempDir::new("roundtrip");
    let key = b"correct horse battery staple";
    for (name, model) in [("mlp", mlp()), ("generated", generated())] {
        let plain = bytes_of(&model);
        for (i, opts) in all_options().iter().enumerate() {
            let what = format!("{name} / {:?} {:?}", opts.format, opts.chunk_cipher);
            // bytes
            let enc = crypto::save_encrypted_model_to_bytes(&model, key, opts).unwrap();
            assert_eq!(&enc[..8], opts.format.magic(), "{what}");
            assert!(
                enc.windows(plain.len().min(64))
                    .all(|w| w != &plain[..plain.len().min(64)]),
                "{what}: plaintext visible in the ciphertext"
            );
            let back =
                onnx_light::load_encrypted_model_from_bytes(&enc, key, &LoadOptions::default())
                    .unwrap();
            assert_eq!(bytes_of(&back), plain, "{what}");
            // Random salt and IV: two encryptions differ.
            let again = crypto::save_encrypted_model_to_bytes(&model, key, opts).unwrap();
            assert_ne!(enc, again, "{what}");
            // file
            let path = dir.path(&format!("{name}-{i}.onnxc"));
            crypto::save_encrypted_model(&model, &path, key, opts).unwrap();
            let file_bytes = std::fs::read(&path).unwrap();
            assert_eq!(&file_bytes[..8], opts.format.magic(), "{what}");
            assert_eq!(file_bytes.len(), enc.len(), "{what}");
            for no_copy in [false, true] {
                let po = ParseOptions {
                    no_copy,
                    num_threads: 2,
                    ..Default::default()
                };
                let back =
                    onnx_light::load_encrypted_model(&path, key, &LoadOptions::from(po.clone()))
                        .unwrap();
                assert_eq!(bytes_of(&back), plain, "{what} no_copy={no_copy}");
            }
            // interchangeable: the file's bytes load from memory, the buffer loads as a file
            let back = onnx_light::load_encrypted_model_from_bytes(
                &file_bytes,
                key,
                &LoadOptions::default(),
            )
            .unwrap();
            assert_eq!(bytes_of(&back), plain, "{what}: file -> bytes");
            let path2 = dir.path(&format!("{name}-{i}-from-bytes.onnxc"));
            std::fs::write(&path2, &enc).unwrap();
            let back =
                onnx_light::load_encrypted_model(&path2, key, &LoadOptions::default()).unwrap();
            assert_eq!(bytes_of(&back), plain, "{what}: bytes -> file");
            // and the raw-bytes helpers agree
            assert_eq!(
                &crypto::decrypt_bytes(&enc, key).unwrap()[..],
                &plain[..],
                "{what}"
            );
            let out = dir.path(&format!("{name}-{i}.onnx"));
            assert_eq!(
                crypto::decrypt_file(&path, &out, key).unwrap(),
                plain.len() as u64
            );
            assert_eq!(std::fs::read(&out).unwrap(), plain, "{what}");
        }
    }
}

#[test]
fn default_format_is_onnxcry3_and_only_onnxcry1_is_unauthenticated() {
    assert_eq!(
        EncryptionOptions::default().format,
        EncryptionFormat::AesGcm
    );
    let enc =
        crypto::save_encrypted_model_to_bytes(&kat_model(), b"k", &Default::default()).unwrap();
    assert_eq!(&enc[..8], b"ONNXCRY3");
    for f in EncryptionFormat::ALL {
        assert_eq!(f.is_authenticated(), f != EncryptionFormat::AesCbc);
    }
}

#[test]
fn empty_key_and_any_bytes_are_keys() {
    let model = kat_model();
    let plain = bytes_of(&model);
    for opts in all_options() {
        for key in [&b""[..], b"\0", b"\xff\xfe\0binary\x80", &[7u8; 1000][..]] {
            let enc = crypto::save_encrypted_model_to_bytes(&model, key, &opts).unwrap();
            let back =
                onnx_light::load_encrypted_model_from_bytes(&enc, key, &LoadOptions::default())
                    .unwrap();
            assert_eq!(bytes_of(&back), plain);
        }
        // The empty key is a key like any other: "\x01" does not open it. (HMAC pads keys
        // shorter than its 64-byte block with zeros, so for PBKDF2-HMAC -- and thus for every
        // format, the C++ library's included -- "" and "\0" are the same key;
        // docs/encryption.md says so.)
        let enc = crypto::save_encrypted_model_to_bytes(&model, b"", &opts).unwrap();
        let e = onnx_light::load_encrypted_model_from_bytes(&enc, b"\x01", &LoadOptions::default())
            .unwrap_err();
        assert!(is_auth(&e), "{:?}: {e}", opts.format);
        let same =
            onnx_light::load_encrypted_model_from_bytes(&enc, b"\0\0", &LoadOptions::default())
                .unwrap();
        assert_eq!(bytes_of(&same), plain);
    }
}

// ---------------------------------------------------------------------------------------------
// Known-answer vectors

fn kat_cases() -> Vec<(&'static str, &'static str, EncryptionOptions, &'static [u8])> {
    let pass = KAT_PASSPHRASE.as_bytes();
    vec![
        (
            "ONNXCRY1",
            KAT_ONNXCRY1,
            EncryptionOptions::with_format(EncryptionFormat::AesCbc),
            pass,
        ),
        (
            "ONNXCRY2",
            KAT_ONNXCRY2,
            EncryptionOptions::with_format(EncryptionFormat::ChaCha20Poly1305),
            pass,
        ),
        (
            "ONNXCRY3",
            KAT_ONNXCRY3,
            EncryptionOptions::with_format(EncryptionFormat::AesGcm),
            pass,
        ),
        (
            "ONNXCRY3 empty key",
            KAT_ONNXCRY3_EMPTY_KEY,
            EncryptionOptions::with_format(EncryptionFormat::AesGcm),
            b"",
        ),
        (
            "ONNXCRYS AES-GCM 64",
            KAT_ONNXCRYS_AES_GCM_64,
            chunked64(ChunkCipher::AesGcm),
            pass,
        ),
        (
            "ONNXCRYS ChaCha20-Poly1305 64",
            KAT_ONNXCRYS_CHACHA20_POLY1305_64,
            chunked64(ChunkCipher::ChaCha20Poly1305),
            pass,
        ),
    ]
}

#[test]
fn known_answer_vectors() {
    let plain = bytes_of(&kat_model());
    assert_eq!(hex(&plain), KAT_PLAINTEXT, "the KAT model's serialization");
    let (salt, iv) = (arr16(KAT_SALT), arr16(KAT_IV));
    let dir = TempDir::new("kat");
    let input = dir.path("kat.onnx");
    std::fs::write(&input, &plain).unwrap();
    // The vectors are written and read with the formats' 100 000 iterations, also under an
    // emulator (where the other derivations of the test process use fewer: the comparisons
    // of the entry points below then hold at that count).
    let stale: Vec<String> = testing::with_real_pbkdf2(|| {
        kat_cases()
            .iter()
            .filter_map(|(name, expected, opts, key)| {
                let got = testing::encrypt_bytes_with(&plain, key, opts, salt, iv).unwrap();
                let decrypted = crypto::decrypt_bytes(&unhex(expected), key).unwrap();
                assert_eq!(&decrypted[..], &plain[..], "{name}: the vector decrypts");
                (hex(&got) != *expected).then(|| format!("{name}: {}", hex(&got)))
            })
            .collect()
    });
    assert!(
        stale.is_empty(),
        "known-answer vectors differ:\n{}",
        stale.join("\n")
    );
    for (name, expected, opts, key) in kat_cases() {
        let got = testing::encrypt_bytes_with(&plain, key, &opts, salt, iv).unwrap();
        if !testing::emulated() {
            assert_eq!(hex(&got), expected, "{name}");
        }
        // The model entry point and the file entry point give the same bytes.
        let via_model =
            testing::save_encrypted_model_to_bytes_with(&kat_model(), key, &opts, salt, iv)
                .unwrap();
        assert_eq!(via_model, got, "{name}");
        let out = dir.path("kat.onnxc");
        testing::encrypt_file_with(&input, &out, key, &opts, salt, iv).unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), got, "{name}");
        // And they decrypt.
        assert_eq!(
            &crypto::decrypt_bytes(&got, key).unwrap()[..],
            &plain[..],
            "{name}"
        );
        let m = onnx_light::load_encrypted_model_from_bytes(&got, key, &LoadOptions::default())
            .unwrap();
        assert_eq!(m.producer_name(), "onnx_light-kat");
    }
}

// ---------------------------------------------------------------------------------------------
// Tampering, wrong keys, truncation, bad input (the exhaustive tests derive thousands of keys:
// with fewer PBKDF2 iterations, which change none of what they check)

#[test]
fn every_single_byte_modification_is_detected() {
    testing::with_few_pbkdf2(|| {
        let model = mlp();
        let key = b"tamper";
        let cases = [
            EncryptionOptions::with_format(EncryptionFormat::ChaCha20Poly1305),
            EncryptionOptions::with_format(EncryptionFormat::AesGcm),
            chunked64(ChunkCipher::AesGcm),
            chunked64(ChunkCipher::ChaCha20Poly1305),
        ];
        for opts in cases {
            let enc = crypto::save_encrypted_model_to_bytes(&model, key, &opts).unwrap();
            let header = match opts.format {
                EncryptionFormat::Chunked => 36,
                _ => 52,
            };
            let mut rng = Rng(0x5eed + enc.len() as u64);
            let masks: Vec<u8> = (0..enc.len()).map(|_| (rng.next() as u8).max(1)).collect();
            par_for(enc.len(), |i| {
                let mut bad = enc.clone();
                bad[i] ^= masks[i];
                let e =
                    onnx_light::load_encrypted_model_from_bytes(&bad, key, &LoadOptions::default())
                        .expect_err(&format!(
                            "{:?}: flip of byte {i} (xor {:#04x}) undetected",
                            opts.format, masks[i]
                        ));
                // A flip in the magic may turn ONNXCRY3 into ONNXCRY2 (an authentication
                // error) or into no format (bad magic).
                if i >= header {
                    assert!(is_auth(&e), "{:?} byte {i}: {e}", opts.format);
                } else {
                    assert!(is_auth(&e) || is_crypto(&e), "byte {i}: {e}");
                }
            });
        }
    })
}

#[test]
fn chunked_format_detects_reordering_truncation_and_extension() {
    let key = b"stream";
    let plain: Vec<u8> = Rng(5).bytes(64 * 5 + 10);
    let opts = chunked64(ChunkCipher::AesGcm);
    let enc = crypto::encrypt_bytes(&plain, key, &opts).unwrap();
    let chunk = |i: usize| 36 + i * 80..36 + (i + 1) * 80;
    assert_eq!(enc.len(), 36 + 5 * 80 + 26);
    assert_eq!(&crypto::decrypt_bytes(&enc, key).unwrap()[..], &plain[..]);
    // swap chunks 1 and 2
    let mut swapped = enc.clone();
    swapped[chunk(1)].copy_from_slice(&enc[chunk(2)]);
    swapped[chunk(2)].copy_from_slice(&enc[chunk(1)]);
    assert!(is_auth(&crypto::decrypt_bytes(&swapped, key).unwrap_err()));
    // duplicate chunk 0 in place of 1
    let mut dup = enc.clone();
    dup[chunk(1)].copy_from_slice(&enc[chunk(0)]);
    assert!(is_auth(&crypto::decrypt_bytes(&dup, key).unwrap_err()));
    // drop the last chunk (cut at a chunk boundary)
    let cut = &enc[..chunk(4).end];
    let e = crypto::decrypt_bytes(cut, key).unwrap_err();
    assert!(is_crypto(&e) && e.to_string().contains("last chunk"), "{e}");
    // drop a middle chunk
    let mut removed = enc[..chunk(1).start].to_vec();
    removed.extend_from_slice(&enc[chunk(2).start..]);
    assert!(is_auth(&crypto::decrypt_bytes(&removed, key).unwrap_err()));
    // append bytes, or a whole extra chunk copied from the file
    for extra in [&b"x"[..], &enc[chunk(0)], &[0u8; 16][..]] {
        let mut ext = enc.clone();
        ext.extend_from_slice(extra);
        let e = crypto::decrypt_bytes(&ext, key).unwrap_err();
        assert!(is_auth(&e) || is_crypto(&e), "{e}");
    }
    // An exact multiple of the chunk size ends with an empty last chunk.
    let exact: Vec<u8> = Rng(6).bytes(128);
    let enc2 = crypto::encrypt_bytes(&exact, key, &opts).unwrap();
    assert_eq!(enc2.len(), 36 + 2 * 80 + 16);
    assert_eq!(&crypto::decrypt_bytes(&enc2, key).unwrap()[..], &exact[..]);
    let e = crypto::decrypt_bytes(&enc2[..36 + 160], key).unwrap_err();
    assert!(is_crypto(&e), "{e}");
    // The same checks through the streaming reader.
    let mut r = StreamDecryptor::new(&swapped[..], key).unwrap();
    let mut sink = Vec::new();
    let e = std::io::copy(&mut r, &mut sink).unwrap_err();
    let inner = e.get_ref().and_then(|x| x.downcast_ref::<Error>()).unwrap();
    assert!(is_auth(inner), "{inner}");
    assert_eq!(
        sink.len(),
        64,
        "only the authenticated first chunk came out"
    );
    let r = StreamDecryptor::new(cut, key).unwrap();
    let e = r.decrypt_to(&mut Vec::new(), Path::new("x")).unwrap_err();
    assert!(is_crypto(&e), "{e}");
}

#[test]
fn wrong_keys_are_always_refused_in_every_format() {
    testing::with_few_pbkdf2(|| {
        const KEYS: usize = 200;
        let model = mlp();
        let right = b"the right key".to_vec();
        for opts in all_options() {
            let enc = crypto::save_encrypted_model_to_bytes(&model, &right, &opts).unwrap();
            let mut rng = Rng(0xbad + opts.format as u64 + opts.chunk_cipher as u64);
            let keys: Vec<Vec<u8>> = (0..KEYS)
                .map(|i| {
                    if i == 0 {
                        return Vec::new();
                    }
                    let len = (rng.next() % 40) as usize;
                    rng.bytes(len)
                })
                .filter(|k| *k != right)
                .collect();
            assert!(keys.len() >= KEYS - 1);
            par_for(keys.len(), |i| {
                let r = onnx_light::load_encrypted_model_from_bytes(
                    &enc,
                    &keys[i],
                    &LoadOptions::default(),
                );
                match r {
                    Err(e) => assert!(is_auth(&e), "{:?}: {e}", opts.format),
                    Ok(_) => panic!("{:?}: wrong key {i} returned a model", opts.format),
                }
                if i % 10 == 0 {
                    assert!(is_auth(&crypto::decrypt_bytes(&enc, &keys[i]).unwrap_err()));
                }
            });
        }
    })
}

#[test]
fn truncation_at_every_length_is_an_error() {
    testing::with_few_pbkdf2(|| {
        let model = kat_model();
        let key = b"trunc";
        let mut opts = all_options();
        opts.push(chunked64(ChunkCipher::AesGcm));
        for o in opts {
            let enc = crypto::save_encrypted_model_to_bytes(&model, key, &o).unwrap();
            par_for(enc.len(), |len| {
                let cut = &enc[..len];
                let e =
                    onnx_light::load_encrypted_model_from_bytes(cut, key, &LoadOptions::default())
                        .expect_err(&format!("{:?}: truncation to {len} accepted", o.format));
                let msg = e.to_string();
                if len == 0 {
                    assert!(is_crypto(&e) && msg.contains("empty"), "{msg}");
                } else if len < 40 {
                    assert!(is_crypto(&e) && msg.contains("truncated"), "{len}: {msg}");
                } else {
                    assert!(is_crypto(&e) || is_auth(&e), "{len}: {msg}");
                }
                if len % 7 == 0 {
                    assert!(crypto::decrypt_bytes(cut, key).is_err());
                }
            });
        }
    })
}

#[test]
fn bad_magic_empty_input_and_missing_files() {
    let key = b"k";
    let msg = |d: &[u8]| {
        let e = onnx_light::load_encrypted_model_from_bytes(d, key, &LoadOptions::default())
            .unwrap_err();
        assert!(is_crypto(&e), "{e}");
        e.to_string()
    };
    assert!(msg(b"").contains("empty input"));
    assert!(msg(b"ONNX").contains("truncated"));
    let plain_model = std::fs::read(root().join("samples/mlp.onnx")).unwrap();
    assert!(msg(&plain_model).contains("bad magic"));
    let mut enc =
        crypto::save_encrypted_model_to_bytes(&kat_model(), key, &Default::default()).unwrap();
    enc[7] = b'4';
    assert!(msg(&enc).contains("bad magic"));
    enc[..8].copy_from_slice(b"onnxcry3");
    assert!(msg(&enc).contains("bad magic"));
    // Chunked header checks: version, cipher id, reserved bytes, chunk size.
    let c = crypto::encrypt_bytes(b"abc", key, &chunked64(ChunkCipher::AesGcm)).unwrap();
    for (at, value, what) in [
        (8, 2, "version 2"),
        (9, 7, "cipher id 7"),
        (10, 1, "reserved"),
        (12, 3, "chunk size"),
    ] {
        let mut bad = c.clone();
        bad[at] = value;
        let e = crypto::decrypt_bytes(&bad, key).unwrap_err();
        assert!(is_crypto(&e), "{what}: {e}");
        assert!(e.to_string().contains(what), "{what}: {e}");
    }
    let dir = TempDir::new("bad");
    let empty = dir.path("empty.onnxc");
    std::fs::write(&empty, b"").unwrap();
    let e = onnx_light::load_encrypted_model(&empty, key, &LoadOptions::default()).unwrap_err();
    assert!(is_crypto(&e) && e.to_string().contains("empty"), "{e}");
    let e = crypto::decrypt_file(&empty, dir.path("out"), key).unwrap_err();
    assert!(is_crypto(&e), "{e}");
    assert!(!dir.path("out").exists(), "no output on failure");
    let e = onnx_light::load_encrypted_model(dir.path("missing"), key, &LoadOptions::default())
        .unwrap_err();
    assert!(matches!(e, Error::Io { .. }), "{e}");
}

#[test]
fn random_inputs_are_errors_never_panics() {
    let mut rng = Rng(0xf00d);
    let mut cases = Vec::new();
    for magic in [&b"ONNXCRY1"[..], b"ONNXCRY2", b"ONNXCRY3", b"ONNXCRYS"] {
        for _ in 0..40 {
            let len = (rng.next() % 300) as usize;
            let mut d = magic.to_vec();
            d.extend(rng.bytes(len));
            if magic == b"ONNXCRYS" && rng.next() % 2 == 0 && d.len() >= 16 {
                // a plausible header, random chunk size
                d[8] = 1;
                d[9] = 2 + (rng.next() % 2) as u8;
                d[10] = 0;
                d[11] = 0;
                d[12..16].copy_from_slice(&(64 + (rng.next() % 200) as u32).to_le_bytes());
            }
            cases.push(d);
        }
    }
    par_for(cases.len(), |i| {
        let r =
            onnx_light::load_encrypted_model_from_bytes(&cases[i], b"k", &LoadOptions::default());
        let e = r.expect_err("random bytes decrypted");
        assert!(is_crypto(&e) || is_auth(&e), "{e}");
    });
}

#[test]
fn onnxcry1_refuses_non_models_and_reports_bad_plaintext_as_authentication() {
    let opts = EncryptionOptions::with_format(EncryptionFormat::AesCbc);
    let e = crypto::encrypt_bytes(b"\xff\xff not a model", b"k", &opts).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    // Unknown fields in ModelProto / GraphProto: refused by ONNXCRY1 (whose wrong-key check
    // relies on their absence), fine in the authenticated formats.
    let mut odd = kat_model();
    odd.unknown_fields_mut().push_raw(&[0xa0, 0x06, 0x01]); // field 100, varint 1
    let e = crypto::save_encrypted_model_to_bytes(&odd, b"k", &opts).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert!(crypto::encrypt_bytes(&bytes_of(&odd), b"k", &opts).is_err());
    let enc = crypto::save_encrypted_model_to_bytes(&odd, b"k", &Default::default()).unwrap();
    let back =
        onnx_light::load_encrypted_model_from_bytes(&enc, b"k", &LoadOptions::default()).unwrap();
    assert_eq!(bytes_of(&back), bytes_of(&odd));
    // A decryption whose padding is right but whose plaintext is not a model is an
    // authentication error (not a parse error, not a model).
    let mut rng = Rng(77);
    let mut refused = 0;
    for _ in 0..64 {
        let mut enc = crypto::save_encrypted_model_to_bytes(&kat_model(), b"k", &opts).unwrap();
        // Change the IV: the first plaintext block changes, the padding stays valid.
        enc[24 + (rng.next() % 16) as usize] ^= 0x80;
        // Flipping the top bit of one byte of the first block may still leave a valid protobuf
        // (e.g. inside a string): that is ONNXCRY1's documented weakness. When it does not, the
        // error is an authentication error.
        if let Err(e) =
            onnx_light::load_encrypted_model_from_bytes(&enc, b"k", &LoadOptions::default())
        {
            assert!(is_auth(&e), "{e}");
            refused += 1;
        }
    }
    assert!(refused > 0);
}

#[test]
fn error_messages_carry_no_key_material() {
    let secret = b"S3cret-Passphrase-7f3a";
    let wrong = b"Wrong-Passphrase-91c2";
    let hexes = [hex(secret), hex(wrong)];
    for opts in all_options() {
        let enc = crypto::save_encrypted_model_to_bytes(&kat_model(), secret, &opts).unwrap();
        let mut errors = vec![
            onnx_light::load_encrypted_model_from_bytes(&enc, wrong, &LoadOptions::default())
                .unwrap_err(),
            onnx_light::load_encrypted_model_from_bytes(
                &enc[..60],
                secret,
                &LoadOptions::default(),
            )
            .unwrap_err(),
        ];
        let mut bad = enc.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        errors.push(
            onnx_light::load_encrypted_model_from_bytes(&bad, secret, &LoadOptions::default())
                .unwrap_err(),
        );
        for e in errors {
            let text = format!("{e} {e:?}");
            for s in [&b"S3cret"[..], b"Wrong-Pass"] {
                assert!(!text.as_bytes().windows(s.len()).any(|w| w == s), "{text}");
            }
            for h in &hexes {
                assert!(!text.contains(&h[..16]), "{text}");
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Streaming, random access, files of any bytes (e.g. external data)

#[test]
fn encrypted_files_of_any_bytes_with_random_access() {
    let dir = TempDir::new("files");
    let data: Vec<u8> = Rng(11).bytes(3 * (1 << 20) + 12345);
    let input = dir.path("weights.bin");
    std::fs::write(&input, &data).unwrap();
    let key = b"weights key";
    for cipher in [ChunkCipher::AesGcm, ChunkCipher::ChaCha20Poly1305] {
        let opts = EncryptionOptions {
            format: EncryptionFormat::Chunked,
            chunk_cipher: cipher,
            ..Default::default()
        };
        let enc = dir.path("weights.bin.enc");
        assert_eq!(
            crypto::encrypt_file(&input, &enc, key, &opts).unwrap(),
            data.len() as u64
        );
        assert_eq!(
            std::fs::metadata(&enc).unwrap().len(),
            StreamEncryptor::<Vec<u8>>::encrypted_len(data.len() as u64, 1 << 20)
        );
        let f = EncryptedFile::open(&enc, key).unwrap();
        assert_eq!(f.len(), data.len() as u64);
        let mut rng = Rng(3);
        for _ in 0..50 {
            let off = (rng.next() % data.len() as u64) as usize;
            let len = ((rng.next() % (3 << 20)) as usize).min(data.len() - off);
            let mut buf = vec![0u8; len];
            f.read_exact_at(off as u64, &mut buf).unwrap();
            assert_eq!(buf, data[off..off + len]);
        }
        let mut past = [0u8; 2];
        assert!(f.read_exact_at(data.len() as u64 - 1, &mut past).is_err());
        assert_eq!(&f.read_all().unwrap()[..], &data[..]);
        // Wrong key, and a truncated file, are refused at open.
        assert!(is_auth(&EncryptedFile::open(&enc, b"nope").err().unwrap()));
        let cut = dir.path("cut.enc");
        let bytes = std::fs::read(&enc).unwrap();
        std::fs::write(&cut, &bytes[..bytes.len() - 100]).unwrap();
        assert!(is_auth(&EncryptedFile::open(&cut, key).err().unwrap()));
        // Whole-file decryption.
        let out = dir.path("weights.out");
        assert_eq!(
            crypto::decrypt_file(&enc, &out, key).unwrap(),
            data.len() as u64
        );
        assert_eq!(std::fs::read(&out).unwrap(), data);
        // A failed decryption leaves an existing output untouched.
        std::fs::write(&out, b"keep me").unwrap();
        assert!(crypto::decrypt_file(&cut, &out, key).is_err());
        assert_eq!(std::fs::read(&out).unwrap(), b"keep me");
    }
    // The one-shot formats encrypt files too (read whole).
    let opts = EncryptionOptions::default();
    let enc = dir.path("weights.c3");
    crypto::encrypt_file(&input, &enc, key, &opts).unwrap();
    let out = dir.path("weights.c3.out");
    crypto::decrypt_file(&enc, &out, key).unwrap();
    assert_eq!(std::fs::read(&out).unwrap(), data);
}

#[test]
fn stream_encryptor_and_decryptor_over_plain_io() {
    let key = b"io";
    let data: Vec<u8> = Rng(21).bytes(10_000);
    let mut enc = StreamEncryptor::new(Vec::new(), key, ChunkCipher::AesGcm, 1000).unwrap();
    use std::io::Write;
    for piece in data.chunks(333) {
        enc.write_all(piece).unwrap();
    }
    let out = enc.finish().unwrap();
    assert_eq!(
        out.len() as u64,
        StreamEncryptor::<Vec<u8>>::encrypted_len(10_000, 1000)
    );
    let mut dec = StreamDecryptor::new(&out[..], key).unwrap();
    let mut back = Vec::new();
    std::io::Read::read_to_end(&mut dec, &mut back).unwrap();
    assert_eq!(back, data);
    // An encryptor dropped without finish leaves a stream with no last chunk.
    let mut buf = Vec::new();
    {
        let mut enc = StreamEncryptor::new(&mut buf, key, ChunkCipher::AesGcm, 64).unwrap();
        enc.write_all(&data[..200]).unwrap();
    }
    let e = crypto::decrypt_bytes(&buf, key).unwrap_err();
    assert!(is_crypto(&e) || is_auth(&e), "{e}");
    // Bad chunk sizes are refused.
    assert!(StreamEncryptor::new(Vec::new(), key, ChunkCipher::AesGcm, 10).is_err());
    assert!(StreamEncryptor::new(Vec::new(), key, ChunkCipher::AesGcm, (64 << 20) + 1).is_err());
}

#[test]
fn external_data_plaintext_or_encrypted_weights() {
    let dir = TempDir::new("external");
    let model = generated();
    let onnx_path = dir.path("m.onnx");
    onnx_light::save_model_with_external_data(&model, &onnx_path, &Default::default()).unwrap();
    let refs = onnx_light::load_model(
        &onnx_path,
        &LoadOptions {
            load_external_data: false,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(
        bytes_of(&refs) != bytes_of(&model),
        "the big tensor is external"
    );
    // What load_model makes of the pair (tensors inline again).
    let loaded = bytes_of(&onnx_light::load_model(&onnx_path, &LoadOptions::default()).unwrap());
    // An encrypted model with plaintext weights beside it loads them like load_model does.
    let enc = dir.path("m.onnxc");
    crypto::save_encrypted_model(&refs, &enc, b"k", &Default::default()).unwrap();
    let back = onnx_light::load_encrypted_model(&enc, b"k", &LoadOptions::default()).unwrap();
    assert!(bytes_of(&back) == loaded);
    // From bytes: only with an explicit directory.
    let data = std::fs::read(&enc).unwrap();
    let back =
        onnx_light::load_encrypted_model_from_bytes(&data, b"k", &LoadOptions::default()).unwrap();
    assert!(bytes_of(&back) == bytes_of(&refs));
    let with_dir = LoadOptions {
        external_data_dir: Some(dir.0.clone()),
        ..Default::default()
    };
    let back = onnx_light::load_encrypted_model_from_bytes(&data, b"k", &with_dir).unwrap();
    assert!(bytes_of(&back) == loaded);
    // Encrypted weights: the weight file in the chunked format, read per tensor by random
    // access (what an encrypted external-data loader does), or decrypted back whole.
    let weights = dir.path("m.onnx.data");
    let weights_enc = dir.path("m.onnx.data.onnxcrys");
    let opts = EncryptionOptions::with_format(EncryptionFormat::Chunked);
    crypto::encrypt_file(&weights, &weights_enc, b"w", &opts).unwrap();
    let original_weights = std::fs::read(&weights).unwrap();
    std::fs::remove_file(&weights).unwrap();
    assert!(onnx_light::load_encrypted_model(&enc, b"k", &LoadOptions::default()).is_err());
    let f = EncryptedFile::open(&weights_enc, b"w").unwrap();
    let big = refs
        .graph()
        .initializer()
        .iter()
        .find(|t| t.name() == "big")
        .unwrap();
    let entry = |k: &str| -> u64 {
        big.external_data()
            .iter()
            .find(|e| e.key().as_bytes() == k.as_bytes())
            .map(|e| e.value().to_string_lossy().parse().unwrap())
            .unwrap()
    };
    let (offset, length) = (entry("offset"), entry("length"));
    let mut tensor = vec![0u8; length as usize];
    f.read_exact_at(offset, &mut tensor).unwrap();
    let inline = model
        .graph()
        .initializer()
        .iter()
        .find(|t| t.name() == "big")
        .unwrap();
    assert_eq!(&tensor[..], inline.raw_data());
    crypto::decrypt_file(&weights_enc, &weights, b"w").unwrap();
    assert_eq!(std::fs::read(&weights).unwrap(), original_weights);
    let back = onnx_light::load_encrypted_model(&enc, b"k", &LoadOptions::default()).unwrap();
    assert!(bytes_of(&back) == loaded);
}
