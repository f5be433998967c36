//! DLPack export and import: struct layout, the type map of formats.md §3, zero-copy export with
//! the owner token released exactly once, READ_ONLY for shared (memory-mapped, borrowed) bytes,
//! typed fields refused or copied, and import by copy or borrow with the producer's deleter.

use std::ffi::c_void;
use std::mem::{offset_of, size_of};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use onnx_light::dlpack::{
    CopyMode, DLDataType, DLDevice, DLManagedTensor, DLManagedTensorVersioned,
    DLPACK_FLAG_BITMASK_IS_COPIED, DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED,
    DLPACK_FLAG_BITMASK_READ_ONLY, DLPackVersion, DLTensor, ExportOptions, ImportMode, OwnedDlpack,
    dl_data_type, onnx_data_type, tensor_from_dlpack, to_dlpack, to_dlpack_versioned,
};
use onnx_light::proto::{DataType, Message, ModelProto, TensorProto};
use onnx_light::{
    ByteSpan, Error, FileLoadMode, LoadOptions, ParseOptions, Repeated, SerializeOptions,
};

const NEVER: ExportOptions = ExportOptions {
    copy: CopyMode::Never,
};
const IF_NEEDED: ExportOptions = ExportOptions {
    copy: CopyMode::IfNeeded,
};
const ALWAYS: ExportOptions = ExportOptions {
    copy: CopyMode::Always,
};

/// formats.md §3, written out independently of the library's table: (ONNX value, code, bits).
const EXPECTED_MAP: [(i32, u8, u8); 25] = [
    (1, 2, 32),   // FLOAT
    (2, 1, 8),    // UINT8
    (3, 0, 8),    // INT8
    (4, 1, 16),   // UINT16
    (5, 0, 16),   // INT16
    (6, 0, 32),   // INT32
    (7, 0, 64),   // INT64
    (9, 6, 8),    // BOOL
    (10, 2, 16),  // FLOAT16
    (11, 2, 64),  // DOUBLE
    (12, 1, 32),  // UINT32
    (13, 1, 64),  // UINT64
    (14, 5, 64),  // COMPLEX64
    (15, 5, 128), // COMPLEX128
    (16, 4, 16),  // BFLOAT16
    (17, 10, 8),  // FLOAT8E4M3FN
    (18, 11, 8),  // FLOAT8E4M3FNUZ
    (19, 12, 8),  // FLOAT8E5M2
    (20, 13, 8),  // FLOAT8E5M2FNUZ
    (21, 1, 4),   // UINT4
    (22, 0, 4),   // INT4
    (23, 17, 4),  // FLOAT4E2M1
    (24, 14, 8),  // FLOAT8E8M0
    (25, 1, 2),   // UINT2
    (26, 0, 2),   // INT2
];

fn data_type(v: i32) -> DataType {
    DataType::from_i32(v).unwrap()
}

/// A tensor of type `ty` with `dims` and deterministic raw bytes of the right length.
fn raw_tensor(name: &str, ty: i32, dims: &[i64]) -> TensorProto {
    let n: i64 = dims.iter().product();
    let bytes = (n as u64 * data_type(ty).bits() as u64).div_ceil(8) as usize;
    let mut t = TensorProto::new();
    t.set_name(name);
    t.set_data_type(ty);
    t.set_dims(dims);
    t.set_raw_data(
        (0..bytes)
            .map(|i| (i as u8).wrapping_mul(37).wrapping_add(ty as u8))
            .collect::<Vec<u8>>(),
    );
    t
}

fn unsupported(e: Error) -> String {
    match e {
        Error::Unsupported(s) => s,
        other => panic!("expected Error::Unsupported, got {other:?}"),
    }
}

fn invalid(e: Error) -> String {
    match e {
        Error::InvalidArgument(s) => s,
        other => panic!("expected Error::InvalidArgument, got {other:?}"),
    }
}

/// The bytes a DLTensor exported by this library points at (compact, CPU).
fn exported_bytes(t: &DLTensor) -> &[u8] {
    let n: i64 = (0..t.ndim as usize)
        // SAFETY: an exported tensor has `ndim` extents at `shape`.
        .map(|i| unsafe { *t.shape.add(i) })
        .product();
    let len = (n as u64 * t.dtype.bits as u64).div_ceil(8) as usize;
    if len == 0 {
        return &[];
    }
    // SAFETY: the export keeps `len` bytes alive at `data` while the managed tensor lives.
    unsafe { std::slice::from_raw_parts(t.data.cast::<u8>().add(t.byte_offset as usize), len) }
}

#[test]
fn struct_layout_matches_dlpack_h() {
    assert_eq!(size_of::<DLDevice>(), 8);
    assert_eq!(size_of::<DLDataType>(), 4);
    assert_eq!(size_of::<DLPackVersion>(), 8);
    assert_eq!(size_of::<DLTensor>(), 48, "DLTensor is 48 bytes on x86-64");
    assert_eq!(offset_of!(DLTensor, data), 0);
    assert_eq!(offset_of!(DLTensor, device), 8);
    assert_eq!(offset_of!(DLTensor, ndim), 16);
    assert_eq!(offset_of!(DLTensor, dtype), 20);
    assert_eq!(offset_of!(DLTensor, shape), 24);
    assert_eq!(offset_of!(DLTensor, strides), 32);
    assert_eq!(offset_of!(DLTensor, byte_offset), 40);
    assert_eq!(offset_of!(DLDataType, bits), 1);
    assert_eq!(offset_of!(DLDataType, lanes), 2);
    assert_eq!(size_of::<DLManagedTensor>(), 64);
    assert_eq!(offset_of!(DLManagedTensor, manager_ctx), 48);
    assert_eq!(offset_of!(DLManagedTensor, deleter), 56);
    assert_eq!(size_of::<DLManagedTensorVersioned>(), 80);
    assert_eq!(offset_of!(DLManagedTensorVersioned, version), 0);
    assert_eq!(offset_of!(DLManagedTensorVersioned, manager_ctx), 8);
    assert_eq!(offset_of!(DLManagedTensorVersioned, deleter), 16);
    assert_eq!(offset_of!(DLManagedTensorVersioned, flags), 24);
    assert_eq!(offset_of!(DLManagedTensorVersioned, dl_tensor), 32);
    assert_eq!(DLPACK_FLAG_BITMASK_READ_ONLY, 1);
    assert_eq!(DLPACK_FLAG_BITMASK_IS_COPIED, 2);
    assert_eq!(DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED, 4);
}

#[test]
fn type_map_covers_every_numeric_type() {
    for (v, code, bits) in EXPECTED_MAP {
        let t = data_type(v);
        let dl = dl_data_type(t).unwrap();
        assert_eq!(
            (dl.code, dl.bits, dl.lanes),
            (code, bits, 1),
            "{}",
            t.name()
        );
        assert_eq!(onnx_data_type(dl).unwrap(), t, "inverse of {}", t.name());
        assert_eq!(u32::from(bits), t.bits(), "{}", t.name());
    }
    // Every ONNX type is either in the map or one of the refused ones.
    for v in 0..=28 {
        let t = data_type(v);
        let in_map = EXPECTED_MAP.iter().any(|(x, _, _)| *x == v);
        match dl_data_type(t) {
            Ok(_) => assert!(in_map, "{} must not map", t.name()),
            Err(e) => {
                assert!(!in_map, "{} must map", t.name());
                let msg = unsupported(e);
                assert!(msg.contains(t.name()), "{msg}");
                assert!(matches!(v, 0 | 8 | 27 | 28), "{} refused", t.name());
            }
        }
    }
    // Vector types and codes outside the map have no ONNX type.
    let vec4 = DLDataType {
        code: 2,
        bits: 32,
        lanes: 4,
    };
    assert!(unsupported(onnx_data_type(vec4).unwrap_err()).contains("lanes 4"));
    for (code, bits) in [(3, 64), (2, 8), (7, 8), (15, 6), (0, 1), (6, 1)] {
        let dl = DLDataType {
            code,
            bits,
            lanes: 1,
        };
        unsupported(onnx_data_type(dl).unwrap_err());
    }
}

#[test]
fn export_is_zero_copy_for_every_numeric_type() {
    for (v, code, bits) in EXPECTED_MAP {
        for dims in [vec![3i64, 5], vec![7], vec![]] {
            let mut t = raw_tensor("x", v, &dims);
            let before = t.raw_data().as_ptr();
            let expected = t.raw_data().to_vec();
            let m = to_dlpack_versioned(&mut t, &NEVER).unwrap();
            let dl = m.dl_tensor();
            assert_eq!(m.get().version, DLPackVersion { major: 1, minor: 1 });
            assert_eq!(m.flags(), DLPACK_FLAG_BITMASK_READ_ONLY);
            assert_eq!(dl.device, DLDevice::CPU);
            assert_eq!(
                (dl.dtype.code, dl.dtype.bits, dl.dtype.lanes),
                (code, bits, 1)
            );
            assert_eq!(dl.ndim as usize, dims.len());
            assert_eq!(m.shape(), &dims[..]);
            if dims.is_empty() {
                assert!(dl.shape.is_null(), "scalar: no shape");
            }
            assert!(dl.strides.is_null());
            assert_eq!(dl.byte_offset, 0);
            assert_eq!(dl.data.cast::<u8>().cast_const(), before, "no copy");
            assert_eq!(
                t.raw_data().as_ptr(),
                before,
                "the tensor still has the same bytes"
            );
            assert_eq!(exported_bytes(dl), &expected[..]);
            assert_eq!(m.bytes().unwrap(), &expected[..]);

            let legacy = to_dlpack(&mut t, &NEVER).unwrap();
            assert_eq!(legacy.dl_tensor().data.cast::<u8>().cast_const(), before);
            assert_eq!(legacy.flags(), 0, "the legacy struct has no flags");
            assert_eq!(legacy.shape(), &dims[..]);
            assert_eq!(exported_bytes(legacy.dl_tensor()), &expected[..]);
        }
    }
}

/// An owner token that counts how often it is dropped.
struct Counted(Arc<AtomicUsize>, Vec<u8>);
impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A model whose one initializer borrows bytes from a counted owner; returns the drop counter
/// and a weak reference to the owner.
fn model_with_counted_owner() -> (ModelProto, Arc<AtomicUsize>, Weak<Counted>, *const u8) {
    let drops = Arc::new(AtomicUsize::new(0));
    let owner = Arc::new(Counted(drops.clone(), (0..64u8).collect()));
    let ptr = owner.1.as_ptr();
    let weak = Arc::downgrade(&owner);
    // SAFETY: the 64 bytes live as long as `owner`, which the span holds.
    let span = unsafe { ByteSpan::from_owner_raw(ptr, 64, owner) };
    let mut m = ModelProto::new();
    let t = m.mutable_graph().add_initializer();
    t.set_name("w");
    t.set_data_type(1);
    t.set_dims(vec![4, 4]);
    t.set_raw_data(span);
    (m, drops, weak, ptr)
}

#[test]
fn owner_is_released_exactly_once_by_the_deleter() {
    for legacy in [false, true] {
        let (mut m, drops, weak, ptr) = model_with_counted_owner();
        let t = &mut m.mutable_graph().mutable_initializer()[0];
        let raw: *mut c_void = if legacy {
            to_dlpack(t, &NEVER).unwrap().into_raw().cast()
        } else {
            to_dlpack_versioned(t, &NEVER).unwrap().into_raw().cast()
        };
        drop(m);
        assert_eq!(
            drops.load(Ordering::SeqCst),
            0,
            "the export keeps the owner"
        );
        assert_eq!(weak.strong_count(), 1, "only the export holds it");
        // SAFETY: `raw` is a live export of the matching struct; its deleter is called once.
        unsafe {
            let dl = if legacy {
                &(*raw.cast::<DLManagedTensor>()).dl_tensor
            } else {
                let v = &*raw.cast::<DLManagedTensorVersioned>();
                assert!(!v.manager_ctx.is_null(), "manager_ctx holds the owner");
                assert_eq!(v.flags, DLPACK_FLAG_BITMASK_READ_ONLY, "borrowed bytes");
                &v.dl_tensor
            };
            assert_eq!(dl.data.cast::<u8>().cast_const(), ptr);
            let bytes = exported_bytes(dl);
            assert_eq!(
                bytes,
                &(0..64u8).collect::<Vec<_>>()[..],
                "valid after the model is gone"
            );
            if legacy {
                let p = raw.cast::<DLManagedTensor>();
                ((*p).deleter.unwrap())(p);
            } else {
                let p = raw.cast::<DLManagedTensorVersioned>();
                ((*p).deleter.unwrap())(p);
            }
        }
        assert_eq!(
            drops.load(Ordering::SeqCst),
            1,
            "released by the deleter, once"
        );
        assert!(weak.upgrade().is_none());
    }
}

#[test]
fn owned_bytes_are_shared_not_copied_and_outlive_the_model() {
    let mut m = ModelProto::new();
    m.mutable_graph()
        .mutable_initializer()
        .push(raw_tensor("w", 1, &[256]));
    let t = &mut m.mutable_graph().mutable_initializer()[0];
    assert!(!t.raw_data_opt().unwrap().is_borrowed());
    let before = t.raw_data().as_ptr();
    let expected = t.raw_data().to_vec();
    let e = to_dlpack_versioned(t, &NEVER).unwrap();
    // The model's bytes moved into shared storage: same pointer, now shared with the export.
    let t = &m.graph().initializer()[0];
    assert_eq!(t.raw_data().as_ptr(), before);
    assert!(t.raw_data_opt().unwrap().is_borrowed());
    assert_eq!(
        e.flags(),
        DLPACK_FLAG_BITMASK_READ_ONLY,
        "shared bytes are read-only"
    );
    // Writing the model's tensor copies; the export keeps the old bytes.
    m.mutable_graph().mutable_initializer()[0]
        .mutable_raw_data()
        .as_mut_slice()[0] ^= 0xFF;
    drop(m);
    assert_eq!(e.bytes().unwrap(), &expected[..]);
    assert_eq!(e.dl_tensor().data.cast::<u8>().cast_const(), before);
}

#[test]
fn memory_mapped_and_shared_bytes_are_read_only() {
    let dir = std::env::temp_dir().join(format!("onnxl-dlpack-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("m.onnx");
    let mut m = ModelProto::new();
    m.mutable_graph()
        .mutable_initializer()
        .push(raw_tensor("big", 1, &[4096]));
    onnx_light::save_model(&m, &path, &SerializeOptions::default()).unwrap();
    let opts = ParseOptions {
        no_copy: true,
        file_load_mode: FileLoadMode::Mmap,
        // Borrow the payload wherever it is in the file (no aligned copy).
        alignment: 1,
        ..Default::default()
    };
    let mut mapped = onnx_light::load_model(&path, &LoadOptions::from(opts.clone())).unwrap();
    let t = &mut mapped.mutable_graph().mutable_initializer()[0];
    assert!(t.raw_data_opt().unwrap().is_borrowed());
    let ptr = t.raw_data().as_ptr();
    let e = to_dlpack_versioned(t, &NEVER).unwrap();
    assert_eq!(
        e.flags() & DLPACK_FLAG_BITMASK_READ_ONLY,
        DLPACK_FLAG_BITMASK_READ_ONLY
    );
    assert_eq!(e.flags() & DLPACK_FLAG_BITMASK_IS_COPIED, 0);
    assert_eq!(
        e.dl_tensor().data.cast::<u8>().cast_const(),
        ptr,
        "points into the map"
    );
    drop(mapped);
    // The mapping stays alive through the export's owner token; on Unix even once its file is
    // gone (Windows refuses to remove a mapped file: the directory goes once the export does).
    #[cfg(unix)]
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(e.bytes().unwrap(), m.graph().initializer()[0].raw_data());
    #[cfg(windows)]
    {
        drop(e);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    // Bytes borrowed from a shared buffer.
    let bytes = Arc::new(m.serialize_to_vec());
    let opts = ParseOptions {
        no_copy: true,
        alignment: 1,
        ..Default::default()
    };
    let mut shared: ModelProto = onnx_light::parse_from_shared(bytes.clone(), &opts).unwrap();
    let t = &mut shared.mutable_graph().mutable_initializer()[0];
    let e = to_dlpack_versioned(t, &NEVER).unwrap();
    assert_eq!(e.flags(), DLPACK_FLAG_BITMASK_READ_ONLY);
    let base = bytes.as_ptr() as usize;
    let data = e.dl_tensor().data as usize;
    assert!(
        data >= base && data < base + bytes.len(),
        "inside the shared buffer"
    );
}

#[test]
fn typed_fields_are_refused_or_copied_when_asked() {
    let mut t = TensorProto::new();
    t.set_name("f");
    t.set_data_type(1);
    t.set_dims(vec![2, 2]);
    t.set_float_data(vec![1.0, -2.5, 3.25, 1e-3]);
    let msg = unsupported(to_dlpack_versioned(&mut t, &NEVER).unwrap_err());
    assert!(msg.contains("float_data") && msg.contains("'f'"), "{msg}");
    unsupported(to_dlpack(&mut t, &NEVER).unwrap_err());
    let e = to_dlpack_versioned(&mut t, &IF_NEEDED).unwrap();
    assert_eq!(e.flags(), DLPACK_FLAG_BITMASK_IS_COPIED, "a writable copy");
    let want: Vec<u8> = t
        .float_data()
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    assert_eq!(e.bytes().unwrap(), &want[..]);
    assert_eq!(t.raw_data_opt(), None, "the tensor is unchanged");

    // Each typed field, converted as onnx.numpy_helper.to_array reads it.
    type Fill = Box<dyn Fn(&mut TensorProto)>;
    let cases: Vec<(i32, Fill, Vec<u8>)> = vec![
        (
            10,
            Box::new(|t| t.set_int32_data(vec![0x3C00, 0xC000])),
            vec![0x00, 0x3C, 0x00, 0xC0],
        ),
        (
            3,
            Box::new(|t| t.set_int32_data(vec![-1, 127])),
            vec![0xFF, 0x7F],
        ),
        (9, Box::new(|t| t.set_int32_data(vec![1, 0])), vec![1, 0]),
        (
            6,
            Box::new(|t| t.set_int32_data(vec![-2, 7])),
            [(-2i32).to_le_bytes(), 7i32.to_le_bytes()].concat(),
        ),
        (
            7,
            Box::new(|t| t.set_int64_data(vec![-3, 1 << 40])),
            [(-3i64).to_le_bytes(), (1i64 << 40).to_le_bytes()].concat(),
        ),
        (
            12,
            Box::new(|t| t.set_uint64_data(vec![5, 0xFFFF_FFFF])),
            [5u32.to_le_bytes(), 0xFFFF_FFFFu32.to_le_bytes()].concat(),
        ),
        (
            13,
            Box::new(|t| t.set_uint64_data(vec![u64::MAX, 9])),
            [u64::MAX.to_le_bytes(), 9u64.to_le_bytes()].concat(),
        ),
        (
            11,
            Box::new(|t| t.set_double_data(vec![0.5, -1.0])),
            [0.5f64.to_le_bytes(), (-1.0f64).to_le_bytes()].concat(),
        ),
        (
            14,
            Box::new(|t| t.set_float_data(vec![1.0, 2.0, 3.0, 4.0])),
            [1.0f32, 2.0, 3.0, 4.0]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
        ),
        // INT4: one packed byte per int32 value (2 elements, 1 byte).
        (22, Box::new(|t| t.set_int32_data(vec![0x7F])), vec![0x7F]),
    ];
    for (ty, fill, want) in cases {
        let mut t = TensorProto::new();
        t.set_data_type(ty);
        t.set_dims(vec![2]);
        fill(&mut t);
        let e = to_dlpack_versioned(&mut t, &IF_NEEDED).unwrap();
        assert_eq!(e.bytes().unwrap(), &want[..], "type {ty}");
        assert_eq!(e.flags(), DLPACK_FLAG_BITMASK_IS_COPIED);
    }

    // Wrong number of typed values: refused even with a copy.
    let mut t = TensorProto::new();
    t.set_data_type(1);
    t.set_dims(vec![3]);
    t.set_float_data(vec![1.0]);
    assert!(invalid(to_dlpack_versioned(&mut t, &IF_NEEDED).unwrap_err()).contains("float_data"));
    // No data at all.
    t.mutable_float_data().clear();
    assert!(invalid(to_dlpack_versioned(&mut t, &IF_NEEDED).unwrap_err()).contains("no data"));
}

#[test]
fn explicit_copy_of_raw_data_is_private_and_writable() {
    let mut t = raw_tensor("w", 6, &[16]);
    let before = t.raw_data().as_ptr();
    let e = to_dlpack_versioned(&mut t, &ALWAYS).unwrap();
    assert_eq!(e.flags(), DLPACK_FLAG_BITMASK_IS_COPIED);
    assert_ne!(e.dl_tensor().data.cast::<u8>().cast_const(), before);
    assert_eq!(e.bytes().unwrap(), t.raw_data());
    assert!(!t.raw_data_opt().unwrap().is_borrowed(), "not shared");
    // SAFETY: the copy belongs to this consumer alone (IS_COPIED, not READ_ONLY).
    unsafe { *e.dl_tensor().data.cast::<u8>() ^= 0xFF };
    assert_ne!(e.bytes().unwrap()[0], t.raw_data()[0]);
}

#[test]
fn unowned_caller_bytes_are_refused_unless_copied() {
    let mut m = ModelProto::new();
    m.mutable_graph()
        .mutable_initializer()
        .push(raw_tensor("w", 1, &[1024]));
    let bytes = m.serialize_to_vec();
    let opts = ParseOptions {
        no_copy: true,
        ..Default::default()
    };
    // SAFETY: `bytes` outlives `parsed` and every export taken from it below.
    let mut parsed: ModelProto =
        unsafe { onnx_light::parse_from_bytes_unowned(&bytes, &opts) }.unwrap();
    let t = &mut parsed.mutable_graph().mutable_initializer()[0];
    assert!(t.raw_data_opt().unwrap().is_unowned_borrow());
    let msg = unsupported(to_dlpack_versioned(t, &NEVER).unwrap_err());
    assert!(msg.contains("without an owner"), "{msg}");
    unsupported(to_dlpack(t, &NEVER).unwrap_err());
    let e = to_dlpack_versioned(t, &IF_NEEDED).unwrap();
    assert_eq!(e.flags(), DLPACK_FLAG_BITMASK_IS_COPIED);
    assert_eq!(e.bytes().unwrap(), t.raw_data());
    let range = bytes.as_ptr() as usize..bytes.as_ptr() as usize + bytes.len();
    assert!(!range.contains(&(e.dl_tensor().data as usize)), "a copy");
}

#[test]
fn export_refusals() {
    // STRING, UNDEFINED, FLOAT6 and unknown types.
    for ty in [8, 0, 27, 28, 99] {
        let mut t = TensorProto::new();
        t.set_data_type(ty);
        t.set_dims(vec![1]);
        t.set_raw_data(vec![0u8]);
        unsupported(to_dlpack_versioned(&mut t, &ALWAYS).unwrap_err());
    }
    // raw_data of the wrong length.
    let mut t = raw_tensor("w", 1, &[4]);
    t.set_dims(vec![5]);
    assert!(invalid(to_dlpack_versioned(&mut t, &NEVER).unwrap_err()).contains("raw_data has 16"));
    // Negative dims.
    t.set_dims(vec![-4]);
    assert!(invalid(to_dlpack_versioned(&mut t, &NEVER).unwrap_err()).contains("negative"));
    // External data not loaded.
    let mut t = raw_tensor("w", 1, &[4]);
    t.clear_raw_data();
    t.set_data_location(1);
    assert!(unsupported(to_dlpack_versioned(&mut t, &ALWAYS).unwrap_err()).contains("external"));
    // A segment.
    let mut t = raw_tensor("w", 1, &[4]);
    t.mutable_segment().set_begin(0);
    unsupported(to_dlpack_versioned(&mut t, &NEVER).unwrap_err());
}

#[test]
fn empty_tensor_has_null_data() {
    let mut t = raw_tensor("e", 1, &[0, 3]);
    let e = to_dlpack_versioned(&mut t, &NEVER).unwrap();
    assert!(e.dl_tensor().data.is_null());
    assert_eq!(e.shape(), &[0, 3]);
    assert_eq!(e.bytes().unwrap(), &[] as &[u8]);
    let back = tensor_from_dlpack(e, ImportMode::Borrow).unwrap();
    assert_eq!(back.dims()[..], [0, 3]);
    assert_eq!(back.raw_data(), &[] as &[u8]);
}

// ---- import ------------------------------------------------------------------------------------

static DELETED: Mutex<Vec<usize>> = Mutex::new(Vec::new());

/// A producer's tensor: the managed struct first, then what it points at.
#[repr(C)]
struct Producer {
    managed: DLManagedTensorVersioned,
    shape: Vec<i64>,
    strides: Option<Vec<i64>>,
    data: Vec<u8>,
    id: usize,
}

unsafe extern "C" fn producer_deleter(p: *mut DLManagedTensorVersioned) {
    // SAFETY: `p` is the first field of a leaked `Producer`, deleted once.
    let b = unsafe { Box::from_raw(p.cast::<Producer>()) };
    DELETED.lock().unwrap().push(b.id);
}

#[repr(C)]
struct LegacyProducer {
    managed: DLManagedTensor,
    shape: Vec<i64>,
    data: Vec<u8>,
    id: usize,
}

unsafe extern "C" fn legacy_deleter(p: *mut DLManagedTensor) {
    // SAFETY: `p` is the first field of a leaked `LegacyProducer`, deleted once.
    let b = unsafe { Box::from_raw(p.cast::<LegacyProducer>()) };
    DELETED.lock().unwrap().push(b.id);
}

static NEXT_ID: AtomicUsize = AtomicUsize::new(1);

fn deletions(id: usize) -> usize {
    DELETED.lock().unwrap().iter().filter(|x| **x == id).count()
}

/// A versioned producer tensor; returns it and its id (for counting deleter calls).
fn producer(
    dtype: DLDataType,
    shape: &[i64],
    strides: Option<&[i64]>,
    data: Vec<u8>,
    tweak: impl FnOnce(&mut DLManagedTensorVersioned),
) -> (OwnedDlpack<DLManagedTensorVersioned>, usize) {
    let id = NEXT_ID.fetch_add(1, Ordering::SeqCst);
    let mut b = Box::new(Producer {
        managed: DLManagedTensorVersioned {
            version: DLPackVersion { major: 1, minor: 1 },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(producer_deleter),
            flags: 0,
            dl_tensor: DLTensor {
                data: std::ptr::null_mut(),
                device: DLDevice::CPU,
                ndim: shape.len() as i32,
                dtype,
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            },
        },
        shape: shape.to_vec(),
        strides: strides.map(|s| s.to_vec()),
        data,
        id,
    });
    b.managed.dl_tensor.shape = b.shape.as_mut_ptr();
    if let Some(s) = &mut b.strides {
        b.managed.dl_tensor.strides = s.as_mut_ptr();
    }
    b.managed.dl_tensor.data = b.data.as_mut_ptr().cast();
    tweak(&mut b.managed);
    let p = Box::into_raw(b);
    // SAFETY: a valid managed tensor, owned here; its deleter frees it once.
    (unsafe { OwnedDlpack::from_raw(p.cast()) }.unwrap(), id)
}

const F32: DLDataType = DLDataType {
    code: 2,
    bits: 32,
    lanes: 1,
};

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn import_borrow_keeps_the_producer_until_the_last_user() {
    let data = f32_bytes(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let (m, id) = producer(F32, &[2, 3], None, data.clone(), |_| {});
    let ptr = m.dl_tensor().data.cast::<u8>().cast_const();
    let t = tensor_from_dlpack(m, ImportMode::Borrow).unwrap();
    assert_eq!(t.dims()[..], [2, 3]);
    assert_eq!(t.data_type(), 1);
    assert!(!t.has_name());
    assert_eq!(t.raw_data().as_ptr(), ptr, "borrowed, not copied");
    assert_eq!(t.raw_data(), &data[..]);
    let copy = t.clone();
    drop(t);
    assert_eq!(deletions(id), 0, "the clone still uses the bytes");
    // A model holding it serializes the producer's bytes.
    let mut model = ModelProto::new();
    model.mutable_graph().mutable_initializer().push(copy);
    let bytes = model.serialize_to_vec();
    let back = ModelProto::parse_from_bytes(&bytes).unwrap();
    assert_eq!(back.graph().initializer()[0].raw_data(), &data[..]);
    drop(model);
    assert_eq!(
        deletions(id),
        1,
        "the deleter ran once, after the last user"
    );
}

#[test]
fn import_copy_calls_the_deleter_at_once() {
    let data = f32_bytes(&[9.0, 8.0]);
    let (m, id) = producer(F32, &[2], None, data.clone(), |_| {});
    let ptr = m.dl_tensor().data as usize;
    let t = tensor_from_dlpack(m, ImportMode::Copy).unwrap();
    assert_eq!(deletions(id), 1);
    assert_ne!(t.raw_data().as_ptr() as usize, ptr);
    assert_eq!(t.raw_data(), &data[..]);
    assert!(!t.raw_data_opt().unwrap().is_borrowed());
}

#[test]
fn import_legacy_struct() {
    let id = NEXT_ID.fetch_add(1, Ordering::SeqCst);
    let mut b = Box::new(LegacyProducer {
        managed: DLManagedTensor {
            dl_tensor: DLTensor {
                data: std::ptr::null_mut(),
                device: DLDevice::CPU,
                ndim: 1,
                dtype: DLDataType {
                    code: 1,
                    bits: 4,
                    lanes: 1,
                },
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: 1,
            },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(legacy_deleter),
        },
        shape: vec![3],
        data: vec![0xEE, 0x21, 0x03],
        id,
    });
    b.managed.dl_tensor.shape = b.shape.as_mut_ptr();
    b.managed.dl_tensor.data = b.data.as_mut_ptr().cast();
    // SAFETY: a valid managed tensor owned here.
    let m = unsafe { OwnedDlpack::from_raw(Box::into_raw(b).cast::<DLManagedTensor>()) }.unwrap();
    let t = tensor_from_dlpack(m, ImportMode::Borrow).unwrap();
    assert_eq!(t.data_type(), 21, "UINT4");
    assert_eq!(
        t.raw_data(),
        &[0x21, 0x03],
        "byte_offset applied, 3 packed nibbles = 2 bytes"
    );
    drop(t);
    assert_eq!(deletions(id), 1);
}

#[test]
fn import_checks_layout_device_type_and_version() {
    let data = f32_bytes(&[0.0; 6]);
    type Tweak = Box<dyn FnOnce(&mut DLManagedTensorVersioned)>;
    let cases: Vec<(&str, Tweak, Option<&[i64]>)> = vec![
        (
            "not the CPU",
            Box::new(|m| {
                m.dl_tensor.device = DLDevice {
                    device_type: 2,
                    device_id: 0,
                }
            }),
            None,
        ),
        ("major version 1", Box::new(|m| m.version.major = 2), None),
        ("lanes", Box::new(|m| m.dl_tensor.dtype.lanes = 2), None),
        ("no ONNX", Box::new(|m| m.dl_tensor.dtype.code = 3), None),
        ("not compact row-major", Box::new(|_| {}), Some(&[1, 2])),
        ("ndim", Box::new(|m| m.dl_tensor.ndim = -1), None),
        (
            "NULL shape",
            Box::new(|m| m.dl_tensor.shape = std::ptr::null_mut()),
            None,
        ),
        (
            "NULL data",
            Box::new(|m| m.dl_tensor.data = std::ptr::null_mut()),
            None,
        ),
    ];
    for (what, tweak, strides) in cases {
        let (m, id) = producer(F32, &[2, 3], strides, data.clone(), tweak);
        let e = tensor_from_dlpack(m, ImportMode::Borrow).unwrap_err();
        assert!(e.to_string().contains(what), "{what}: {e}");
        assert!(
            matches!(e, Error::Unsupported(_) | Error::InvalidArgument(_)),
            "{e:?}"
        );
        assert_eq!(
            deletions(id),
            1,
            "{what}: the refused tensor is released once"
        );
    }
    // Padded sub-byte elements.
    let u4 = DLDataType {
        code: 1,
        bits: 4,
        lanes: 1,
    };
    let (m, _) = producer(u4, &[2], None, vec![1, 2], |m| {
        m.flags = DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED
    });
    assert!(unsupported(tensor_from_dlpack(m, ImportMode::Copy).unwrap_err()).contains("padded"));
    // Negative extent.
    let (m, _) = producer(F32, &[-1], None, vec![], |_| {});
    invalid(tensor_from_dlpack(m, ImportMode::Copy).unwrap_err());
}

#[test]
fn import_accepts_row_major_strides_and_any_stride_on_unit_extents() {
    let data = f32_bytes(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    for strides in [Some(&[3i64, 1][..]), None] {
        let (m, _) = producer(F32, &[2, 3], strides, data.clone(), |_| {});
        assert_eq!(
            tensor_from_dlpack(m, ImportMode::Copy).unwrap().raw_data(),
            &data[..]
        );
    }
    let (m, _) = producer(F32, &[1, 6], Some(&[99, 1]), data.clone(), |_| {});
    assert_eq!(
        tensor_from_dlpack(m, ImportMode::Copy).unwrap().raw_data(),
        &data[..]
    );
    // Transposed strides are refused.
    let (m, _) = producer(F32, &[3, 2], Some(&[1, 3]), data.clone(), |_| {});
    unsupported(tensor_from_dlpack(m, ImportMode::Copy).unwrap_err());
    // Minor version 7 of major 1 is fine.
    let (m, _) = producer(F32, &[6], None, data.clone(), |m| m.version.minor = 7);
    assert_eq!(
        tensor_from_dlpack(m, ImportMode::Copy).unwrap().dims()[..],
        [6]
    );
}

#[test]
fn export_then_borrowing_import_round_trips_every_type() {
    for (v, _, _) in EXPECTED_MAP {
        let (mut m, drops, weak, _) = model_with_counted_owner();
        let t = &mut m.mutable_graph().mutable_initializer()[0];
        // Reinterpret the 64 counted bytes as type v with a fitting shape.
        let bits = data_type(v).bits() as i64;
        t.set_data_type(v);
        t.set_dims(vec![64 * 8 / bits]);
        let e = to_dlpack_versioned(t, &NEVER).unwrap();
        let back = tensor_from_dlpack(e, ImportMode::Borrow).unwrap();
        drop(m);
        assert_eq!(back.data_type(), v);
        assert_eq!(back.dims()[..], [64 * 8 / bits]);
        assert_eq!(back.raw_data(), &(0..64u8).collect::<Vec<_>>()[..]);
        assert_eq!(drops.load(Ordering::SeqCst), 0);
        drop(back);
        assert_eq!(drops.load(Ordering::SeqCst), 1, "type {v}: released once");
        assert!(weak.upgrade().is_none());
    }
}
