//! Parameter dictionaries (TVM/CVM params format, formats.md §4): exact layout, round trips of
//! every numeric type, saving a model's initializers (all or chosen), loading into a model
//! (replace by name, add), borrowing, and every malformed file refused with `Error::Params`.

use std::sync::Arc;

use onnx_light::params::{
    self, ARRAY_MAGIC, LIST_MAGIC, MAX_NDIM, ParamsLoadOptions, ParamsLoadReport,
};
use onnx_light::proto::{DataType, ModelProto, TensorProto};
use onnx_light::{Error, SerializeOptions};

/// Every numeric type with its DLPack (code, bits) as formats.md §3 lists them.
const TYPES: [(i32, u8, u8); 25] = [
    (1, 2, 32),
    (2, 1, 8),
    (3, 0, 8),
    (4, 1, 16),
    (5, 0, 16),
    (6, 0, 32),
    (7, 0, 64),
    (9, 6, 8),
    (10, 2, 16),
    (11, 2, 64),
    (12, 1, 32),
    (13, 1, 64),
    (14, 5, 64),
    (15, 5, 128),
    (16, 4, 16),
    (17, 10, 8),
    (18, 11, 8),
    (19, 12, 8),
    (20, 13, 8),
    (21, 1, 4),
    (22, 0, 4),
    (23, 17, 4),
    (24, 14, 8),
    (25, 1, 2),
    (26, 0, 2),
];

fn tensor(name: &str, ty: i32, dims: &[i64], seed: u8) -> TensorProto {
    let n: i64 = dims.iter().product();
    let bits = DataType::from_i32(ty).unwrap().bits() as u64;
    let len = (n as u64 * bits).div_ceil(8) as usize;
    let mut bytes: Vec<u8> = (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect();
    // Packed sub-byte data: the padding bits of the last byte are zero (as onnx writes them).
    let used = (n as u64 * bits) % 8;
    if used != 0 {
        *bytes.last_mut().unwrap() &= (1u8 << used) - 1;
    }
    let mut t = TensorProto::new();
    t.set_name(name);
    t.set_data_type(ty);
    t.set_dims(dims);
    t.set_raw_data(bytes);
    t
}

fn params_err(e: Error) -> (u64, String) {
    match e {
        Error::Params { offset, reason } => (offset, reason),
        other => panic!("expected Error::Params, got {other:?}"),
    }
}

// ---- an independent writer of the format (for exact-layout and malformed-file tests) ---------

#[derive(Clone)]
struct Arr {
    magic: u64,
    reserved: u64,
    device: (i32, i32),
    ndim: i32,
    dtype: (u8, u8, u16),
    shape: Vec<i64>,
    size: i64,
    data: Vec<u8>,
}

#[derive(Clone)]
struct List {
    magic: u64,
    reserved: u64,
    names: Vec<Vec<u8>>,
    name_count: u64,
    array_count: u64,
    arrays: Vec<Arr>,
    trailing: Vec<u8>,
}

fn arr(dtype: (u8, u8, u16), shape: &[i64], data: Vec<u8>) -> Arr {
    Arr {
        magic: ARRAY_MAGIC,
        reserved: 0,
        device: (1, 0),
        ndim: shape.len() as i32,
        dtype,
        shape: shape.to_vec(),
        size: data.len() as i64,
        data,
    }
}

/// Two arrays: "a" FLOAT [2, 2] and "bb" INT8 [3].
fn good() -> List {
    let floats: Vec<u8> = [1.0f32, -2.0, 0.5, 8.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    List {
        magic: LIST_MAGIC,
        reserved: 0,
        names: vec![b"a".to_vec(), b"bb".to_vec()],
        name_count: 2,
        array_count: 2,
        arrays: vec![
            arr((2, 32, 1), &[2, 2], floats),
            arr((0, 8, 1), &[3], vec![0xFF, 1, 2]),
        ],
        trailing: vec![],
    }
}

fn encode(l: &List) -> Vec<u8> {
    let mut o = Vec::new();
    o.extend(l.magic.to_le_bytes());
    o.extend(l.reserved.to_le_bytes());
    o.extend(l.name_count.to_le_bytes());
    for n in &l.names {
        o.extend((n.len() as u64).to_le_bytes());
        o.extend(n);
    }
    o.extend(l.array_count.to_le_bytes());
    for a in &l.arrays {
        o.extend(a.magic.to_le_bytes());
        o.extend(a.reserved.to_le_bytes());
        o.extend(a.device.0.to_le_bytes());
        o.extend(a.device.1.to_le_bytes());
        o.extend(a.ndim.to_le_bytes());
        o.push(a.dtype.0);
        o.push(a.dtype.1);
        o.extend(a.dtype.2.to_le_bytes());
        for d in &a.shape {
            o.extend(d.to_le_bytes());
        }
        o.extend(a.size.to_le_bytes());
        o.extend(&a.data);
    }
    o.extend(&l.trailing);
    o
}

/// Offset of the first array in `good()`: 24 + (8 + 1) + (8 + 2) + 8.
const FIRST_ARRAY: u64 = 51;

#[test]
fn writer_output_is_exactly_the_format() {
    let want = encode(&good());
    let loaded = params::load_params(&want).unwrap();
    assert_eq!(loaded.len(), 2);
    let refs: Vec<&TensorProto> = loaded.iter().collect();
    assert_eq!(params::save_tensors(&refs).unwrap(), want, "byte-identical");
    assert_eq!(loaded[0].name(), "a");
    assert_eq!(loaded[0].data_type(), 1);
    assert_eq!(loaded[0].dims()[..], [2, 2]);
    assert_eq!(loaded[1].name(), "bb");
    assert_eq!(loaded[1].data_type(), 3);
    assert_eq!(loaded[1].raw_data(), &[0xFF, 1, 2]);
}

#[test]
fn every_numeric_type_round_trips() {
    let mut tensors = Vec::new();
    for (i, (ty, _, _)) in TYPES.iter().enumerate() {
        for (j, dims) in [vec![3i64, 5], vec![7], vec![], vec![2, 0, 4]]
            .iter()
            .enumerate()
        {
            tensors.push(tensor(&format!("t{i}_{j}"), *ty, dims, i as u8));
        }
    }
    let refs: Vec<&TensorProto> = tensors.iter().collect();
    let bytes = params::save_tensors(&refs).unwrap();
    let back = params::load_params(&bytes).unwrap();
    assert_eq!(back.len(), tensors.len());
    for (a, b) in tensors.iter().zip(&back) {
        assert_eq!(a.name(), b.name());
        assert_eq!(a.data_type(), b.data_type(), "{}", a.name());
        assert_eq!(a.dims(), b.dims(), "{}", a.name());
        assert_eq!(a.raw_data(), b.raw_data(), "{}", a.name());
    }
    // The DLPack types written, and the size rule ((bits + 7) / 8 per element): parse the file
    // with the test's own reader.
    let mut pos = 16usize;
    let u64_at = |p: usize| u64::from_le_bytes(bytes[p..p + 8].try_into().unwrap());
    let n = u64_at(pos) as usize;
    pos += 8;
    for _ in 0..n {
        pos += 8 + u64_at(pos) as usize;
    }
    pos += 8;
    for t in &tensors {
        let (_, code, bits) = TYPES
            .iter()
            .find(|(ty, _, _)| *ty == t.data_type())
            .unwrap();
        assert_eq!(u64_at(pos), ARRAY_MAGIC);
        let ndim = i32::from_le_bytes(bytes[pos + 24..pos + 28].try_into().unwrap()) as usize;
        assert_eq!(bytes[pos + 28], *code, "{}", t.name());
        assert_eq!(bytes[pos + 29], *bits, "{}", t.name());
        assert_eq!(&bytes[pos + 30..pos + 32], &[1, 0], "lanes 1");
        pos += 32 + 8 * ndim;
        let size = u64_at(pos) as usize;
        let elements: i64 = t.dims().iter().product();
        assert_eq!(
            size,
            elements as usize * (*bits as usize).div_ceil(8),
            "{}",
            t.name()
        );
        pos += 8 + size;
    }
    assert_eq!(pos, bytes.len());
}

#[test]
fn sub_byte_types_are_one_element_per_byte_sign_extended() {
    // INT4 [-8, 7, -1] packed: 0x78, 0x0F; UINT2 [1, 2, 3, 0, 1] packed: 0b00_11_10_01, 0b01.
    let mut i4 = TensorProto::new();
    i4.set_name("i4");
    i4.set_data_type(22);
    i4.set_dims(vec![3]);
    i4.set_raw_data(vec![0x78u8, 0x0F]);
    let mut u2 = TensorProto::new();
    u2.set_name("u2");
    u2.set_data_type(25);
    u2.set_dims(vec![5]);
    u2.set_raw_data(vec![0b0011_1001u8, 0b01]);
    let bytes = params::save_tensors(&[&i4, &u2]).unwrap();
    let mut l = good();
    l.names = vec![b"i4".to_vec(), b"u2".to_vec()];
    l.arrays = vec![
        arr((0, 4, 1), &[3], vec![0xF8, 0x07, 0xFF]),
        arr((1, 2, 1), &[5], vec![1, 2, 3, 0, 1]),
    ];
    assert_eq!(bytes, encode(&l));
    let back = params::load_params(&bytes).unwrap();
    assert_eq!(back[0].raw_data(), i4.raw_data());
    assert_eq!(back[1].raw_data(), u2.raw_data());
}

#[test]
fn tvm_bool_is_accepted() {
    let mut l = good();
    l.arrays[1] = arr((1, 1, 1), &[3], vec![1, 0, 1]);
    let t = params::load_params(&encode(&l)).unwrap();
    assert_eq!(t[1].data_type(), 9, "BOOL");
    assert_eq!(t[1].raw_data(), &[1, 0, 1]);
}

fn model() -> ModelProto {
    let mut m = ModelProto::new();
    m.set_ir_version(10);
    let g = m.mutable_graph();
    g.mutable_initializer().push(tensor("w", 1, &[4, 2], 1));
    g.mutable_initializer().push(tensor("b", 7, &[2], 2));
    let mut typed = TensorProto::new();
    typed.set_name("typed");
    typed.set_data_type(6);
    typed.set_dims(vec![3]);
    typed.set_int32_data(vec![-1, 0, 7]);
    g.mutable_initializer().push(typed);
    m
}

#[test]
fn save_all_or_chosen_initializers() {
    let m = model();
    let all = params::load_params(&params::save_params(&m, None).unwrap()).unwrap();
    let names: Vec<String> = all.iter().map(|t| t.name().to_string()).collect();
    assert_eq!(names, ["w", "b", "typed"]);
    assert_eq!(all[0].raw_data(), m.graph().initializer()[0].raw_data());
    // Typed fields are written as raw little-endian bytes.
    let want: Vec<u8> = [-1i32, 0, 7].iter().flat_map(|v| v.to_le_bytes()).collect();
    assert_eq!(all[2].raw_data(), &want[..]);

    let chosen =
        params::load_params(&params::save_params(&m, Some(&["typed", "w"])).unwrap()).unwrap();
    let names: Vec<String> = chosen.iter().map(|t| t.name().to_string()).collect();
    assert_eq!(names, ["typed", "w"], "in the order asked");

    match params::save_params(&m, Some(&["nope"])).unwrap_err() {
        Error::InvalidArgument(s) => assert!(s.contains("nope"), "{s}"),
        other => panic!("{other:?}"),
    }
    match params::save_params(&m, Some(&["w", "w"])).unwrap_err() {
        Error::InvalidArgument(s) => assert!(s.contains("twice"), "{s}"),
        other => panic!("{other:?}"),
    }
    // A STRING initializer cannot be saved.
    let mut s = model();
    let t = s.mutable_graph().add_initializer();
    t.set_name("s");
    t.set_data_type(8);
    t.set_dims(vec![1]);
    t.add_string_data("x");
    match params::save_params(&s, None).unwrap_err() {
        Error::Unsupported(msg) => assert!(msg.contains("'s'") && msg.contains("STRING"), "{msg}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn save_to_file_and_load_into_a_model() {
    let dir = std::env::temp_dir().join(format!("onnxl-params-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("m.params");
    let src = model();
    let n = params::save_params_file(&src, &path, None).unwrap();
    assert_eq!(n, std::fs::metadata(&path).unwrap().len());

    // Into a model with different data: "w" and "typed" replaced, "b" replaced, "extra" kept.
    let mut dst = ModelProto::new();
    let g = dst.mutable_graph();
    let mut w = tensor("w", 1, &[8], 99);
    w.set_doc_string("kept");
    g.mutable_initializer().push(w);
    let mut typed = TensorProto::new();
    typed.set_name("typed");
    typed.set_data_type(1);
    typed.set_float_data(vec![1.0]);
    typed.set_dims(vec![1]);
    g.mutable_initializer().push(typed);
    g.mutable_initializer().push(tensor("extra", 2, &[2], 5));
    let before = dst.clone();
    let report =
        params::load_params_file_into_model(&mut dst, &path, &ParamsLoadOptions::default())
            .unwrap();
    assert_eq!(
        report,
        ParamsLoadReport {
            replaced: 2,
            added: 1
        }
    );
    let g = dst.graph();
    let names: Vec<String> = g
        .initializer()
        .iter()
        .map(|t| t.name().to_string())
        .collect();
    assert_eq!(names, ["w", "typed", "extra", "b"]);
    assert_eq!(g.initializer()[0].dims()[..], [4, 2]);
    assert_eq!(
        g.initializer()[0].raw_data(),
        src.graph().initializer()[0].raw_data()
    );
    assert_eq!(g.initializer()[0].doc_string(), "kept");
    assert_eq!(g.initializer()[1].data_type(), 6);
    assert!(
        g.initializer()[1].float_data().is_empty(),
        "typed fields cleared"
    );
    assert_eq!(g.initializer()[2], before.graph().initializer()[2]);
    assert_eq!(
        g.initializer()[3].raw_data(),
        src.graph().initializer()[1].raw_data()
    );

    // add_missing = false: refused, the model unchanged.
    let mut strict = before.clone();
    let opts = ParamsLoadOptions {
        add_missing: false,
        ..Default::default()
    };
    let e = params::load_params_file_into_model(&mut strict, &path, &opts).unwrap_err();
    assert!(e.to_string().contains("'b'"), "{e}");
    assert_eq!(strict, before);
    let mut empty = ModelProto::new();
    params::load_params_file_into_model(&mut empty, &path, &opts).unwrap_err();
    assert!(!empty.has_graph(), "not even a graph was added");

    // no_copy: the bytes borrow from the file's mapping.
    let opts = ParamsLoadOptions {
        no_copy: true,
        ..Default::default()
    };
    let mapped = params::load_params_file(&path, &opts).unwrap();
    assert!(mapped[0].raw_data_opt().unwrap().is_borrowed());
    assert!(mapped[0].raw_data_opt().unwrap().owner().is_some());
    // On Unix the bytes outlive the file (Windows refuses to remove a mapped file).
    #[cfg(unix)]
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        mapped[0].raw_data(),
        src.graph().initializer()[0].raw_data()
    );
    #[cfg(windows)]
    {
        drop(mapped);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    // The model with loaded params saves and reloads.
    let out = onnx_light::serialize_to_vec(&dst, &SerializeOptions::default()).unwrap();
    let again = onnx_light::load_model_from_bytes(&out, &Default::default()).unwrap();
    assert_eq!(again, dst);
}

#[test]
fn shared_load_borrows_from_the_buffer() {
    let bytes = Arc::new(encode(&good()));
    let t = params::load_params_shared(bytes.clone()).unwrap();
    let range = bytes.as_ptr() as usize..bytes.as_ptr() as usize + bytes.len();
    assert!(range.contains(&(t[0].raw_data().as_ptr() as usize)));
    assert_eq!(
        t[0].raw_data().as_ptr() as usize - range.start,
        FIRST_ARRAY as usize + 56
    );
    drop(bytes);
    assert_eq!(
        t[1].raw_data(),
        &[0xFF, 1, 2],
        "kept alive by the owner token"
    );
}

#[test]
fn every_malformed_file_is_refused() {
    type Edit = Box<dyn Fn(&mut List)>;
    let a0 = FIRST_ARRAY;
    let cases: Vec<(&str, Edit, &str, Option<u64>)> = vec![
        (
            "list magic",
            Box::new(|l| l.magic = 1),
            "bad list magic",
            Some(0),
        ),
        (
            "list reserved",
            Box::new(|l| l.reserved = 5),
            "reserved word is 5",
            Some(8),
        ),
        (
            "name count",
            Box::new(|l| l.name_count = u64::MAX),
            "names cannot fit",
            Some(16),
        ),
        (
            "name length",
            Box::new(|l| l.names[1] = vec![]),
            "empty",
            Some(33),
        ),
        (
            "name utf8",
            Box::new(|l| l.names[0] = vec![0xFF]),
            "not UTF-8",
            Some(32),
        ),
        (
            "duplicate",
            Box::new(|l| l.names[1] = b"a".to_vec()),
            "appears twice",
            Some(33),
        ),
        (
            "counts",
            Box::new(|l| l.array_count = 1),
            "1 arrays for 2 names",
            Some(43),
        ),
        (
            "array magic",
            Box::new(|l| l.arrays[0].magic = 7),
            "bad array magic",
            Some(a0),
        ),
        (
            "array reserved",
            Box::new(|l| l.arrays[0].reserved = 1),
            "reserved word is 1",
            Some(a0 + 8),
        ),
        (
            "gpu",
            Box::new(|l| l.arrays[0].device = (2, 0)),
            "device (2, 0)",
            Some(a0 + 16),
        ),
        (
            "device id",
            Box::new(|l| l.arrays[1].device = (1, 3)),
            "device (1, 3)",
            None,
        ),
        (
            "ndim negative",
            Box::new(|l| l.arrays[0].ndim = -1),
            "ndim -1",
            Some(a0 + 24),
        ),
        (
            "ndim huge",
            Box::new(|l| l.arrays[0].ndim = MAX_NDIM + 1),
            "ndim 1025",
            Some(a0 + 24),
        ),
        (
            "ndim past end",
            Box::new(|l| l.arrays[1].ndim = 1000),
            "the shape needs",
            None,
        ),
        (
            "opaque type",
            Box::new(|l| l.arrays[0].dtype = (3, 32, 1)),
            "no ONNX equivalent",
            Some(a0 + 28),
        ),
        (
            "lanes",
            Box::new(|l| l.arrays[0].dtype = (2, 32, 4)),
            "lanes 4",
            Some(a0 + 28),
        ),
        (
            "float6",
            Box::new(|l| l.arrays[0].dtype = (15, 6, 1)),
            "no ONNX equivalent",
            Some(a0 + 28),
        ),
        (
            "negative extent",
            Box::new(|l| l.arrays[0].shape[1] = -2),
            "negative",
            Some(a0 + 40),
        ),
        (
            "size mismatch",
            Box::new(|l| l.arrays[0].size = 15),
            "byte size 15",
            Some(a0 + 48),
        ),
        (
            "negative size",
            Box::new(|l| l.arrays[0].size = -16),
            "byte size -16",
            Some(a0 + 48),
        ),
        (
            "size overflow",
            Box::new(|l| l.arrays[0].shape = vec![i64::MAX, 4]),
            "overflows",
            Some(a0 + 48),
        ),
        (
            "data past end",
            Box::new(|l| {
                l.arrays[1].shape = vec![1 << 40];
                l.arrays[1].size = 1 << 40;
            }),
            "the data needs",
            None,
        ),
        (
            "trailing",
            Box::new(|l| l.trailing = vec![0; 3]),
            "3 unexpected bytes",
            None,
        ),
        (
            "int4 out of range",
            Box::new(|l| l.arrays[1] = arr((0, 4, 1), &[3], vec![1, 0x10, 2])),
            "outside the type",
            None,
        ),
    ];
    let good_len = encode(&good()).len() as u64;
    for (what, edit, reason, offset) in cases {
        let mut l = good();
        edit(&mut l);
        let bytes = encode(&l);
        let (at, msg) = params_err(params::load_params(&bytes).unwrap_err());
        assert!(msg.contains(reason), "{what}: {msg}");
        if let Some(offset) = offset {
            assert_eq!(at, offset, "{what}: {msg}");
        } else {
            assert!(
                at > FIRST_ARRAY && at <= bytes.len() as u64,
                "{what}: offset {at}"
            );
        }
        if what == "trailing" {
            assert_eq!(at, good_len);
        }
        // The model is left unchanged.
        let mut m = model();
        let before = m.clone();
        params::load_params_into_model(&mut m, &bytes, &ParamsLoadOptions::default()).unwrap_err();
        assert_eq!(m, before, "{what}");
    }
}

#[test]
fn every_truncation_is_refused_without_panic() {
    let bytes = encode(&good());
    for len in 0..bytes.len() {
        let (at, msg) = params_err(params::load_params(&bytes[..len]).unwrap_err());
        assert!(
            msg.contains("truncated") || msg.contains("cannot fit"),
            "{len}: {msg}"
        );
        assert!(at <= len as u64, "{len}: offset {at}");
    }
}

#[test]
fn byte_flips_never_panic() {
    let bytes = encode(&good());
    for i in 0..bytes.len() {
        for bit in 0..8 {
            let mut b = bytes.clone();
            b[i] ^= 1 << bit;
            match params::load_params(&b) {
                Ok(t) => assert_eq!(t.len(), 2),
                Err(e) => {
                    params_err(e);
                }
            }
        }
    }
}
