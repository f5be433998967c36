//! ONNXCRY1 (AES-256-CBC without a MAC): a bad padding and a corrupted block fail with the
//! same error after the same work (no padding oracle through timing), and
//! `reject_unauthenticated` refuses the format on load.

use crate::common;

use common::best_cpu_of;
use onnx_light::crypto::{EncryptionFormat, EncryptionOptions};
use onnx_light::proto::{Message, ModelProto};
use onnx_light::{Error, LoadOptions, ParseOptions};

const KEY: &[u8] = b"passphrase";

/// A metadata-heavy model of a few MB (parsing it costs far more than decrypting it).
fn model() -> ModelProto {
    let mut m = ModelProto::new();
    m.set_ir_version(8);
    m.add_opset_import().set_version(17);
    let g = m.mutable_graph();
    for i in 0..60_000 {
        let n = g.add_node();
        n.set_op_type("Relu");
        n.add_input(format!("x{i}"));
        n.add_output(format!("x{}", i + 1));
        n.set_name(format!("node_{i}"));
    }
    m
}

/// The best thread CPU time of `a` and of `b` over `rounds` rounds, the two run alternately, so
/// that whatever else the machine (or the test running beside this one) does at some moment
/// weighs on both alike.
fn best_cpu_alternating(
    rounds: usize,
    mut a: impl FnMut(),
    mut b: impl FnMut(),
) -> (std::time::Duration, std::time::Duration) {
    let (mut best_a, mut best_b) = (std::time::Duration::MAX, std::time::Duration::MAX);
    for _ in 0..rounds {
        best_a = best_a.min(best_cpu_of(1, &mut a));
        best_b = best_b.min(best_cpu_of(1, &mut b));
    }
    (best_a, best_b)
}

#[test]
fn bad_padding_and_corrupted_blocks_take_the_same_path() {
    let bytes = model().serialize_to_vec();
    let opts = EncryptionOptions::with_format(EncryptionFormat::AesCbc);
    let enc = onnx_light::crypto::encrypt_bytes(&bytes, KEY, &opts).unwrap();
    let n = enc.len();
    // The last ciphertext block replaced: the last plaintext block is random, so its padding
    // is invalid (a valid one has a chance of about 1 in 256; these bytes are fixed).
    let mut bad_padding = enc.clone();
    for (i, b) in bad_padding[n - 16..].iter_mut().enumerate() {
        *b ^= 0x5a ^ i as u8;
    }
    // A block near the end corrupted: the padding (last block) stays valid, the model breaks.
    let mut bad_block = enc.clone();
    for b in &mut bad_block[n - 80..n - 64] {
        *b ^= 0xa5;
    }
    let popts = ParseOptions::default();
    let fail = |data: &[u8]| {
        onnx_light::load_encrypted_model_from_bytes(data, KEY, &LoadOptions::from(popts.clone()))
            .unwrap_err()
    };
    let (e1, e2) = (fail(&bad_padding), fail(&bad_block));
    assert!(matches!(e1, Error::Authentication(_)), "{e1}");
    assert_eq!(e1.to_string(), e2.to_string());
    let (t_padding, t_block) = best_cpu_alternating(
        15,
        || {
            fail(&bad_padding);
        },
        || {
            fail(&bad_block);
        },
    );
    let ratio = t_padding.as_secs_f64() / t_block.as_secs_f64();
    println!("bad padding {t_padding:?}, corrupted block {t_block:?} (ratio {ratio:.2})");
    assert!(
        (0.6..1.67).contains(&ratio),
        "a bad padding fails in {t_padding:?}, a corrupted block in {t_block:?}: the timing \
         tells them apart"
    );
    // Same for the byte-level decryption.
    let (t_padding, t_block) = best_cpu_alternating(
        15,
        || {
            onnx_light::crypto::decrypt_bytes(&bad_padding, KEY).unwrap_err();
        },
        || {
            onnx_light::crypto::decrypt_bytes(&bad_block, KEY).unwrap_err();
        },
    );
    let ratio = t_padding.as_secs_f64() / t_block.as_secs_f64();
    println!("decrypt_bytes: bad padding {t_padding:?}, corrupted block {t_block:?}");
    assert!((0.6..1.67).contains(&ratio), "{t_padding:?} vs {t_block:?}");
}

#[test]
fn reject_unauthenticated_refuses_onnxcry1() {
    let bytes = model().serialize_to_vec();
    let strict = LoadOptions {
        reject_unauthenticated: true,
        ..Default::default()
    };
    let cry1 = onnx_light::crypto::encrypt_bytes(
        &bytes,
        KEY,
        &EncryptionOptions::with_format(EncryptionFormat::AesCbc),
    )
    .unwrap();
    let e = onnx_light::load_encrypted_model_from_bytes(&cry1, KEY, &strict).unwrap_err();
    assert!(matches!(e, Error::Authentication(_)), "{e:?}");
    assert!(e.to_string().contains("reject_unauthenticated"), "{e}");
    // Accepted without the option, and authenticated formats are accepted with it.
    onnx_light::load_encrypted_model_from_bytes(&cry1, KEY, &LoadOptions::default()).unwrap();
    for format in [
        EncryptionFormat::ChaCha20Poly1305,
        EncryptionFormat::AesGcm,
        EncryptionFormat::Chunked,
    ] {
        let enc =
            onnx_light::crypto::encrypt_bytes(&bytes, KEY, &EncryptionOptions::with_format(format))
                .unwrap();
        let m = onnx_light::load_encrypted_model_from_bytes(&enc, KEY, &strict).unwrap();
        assert_eq!(m.serialize_to_vec(), bytes);
    }
}
