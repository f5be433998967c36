//! Encrypted external data: weight files written through the ONNXCRYS encryptor
//! (`SaveExternalOptions::encryption`) and read back by plaintext range
//! (`LoadOptions::external_data_key`): round trips in every layout (one file, split files, one
//! file per tensor, more files than are kept open), copy and no-copy loads, plaintext offsets
//! and checksums, and the errors — missing passphrase, wrong passphrase, a modified byte,
//! truncation, extension, a one-shot format — each distinct and naming the file.

use crate::common;
use common::{
    TempDir, is_encrypted, starts_with_chunked_magic, tensors_of, uint8_tensor as tensor, with_key,
};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use onnx_light::crypto::{
    self, ChunkCipher, EncryptedFile, EncryptionFormat, EncryptionOptions, Passphrase,
};
use onnx_light::external::{
    ExternalDataInfo, check_external_data, load_external_data_for_model,
    save_model_with_external_data, sha1_hex, uses_external_data,
};
use onnx_light::proto::{GraphProto, ModelProto, NodeProto};
use onnx_light::{
    Error, ExternalEncryption, LoadOptions, Message, ParseOptions, SaveExternalOptions,
};

const KEY: &[u8] = b"weights passphrase";

/// Tensors over the threshold of several sizes (across chunk boundaries for small chunks, and
/// one over more than one default 1 MiB chunk: 3 MiB), an attribute tensor, a subgraph and
/// small ones.
fn model() -> ModelProto {
    let large = 3 * (1 << 20) + 12_345;
    let mut m = ModelProto::new();
    m.set_ir_version(10);
    m.set_producer_name("encrypted-external-test");
    let mut sub = GraphProto::new();
    sub.mutable_initializer().push(tensor("sub.init", 5000, 1));
    let g = m.mutable_graph();
    g.set_name("main");
    for (i, n) in [1500usize, 4097, 70_000, large, 2048]
        .into_iter()
        .enumerate()
    {
        g.mutable_initializer()
            .push(tensor(&format!("w{i}"), n, 10 + i as u8));
    }
    g.mutable_initializer().push(tensor("small", 100, 3));
    let mut node = NodeProto::new();
    node.set_op_type("If");
    let mut a = onnx_light::proto::AttributeProto::new();
    a.set_name("then_branch");
    a.set_type(5);
    a.set_g(sub);
    node.mutable_attribute().push(a);
    g.mutable_node().push(node);
    m
}

fn infos(m: &ModelProto) -> BTreeMap<String, ExternalDataInfo> {
    let mut out = BTreeMap::new();
    m.visit_tensors(&mut |t| {
        if uses_external_data(t) {
            out.insert(t.name().to_string(), ExternalDataInfo::parse(t).unwrap());
        }
    });
    out
}

fn enc(chunk_size: u32, cipher: ChunkCipher) -> Option<ExternalEncryption> {
    Some(ExternalEncryption {
        key: Passphrase::new(KEY),
        cipher,
        chunk_size,
    })
}

#[test]
fn round_trips_in_every_layout_and_decrypts_to_the_plaintext_layout() {
    let m = model();
    let want = tensors_of(&m);
    let layouts: Vec<(&str, SaveExternalOptions)> = vec![
        ("one", SaveExternalOptions::default()),
        (
            "split",
            SaveExternalOptions {
                location: Some("w.bin".into()),
                max_external_file_size: 100_000,
                ..Default::default()
            },
        ),
        (
            "per-tensor",
            SaveExternalOptions {
                all_tensors_to_one_file: false,
                ..Default::default()
            },
        ),
        (
            "packed",
            SaveExternalOptions {
                alignment: 0,
                num_threads: 2,
                ..Default::default()
            },
        ),
    ];
    for (name, base) in layouts {
        for (chunk, cipher) in [
            (64, ChunkCipher::AesGcm),
            (1 << 20, ChunkCipher::ChaCha20Poly1305),
            (4096, ChunkCipher::AesGcm),
        ] {
            let dir = TempDir::new(&format!("layout-{name}-{chunk}"));
            let plain_dir = TempDir::new(&format!("layout-{name}-{chunk}-plain"));
            let opts = SaveExternalOptions {
                checksum: true,
                encryption: enc(chunk, cipher),
                ..base.clone()
            };
            let report = save_model_with_external_data(&m, dir.path("m.onnx"), &opts).unwrap();
            let plain_report = save_model_with_external_data(
                &m,
                plain_dir.path("m.onnx"),
                &SaveExternalOptions {
                    checksum: true,
                    ..base.clone()
                },
            )
            .unwrap();
            assert!(report.files.len() >= 2 || name == "one" || name == "packed");
            // Same plan, same plaintext checksums, and the model files are identical.
            assert_eq!(report, plain_report, "{name}");
            assert_eq!(
                std::fs::read(dir.path("m.onnx")).unwrap(),
                std::fs::read(plain_dir.path("m.onnx")).unwrap()
            );
            for f in &report.files {
                let p = dir.path(&f.location);
                assert!(starts_with_chunked_magic(&p), "{}", p.display());
                // The encrypted file's size follows the format; it decrypts to exactly the file
                // a plaintext save writes (offsets are plaintext offsets).
                assert_eq!(
                    std::fs::metadata(&p).unwrap().len(),
                    crypto::StreamEncryptor::<Vec<u8>>::encrypted_len(f.size, chunk)
                );
                let out = dir.path("decrypted.tmp");
                crypto::decrypt_file(&p, &out, KEY).unwrap();
                let plain = std::fs::read(plain_dir.path(&f.location)).unwrap();
                assert_eq!(std::fs::read(&out).unwrap(), plain, "{name} {}", f.location);
                assert_eq!(f.sha1.as_deref(), Some(sha1_hex(&plain).as_str()));
                std::fs::remove_file(out).unwrap();
            }
            // Every tensor reads back by plaintext range through EncryptedFile.
            let refs = onnx_light::load_model(
                dir.path("m.onnx"),
                &LoadOptions {
                    load_external_data: false,
                    ..Default::default()
                },
            )
            .unwrap();
            for (t, info) in infos(&refs) {
                let f = EncryptedFile::open(dir.path(&info.location), KEY).unwrap();
                let mut buf = vec![0u8; info.length.unwrap() as usize];
                f.read_exact_at(info.offset, &mut buf).unwrap();
                assert_eq!(Some(buf), want[&t], "{t}");
            }
            // Loads: copy (1 and 2 threads), no-copy, with checksum verification.
            for popts in [
                LoadOptions::default(),
                LoadOptions {
                    verify_external_checksums: true,
                    ..LoadOptions::from(ParseOptions {
                        num_threads: 2,
                        ..Default::default()
                    })
                },
                LoadOptions::from(ParseOptions {
                    no_copy: true,
                    ..Default::default()
                }),
                LoadOptions {
                    verify_external_checksums: true,
                    ..LoadOptions::from(ParseOptions {
                        no_copy: true,
                        alignment: 4096,
                        ..Default::default()
                    })
                },
            ] {
                let loaded =
                    onnx_light::load_model(dir.path("m.onnx"), &with_key(KEY, popts.clone()))
                        .unwrap();
                assert_eq!(tensors_of(&loaded), want, "{name} {chunk} {popts:?}");
                loaded.visit_tensors(&mut |t| {
                    assert!(!uses_external_data(t));
                    // Decrypted tensors are owned, never borrowed from a map of ciphertext.
                    if let Some(r) = t.raw_data_opt() {
                        assert!(!r.is_borrowed());
                    }
                });
            }
            // The checker resolves, sizes and verifies them with the key.
            let check = check_external_data(
                &refs,
                &dir.0,
                &with_key(KEY, Default::default()),
                true,
                None,
            );
            assert!(check.problems.is_empty(), "{:?}", check.problems);
            assert_eq!(check.checksums_verified, infos(&refs).len());
            assert!(check.files.iter().all(|f| f.encrypted));
        }
    }
}

#[test]
fn real_sample_model_round_trips() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let m = onnx_light::load_model(root.join("samples/mlp.onnx"), &LoadOptions::default()).unwrap();
    let dir = TempDir::new("sample");
    let report = save_model_with_external_data(
        &m,
        dir.path("mlp.onnx"),
        &SaveExternalOptions {
            size_threshold: 64,
            checksum: true,
            encryption: enc(64, ChunkCipher::AesGcm),
            ..Default::default()
        },
    )
    .unwrap();
    assert!(report.external_tensors >= 2);
    let loaded = onnx_light::load_model(
        dir.path("mlp.onnx"),
        &with_key(
            KEY,
            LoadOptions {
                verify_external_checksums: true,
                ..Default::default()
            },
        ),
    )
    .unwrap();
    assert_eq!(tensors_of(&loaded), tensors_of(&m));
    assert_eq!(loaded.graph().node().len(), m.graph().node().len());
}

#[test]
fn more_files_than_kept_open_share_one_key_derivation() {
    // 100 per-tensor files: files past the 64 kept open are opened (and authenticated) again
    // when read; all share the save's salt, so the key is derived once per load.
    let mut m = ModelProto::new();
    for i in 0..100 {
        m.mutable_graph().mutable_initializer().push(tensor(
            &format!("t{i}"),
            1024 + i * 7,
            i as u8,
        ));
    }
    let dir = TempDir::new("many");
    let report = save_model_with_external_data(
        &m,
        dir.path("m.onnx"),
        &SaveExternalOptions {
            all_tensors_to_one_file: false,
            checksum: true,
            num_threads: 2,
            encryption: enc(256, ChunkCipher::AesGcm),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(report.files.len(), 100);
    // One salt, 100 distinct nonce prefixes.
    let mut salts = std::collections::HashSet::new();
    let mut prefixes = std::collections::HashSet::new();
    for f in &report.files {
        let b = std::fs::read(dir.path(&f.location)).unwrap();
        salts.insert(b[16..32].to_vec());
        prefixes.insert(b[32..36].to_vec());
    }
    assert_eq!((salts.len(), prefixes.len()), (1, 100));
    let start = std::time::Instant::now();
    for popts in [
        LoadOptions {
            verify_external_checksums: true,
            ..LoadOptions::from(ParseOptions {
                num_threads: 2,
                ..Default::default()
            })
        },
        LoadOptions::from(ParseOptions {
            no_copy: true,
            ..Default::default()
        }),
    ] {
        let loaded = onnx_light::load_model(dir.path("m.onnx"), &with_key(KEY, popts)).unwrap();
        assert_eq!(tensors_of(&loaded), tensors_of(&m));
    }
    // 100 derivations would take seconds; a handful take well under that.
    assert!(start.elapsed().as_secs() < 20, "{:?}", start.elapsed());
}

/// Saves `model()` encrypted with 4 KiB chunks; returns (dir, weight file path, its bytes).
fn saved() -> (TempDir, PathBuf, Vec<u8>) {
    let dir = TempDir::new("errors");
    save_model_with_external_data(
        &model(),
        dir.path("m.onnx"),
        &SaveExternalOptions {
            encryption: enc(4096, ChunkCipher::AesGcm),
            ..Default::default()
        },
    )
    .unwrap();
    let w = dir.path("m.onnx.data");
    let bytes = std::fs::read(&w).unwrap();
    (dir, w, bytes)
}

fn names_file(e: &Error, file: &Path) -> bool {
    e.to_string().contains(&file.display().to_string())
}

#[test]
fn missing_and_wrong_passphrase_are_distinct_errors_naming_the_file() {
    let (dir, w, _) = saved();
    for no_copy in [false, true] {
        let base = ParseOptions {
            no_copy,
            ..Default::default()
        };
        let e = onnx_light::load_model(dir.path("m.onnx"), &LoadOptions::from(base.clone()))
            .unwrap_err();
        assert!(matches!(e, Error::ExternalData { .. }), "{e}");
        assert!(e.to_string().contains("no passphrase"), "{e}");
        assert!(names_file(&e, &w), "{e}");
        let e = onnx_light::load_model(
            dir.path("m.onnx"),
            &LoadOptions {
                external_data_key: Some(b"not the key".into()),
                ..LoadOptions::from(ParseOptions { ..base.clone() })
            },
        )
        .unwrap_err();
        assert!(matches!(e, Error::Authentication(_)), "{e}");
        assert!(names_file(&e, &w), "{e}");
        assert!(!e.to_string().contains("not the key"));
    }
    // The model is unchanged by a failed load_external_data_for_model.
    let mut refs = onnx_light::load_model(
        dir.path("m.onnx"),
        &LoadOptions {
            load_external_data: false,
            ..Default::default()
        },
    )
    .unwrap();
    let before = refs.serialize_to_vec();
    assert!(load_external_data_for_model(&mut refs, &dir.0, &LoadOptions::default()).is_err());
    assert_eq!(refs.serialize_to_vec(), before);
    // The key of the model file's loader does not matter for plaintext weights.
    let plain = TempDir::new("plain-with-key");
    save_model_with_external_data(&model(), plain.path("m.onnx"), &Default::default()).unwrap();
    let loaded =
        onnx_light::load_model(plain.path("m.onnx"), &with_key(KEY, Default::default())).unwrap();
    assert_eq!(tensors_of(&loaded), tensors_of(&model()));
}

#[test]
fn modified_truncated_and_extended_files_are_refused() {
    let (dir, w, good) = saved();
    let load = |no_copy: bool| {
        onnx_light::load_model(
            dir.path("m.onnx"),
            &with_key(
                KEY,
                LoadOptions::from(ParseOptions {
                    no_copy,
                    num_threads: 2,
                    ..Default::default()
                }),
            ),
        )
    };
    // A modified byte anywhere: header, first chunk, a middle chunk (a tensor's bytes), a tag,
    // the last chunk.
    let chunk = 4096 + 16;
    for at in [
        9usize,
        20,
        40,
        36 + chunk * 3 + 100,
        36 + chunk * 5 + 4096 + 3,
        good.len() - 1,
    ] {
        let mut bad = good.clone();
        bad[at] ^= 0x01;
        std::fs::write(&w, &bad).unwrap();
        for no_copy in [false, true] {
            let e = load(no_copy).unwrap_err();
            assert!(
                matches!(e, Error::Authentication(_) | Error::Crypto(_)),
                "byte {at}: {e}"
            );
            assert!(names_file(&e, &w), "{e}");
        }
    }
    // A modified ciphertext byte is an authentication error, not a parameter error.
    let mut bad = good.clone();
    bad[36 + chunk * 3 + 100] ^= 0x80;
    std::fs::write(&w, &bad).unwrap();
    let e = load(false).unwrap_err();
    assert!(matches!(e, Error::Authentication(_)), "{e}");
    assert!(e.to_string().contains("chunk 3"), "{e}");
    // Truncated: inside a chunk, at a chunk boundary, inside the header.
    for len in [good.len() - 1, 36 + chunk * 10, 20] {
        std::fs::write(&w, &good[..len]).unwrap();
        let e = load(false).unwrap_err();
        assert!(
            matches!(e, Error::Crypto(_) | Error::Authentication(_)),
            "{len}: {e}"
        );
        assert!(names_file(&e, &w), "{e}");
        if len == 36 + chunk * 10 || len == 20 {
            assert!(e.to_string().contains("truncated"), "{len}: {e}");
        }
    }
    // Extended by a byte, and by a whole copy of the last chunk.
    let mut ext = good.clone();
    ext.push(0);
    std::fs::write(&w, &ext).unwrap();
    assert!(load(false).is_err());
    // Swapping two full chunks.
    let mut swapped = good.clone();
    let (a, b) = (36 + chunk, 36 + 2 * chunk);
    let first: Vec<u8> = swapped[a..a + chunk].to_vec();
    swapped.copy_within(b..b + chunk, a);
    swapped[b..b + chunk].copy_from_slice(&first);
    std::fs::write(&w, &swapped).unwrap();
    assert!(matches!(load(false).unwrap_err(), Error::Authentication(_)));
    // Restored: loads again.
    std::fs::write(&w, &good).unwrap();
    assert_eq!(tensors_of(&load(true).unwrap()), tensors_of(&model()));
}

#[test]
fn one_shot_formats_and_unreadable_ranges_are_errors() {
    let (dir, w, _) = saved();
    let plain = dir.path("plain.bin");
    crypto::decrypt_file(&w, &plain, KEY).unwrap();
    // ONNXCRY3 weights cannot be read by range: a clear error, with or without a key.
    crypto::encrypt_file(&plain, &w, KEY, &EncryptionOptions::default()).unwrap();
    for popts in [
        LoadOptions::default(),
        with_key(KEY, LoadOptions::default()),
    ] {
        let e = onnx_light::load_model(dir.path("m.onnx"), &popts).unwrap_err();
        assert!(e.to_string().contains("ONNXCRY3"), "{e}");
        assert!(e.to_string().contains("chunked"), "{e}");
        assert!(names_file(&e, &w), "{e}");
    }
    // A chunked file made with `encrypt_file` (its own salt) works like a saved one.
    crypto::encrypt_file(
        &plain,
        &w,
        KEY,
        &EncryptionOptions {
            format: EncryptionFormat::Chunked,
            chunk_size: 100,
            ..Default::default()
        },
    )
    .unwrap();
    let loaded =
        onnx_light::load_model(dir.path("m.onnx"), &with_key(KEY, Default::default())).unwrap();
    assert_eq!(tensors_of(&loaded), tensors_of(&model()));
    // A range past the plaintext's end (the file is shorter than the model says) is refused
    // before anything is read.
    std::fs::write(&plain, b"short").unwrap();
    crypto::encrypt_file(
        &plain,
        &w,
        KEY,
        &EncryptionOptions::with_format(EncryptionFormat::Chunked),
    )
    .unwrap();
    let e =
        onnx_light::load_model(dir.path("m.onnx"), &with_key(KEY, Default::default())).unwrap_err();
    assert!(matches!(e, Error::ExternalData { .. }), "{e}");
    assert!(e.to_string().contains("past the end"), "{e}");
}

#[test]
fn fully_encrypted_model_directory_and_resave_from_unloaded_weights() {
    // The model file encrypted too (ONNXCRY3): `load_encrypted_model` reads its encrypted
    // weights with the same options.
    let (dir, _, _) = saved();
    let model_key = b"model key";
    let enc_model = dir.path("m.onnxc");
    crypto::encrypt_file(
        dir.path("m.onnx"),
        &enc_model,
        model_key,
        &EncryptionOptions::default(),
    )
    .unwrap();
    std::fs::remove_file(dir.path("m.onnx")).unwrap();
    let m =
        onnx_light::load_encrypted_model(&enc_model, model_key, &with_key(KEY, Default::default()))
            .unwrap();
    assert_eq!(tensors_of(&m), tensors_of(&model()));
    let e = onnx_light::load_encrypted_model(&enc_model, model_key, &LoadOptions::default())
        .unwrap_err();
    assert!(e.to_string().contains("no passphrase"), "{e}");

    // Saving a model whose encrypted weights were not loaded reads them from `source_dir` with
    // the save's key.
    let refs = onnx_light::load_encrypted_model(
        &enc_model,
        model_key,
        &LoadOptions {
            load_external_data: false,
            ..Default::default()
        },
    )
    .unwrap();
    let out = TempDir::new("resave");
    save_model_with_external_data(
        &refs,
        out.path("m.onnx"),
        &SaveExternalOptions {
            source_dir: Some(dir.0.clone()),
            encryption: enc(1 << 16, ChunkCipher::ChaCha20Poly1305),
            ..Default::default()
        },
    )
    .unwrap();
    let again =
        onnx_light::load_model(out.path("m.onnx"), &with_key(KEY, Default::default())).unwrap();
    assert_eq!(tensors_of(&again), tensors_of(&model()));
}

#[test]
fn invalid_chunk_size_is_an_option_error() {
    let dir = TempDir::new("opt");
    for cs in [0u32, 63, (64 << 20) + 1] {
        let e = save_model_with_external_data(
            &model(),
            dir.path("m.onnx"),
            &SaveExternalOptions {
                encryption: enc(cs, ChunkCipher::AesGcm),
                ..Default::default()
            },
        )
        .unwrap_err();
        assert!(matches!(e, Error::InvalidOption { .. }), "{e}");
    }
    assert!(!dir.path("m.onnx").exists());
    // The passphrase never shows in Debug output of the options.
    let s = format!("{:?}", enc(64, ChunkCipher::AesGcm));
    assert!(!s.contains("weights passphrase"), "{s}");
}

#[test]
fn fully_encrypted_directory_in_one_save() {
    use onnx_light::external::{PrepackedBlobs, save_encrypted_model_with_external_data};
    let dir = TempDir::new("one-save");
    let path = dir.path("m.onnx");
    let mut blobs = PrepackedBlobs::new();
    blobs.attach("w1", "gemm", vec![5u8; 300]).unwrap();
    let opts = SaveExternalOptions {
        checksum: true,
        encryption: enc(1 << 12, ChunkCipher::AesGcm),
        ..Default::default()
    };
    // Without the weights' encryption (which gives the passphrase): refused, nothing written.
    let e = save_encrypted_model_with_external_data(
        &model(),
        &blobs,
        &path,
        &SaveExternalOptions::default(),
        &EncryptionOptions::default(),
        None,
    )
    .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert_eq!(std::fs::read_dir(&dir.0).unwrap().count(), 0);
    for format in [EncryptionFormat::AesGcm, EncryptionFormat::Chunked] {
        let report = save_encrypted_model_with_external_data(
            &model(),
            &blobs,
            &path,
            &opts,
            &EncryptionOptions::with_format(format),
            None,
        )
        .unwrap();
        assert_eq!(report.prepacked_blobs, 1);
        // Every file of the directory is encrypted: the model and its one weight file.
        let names: Vec<PathBuf> = std::fs::read_dir(&dir.0)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(names.iter().all(|p| is_encrypted(p)), "{names:?}");
        assert_eq!(crypto::detect_file_format(&path).unwrap(), format);
        let (m, loaded_blobs) = {
            let mut m = onnx_light::load_encrypted_model(
                &path,
                KEY,
                &LoadOptions {
                    load_external_data: false,
                    ..Default::default()
                },
            )
            .unwrap();
            let r =
                load_external_data_for_model(&mut m, &dir.0, &with_key(KEY, Default::default()))
                    .unwrap();
            (m, r.blobs)
        };
        assert_eq!(tensors_of(&m), tensors_of(&model()));
        assert_eq!(
            loaded_blobs.get("w1", "gemm").unwrap().buffer(0).unwrap(),
            &[5u8; 300][..]
        );
        // A wrong passphrase fails on the model file itself.
        let e =
            onnx_light::load_encrypted_model(&path, b"wrong", &with_key(KEY, Default::default()))
                .unwrap_err();
        assert!(matches!(e, Error::Authentication(_)), "{e}");
    }
}

#[test]
fn plaintext_save_over_an_unreadable_encrypted_model_keeps_its_files() {
    // A save without the passphrase cannot read the encrypted model it replaces: it writes no
    // name already in the directory before the commit, so the old model stays whole until
    // then (the kill test checks every instant); afterwards the weights move to the wanted
    // name and no alternate stays.
    use onnx_light::external::{PrepackedBlobs, save_encrypted_model_with_external_data};
    let dir = TempDir::new("over-enc");
    let path = dir.path("m.onnx");
    save_encrypted_model_with_external_data(
        &model(),
        &PrepackedBlobs::new(),
        &path,
        &SaveExternalOptions {
            encryption: enc(1 << 12, ChunkCipher::AesGcm),
            ..Default::default()
        },
        &EncryptionOptions::default(),
        None,
    )
    .unwrap();
    let old_weights = std::fs::read(dir.path("m.onnx.data")).unwrap();
    let report =
        save_model_with_external_data(&model(), &path, &SaveExternalOptions::default()).unwrap();
    assert_eq!(report.files[0].location, "m.onnx.data");
    assert_ne!(std::fs::read(dir.path("m.onnx.data")).unwrap(), old_weights);
    assert!(!dir.path("m.onnx_1.data").exists());
    let m = onnx_light::load_model(&path, &LoadOptions::default()).unwrap();
    assert_eq!(tensors_of(&m), tensors_of(&model()));
}
