//! Deterministic synthetic ONNX models, written with a tiny protobuf encoder of their own (so the
//! inputs do not depend on the library under test):
//! - `transformer`: a decoder-only transformer (LayerNorm spelled out as ReduceMean/Sub/Pow/…,
//!   attention, MLP with Gelu as Erf), weights as FLOAT initializers in `raw_data`, PyTorch-style
//!   names; either inline (one file) or with external data (standard ONNX layout: one data file,
//!   `location`/`offset`/`length` entries, offsets aligned to 4096, `data_location = EXTERNAL`);
//! - `metadata`: ~200k nodes with names, attributes and value_info, few small initializers.
//!
//! Fields are written in field-number order, as protobuf does, so the files are canonical.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

// ---------------------------------------------------------------- wire helpers

fn put_varint(b: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        b.push((v as u8) | 0x80);
        v >>= 7;
    }
    b.push(v as u8);
}

fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

fn put_key(b: &mut Vec<u8>, field: u32, wire_type: u8) {
    put_varint(b, ((field as u64) << 3) | wire_type as u64);
}

fn put_len(b: &mut Vec<u8>, field: u32, data: &[u8]) {
    put_key(b, field, 2);
    put_varint(b, data.len() as u64);
    b.extend_from_slice(data);
}

fn put_int(b: &mut Vec<u8>, field: u32, v: i64) {
    put_key(b, field, 0);
    put_varint(b, v as u64);
}

fn put_f32(b: &mut Vec<u8>, field: u32, v: f32) {
    put_key(b, field, 5);
    b.extend_from_slice(&v.to_le_bytes());
}

// ---------------------------------------------------------------- ONNX pieces

const FLOAT: i64 = 1;
const INT64: i64 = 7;

/// AttributeProto bodies.
fn attr_int(name: &str, v: i64) -> Vec<u8> {
    let mut b = Vec::new();
    put_len(&mut b, 1, name.as_bytes());
    put_int(&mut b, 3, v);
    put_int(&mut b, 20, 2); // INT
    b
}

fn attr_float(name: &str, v: f32) -> Vec<u8> {
    let mut b = Vec::new();
    put_len(&mut b, 1, name.as_bytes());
    put_f32(&mut b, 2, v);
    put_int(&mut b, 20, 1); // FLOAT
    b
}

fn attr_ints(name: &str, v: &[i64]) -> Vec<u8> {
    let mut b = Vec::new();
    put_len(&mut b, 1, name.as_bytes());
    for &x in v {
        put_int(&mut b, 8, x); // proto2: unpacked
    }
    put_int(&mut b, 20, 7); // INTS
    b
}

fn attr_string(name: &str, v: &str) -> Vec<u8> {
    let mut b = Vec::new();
    put_len(&mut b, 1, name.as_bytes());
    put_len(&mut b, 4, v.as_bytes());
    put_int(&mut b, 20, 3); // STRING
    b
}

/// NodeProto body.
fn node(name: &str, op: &str, inputs: &[&str], outputs: &[&str], attrs: &[Vec<u8>]) -> Vec<u8> {
    let mut b = Vec::with_capacity(128);
    for i in inputs {
        put_len(&mut b, 1, i.as_bytes());
    }
    for o in outputs {
        put_len(&mut b, 2, o.as_bytes());
    }
    put_len(&mut b, 3, name.as_bytes());
    put_len(&mut b, 4, op.as_bytes());
    for a in attrs {
        put_len(&mut b, 5, a);
    }
    b
}

enum Dim<'a> {
    Value(i64),
    Param(&'a str),
}

/// ValueInfoProto body of a tensor.
fn value_info(name: &str, elem_type: i64, dims: &[Dim<'_>]) -> Vec<u8> {
    let mut shape = Vec::new();
    for d in dims {
        let mut db = Vec::new();
        match d {
            Dim::Value(v) => put_int(&mut db, 1, *v),
            Dim::Param(p) => put_len(&mut db, 2, p.as_bytes()),
        }
        put_len(&mut shape, 1, &db);
    }
    let mut tensor = Vec::new();
    put_int(&mut tensor, 1, elem_type);
    put_len(&mut tensor, 2, &shape);
    let mut ty = Vec::new();
    put_len(&mut ty, 1, &tensor);
    let mut b = Vec::new();
    put_len(&mut b, 1, name.as_bytes());
    put_len(&mut b, 2, &ty);
    b
}

/// Where an initializer's bytes come from.
enum Payload {
    /// `len` bytes of the random pool, starting at `start` (wrapping).
    Pool { start: usize, len: usize },
    /// Given bytes (small constants).
    Bytes(Vec<u8>),
}

impl Payload {
    fn len(&self) -> usize {
        match self {
            Payload::Pool { len, .. } => *len,
            Payload::Bytes(b) => b.len(),
        }
    }
}

struct Init {
    name: String,
    dims: Vec<i64>,
    data_type: i64,
    payload: Payload,
}

/// A graph being built: node and value-info bodies (small) plus initializer specs (large
/// payloads are produced while writing).
#[derive(Default)]
struct Graph {
    name: String,
    nodes: Vec<Vec<u8>>,
    inits: Vec<Init>,
    inputs: Vec<Vec<u8>>,
    outputs: Vec<Vec<u8>>,
    value_info: Vec<Vec<u8>>,
    pool_cursor: usize,
}

impl Graph {
    fn weight(&mut self, name: String, dims: &[i64]) -> String {
        let len = dims.iter().product::<i64>() as usize * 4;
        let start = self.pool_cursor;
        self.pool_cursor = (self.pool_cursor + len / 3 + 4096 * 7 + 4) % POOL_BYTES;
        self.inits.push(Init {
            name: name.clone(),
            dims: dims.to_vec(),
            data_type: FLOAT,
            payload: Payload::Pool { start, len },
        });
        name
    }

    fn const_i64(&mut self, name: String, values: &[i64]) -> String {
        let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.inits.push(Init {
            name: name.clone(),
            dims: vec![values.len() as i64],
            data_type: INT64,
            payload: Payload::Bytes(bytes),
        });
        name
    }

    fn const_f32(&mut self, name: String, v: f32) -> String {
        self.inits.push(Init {
            name: name.clone(),
            dims: vec![],
            data_type: FLOAT,
            payload: Payload::Bytes(v.to_le_bytes().to_vec()),
        });
        name
    }

    /// Adds a node whose single output is named `{name}_output_0`; returns the output name.
    fn op(&mut self, name: &str, op: &str, inputs: &[&str], attrs: &[Vec<u8>]) -> String {
        let out = format!("{name}_output_0");
        self.nodes.push(node(name, op, inputs, &[&out], attrs));
        out
    }
}

// ---------------------------------------------------------------- random pool

const POOL_BYTES: usize = 16 << 20;

/// 16 MiB of deterministic pseudo-random FLOAT values in [-0.05, 0.05) (splitmix64).
fn pool() -> Vec<u8> {
    let mut state: u64 = 0x0123_4567_89ab_cdef;
    let mut out = Vec::with_capacity(POOL_BYTES);
    while out.len() < POOL_BYTES {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        for half in [z as u32, (z >> 32) as u32] {
            let f = (half >> 8) as f32 / (1u32 << 24) as f32 * 0.1 - 0.05;
            out.extend_from_slice(&f.to_le_bytes());
        }
    }
    out
}

fn write_pool_range(
    w: &mut impl Write,
    pool: &[u8],
    start: usize,
    mut len: usize,
) -> std::io::Result<()> {
    let mut pos = start % pool.len();
    while len > 0 {
        let n = len.min(pool.len() - pos);
        w.write_all(&pool[pos..pos + n])?;
        len -= n;
        pos = 0;
    }
    Ok(())
}

// ---------------------------------------------------------------- writing

/// How initializer payloads are stored.
enum Layout<'a> {
    Inline,
    /// External data in `data_path`; `location` is its name relative to the model file.
    External {
        data_path: &'a Path,
        location: &'a str,
    },
}

const EXTERNAL_ALIGN: u64 = 4096;

/// Writes `graph` as a ModelProto to `path`; returns (model file bytes, external data bytes).
fn write_model(graph: &Graph, path: &Path, layout: Layout<'_>) -> std::io::Result<(u64, u64)> {
    let pool = pool();
    // Tensor headers (everything but an inline payload), and external offsets.
    let mut headers = Vec::with_capacity(graph.inits.len());
    let mut ext_offset = 0u64;
    let mut ext_plan = Vec::new();
    for init in &graph.inits {
        let mut h = Vec::new();
        for &d in &init.dims {
            put_int(&mut h, 1, d);
        }
        put_int(&mut h, 2, init.data_type);
        put_len(&mut h, 8, init.name.as_bytes());
        let len = init.payload.len() as u64;
        let external = matches!(layout, Layout::External { .. }) && len >= 1024;
        if let (true, Layout::External { location, .. }) = (external, &layout) {
            ext_offset = ext_offset.div_ceil(EXTERNAL_ALIGN) * EXTERNAL_ALIGN;
            for (k, v) in [
                ("location", location.to_string()),
                ("offset", ext_offset.to_string()),
                ("length", len.to_string()),
            ] {
                let mut e = Vec::new();
                put_len(&mut e, 1, k.as_bytes());
                put_len(&mut e, 2, v.as_bytes());
                put_len(&mut h, 13, &e);
            }
            put_int(&mut h, 14, 1); // data_location = EXTERNAL
            ext_plan.push((ext_offset, init));
            ext_offset += len;
            headers.push((h, 0u64));
        } else {
            put_key(&mut h, 9, 2);
            put_varint(&mut h, len);
            headers.push((h, len));
        }
    }
    let msg_len = |body: u64| 1 + varint_len(body) as u64 + body;
    let mut graph_len = 0u64;
    for n in &graph.nodes {
        graph_len += msg_len(n.len() as u64);
    }
    graph_len += msg_len(graph.name.len() as u64);
    for (h, payload) in &headers {
        graph_len += msg_len(h.len() as u64 + payload);
    }
    for v in graph
        .inputs
        .iter()
        .chain(&graph.outputs)
        .chain(&graph.value_info)
    {
        graph_len += msg_len(v.len() as u64);
    }

    let file = File::create(path)?;
    let mut w = BufWriter::with_capacity(8 << 20, file);
    let mut head = Vec::new();
    put_int(&mut head, 1, 10); // ir_version
    put_len(&mut head, 2, b"onnx_light-bench");
    put_len(&mut head, 3, b"1.0");
    put_key(&mut head, 7, 2);
    put_varint(&mut head, graph_len);
    w.write_all(&head)?;
    let mut written = head.len() as u64;
    let mut piece = Vec::new();
    let mut emit = |w: &mut BufWriter<File>, field: u32, body: &[u8]| -> std::io::Result<u64> {
        piece.clear();
        put_len(&mut piece, field, body);
        w.write_all(&piece)?;
        Ok(piece.len() as u64)
    };
    for n in &graph.nodes {
        written += emit(&mut w, 1, n)?;
    }
    written += emit(&mut w, 2, graph.name.as_bytes())?;
    for ((h, payload_len), init) in headers.iter().zip(&graph.inits) {
        let mut p = Vec::new();
        put_key(&mut p, 5, 2);
        put_varint(&mut p, h.len() as u64 + payload_len);
        p.extend_from_slice(h);
        w.write_all(&p)?;
        written += p.len() as u64;
        if *payload_len > 0 {
            match &init.payload {
                Payload::Pool { start, len } => write_pool_range(&mut w, &pool, *start, *len)?,
                Payload::Bytes(b) => w.write_all(b)?,
            }
            written += payload_len;
        }
    }
    for v in &graph.inputs {
        written += emit(&mut w, 11, v)?;
    }
    for v in &graph.outputs {
        written += emit(&mut w, 12, v)?;
    }
    for v in &graph.value_info {
        written += emit(&mut w, 13, v)?;
    }
    let mut tail = Vec::new();
    let mut opset = Vec::new();
    put_int(&mut opset, 2, 18);
    put_len(&mut tail, 8, &opset);
    w.write_all(&tail)?;
    written += tail.len() as u64;
    let file = w.into_inner().map_err(|e| e.into_error())?;
    // Flush to disk now, so that write-back does not run during the measurements.
    file.sync_all()?;

    let mut ext_written = 0u64;
    if let Layout::External { data_path, .. } = layout {
        let mut w = BufWriter::with_capacity(8 << 20, File::create(data_path)?);
        for (offset, init) in ext_plan {
            if offset > ext_written {
                w.write_all(&vec![0u8; (offset - ext_written) as usize])?;
                ext_written = offset;
            }
            match &init.payload {
                Payload::Pool { start, len } => write_pool_range(&mut w, &pool, *start, *len)?,
                Payload::Bytes(b) => w.write_all(b)?,
            }
            ext_written += init.payload.len() as u64;
        }
        w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    }
    Ok((written, ext_written))
}

// ---------------------------------------------------------------- models

/// Shape of a synthetic transformer.
pub struct TransformerShape {
    pub layers: usize,
    pub hidden: i64,
    pub ffn: i64,
    pub vocab: i64,
    pub heads: i64,
}

impl TransformerShape {
    /// ~0.54 GB of FLOAT weights (10 layers, d = 1024).
    pub fn half_gb() -> Self {
        Self {
            layers: 10,
            hidden: 1024,
            ffn: 4096,
            vocab: 8192,
            heads: 16,
        }
    }
    /// ~3.1 GB of FLOAT weights (14 layers, d = 2048).
    pub fn three_gb() -> Self {
        Self {
            layers: 14,
            hidden: 2048,
            ffn: 8192,
            vocab: 32000,
            heads: 16,
        }
    }
    /// Smaller variants for a quick run of the script (`--scale`).
    pub fn scaled(mut self, scale: f64) -> Self {
        if scale < 1.0 {
            self.layers = ((self.layers as f64 * scale).ceil() as usize).max(1);
        }
        self
    }
}

fn layer_norm(g: &mut Graph, p: &str, x: &str, wname: String, bname: String, d: i64) -> String {
    let axes = g.const_i64(format!("{p}/Constant_axes"), &[-1]);
    let two = g.const_f32(format!("{p}/Constant_two"), 2.0);
    let eps = g.const_f32(format!("{p}/Constant_eps"), 1e-5);
    let w = g.weight(wname, &[d]);
    let b = g.weight(bname, &[d]);
    let mean = g.op(
        &format!("{p}/ReduceMean"),
        "ReduceMean",
        &[x, &axes],
        &[attr_int("keepdims", 1)],
    );
    let sub = g.op(&format!("{p}/Sub"), "Sub", &[x, &mean], &[]);
    let pow = g.op(&format!("{p}/Pow"), "Pow", &[&sub, &two], &[]);
    let var = g.op(
        &format!("{p}/ReduceMean_1"),
        "ReduceMean",
        &[&pow, &axes],
        &[attr_int("keepdims", 1)],
    );
    let add = g.op(&format!("{p}/Add"), "Add", &[&var, &eps], &[]);
    let sqrt = g.op(&format!("{p}/Sqrt"), "Sqrt", &[&add], &[]);
    let div = g.op(&format!("{p}/Div"), "Div", &[&sub, &sqrt], &[]);
    let mul = g.op(&format!("{p}/Mul"), "Mul", &[&div, &w], &[]);
    g.op(&format!("{p}/Add_1"), "Add", &[&mul, &b], &[])
}

fn linear(g: &mut Graph, p: &str, wp: &str, x: &str, din: i64, dout: i64) -> String {
    let w = g.weight(format!("{wp}.weight"), &[din, dout]);
    let b = g.weight(format!("{wp}.bias"), &[dout]);
    let mm = g.op(&format!("{p}/MatMul"), "MatMul", &[x, &w], &[]);
    g.op(&format!("{p}/Add"), "Add", &[&mm, &b], &[])
}

fn transformer(s: &TransformerShape) -> Graph {
    let mut g = Graph {
        name: "main_graph".into(),
        ..Default::default()
    };
    let (d, heads) = (s.hidden, s.heads);
    let embed = g.weight("model.embed_tokens.weight".into(), &[s.vocab, d]);
    let mut x = g.op(
        "/model/embed_tokens/Gather",
        "Gather",
        &[&embed, "input_ids"],
        &[attr_int("axis", 0)],
    );
    let split_shape = g.const_i64(
        "/model/Constant_split_heads".into(),
        &[0, 0, heads, d / heads],
    );
    let merge_shape = g.const_i64("/model/Constant_merge_heads".into(), &[0, 0, d]);
    let scale = g.const_f32("/model/Constant_scale".into(), ((d / heads) as f32).sqrt());
    for l in 0..s.layers {
        let p = format!("/model/layers.{l}");
        let wp = format!("model.layers.{l}");
        let h = layer_norm(
            &mut g,
            &format!("{p}/input_layernorm"),
            &x,
            format!("{wp}.input_layernorm.weight"),
            format!("{wp}.input_layernorm.bias"),
            d,
        );
        let mut qkv = Vec::new();
        for n in ["q_proj", "k_proj", "v_proj"] {
            let y = linear(
                &mut g,
                &format!("{p}/self_attn/{n}"),
                &format!("{wp}.self_attn.{n}"),
                &h,
                d,
                d,
            );
            let r = g.op(
                &format!("{p}/self_attn/{n}/Reshape"),
                "Reshape",
                &[&y, &split_shape],
                &[],
            );
            let perm: &[i64] = if n == "k_proj" {
                &[0, 2, 3, 1]
            } else {
                &[0, 2, 1, 3]
            };
            qkv.push(g.op(
                &format!("{p}/self_attn/{n}/Transpose"),
                "Transpose",
                &[&r],
                &[attr_ints("perm", perm)],
            ));
        }
        let scores = g.op(
            &format!("{p}/self_attn/MatMul"),
            "MatMul",
            &[&qkv[0], &qkv[1]],
            &[],
        );
        let scaled = g.op(
            &format!("{p}/self_attn/Div"),
            "Div",
            &[&scores, &scale],
            &[],
        );
        let probs = g.op(
            &format!("{p}/self_attn/Softmax"),
            "Softmax",
            &[&scaled],
            &[attr_int("axis", -1)],
        );
        let ctx = g.op(
            &format!("{p}/self_attn/MatMul_1"),
            "MatMul",
            &[&probs, &qkv[2]],
            &[],
        );
        let ctx_t = g.op(
            &format!("{p}/self_attn/Transpose"),
            "Transpose",
            &[&ctx],
            &[attr_ints("perm", &[0, 2, 1, 3])],
        );
        let merged = g.op(
            &format!("{p}/self_attn/Reshape"),
            "Reshape",
            &[&ctx_t, &merge_shape],
            &[],
        );
        let o = linear(
            &mut g,
            &format!("{p}/self_attn/o_proj"),
            &format!("{wp}.self_attn.o_proj"),
            &merged,
            d,
            d,
        );
        let res1 = g.op(&format!("{p}/Add"), "Add", &[&x, &o], &[]);
        let h2 = layer_norm(
            &mut g,
            &format!("{p}/post_attention_layernorm"),
            &res1,
            format!("{wp}.post_attention_layernorm.weight"),
            format!("{wp}.post_attention_layernorm.bias"),
            d,
        );
        let up = linear(
            &mut g,
            &format!("{p}/mlp/fc1"),
            &format!("{wp}.mlp.fc1"),
            &h2,
            d,
            s.ffn,
        );
        let sqrt2 = g.const_f32(
            format!("{p}/mlp/act/Constant_sqrt2"),
            std::f32::consts::SQRT_2,
        );
        let one = g.const_f32(format!("{p}/mlp/act/Constant_one"), 1.0);
        let half = g.const_f32(format!("{p}/mlp/act/Constant_half"), 0.5);
        let dv = g.op(&format!("{p}/mlp/act/Div"), "Div", &[&up, &sqrt2], &[]);
        let erf = g.op(&format!("{p}/mlp/act/Erf"), "Erf", &[&dv], &[]);
        let a1 = g.op(&format!("{p}/mlp/act/Add"), "Add", &[&erf, &one], &[]);
        let m1 = g.op(&format!("{p}/mlp/act/Mul"), "Mul", &[&up, &a1], &[]);
        let act = g.op(&format!("{p}/mlp/act/Mul_1"), "Mul", &[&m1, &half], &[]);
        let down = linear(
            &mut g,
            &format!("{p}/mlp/fc2"),
            &format!("{wp}.mlp.fc2"),
            &act,
            s.ffn,
            d,
        );
        x = g.op(&format!("{p}/Add_1"), "Add", &[&res1, &down], &[]);
    }
    let xf = layer_norm(
        &mut g,
        "/model/norm",
        &x,
        "model.norm.weight".into(),
        "model.norm.bias".into(),
        d,
    );
    // Tied LM head: logits = x · embedᵀ.
    let et = g.op(
        "/lm_head/Transpose",
        "Transpose",
        &[&embed],
        &[attr_ints("perm", &[1, 0])],
    );
    let logits_tmp = g.op("/lm_head/MatMul", "MatMul", &[&xf, &et], &[]);
    g.nodes.push(node(
        "/lm_head/Identity",
        "Identity",
        &[&logits_tmp],
        &["logits"],
        &[],
    ));
    g.inputs.push(value_info(
        "input_ids",
        INT64,
        &[Dim::Param("batch"), Dim::Param("sequence")],
    ));
    g.outputs.push(value_info(
        "logits",
        FLOAT,
        &[
            Dim::Param("batch"),
            Dim::Param("sequence"),
            Dim::Value(s.vocab),
        ],
    ));
    g
}

/// Writes a single-file transformer; returns its size.
pub fn write_transformer_inline(path: &Path, s: &TransformerShape) -> std::io::Result<u64> {
    Ok(write_model(&transformer(s), path, Layout::Inline)?.0)
}

/// Writes a transformer with its weights in `data_path` (standard ONNX external-data layout,
/// `location` = the data file's name); returns (model file size, data file size).
pub fn write_transformer_external(
    path: &Path,
    data_path: &Path,
    s: &TransformerShape,
) -> std::io::Result<(u64, u64)> {
    let location = data_path.file_name().unwrap().to_str().unwrap().to_string();
    write_model(
        &transformer(s),
        path,
        Layout::External {
            data_path,
            location: &location,
        },
    )
}

/// Writes a metadata-heavy model of `nodes` nodes (conv-net-like blocks of 10 ops with
/// attributes, value_info for 3 outputs in 10, one small shape initializer per block; ~115
/// bytes per node, 200k nodes ≈ 22 MiB); returns its size.
pub fn write_metadata_heavy(path: &Path, nodes: usize) -> std::io::Result<u64> {
    let mut g = Graph {
        name: "torch_jit".into(),
        ..Default::default()
    };
    const OPS: [&str; 10] = [
        "Conv",
        "Relu",
        "Add",
        "Mul",
        "Transpose",
        "Reshape",
        "Concat",
        "Gather",
        "Cast",
        "Gemm",
    ];
    let mut prev = "input".to_string();
    let mut n = 0usize;
    let mut block = 0usize;
    while n < nodes {
        let shape = g.const_i64(format!("/b{block}/shape"), &[1, -1, 64]);
        for (k, &op) in OPS.iter().enumerate() {
            if n == nodes {
                break;
            }
            let name = format!("/b{block}/{op}_{k}");
            let attrs: Vec<Vec<u8>> = match op {
                "Conv" => vec![
                    attr_ints("kernel_shape", &[3, 3]),
                    attr_ints("pads", &[1, 1, 1, 1]),
                    attr_ints("strides", &[1, 1]),
                ],
                "Transpose" => vec![attr_ints("perm", &[0, 2, 1])],
                "Concat" | "Gather" => vec![attr_int("axis", 1)],
                "Cast" => vec![attr_int("to", 1)],
                "Gemm" => vec![attr_float("alpha", 1.0), attr_int("transB", 1)],
                "Relu" if block.is_multiple_of(8) => vec![attr_string("note", "fused")],
                _ => vec![],
            };
            let out = match op {
                "Add" | "Mul" | "Concat" | "Gemm" => g.op(&name, op, &[&prev, "input"], &attrs),
                "Reshape" => g.op(&name, op, &[&prev, &shape], &attrs),
                "Gather" => g.op(&name, op, &[&prev, "indices"], &attrs),
                _ => g.op(&name, op, &[&prev], &attrs),
            };
            if k % 4 == 0 {
                g.value_info.push(value_info(
                    &out,
                    FLOAT,
                    &[Dim::Param("N"), Dim::Value(64), Dim::Value(64)],
                ));
            }
            prev = out;
            n += 1;
        }
        block += 1;
    }
    g.nodes.push(node(
        "/output/Identity",
        "Identity",
        &[&prev],
        &["output"],
        &[],
    ));
    g.inputs.push(value_info(
        "input",
        FLOAT,
        &[Dim::Param("N"), Dim::Value(64), Dim::Value(64)],
    ));
    g.inputs
        .push(value_info("indices", INT64, &[Dim::Value(64)]));
    g.outputs.push(value_info(
        "output",
        FLOAT,
        &[Dim::Param("N"), Dim::Value(64), Dim::Value(64)],
    ));
    Ok(write_model(&g, path, Layout::Inline)?.0)
}

/// NodeProto body with `doc_string` and `domain` written even when empty (as exporters do).
fn node_full(
    name: &str,
    op: &str,
    domain: &str,
    inputs: &[&str],
    outputs: &[&str],
    attrs: &[Vec<u8>],
) -> Vec<u8> {
    let mut b = node(name, op, inputs, outputs, attrs);
    put_len(&mut b, 6, b""); // doc_string
    put_len(&mut b, 7, domain.as_bytes());
    b
}

/// (e) A shape-inferred export: `nodes` single-input nodes, each with one FLOAT attribute, empty
/// `doc_string` and `domain` present, and a `value_info` (one symbolic and one fixed dimension)
/// for EVERY output; names like `/model/layers.12/act_1234`, 1000 nodes per layer.
pub fn write_value_info_heavy(path: &Path, nodes: usize) -> std::io::Result<u64> {
    let mut g = Graph {
        name: "main_graph".into(),
        ..Default::default()
    };
    const OPS: [&str; 4] = ["LeakyRelu", "Elu", "HardSigmoid", "Selu"];
    let mut prev = "input".to_string();
    for i in 0..nodes {
        let layer = i / 1000;
        let op = OPS[i % OPS.len()];
        let name = format!("/model/layers.{layer}/{op}_{i}");
        let out = format!("/model/layers.{layer}/act_{i}");
        let attrs = [attr_float("alpha", 0.01 + (i % 7) as f32 * 0.1)];
        g.nodes
            .push(node_full(&name, op, "", &[&prev], &[&out], &attrs));
        g.value_info.push(value_info(
            &out,
            FLOAT,
            &[Dim::Param("batch_size"), Dim::Value(4096)],
        ));
        prev = out;
    }
    g.nodes.push(node_full(
        "/model/output/Identity",
        "Identity",
        "",
        &[&prev],
        &["output"],
        &[],
    ));
    let io = |n: &str| value_info(n, FLOAT, &[Dim::Param("batch_size"), Dim::Value(4096)]);
    g.inputs.push(io("input"));
    g.outputs.push(io("output"));
    Ok(write_model(&g, path, Layout::Inline)?.0)
}

/// (f) A transformer-like graph without weights: `layers` decoder layers of ~40 nodes with
/// PyTorch-export names (`/model/decoder/layers.7/self_attn/q_proj/MatMulNBits_output_0`), many
/// attributes per node (quantized MatMulNBits of the `com.microsoft` domain with K, N, bits,
/// block_size, accuracy_level; LayerNormalization, Reshape, Transpose, Softmax, Gemm, Cast, …),
/// empty `doc_string` and `domain` present, a `value_info` for every third output and one small
/// shape constant per layer.
pub fn write_transformer_metadata(path: &Path, layers: usize) -> std::io::Result<u64> {
    let mut g = Graph {
        name: "main_graph".into(),
        ..Default::default()
    };
    let mut x = "/model/embed_tokens/Gather_output_0".to_string();
    let hidden = 4096i64;
    let mut outputs = 0usize;
    for l in 0..layers {
        let p = format!("/model/decoder/layers.{l}");
        let shape = g.const_i64(
            format!("{p}/self_attn/Constant_output_0"),
            &[1, -1, 32, 128],
        );
        let mut step = |g: &mut Graph,
                        sub: &str,
                        op: &str,
                        domain: &str,
                        inputs: &[&str],
                        attrs: Vec<Vec<u8>>| {
            let name = format!("{p}/{sub}/{op}");
            let out = format!("{p}/{sub}/{op}_output_0");
            g.nodes
                .push(node_full(&name, op, domain, inputs, &[&out], &attrs));
            if outputs.is_multiple_of(3) {
                g.value_info.push(value_info(
                    &out,
                    FLOAT,
                    &[
                        Dim::Param("batch_size"),
                        Dim::Param("sequence_length"),
                        Dim::Value(hidden),
                    ],
                ));
            }
            outputs += 1;
            out
        };
        let ln = |eps: f32| {
            vec![
                attr_int("axis", -1),
                attr_float("epsilon", eps),
                attr_int("stash_type", 1),
            ]
        };
        let mm = |n: i64| {
            vec![
                attr_int("K", hidden),
                attr_int("N", n),
                attr_int("accuracy_level", 4),
                attr_int("bits", 4),
                attr_int("block_size", 32),
            ]
        };
        let h = step(
            &mut g,
            "input_layernorm",
            "LayerNormalization",
            "",
            &[&x],
            ln(1e-5),
        );
        let mut heads = Vec::new();
        for proj in ["q_proj", "k_proj", "v_proj"] {
            let w = format!("model.decoder.layers.{l}.self_attn.{proj}.weight_Q4");
            let sc = format!("model.decoder.layers.{l}.self_attn.{proj}.weight_scales");
            let m = step(
                &mut g,
                &format!("self_attn/{proj}"),
                "MatMulNBits",
                "com.microsoft",
                &[&h, &w, &sc],
                mm(hidden),
            );
            let r = step(
                &mut g,
                &format!("self_attn/{proj}_reshape"),
                "Reshape",
                "",
                &[&m, &shape],
                vec![attr_int("allowzero", 0)],
            );
            let t = step(
                &mut g,
                &format!("self_attn/{proj}_transpose"),
                "Transpose",
                "",
                &[&r],
                vec![attr_ints("perm", &[0, 2, 1, 3])],
            );
            heads.push(t);
        }
        let rot = step(
            &mut g,
            "self_attn/rotary_emb",
            "RotaryEmbedding",
            "com.microsoft",
            &[&heads[0], "position_ids", "cos_cache", "sin_cache"],
            vec![
                attr_int("interleaved", 0),
                attr_int("num_heads", 32),
                attr_int("rotary_embedding_dim", 128),
                attr_float("scale", 1.0),
            ],
        );
        let kt = step(
            &mut g,
            "self_attn/k_transpose_2",
            "Transpose",
            "",
            &[&heads[1]],
            vec![attr_ints("perm", &[0, 1, 3, 2])],
        );
        let qk = step(
            &mut g,
            "self_attn/MatMul",
            "MatMul",
            "",
            &[&rot, &kt],
            vec![],
        );
        let sc = step(
            &mut g,
            "self_attn/Mul",
            "Mul",
            "",
            &[&qk, "/model/Constant_scale_output_0"],
            vec![],
        );
        let sm = step(
            &mut g,
            "self_attn/Softmax",
            "Softmax",
            "",
            &[&sc],
            vec![attr_int("axis", -1)],
        );
        let av = step(
            &mut g,
            "self_attn/MatMul_1",
            "MatMul",
            "",
            &[&sm, &heads[2]],
            vec![],
        );
        let at = step(
            &mut g,
            "self_attn/Transpose_3",
            "Transpose",
            "",
            &[&av],
            vec![attr_ints("perm", &[0, 2, 1, 3])],
        );
        let ar = step(
            &mut g,
            "self_attn/Reshape_3",
            "Reshape",
            "",
            &[&at, &shape],
            vec![attr_int("allowzero", 0)],
        );
        let ow = format!("model.decoder.layers.{l}.self_attn.o_proj.weight_Q4");
        let o = step(
            &mut g,
            "self_attn/o_proj",
            "MatMulNBits",
            "com.microsoft",
            &[&ar, &ow],
            mm(hidden),
        );
        let res = step(&mut g, "residual_add", "Add", "", &[&x, &o], vec![]);
        let h2 = step(
            &mut g,
            "post_attention_layernorm",
            "LayerNormalization",
            "",
            &[&res],
            ln(1e-5),
        );
        let mut mlp = Vec::new();
        for proj in ["gate_proj", "up_proj"] {
            let w = format!("model.decoder.layers.{l}.mlp.{proj}.weight_Q4");
            mlp.push(step(
                &mut g,
                &format!("mlp/{proj}"),
                "MatMulNBits",
                "com.microsoft",
                &[&h2, &w],
                mm(4 * hidden),
            ));
        }
        let act = step(
            &mut g,
            "mlp/act_fn",
            "Gelu",
            "",
            &[&mlp[0]],
            vec![attr_string("approximate", "tanh")],
        );
        let mul = step(&mut g, "mlp/Mul", "Mul", "", &[&act, &mlp[1]], vec![]);
        let cast = step(
            &mut g,
            "mlp/Cast",
            "Cast",
            "",
            &[&mul],
            vec![attr_int("saturate", 1), attr_int("to", 10)],
        );
        let dw = format!("model.decoder.layers.{l}.mlp.down_proj.weight_Q4");
        let down = step(
            &mut g,
            "mlp/down_proj",
            "MatMulNBits",
            "com.microsoft",
            &[&cast, &dw],
            mm(hidden),
        );
        let gm = step(
            &mut g,
            "mlp/Gemm_bias",
            "Gemm",
            "",
            &[&down, "/model/bias_one", "/model/bias_zero"],
            vec![
                attr_float("alpha", 1.0),
                attr_float("beta", 1.0),
                attr_int("transA", 0),
                attr_int("transB", 1),
            ],
        );
        x = step(&mut g, "residual_add_1", "Add", "", &[&res, &gm], vec![]);
    }
    g.nodes.push(node_full(
        "/model/norm/Identity",
        "Identity",
        "",
        &[&x],
        &["logits"],
        &[],
    ));
    let io = |n: &str| {
        value_info(
            n,
            FLOAT,
            &[
                Dim::Param("batch_size"),
                Dim::Param("sequence_length"),
                Dim::Value(hidden),
            ],
        )
    };
    g.inputs.push(io("/model/embed_tokens/Gather_output_0"));
    g.outputs.push(io("logits"));
    Ok(write_model(&g, path, Layout::Inline)?.0)
}
