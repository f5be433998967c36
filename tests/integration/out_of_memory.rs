//! Memory exhaustion is an error, never an abort of the host process. Each case runs in a child
//! process (this test binary re-run on `child_process_oom`) under `setrlimit(RLIMIT_AS)`: the child
//! must print its outcome and exit normally.
//!
//! - a 30 MB file of empty `TensorShapeProto.dim` entries with the default options: refused by
//!   the metadata budget (`MetadataLimit`) well within 1.5 GiB of address space;
//! - a 4 GiB model file loaded under a 1 GiB limit (copy and buffered modes): the bulk
//!   allocation fails cleanly as `Error::OutOfMemory`;
//! - the same limit when serializing a model whose size does not fit: `OutOfMemory`;
//! - allocations sized by the input in the middle of a parse, under a 640 MiB limit, each with
//!   an input the metadata budget lets through: a packed varint field of 100 million values
//!   (800 MB of elements), a 400 MB unknown field, a 400 MB string copied (`skip_raw_data`
//!   loads do not share strings with the input): `OutOfMemory` naming the field and offset;
//! - without a metadata budget (`max_metadata_bytes = u64::MAX`), under 640 MiB: 20 million
//!   empty nodes (a chunk of the repeated field is refused) and 150 million unpacked `dims`;
//! - a model nested to the maximum depth parsed on a 256 KiB thread stack once the address
//!   space has no room for a 2 MiB stack segment: `OutOfMemory` naming the segment's size.
//!
//! `tests/process_wide/allocation_failures.rs` refuses every single allocation of a parse in turn.

// `setrlimit` and `mmap`: not built for Windows (where no memory limit can be set that Wine 8
// enforces, scripts/test.d/70-cross.sh).
#![cfg(unix)]

use crate::common;

use common::{nested_graphs, wrap};

use onnx_light::proto::Message;
use onnx_light::{DecodeErrorKind, Error, FileLoadMode, LoadOptions, ModelProto, ParseOptions};

const CHILD_ENV: &str = "ONNXL_OOM_CHILD";

/// A model whose one graph input has a tensor shape of `n` empty `dim` entries (2 bytes each).
fn empty_dims(n: usize) -> Vec<u8> {
    let shape: Vec<u8> = [0x0a, 0x00].repeat(n); // TensorShapeProto.dim (1), empty
    // TypeProto.tensor_type (1) -> Tensor.shape (2); ValueInfoProto.type (2); GraphProto.input
    // (11); ModelProto.graph (7).
    wrap(7, &wrap(11, &wrap(2, &wrap(1, &wrap(2, &shape)))))
}

/// The address-space limit of each case (`None`: the stack-segment case, whose limit is what
/// the child holds then plus 1 MiB).
fn limit_of(case: &str) -> Option<u64> {
    match case {
        "empty_dims" | "empty_dims_file" => Some(1536 << 20),
        "huge_file_copy" | "huge_file_buffered" | "huge_serialize" => Some(1 << 30),
        "packed_varints"
        | "unknown_field"
        | "long_string"
        | "empty_nodes_no_budget"
        | "unpacked_dims" => Some(640 << 20),
        _ => None,
    }
}

/// The payload the `huge_serialize` case holds (three times in its model) before it limits its
/// address space.
const SHARED_PAYLOAD: usize = 700 << 20;

/// Limits the address space of this process to the limit of `case`.
fn limit_address_space_of(case: &str) {
    limit_address_space(limit_of(case).expect("a case with a fixed limit"));
}

fn limit_address_space(bytes: u64) {
    let lim = libc::rlimit {
        rlim_cur: bytes,
        rlim_max: bytes,
    };
    // SAFETY: a plain system call on a valid struct.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &lim) }, 0);
}

/// Describes an outcome in one line (what the parent checks).
fn outcome<T>(r: onnx_light::Result<T>) -> String {
    match r {
        Ok(_) => "OK".into(),
        Err(Error::OutOfMemory(m)) => format!("OUT_OF_MEMORY {m}"),
        Err(Error::Decode(d)) if matches!(d.kind, DecodeErrorKind::MetadataLimit { .. }) => {
            format!("METADATA_LIMIT {d}")
        }
        Err(e) => format!("OTHER {e}"),
    }
}

/// The child: runs one case under the address-space limit and prints `RESULT: ...`.
#[test]
#[ignore = "child process of the out-of-memory tests; started by them"]
fn child_process_oom() {
    let case = common::child_spec(CHILD_ENV);
    let dir = std::env::var("ONNXL_OOM_DIR").unwrap();
    let path = std::path::Path::new(&dir).join("input.onnx");
    let result = match case.as_str() {
        "empty_dims" => {
            let bytes = std::fs::read(&path).unwrap();
            limit_address_space_of(&case);
            outcome(onnx_light::parse_from_bytes::<ModelProto>(
                &bytes,
                &ParseOptions::default(),
            ))
        }
        "empty_dims_file" => {
            limit_address_space_of(&case);
            outcome(onnx_light::load_model(&path, &LoadOptions::default()))
        }
        "huge_file_copy" | "huge_file_buffered" => {
            limit_address_space_of(&case);
            let opts = ParseOptions {
                file_load_mode: if case == "huge_file_copy" {
                    FileLoadMode::Auto
                } else {
                    FileLoadMode::Buffered
                },
                ..Default::default()
            };
            outcome(onnx_light::load_model(
                &path,
                &LoadOptions::from(opts.clone()),
            ))
        }
        "huge_serialize" => {
            // A model of 3 tensors sharing one 700 MiB buffer: 2.1 GB serialized.
            let mut m = ModelProto::new();
            let shared = onnx_light::ByteSpan::from_vec(vec![7u8; SHARED_PAYLOAD]);
            let mut span = shared.clone();
            let _ = span.share();
            for i in 0..3 {
                let mut t = onnx_light::TensorProto::new();
                t.set_name(format!("w{i}"));
                t.set_raw_data(span.clone());
                m.mutable_graph().mutable_initializer().push(t);
            }
            limit_address_space_of(&case);
            outcome(onnx_light::serialize_to_vec(
                &m,
                &onnx_light::SerializeOptions::default(),
            ))
        }
        "packed_varints" | "unknown_field" | "long_string" => {
            let opts = ParseOptions {
                skip_raw_data: case == "long_string",
                ..Default::default()
            };
            limit_address_space_of(&case);
            outcome(onnx_light::load_model(
                &path,
                &LoadOptions::from(opts.clone()),
            ))
        }
        "empty_nodes_no_budget" | "unpacked_dims" => {
            // No metadata budget: nothing but the address space stops the parse.
            let bytes = std::fs::read(&path).unwrap();
            let opts = ParseOptions {
                max_metadata_bytes: u64::MAX,
                ..Default::default()
            };
            limit_address_space_of(&case);
            outcome(onnx_light::parse_from_bytes::<ModelProto>(&bytes, &opts))
        }
        "stack_segment" => {
            let bytes = std::fs::read(&path).unwrap();
            stack_segment_refused(&bytes)
        }
        sweep if sweep.starts_with("sweep:") => {
            let (room, threads) = sweep_case(sweep);
            sweep_load(&path, room, threads)
        }
        other => panic!("unknown case {other}"),
    };
    println!("RESULT: {result}");
}

/// Size of the process's address space now (`VmSize` of /proc/self/status).
fn address_space_now() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmSize:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse().ok())
        .expect("VmSize in /proc/self/status");
    kib << 10
}

/// Parses `bytes` (a model nested as deep as the maximum `max_recursion_depth` allows) on a
/// thread with a 256 KiB stack, so that the parse needs stack segments, after limiting the
/// address space to what the process holds plus 1 MiB: room for the parse's small allocations (the thread's heap is already reserved), none
/// for a 2 MiB segment.
fn stack_segment_refused(bytes: &[u8]) -> String {
    let opts = ParseOptions {
        max_recursion_depth: onnx_light::codec::MAX_RECURSION_DEPTH_LIMIT,
        ..Default::default()
    };
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn_scoped(s, || {
                // Warm up this thread's heap and check that the model parses without a limit.
                let m = onnx_light::parse_from_bytes::<ModelProto>(bytes, &opts);
                assert!(m.is_ok(), "{:?}", m.err());
                drop(m);
                limit_address_space(address_space_now() + (1 << 20));
                outcome(onnx_light::parse_from_bytes::<ModelProto>(bytes, &opts))
            })
            .unwrap()
            .join()
            .unwrap_or_else(|_| "PANIC".into())
    })
}

/// The room (bytes) and thread count of a `sweep:ROOM_MIB:THREADS` case.
fn sweep_case(case: &str) -> (usize, i32) {
    let mut it = case.split(':').skip(1).map(|v| v.parse::<usize>().unwrap());
    let (room, threads) = (it.next().unwrap(), it.next().unwrap());
    (room << 20, threads as i32)
}

/// Loads the model at `path` with `threads` threads once only `room` bytes of address space are
/// left: through the Rust API with one thread, through the C ABI (status and message) with more.
fn sweep_load(path: &std::path::Path, room: usize, threads: i32) -> String {
    limit_address_space(address_space_now() + room as u64);
    if threads == 1 {
        let opts = ParseOptions::default();
        return outcome(onnx_light::load_model(
            path,
            &LoadOptions::from(opts.clone()),
        ));
    }
    use onnx_light::ffi::{accessors, model, options, status};
    let c_path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    let mut opts = options::onnxl_parse_options_default();
    opts.num_threads = threads;
    let mut out = std::ptr::null_mut();
    // SAFETY: a NUL-terminated path, valid options and a writable out pointer.
    let s = unsafe { model::onnxl_load_model(c_path.as_ptr(), &opts, &mut out) };
    if !out.is_null() {
        // SAFETY: the model the call above returned, freed once.
        unsafe { accessors::onnxl_model_proto_free(out) };
        return "OK".into();
    }
    // SAFETY: the message of this thread's last failure, read before any other call.
    let message = unsafe { std::ffi::CStr::from_ptr(status::onnxl_last_error_message()) };
    format!("{s:?} {}", message.to_string_lossy())
}

/// Runs `case` in a child process; returns its RESULT line (the child must exit normally).
fn run_child(case: &str, dir: &std::path::Path) -> String {
    let out = common::child_process(module_path!(), "child_process_oom", CHILD_ENV, case)
        .env("ONNXL_OOM_DIR", dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{case}: the child died ({:?}):\n{stdout}\n{stderr}",
        out.status
    );
    let r = stdout
        .lines()
        .find_map(|l| l.split_once("RESULT: ").map(|(_, r)| r))
        .unwrap_or_else(|| panic!("{case}: no result:\n{stdout}\n{stderr}"))
        .to_string();
    println!("{case}: {}", r.chars().take(300).collect::<String>());
    r
}

#[test]
fn empty_dims_are_refused_within_the_address_space_limit() {
    let dir = common::TempDir::new("oom-dims");
    let bytes = empty_dims(15_000_000); // 30 MB
    std::fs::write(dir.path("input.onnx"), &bytes).unwrap();
    for case in ["empty_dims", "empty_dims_file"] {
        let r = run_child(case, &dir.0);
        assert!(
            r.starts_with("METADATA_LIMIT") || r.starts_with("OUT_OF_MEMORY"),
            "{case}: {r}"
        );
    }
}

#[test]
fn a_file_larger_than_the_address_space_is_out_of_memory() {
    let dir = common::TempDir::new("oom-huge");
    let f = std::fs::File::create(dir.path("input.onnx")).unwrap();
    f.set_len(4 << 30).unwrap(); // sparse: no disk space used
    drop(f);
    for case in ["huge_file_copy", "huge_file_buffered"] {
        let r = run_child(case, &dir.0);
        assert!(r.starts_with("OUT_OF_MEMORY"), "{case}: {r}");
    }
    let r = run_child("huge_serialize", &dir.0);
    assert!(r.starts_with("OUT_OF_MEMORY"), "huge_serialize: {r}");
}

/// Writes `head`, then `n` bytes of `fill`, to `path` as the length-delimited field `field`
/// (the body streamed: nothing of size `n` is held in memory).
fn write_big_field(path: &std::path::Path, head: &[u8], field: u32, n: usize, fill: u8) {
    use std::io::Write;
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    f.write_all(head).unwrap();
    let mut prefix = Vec::new();
    onnx_light::wire::put_varint(&mut prefix, onnx_light::wire::tag(field, 2) as u64);
    onnx_light::wire::put_varint(&mut prefix, n as u64);
    f.write_all(&prefix).unwrap();
    let chunk = vec![fill; 1 << 20];
    for _ in 0..n / chunk.len() {
        f.write_all(&chunk).unwrap();
    }
    f.write_all(&chunk[..n % chunk.len()]).unwrap();
    f.flush().unwrap();
}

#[test]
fn allocations_sized_by_the_input_fail_cleanly_mid_parse() {
    let dir = common::TempDir::new("oom-mid-parse");
    let path = dir.path("input.onnx");
    // ModelProto.graph (7) -> GraphProto.initializer (5) -> TensorProto.int64_data (7, packed):
    // 100 million one-byte varints.
    let n = 100_000_000;
    let tensor_len = 1 + onnx_light::wire::varint_len(n as u64) as usize + n;
    let init_len = 1 + onnx_light::wire::varint_len(tensor_len as u64) as usize + tensor_len;
    let mut head = Vec::new();
    onnx_light::wire::put_varint(&mut head, onnx_light::wire::tag(7, 2) as u64);
    onnx_light::wire::put_varint(&mut head, init_len as u64);
    onnx_light::wire::put_varint(&mut head, onnx_light::wire::tag(5, 2) as u64);
    onnx_light::wire::put_varint(&mut head, tensor_len as u64);
    write_big_field(&path, &head, 7, n, 1);
    let r = run_child("packed_varints", &dir.0);
    assert!(r.starts_with("OUT_OF_MEMORY"), "packed_varints: {r}");
    assert!(
        r.contains("800000000 bytes") && r.contains("int64_data"),
        "{r}"
    );

    // An unknown field (number 100) of 400 MB in a ModelProto.
    write_big_field(&path, &[], 100, 400 << 20, 0);
    let r = run_child("unknown_field", &dir.0);
    assert!(r.starts_with("OUT_OF_MEMORY"), "unknown_field: {r}");
    let field_len = onnx_light::wire::varint_len(onnx_light::wire::tag(100, 2) as u64)
        + onnx_light::wire::varint_len(400 << 20)
        + (400 << 20);
    assert!(r.contains(&format!("{field_len} bytes")), "{r}");

    // ModelProto.doc_string (6) of 400 MB.
    write_big_field(&path, &[], 6, 400 << 20, b'x');
    let r = run_child("long_string", &dir.0);
    assert!(r.starts_with("OUT_OF_MEMORY"), "long_string: {r}");
    assert!(r.contains("doc_string"), "{r}");
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn out_of_memory_is_its_own_error() {
    let e = Error::OutOfMemory("cannot allocate 10 bytes for a test".into());
    assert!(e.to_string().contains("out of memory"), "{e}");
    // A model that parses is unaffected by the helper cases above.
    let m = ModelProto::new();
    assert!(m.serialize_to_vec().is_empty());
}

#[test]
fn repeated_messages_and_unpacked_scalars_fail_cleanly_without_a_budget() {
    let dir = common::TempDir::new("oom-no-budget");
    // 20 million empty nodes (40 MB): ~150 bytes of memory each (the nodes' chunks and the
    // order array of the field).
    std::fs::write(
        dir.path("input.onnx"),
        wrap(7, &[0x0a, 0x00].repeat(20_000_000)),
    )
    .unwrap();
    let r = run_child("empty_nodes_no_budget", &dir.0);
    assert!(r.starts_with("OUT_OF_MEMORY"), "empty nodes: {r}");
    assert!(r.contains("ModelProto.graph.node["), "{r}");
    // 150 million unpacked dims of one tensor (300 MB): 1.2 GB of elements.
    let n = 150_000_000;
    let dims = [0x08, 0x01].repeat(n); // TensorProto.dims (1), varint 1
    std::fs::write(dir.path("input.onnx"), wrap(7, &wrap(5, &dims))).unwrap();
    drop(dims);
    let r = run_child("unpacked_dims", &dir.0);
    assert!(r.starts_with("OUT_OF_MEMORY"), "unpacked dims: {r}");
    assert!(r.contains("initializer[0].dims"), "{r}");
    std::fs::remove_file(dir.path("input.onnx")).unwrap();
}

/// A model of 300 000 initializers with 20 empty `external_data` entries each (15.8 MB): its
/// metadata takes ~400 MB to parse.
fn many_small_messages() -> Vec<u8> {
    let mut tensor = wrap(8, b"t"); // TensorProto.name
    tensor.extend_from_slice(&[0x10, 0x01]); // data_type FLOAT
    tensor.extend_from_slice(&[0x6a, 0x00].repeat(20)); // external_data (13), empty
    let init = wrap(5, &tensor);
    wrap(7, &init.repeat(300_000))
}

/// However little memory is left, a load ends with a result or an error — never an abort,
/// also when the error is built while another thread takes the last memory (the reserve and
/// spare errors of `onnx_light::error`): a sweep of the room left, from too little to map the
/// file to enough for the metadata budget to refuse the model first.
#[test]
fn loads_under_a_sweep_of_address_space_limits_never_abort() {
    let dir = common::TempDir::new("oom-sweep");
    std::fs::write(dir.path("input.onnx"), many_small_messages()).unwrap();
    // (Not run under qemu-user, scripts/test.d/70-cross.sh: once a guest's address space is full
    // every failed allocation is slow there.)
    let rooms: Vec<usize> = (8..=520).step_by(32).collect();
    let mut kinds = std::collections::BTreeSet::new();
    for room_mib in rooms {
        for threads in [1, 2] {
            let r = run_child(&format!("sweep:{room_mib}:{threads}"), &dir.0);
            assert!(
                [
                    "OK",
                    "OUT_OF_MEMORY",
                    "METADATA_LIMIT",
                    "OutOfMemory",
                    "LimitExceeded"
                ]
                .iter()
                .any(|k| r.starts_with(k)),
                "room {room_mib} MiB, {threads} threads: {r}"
            );
            kinds.insert(r.split(' ').next().unwrap().to_string());
        }
    }
    // Both failures and the outcome of enough room were reached.
    assert!(
        kinds.contains("OUT_OF_MEMORY") && kinds.contains("OutOfMemory"),
        "{kinds:?}"
    );
}

#[test]
fn a_stack_segment_that_cannot_be_mapped_is_out_of_memory() {
    let dir = common::TempDir::new("oom-stack");
    // 332 levels: nesting depth 997, within the maximum `max_recursion_depth` (1000).
    std::fs::write(dir.path("input.onnx"), nested_graphs(332)).unwrap();
    let r = run_child("stack_segment", &dir.0);
    assert!(r.starts_with("OUT_OF_MEMORY"), "stack segment: {r}");
    let segment = onnx_light::wire::stack::SEGMENT;
    assert!(
        r.contains(&format!("cannot allocate {segment} bytes")),
        "{r}"
    );
    assert!(r.contains("ModelProto.graph.node[0].attribute[0].g"), "{r}");
}
