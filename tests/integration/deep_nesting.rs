//! Nesting at the documented maximum depth never overflows the native stack: a thread with a
//! 256 KiB stack parses, clones, serializes, visits and frees models nested as deep as
//! `max_recursion_depth` allows (graphs in attributes, TypeProto sequences and maps, unknown
//! groups), and a model built through the API far deeper than any parse accepts is refused
//! by every fallible serializer with a clear error (and still clones and drops safely).

use onnx_light::codec::MAX_RECURSION_DEPTH_LIMIT;
use onnx_light::proto::{AttributeProto, GraphProto, Message, ModelProto, NodeProto, TypeProto};
use onnx_light::wire::{put_varint, tag};
use onnx_light::{DecodeErrorKind, Error, ParseOptions, SerializeOptions};

/// Stack of the threads the tests run on: smaller than any platform's default for secondary
/// threads (512 KiB on macOS, 2 MiB for Rust's threads, 8 MiB for glibc's).
const SMALL_STACK: usize = 256 << 10;

/// Runs `f` on a new thread with a [`SMALL_STACK`] stack.
fn on_small_stack<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .stack_size(SMALL_STACK)
            .spawn_scoped(s, f)
            .unwrap()
            .join()
            .unwrap()
    })
}

fn wrap(field: u32, inner: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    put_varint(&mut b, tag(field, 2) as u64);
    put_varint(&mut b, inner.len() as u64);
    b.extend_from_slice(inner);
    b
}

/// A ModelProto whose graph holds a node whose attribute holds a graph ... `levels` times.
fn nested_graphs(levels: usize) -> Vec<u8> {
    let mut g: Vec<u8> = Vec::new();
    for _ in 0..levels {
        // GraphProto.node (1) -> NodeProto.attribute (5) -> AttributeProto.g (6)
        g = wrap(1, &wrap(5, &wrap(6, &g)));
    }
    wrap(7, &g)
}

/// A ModelProto whose graph input's type nests TypeProto sequences (or maps) `levels` times.
fn nested_types(levels: usize, map: bool) -> Vec<u8> {
    let mut t: Vec<u8> = Vec::new();
    for _ in 0..levels {
        t = if map {
            wrap(5, &wrap(2, &t)) // TypeProto.map_type -> value_type
        } else {
            wrap(4, &wrap(1, &t)) // TypeProto.sequence_type -> elem_type
        };
    }
    // ModelProto.graph (7) -> GraphProto.input (11) -> ValueInfoProto.type (2)
    wrap(7, &wrap(11, &wrap(2, &t)))
}

/// Unknown groups (field 15) nested `levels` deep in a ModelProto.
fn nested_groups(levels: usize) -> Vec<u8> {
    let mut b = vec![0x7b; levels];
    b.extend(std::iter::repeat_n(0x7c, levels));
    b
}

fn max_depth_opts() -> ParseOptions {
    ParseOptions {
        max_recursion_depth: MAX_RECURSION_DEPTH_LIMIT,
        ..Default::default()
    }
}

/// The largest `levels` whose model `make(levels)` parses at the maximum depth (the next one is
/// refused with `RecursionLimit`).
fn deepest(make: impl Fn(usize) -> Vec<u8>) -> usize {
    let opts = max_depth_opts();
    let mut levels = 1;
    while onnx_light::parse_from_bytes::<ModelProto>(&make(levels + 1), &opts).is_ok() {
        levels += 1;
    }
    let e = onnx_light::parse_from_bytes::<ModelProto>(&make(levels + 1), &opts).unwrap_err();
    assert_eq!(
        e.as_decode().map(|d| &d.kind),
        Some(&DecodeErrorKind::RecursionLimit(MAX_RECURSION_DEPTH_LIMIT))
    );
    levels
}

/// Parses (copy and no-copy), clones, serializes (plain and through the checked serializer),
/// visits and drops `bytes`, all on a 256 KiB stack.
fn round_trip_on_small_stack(what: &str, bytes: Vec<u8>) {
    let opts = max_depth_opts();
    let shared = std::sync::Arc::new(bytes.clone());
    on_small_stack(move || {
        let m: ModelProto = onnx_light::parse_from_bytes(&bytes, &opts).expect(what);
        let no_copy = ParseOptions {
            no_copy: true,
            ..max_depth_opts()
        };
        let borrowed: ModelProto = onnx_light::parse_from_shared(shared, &no_copy).expect(what);
        let copy = m.clone();
        assert_eq!(copy.serialize_to_vec(), bytes, "{what}: clone");
        let checked = onnx_light::serialize_to_vec(&borrowed, &SerializeOptions::default())
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(checked, bytes, "{what}: checked serializer");
        let mut tensors = 0;
        copy.visit_tensors(&mut |_| tensors += 1);
        assert_eq!(tensors, 0, "{what}");
        drop(copy);
        drop(borrowed);
        drop(m);
    });
}

#[test]
fn graphs_in_attributes_at_the_maximum_depth_on_a_256k_stack() {
    let levels = deepest(nested_graphs);
    // Model -> graph, then node -> attribute -> graph per level: 1 + 3 x levels messages.
    assert!(3 * levels < MAX_RECURSION_DEPTH_LIMIT as usize);
    assert!(1 + 3 * (levels + 1) > MAX_RECURSION_DEPTH_LIMIT as usize);
    round_trip_on_small_stack("graphs in attributes", nested_graphs(levels));
}

#[test]
fn type_sequences_and_maps_at_the_maximum_depth_on_a_256k_stack() {
    let levels = deepest(|l| nested_types(l, false));
    assert!(
        levels * 2 + 3 <= MAX_RECURSION_DEPTH_LIMIT as usize,
        "{levels}"
    );
    round_trip_on_small_stack("TypeProto sequences", nested_types(levels, false));
    let levels = deepest(|l| nested_types(l, true));
    round_trip_on_small_stack("TypeProto maps", nested_types(levels, true));
}

#[test]
fn unknown_groups_at_the_maximum_depth_on_a_256k_stack() {
    let levels = (MAX_RECURSION_DEPTH_LIMIT - 1) as usize;
    round_trip_on_small_stack("unknown groups", nested_groups(levels));
}

/// A model whose graph nests `levels` graphs in attributes, built through the API (inside out,
/// without recursion).
fn api_nested_graphs(levels: usize) -> ModelProto {
    let mut g = GraphProto::new();
    for _ in 0..levels {
        let mut a = AttributeProto::new();
        a.set_name("body");
        a.set_g(g);
        let mut n = NodeProto::new();
        n.mutable_attribute().push(a);
        g = GraphProto::new();
        g.mutable_node().push(n);
    }
    let mut m = ModelProto::new();
    m.set_graph(g);
    m
}

/// A TypeProto nesting sequences `levels` deep, built through the API.
fn api_nested_types(levels: usize) -> TypeProto {
    let mut t = TypeProto::new();
    for _ in 0..levels {
        let mut outer = TypeProto::new();
        outer.mutable_sequence_type().set_elem_type(t);
        t = outer;
    }
    t
}

fn assert_too_deep(e: &Error) {
    assert!(matches!(e, Error::LimitExceeded(_)), "{e:?}");
    let text = e.to_string();
    assert!(
        text.contains("nest") && text.contains(&MAX_RECURSION_DEPTH_LIMIT.to_string()),
        "{text}"
    );
}

#[test]
fn models_built_deeper_than_the_maximum_are_refused_at_serialize_time() {
    on_small_stack(|| {
        let m = api_nested_graphs(100_000);
        let e = onnx_light::serialize_to_vec(&m, &SerializeOptions::default()).unwrap_err();
        assert_too_deep(&e);
        let e = onnx_light::serialize_to_writer(&m, std::io::sink(), &SerializeOptions::default())
            .unwrap_err();
        assert_too_deep(&e);
        let dir = std::env::temp_dir().join(format!("onnxl-deep-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("deep.onnx");
        let e = onnx_light::save_model(&m, &path, &SerializeOptions::default()).unwrap_err();
        assert_too_deep(&e);
        assert!(!path.exists());
        std::fs::remove_dir_all(&dir).unwrap();
        // Clone and drop of the deep model do not overflow either.
        let c = m.clone();
        drop(m);
        drop(c);

        let t = api_nested_types(100_000);
        let e = onnx_light::serialize_to_vec(&t, &SerializeOptions::default()).unwrap_err();
        assert_too_deep(&e);
        drop(t.clone());
        drop(t);
    });
    // Exactly at the maximum is accepted (and parses with the maximum depth): a TypeProto with
    // MAX messages nested below it (a sequence and a type per level).
    let levels = MAX_RECURSION_DEPTH_LIMIT as usize / 2;
    let t = api_nested_types(levels);
    let bytes = onnx_light::serialize_to_vec(&t, &SerializeOptions::default()).unwrap();
    let back: TypeProto = onnx_light::parse_from_bytes(&bytes, &max_depth_opts()).unwrap();
    assert_eq!(back, t);
    let t = api_nested_types(levels + 1);
    assert_too_deep(&onnx_light::serialize_to_vec(&t, &SerializeOptions::default()).unwrap_err());
}
