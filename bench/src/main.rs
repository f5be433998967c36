//! onnx-bench: the side-by-side benchmark of onnx_light against its peers.
//!
//! `onnx-bench run --work DIR --python PY [--testdata DIR] [--runs N] [--scale S] [--only a,b,c,d]
//!                 [--rows ROWS] [--out FILE]`
//!   generates the synthetic models into DIR (deleting each when its cases are done), runs every
//!   case `--runs` times, each in a fresh child process, and prints one markdown table plus the
//!   ratios of the performance targets. `--rows read,memcpy,light1,lightn,onnx,onnx_ir,
//!   prost,onnx_rs` limits the libraries measured (default: all).
//! `onnx-bench case LIB OP MODEL [--data FILE] --out FILE --threads T --iters K`
//!   one measured case (used by `run`; see cases.rs).
//! `onnx-bench gen KIND PATH [--scale S]`
//!   writes one synthetic model (transformer | external | metadata), for a look at it.
//! `onnx-bench sizes`
//!   prints the in-memory size of the common metadata messages (docs/benchmarks.md, "Where the
//!   bytes of a parsed model go").

mod cases;
mod synth;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

fn usage() -> ! {
    eprintln!(
        "usage: onnx-bench run --work DIR --python PY [--pyscript FILE] [--testdata DIR] [--runs N] \
         [--scale S] [--only a,b,c,d,e,f] [--rows ROWS] [--out FILE]\n       onnx-bench case LIB OP MODEL [--data FILE] \
         --out FILE --threads T --iters K\n       onnx-bench gen transformer|external|metadata|value-info|transformer-meta PATH [--scale S]\n       onnx-bench sizes"
    );
    std::process::exit(2)
}

/// `--name value` options after the positional arguments.
fn options(args: &[String]) -> (Vec<String>, HashMap<String, String>) {
    let mut pos = Vec::new();
    let mut opts = HashMap::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if let Some(name) = a.strip_prefix("--") {
            let v = it.next().cloned().unwrap_or_else(|| usage());
            opts.insert(name.to_string(), v);
        } else {
            pos.push(a.clone());
        }
    }
    (pos, opts)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(cmd) = args.first() else { usage() };
    let (pos, opts) = options(&args[1..]);
    match cmd.as_str() {
        "case" => {
            if pos.len() != 3 {
                usage()
            }
            let a = cases::CaseArgs {
                lib: pos[0].clone(),
                op: pos[1].clone(),
                model: PathBuf::from(&pos[2]),
                data: opts.get("data").map(PathBuf::from),
                out: PathBuf::from(opts.get("out").unwrap_or_else(|| usage())),
                threads: opts
                    .get("threads")
                    .map_or(1, |t| t.parse().expect("--threads")),
                iters: opts.get("iters").map_or(1, |t| t.parse().expect("--iters")),
            };
            assert!(cases::OPS.contains(&a.op.as_str()), "unknown op {}", a.op);
            cases::run(&a)
        }
        "sizes" => print_sizes(),
        "gen" => {
            if pos.len() != 2 {
                usage()
            }
            let scale: f64 = opts
                .get("scale")
                .map_or(1.0, |s| s.parse().expect("--scale"));
            let path = Path::new(&pos[1]);
            let t = Instant::now();
            match pos[0].as_str() {
                "transformer" => {
                    let n = synth::write_transformer_inline(
                        path,
                        &synth::TransformerShape::half_gb().scaled(scale),
                    )
                    .unwrap();
                    eprintln!("{} bytes", n);
                }
                "external" => {
                    let data = path.with_extension("onnx.data");
                    let (n, d) = synth::write_transformer_external(
                        path,
                        &data,
                        &synth::TransformerShape::three_gb().scaled(scale),
                    )
                    .unwrap();
                    eprintln!("{} + {} bytes", n, d);
                }
                "metadata" => {
                    let n =
                        synth::write_metadata_heavy(path, (200_000.0 * scale) as usize).unwrap();
                    eprintln!("{} bytes", n);
                }
                "value-info" => {
                    let n =
                        synth::write_value_info_heavy(path, (200_000.0 * scale) as usize).unwrap();
                    eprintln!("{} bytes", n);
                }
                "transformer-meta" => {
                    let n = synth::write_transformer_metadata(path, (2_000.0 * scale) as usize)
                        .unwrap();
                    eprintln!("{} bytes", n);
                }
                _ => usage(),
            }
            eprintln!("written in {:.2?}", t.elapsed());
        }
        "run" => run(&opts),
        _ => usage(),
    }
}

/// The in-memory size of the metadata messages and their parts, as a markdown table.
fn print_sizes() {
    use onnx_light::proto as g;
    use onnx_light::wire::RepeatedField;
    use onnx_light::{ProtoString, UnknownFields};
    use std::mem::size_of;
    let rows: [(&str, usize); 12] = [
        ("NodeProto", size_of::<g::NodeProto>()),
        ("ValueInfoProto", size_of::<g::ValueInfoProto>()),
        ("TypeProto", size_of::<g::TypeProto>()),
        ("TypeProto.Tensor", size_of::<g::TypeProtoTensor>()),
        ("TensorShapeProto", size_of::<g::TensorShapeProto>()),
        (
            "TensorShapeProto.Dimension",
            size_of::<g::TensorShapeProtoDimension>(),
        ),
        ("AttributeProto", size_of::<g::AttributeProto>()),
        ("TensorProto", size_of::<g::TensorProto>()),
        ("ProtoString", size_of::<ProtoString>()),
        ("Option<ProtoString>", size_of::<Option<ProtoString>>()),
        ("UnknownFields", size_of::<UnknownFields>()),
        ("RepeatedField<_>", size_of::<RepeatedField<g::NodeProto>>()),
    ];
    println!("| type | bytes |\n|---|---|");
    for (name, n) in rows {
        println!("| `{name}` | {n} |");
    }
}

// ------------------------------------------------------------------------------------ run

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Row {
    Read,
    Memcpy,
    Light1,
    LightN,
    Onnx,
    OnnxIr,
    Prost,
    OnnxRs,
    /// onnx_light, 1 thread, in a process whose C allocator keeps freed memory ([`KEEP_FREED`]).
    Light1Kept,
    /// onnx (upb) in a process whose C allocator keeps freed memory ([`KEEP_FREED`]).
    OnnxKept,
}

/// Environment of the `*Kept` rows: glibc's malloc neither gives freed memory back to the
/// kernel (trim threshold) nor serves large blocks with fresh maps (mmap threshold), so a
/// repeated parse finds its memory already faulted in. With the defaults, upb's arena blocks
/// are returned to the kernel when a model is freed and faulted in again by the next parse;
/// these rows show both libraries without that cost (metadata parse and serialize only).
const KEEP_FREED: [(&str, &str); 2] = [
    ("MALLOC_TRIM_THRESHOLD_", "1073741824"),
    ("MALLOC_MMAP_THRESHOLD_", "1073741824"),
];

const ROWS: [Row; 10] = [
    Row::Read,
    Row::Memcpy,
    Row::Light1,
    Row::LightN,
    Row::Onnx,
    Row::OnnxIr,
    Row::Prost,
    Row::OnnxRs,
    Row::Light1Kept,
    Row::OnnxKept,
];

impl Row {
    /// Name in `--rows`.
    fn key(self) -> &'static str {
        match self {
            Row::Read => "read",
            Row::Memcpy => "memcpy",
            Row::Light1 => "light1",
            Row::LightN => "lightn",
            Row::Onnx => "onnx",
            Row::OnnxIr => "onnx_ir",
            Row::Prost => "prost",
            Row::OnnxRs => "onnx_rs",
            Row::Light1Kept => "light1_kept",
            Row::OnnxKept => "onnx_kept",
        }
    }

    fn short(self) -> &'static str {
        match self {
            Row::Read => "read/write baseline",
            Row::Memcpy => "memcpy baseline",
            Row::Light1 => "onnx_light 1T",
            Row::LightN => "onnx_light NT",
            Row::Onnx => "onnx (upb)",
            Row::OnnxIr => "onnx-ir (lazy)",
            Row::Prost => "prost",
            Row::OnnxRs => "onnx-rs",
            Row::Light1Kept => "onnx_light 1T, freed memory kept",
            Row::OnnxKept => "onnx (upb), freed memory kept",
        }
    }

    fn label(self, n: usize) -> String {
        match self {
            Row::Read => "baseline: `fs::read` / mmap only / one `write_all` + fsync".into(),
            Row::Memcpy => "baseline: memcpy into a fresh buffer (bytes already in memory)".into(),
            Row::Light1 => "onnx_light, 1 thread".into(),
            Row::LightN => format!("onnx_light, {n} threads (all cores)"),
            Row::Onnx => "onnx (Python, protobuf upb)".into(),
            Row::OnnxIr => "onnx-ir (Python, lazy external tensors; (b) only)".into(),
            Row::Prost => "prost 0.14 (Rust)".into(),
            Row::OnnxRs => "onnx-rs 0.1.3 (Rust, borrowed parse)".into(),
            Row::Light1Kept => "onnx_light, 1 thread, freed memory kept by malloc".into(),
            Row::OnnxKept => "onnx (Python, protobuf upb), freed memory kept by malloc".into(),
        }
    }

    /// True for the rows run with [`KEEP_FREED`] (metadata parse and serialize only; not in
    /// the main table).
    fn keeps_freed(self) -> bool {
        matches!(self, Row::Light1Kept | Row::OnnxKept)
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Op {
    LoadCopy,
    LoadNoCopy,
    /// onnx_light only: the loads with `ParseOptions::alignment` 1 (see cases.rs).
    LoadCopyAlign1,
    LoadNoCopyAlign1,
    /// onnx_light only: the no-copy load (default options) of the model saved with
    /// `SerializeOptions::inline_alignment` ([`aligned_copy`]).
    LoadNoCopyAligned,
    LoadMeta,
    Save,
    SaveNoSync,
    ParseMem,
    SerializeMem,
}

impl Op {
    fn arg(self) -> &'static str {
        match self {
            Op::LoadCopy => "load_copy",
            Op::LoadNoCopy => "load_nocopy",
            Op::LoadCopyAlign1 => "load_copy_align1",
            Op::LoadNoCopyAlign1 => "load_nocopy_align1",
            Op::LoadNoCopyAligned => "load_nocopy",
            Op::LoadMeta => "load_meta",
            Op::Save => "save",
            Op::SaveNoSync => "save_nosync",
            Op::ParseMem => "parse_mem",
            Op::SerializeMem => "serialize_mem",
        }
    }
    fn header(self) -> &'static str {
        match self {
            Op::LoadCopy => "load copy",
            Op::LoadNoCopy => "load no-copy",
            Op::LoadCopyAlign1 => "load copy, alignment 1",
            Op::LoadNoCopyAlign1 => "load no-copy, alignment 1",
            Op::LoadNoCopyAligned => "load no-copy of the aligned save",
            Op::LoadMeta => ".onnx only",
            Op::Save => "save",
            Op::SaveNoSync => "save, no fsync",
            Op::ParseMem => "parse in memory",
            Op::SerializeMem => "serialize in memory",
        }
    }
}

/// One model of the benchmark.
struct Model {
    key: String,
    label: String,
    path: PathBuf,
    data: Option<PathBuf>,
    /// Bytes of the model file (+ external data).
    size: u64,
    /// Bytes of the external data file (0 if none).
    data_size: u64,
    /// Timed repetitions inside one child process.
    iters: usize,
    /// Child processes per case (the best time is kept).
    runs: usize,
    /// Operations shown in the main table.
    main_ops: Vec<Op>,
    /// Operations only used by the ratios.
    extra_ops: Vec<Op>,
    /// Files to delete when the model's cases are done.
    generated: Vec<PathBuf>,
    /// The onnx-ir row runs on this model (external data, and `onnx_ir` importable).
    pyir: bool,
}

impl Model {
    /// A generated metadata model in one file (deleted when its cases are done): 3 repetitions
    /// per process, `runs + 2` processes per case.
    fn generated_inline(
        key: &str,
        label: String,
        path: PathBuf,
        size: u64,
        runs: usize,
        main_ops: Vec<Op>,
        extra_ops: Vec<Op>,
    ) -> Self {
        Model {
            key: key.into(),
            label,
            path: path.clone(),
            data: None,
            size,
            data_size: 0,
            iters: 3,
            runs: runs + 2,
            main_ops,
            extra_ops,
            generated: vec![path],
            pyir: false,
        }
    }
}

#[derive(Clone, Debug)]
enum Cell {
    Ok {
        ns: u64,
        first_ns: u64,
        cpu_ns: u64,
        hwm_kb: u64,
        base_kb: u64,
        /// Tensors copied for alignment by the load (onnx_light's loads).
        realigned: Option<u64>,
    },
    Na(String),
    Err(String),
}

struct Runner {
    exe: PathBuf,
    python: PathBuf,
    pyscript: PathBuf,
    work: PathBuf,
    runs: usize,
    threads: usize,
    /// The libraries measured (`--rows`).
    rows: Vec<Row>,
    results: HashMap<(Row, String, Op), Cell>,
}

/// Why a row cannot do an operation on a model (None = it can).
fn not_available(row: Row, m: &Model, op: Op) -> Option<&'static str> {
    let ext = m.data.is_some();
    if matches!(
        op,
        Op::LoadCopyAlign1 | Op::LoadNoCopyAlign1 | Op::LoadNoCopyAligned
    ) && !matches!(row, Row::Light1 | Row::LightN)
    {
        return Some("—");
    }
    if row.keeps_freed() {
        return match op {
            Op::ParseMem | Op::SerializeMem if !ext => None,
            _ => Some("—"),
        };
    }
    match row {
        Row::Read => match op {
            Op::LoadCopy | Op::LoadNoCopy | Op::LoadMeta | Op::Save | Op::SaveNoSync => None,
            _ => Some("—"),
        },
        Row::Memcpy => match op {
            Op::LoadCopy if !ext => None,
            Op::ParseMem => None,
            _ => Some("—"),
        },
        Row::Light1 | Row::LightN | Row::Light1Kept | Row::OnnxKept => None,
        // onnx-ir is measured on the external-data model only: its loader is lazy (no copy
        // load), and `onnx_ir.save` writes the weights into one external data file.
        Row::OnnxIr => match op {
            _ if !ext || !m.pyir => Some("—"),
            Op::LoadNoCopy | Op::Save | Op::SaveNoSync => None,
            Op::LoadCopy => Some("n/a (lazy loader)"),
            _ => Some("—"),
        },
        Row::Onnx => match op {
            Op::LoadNoCopy => Some("n/a (no zero-copy load)"),
            Op::SaveNoSync => Some("—"),
            _ => None,
        },
        Row::Prost | Row::OnnxRs => match op {
            Op::LoadCopy | Op::LoadNoCopy | Op::Save if ext => Some("n/a (no external data)"),
            Op::SaveNoSync => Some("—"),
            _ => None,
        },
    }
}

impl Runner {
    /// Runs `row`'s `op` on `m` in `runs` fresh processes, keeping the best figures (merged
    /// with those of earlier calls).
    fn case(&mut self, row: Row, m: &Model, op: Op, runs: usize) {
        let key = (row, m.key.clone(), op);
        if let Some(why) = not_available(row, m, op) {
            self.results.insert(key, Cell::Na(why.into()));
            return;
        }
        if !self.rows.contains(&row) {
            self.results.insert(key, Cell::Na("not run".into()));
            return;
        }
        if let Some(Cell::Err(_)) = self.results.get(&key) {
            return;
        }
        let out = self.work.join(format!("out-{}-{:?}.onnx", m.key, row));
        // Cheap operations on the big models are repeated in-process too, so that both the first
        // (cold) and a warm time are seen.
        let iters = match op {
            Op::LoadNoCopy | Op::LoadNoCopyAlign1 | Op::LoadNoCopyAligned | Op::LoadMeta
                if m.iters == 1 =>
            {
                5
            }
            // The aligned-placement comparison: a cold (first) and a warm (best) time each.
            Op::LoadCopy | Op::LoadCopyAlign1 if m.iters == 1 => 3,
            _ => m.iters,
        };
        let mut best: Option<(u64, u64, u64, u64, u64)> = match self.results.get(&key) {
            Some(Cell::Ok {
                ns,
                first_ns,
                cpu_ns,
                hwm_kb,
                base_kb,
                ..
            }) => Some((*ns, *first_ns, *cpu_ns, *hwm_kb, *base_kb)),
            _ => None,
        };
        let mut realigned = match self.results.get(&key) {
            Some(Cell::Ok { realigned, .. }) => *realigned,
            _ => None,
        };
        for _ in 0..runs {
            let mut cmd = if matches!(row, Row::Onnx | Row::OnnxKept | Row::OnnxIr) {
                let mut c = Command::new(&self.python);
                c.arg(if row != Row::OnnxIr {
                    self.pyscript.clone()
                } else {
                    self.pyscript.with_file_name("onnx_ir_case.py")
                })
                .arg(op.arg())
                .arg(&m.path)
                .arg(&out)
                .arg(iters.to_string());
                c
            } else {
                let lib = match row {
                    Row::Read => "read",
                    Row::Memcpy => "memcpy",
                    Row::Light1 | Row::LightN | Row::Light1Kept => "onnx_light",
                    Row::Prost => "prost",
                    _ => "onnx_rs",
                };
                let threads = if row == Row::LightN { -1 } else { 1 };
                let mut c = Command::new(&self.exe);
                let path = match op {
                    Op::LoadNoCopyAligned => aligned_copy(&m.path),
                    _ => m.path.clone(),
                };
                c.args(["case", lib, op.arg()])
                    .arg(path)
                    .arg("--out")
                    .arg(&out);
                c.args([
                    "--threads",
                    &threads.to_string(),
                    "--iters",
                    &iters.to_string(),
                ]);
                if let Some(d) = &m.data {
                    c.arg("--data").arg(d);
                }
                c
            };
            if row.keeps_freed() {
                cmd.envs(KEEP_FREED);
            }
            let res = cmd.output();
            let parsed = res.as_ref().ok().and_then(|o| {
                let s = String::from_utf8_lossy(&o.stdout);
                let line = s.lines().find(|l| l.starts_with("RESULT "))?;
                let field = |n: &str| -> Option<u64> {
                    line.split_whitespace()
                        .find_map(|kv| kv.strip_prefix(n)?.strip_prefix('=')?.parse().ok())
                };
                Some((
                    (
                        field("time_ns")?,
                        field("first_ns")?,
                        field("cpu_ns")?,
                        field("hwm_kb")?,
                        field("base_kb")?,
                    ),
                    field("realigned"),
                ))
            });
            match parsed {
                Some(((ns, first, cpu, hwm, base), n)) => {
                    realigned = realigned.or(n);
                    best = Some(match best {
                        // Best times; the peak RSS and the RSS before of the process whose
                        // peak added the most (a conservative figure). Both from one process:
                        // the RSS before differs between processes of one case (by up to ~0.4
                        // MiB for the Rust cases), so the largest peak less the largest RSS
                        // before, of two processes, is neither one's growth.
                        Some((bns, bfirst, bcpu, bhwm, bbase)) => {
                            let (hwm, base) =
                                if hwm.saturating_sub(base) > bhwm.saturating_sub(bbase) {
                                    (hwm, base)
                                } else {
                                    (bhwm, bbase)
                                };
                            (bns.min(ns), bfirst.min(first), bcpu.min(cpu), hwm, base)
                        }
                        None => (ns, first, cpu, hwm, base),
                    });
                }
                None => {
                    let msg = match &res {
                        Ok(o) => {
                            let e = String::from_utf8_lossy(&o.stderr);
                            let last = e
                                .lines()
                                .rfind(|l| !l.trim().is_empty())
                                .unwrap_or("")
                                .to_string();
                            format!("{} {}", o.status, last)
                        }
                        Err(e) => e.to_string(),
                    };
                    eprintln!("  FAILED {:?} {} {}: {msg}", row, m.key, op.arg());
                    if let Ok(o) = &res {
                        eprintln!("{}", String::from_utf8_lossy(&o.stderr));
                    }
                    self.results.insert(key, Cell::Err("error".into()));
                    let _ = std::fs::remove_file(&out);
                    return;
                }
            }
        }
        let (ns, first_ns, cpu_ns, hwm_kb, base_kb) = best.unwrap();
        eprintln!(
            "  [{}] {:<20} {:<18} {:>10}  peak RSS {}{}",
            m.key,
            row.short(),
            op.arg(),
            fmt_time(ns),
            fmt_mib(hwm_kb * 1024),
            realigned.map_or(String::new(), |n| format!(
                ", {n} tensors copied for alignment"
            ))
        );
        self.results.insert(
            key,
            Cell::Ok {
                ns,
                first_ns,
                cpu_ns,
                hwm_kb,
                base_kb,
                realigned,
            },
        );
    }

    fn model(&mut self, m: &Model) {
        eprintln!("model ({}) {}: {}", m.key, m.label, fmt_mib(m.size));
        let ops: Vec<Op> = m.main_ops.iter().chain(&m.extra_ops).copied().collect();
        // Copy loads with alignment 64 and 1 are compared: their runs alternate, so that both
        // see the same load of the machine.
        let paired = ops.contains(&Op::LoadCopy) && ops.contains(&Op::LoadCopyAlign1);
        for &op in &ops {
            if paired && matches!(op, Op::LoadCopy | Op::LoadCopyAlign1) {
                if op == Op::LoadCopy {
                    let light = |r: &Row| matches!(r, Row::Light1 | Row::LightN);
                    for row in ROWS.into_iter().filter(|r| !light(r)) {
                        self.case(row, m, op, m.runs);
                    }
                    // onnx_light's runs only, so that both follow the same kind of process
                    // (not, say, the 1 GB memcpy baseline); each goes first in every other run.
                    for run in 0..m.runs {
                        let mut pair = [Op::LoadCopy, Op::LoadCopyAlign1];
                        if run % 2 == 1 {
                            pair.reverse();
                        }
                        for op in pair {
                            for row in ROWS.into_iter().filter(light) {
                                self.case(row, m, op, 1);
                            }
                        }
                    }
                    for row in ROWS.into_iter().filter(|r| !light(r)) {
                        self.case(row, m, Op::LoadCopyAlign1, 1);
                    }
                }
                continue;
            }
            // The rows take turns, one fresh process each per round, so that a disturbance of
            // the machine lasting seconds (it happens on the shared VM) slows every library's
            // best run alike instead of all runs of one.
            for _ in 0..m.runs {
                for row in ROWS {
                    self.case(row, m, op, 1);
                }
            }
        }
        for f in &m.generated {
            let _ = std::fs::remove_file(f);
        }
    }

    fn get(&self, row: Row, model: &str, op: Op) -> Option<(u64, u64, u64)> {
        match self.results.get(&(row, model.to_string(), op))? {
            Cell::Ok {
                ns,
                hwm_kb,
                base_kb,
                ..
            } => Some((*ns, *hwm_kb * 1024, *base_kb * 1024)),
            _ => None,
        }
    }

    /// Best CPU time of a repetition.
    fn cpu(&self, row: Row, model: &str, op: Op) -> Option<u64> {
        match self.results.get(&(row, model.to_string(), op))? {
            Cell::Ok { cpu_ns, .. } => Some(*cpu_ns),
            _ => None,
        }
    }

    /// Best time of the first repetition in a process.
    fn first(&self, row: Row, model: &str, op: Op) -> Option<u64> {
        match self.results.get(&(row, model.to_string(), op))? {
            Cell::Ok { first_ns, .. } => Some(*first_ns),
            _ => None,
        }
    }
}

fn fmt_time(ns: u64) -> String {
    let s = ns as f64 / 1e9;
    if s >= 1.0 {
        format!("{s:.2} s")
    } else if s >= 0.1 {
        format!("{:.0} ms", s * 1e3)
    } else if s >= 0.001 {
        format!("{:.1} ms", s * 1e3)
    } else {
        format!("{:.0} µs", s * 1e6)
    }
}

fn fmt_mib(bytes: u64) -> String {
    let m = bytes as f64 / (1u64 << 20) as f64;
    if m >= 10.0 {
        format!("{m:.0} MiB")
    } else {
        format!("{m:.1} MiB")
    }
}

fn file_len(p: &Path) -> u64 {
    std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

/// The largest `n` .onnx files under `dir`.
fn largest_onnx(dir: &Path, n: usize) -> Vec<PathBuf> {
    fn walk(d: &Path, out: &mut Vec<(u64, PathBuf)>) {
        let Ok(rd) = std::fs::read_dir(d) else { return };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "onnx") {
                out.push((file_len(&p), p));
            }
        }
    }
    let mut all = Vec::new();
    walk(dir, &mut all);
    all.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    all.into_iter().take(n).map(|(_, p)| p).collect()
}

fn cmd_output(prog: &str, args: &[&str]) -> String {
    Command::new(prog)
        .args(args)
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

fn machine(python: &Path) -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")?
                .split(':')
                .nth(1)
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_default();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_kb: u64 = meminfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("MemTotal:")?
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let thp =
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
    let py = cmd_output(
        python.to_str().unwrap(),
        &[
            "-c",
            "import sys, onnx, google.protobuf as p; from google.protobuf.internal import api_implementation as a; \
             print(f'Python {sys.version.split()[0]}, onnx {onnx.__version__}, protobuf {p.__version__} ({a.Type()})')",
        ],
    );
    let rustc = cmd_output("rustc", &["--version"]);
    let repo = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let commit = cmd_output("git", &["-C", repo, "rev-parse", "--short", "HEAD"]);
    let dirty = !cmd_output(
        "git",
        &[
            "-C",
            repo,
            "status",
            "--porcelain",
            "--",
            "src",
            "Cargo.toml",
        ],
    )
    .is_empty();
    let commit = format!(
        "onnx_light at commit {}{}",
        if commit.is_empty() { "?" } else { &commit },
        if dirty {
            " + uncommitted changes in src/"
        } else {
            ""
        }
    );
    format!(
        "- machine: {} cores (`nproc`), {cpu}, {:.1} GiB RAM, Linux {}, transparent huge pages: {}\n- {commit}; {rustc}; {py}\n- date: {}\n",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        mem_kb as f64 / (1u64 << 20) as f64,
        kernel.trim(),
        thp.trim(),
        cmd_output("date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
    )
}

fn run(opts: &HashMap<String, String>) {
    let started = Instant::now();
    let load_start = loadavg();
    let work = PathBuf::from(opts.get("work").unwrap_or_else(|| usage()));
    std::fs::create_dir_all(&work).expect("create work dir");
    let python = PathBuf::from(opts.get("python").unwrap_or_else(|| usage()));
    let exe = std::env::current_exe().expect("current exe");
    let pyscript = opts
        .get("pyscript")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("py/onnx_case.py"));
    let runs: usize = opts.get("runs").map_or(3, |s| s.parse().expect("--runs"));
    let scale: f64 = opts
        .get("scale")
        .map_or(1.0, |s| s.parse().expect("--scale"));
    let only: Vec<String> = opts.get("only").map_or(
        ["a", "b", "c", "d", "e", "f"].map(String::from).to_vec(),
        |s| s.split(',').map(|x| x.trim().to_string()).collect(),
    );
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let rows: Vec<Row> = match opts.get("rows") {
        None => ROWS.to_vec(),
        Some(list) => list
            .split(',')
            .map(|k| {
                ROWS.into_iter()
                    .find(|r| r.key() == k.trim())
                    .unwrap_or_else(|| panic!("--rows: unknown row {k:?}"))
            })
            .collect(),
    };
    let mut r = Runner {
        exe,
        python: python.clone(),
        pyscript,
        work: work.clone(),
        runs,
        threads,
        rows,
        results: HashMap::new(),
    };
    let mut models: Vec<Model> = Vec::new();
    let main_ops = vec![Op::LoadCopy, Op::LoadNoCopy, Op::Save];

    // (c) metadata-heavy, (d) real models, (a) 0.5 GB inline, (b) 3 GB external: small first,
    // each model's files deleted before the next is generated (disk use stays ~2× the largest).
    if only.iter().any(|o| o == "c") {
        let path = work.join("metadata_heavy.onnx");
        let nodes = (200_000.0 * scale) as usize;
        let t = Instant::now();
        let size = synth::write_metadata_heavy(&path, nodes).expect("generate (c)");
        eprintln!("generated (c) in {:.1?}", t.elapsed());
        let m = Model::generated_inline(
            "c",
            format!("metadata-heavy, {}k nodes", nodes / 1000),
            path,
            size,
            runs,
            main_ops.clone(),
            vec![Op::ParseMem, Op::SerializeMem, Op::SaveNoSync],
        );
        r.model(&m);
        models.push(m);
    }
    // (e) value_info for every output, (f) transformer-like metadata: in-memory parse and
    // serialize only (the metadata targets).
    type Writer = fn(&Path, usize) -> std::io::Result<u64>;
    let shapes: [(&str, &str, usize, Writer, &str); 2] = [
        (
            "e",
            "value_info.onnx",
            200_000,
            synth::write_value_info_heavy,
            "nodes, a value_info for every output",
        ),
        (
            "f",
            "transformer_metadata.onnx",
            2_000,
            synth::write_transformer_metadata,
            "transformer layers, long names, many attributes",
        ),
    ];
    for (key, file, full, write, what) in shapes {
        if !only.iter().any(|o| o == key) {
            continue;
        }
        let path = work.join(file);
        let n = ((full as f64 * scale) as usize).max(1);
        let t = Instant::now();
        let size = write(&path, n).unwrap_or_else(|e| panic!("generate ({key}): {e}"));
        eprintln!("generated ({key}) in {:.1?}", t.elapsed());
        let m = Model::generated_inline(
            key,
            format!("{n} {what}"),
            path,
            size,
            runs,
            vec![],
            vec![Op::ParseMem, Op::SerializeMem],
        );
        r.model(&m);
        models.push(m);
    }
    if only.iter().any(|o| o == "d") {
        if let Some(dir) = opts.get("testdata") {
            for (i, p) in largest_onnx(Path::new(dir), 3).into_iter().enumerate() {
                let name = p.file_stem().unwrap().to_string_lossy().to_string();
                let m = Model {
                    key: if i == 0 {
                        "d".into()
                    } else {
                        format!("d{}", i + 1)
                    },
                    label: format!("real: {name}"),
                    size: file_len(&p),
                    data_size: 0,
                    path: p,
                    data: None,
                    iters: 20,
                    // Three fresh processes per `--runs` (9 by default): a first parse of these
                    // models takes under 1 ms, so a disturbance of the shared machine lasting a
                    // few seconds can cover every process of a smaller count.
                    runs: runs * 3,
                    main_ops: if i == 0 { main_ops.clone() } else { vec![] },
                    extra_ops: vec![Op::ParseMem, Op::SerializeMem],
                    generated: vec![],
                    pyir: false,
                };
                r.model(&m);
                models.push(m);
            }
        } else {
            eprintln!("no --testdata: real models skipped");
        }
    }
    if only.iter().any(|o| o == "a") {
        let path = work.join("transformer_0.5gb.onnx");
        let shape = synth::TransformerShape::half_gb().scaled(scale);
        let t = Instant::now();
        let size = synth::write_transformer_inline(&path, &shape).expect("generate (a)");
        eprintln!("generated (a) in {:.1?}", t.elapsed());
        let aligned = aligned_copy(&path);
        let model = onnx_light::load_model(&path, &light_no_copy().into()).expect("load (a)");
        let opts = onnx_light::SerializeOptions {
            inline_alignment: ALIGNED_SAVE,
            ..Default::default()
        };
        onnx_light::save_model(&model, &aligned, &opts).expect("aligned save of (a)");
        drop(model);
        let m = Model {
            key: "a".into(),
            label: format!(
                "transformer, {} layers, d={}, inline",
                shape.layers, shape.hidden
            ),
            path: path.clone(),
            data: None,
            size,
            data_size: 0,
            iters: 1,
            runs,
            main_ops: main_ops.clone(),
            extra_ops: vec![
                Op::SaveNoSync,
                Op::LoadCopyAlign1,
                Op::LoadNoCopyAlign1,
                Op::LoadNoCopyAligned,
            ],
            generated: vec![path, aligned],
            pyir: false,
        };
        r.model(&m);
        models.push(m);
    }
    if only.iter().any(|o| o == "b") {
        let path = work.join("transformer_3gb.onnx");
        let data = work.join("transformer_3gb.onnx.data");
        let shape = synth::TransformerShape::three_gb().scaled(scale);
        let t = Instant::now();
        let (n, d) = synth::write_transformer_external(&path, &data, &shape).expect("generate (b)");
        eprintln!("generated (b) in {:.1?}", t.elapsed());
        // Flush the 3 GB just written, so that its writeback does not run under the first cases.
        for f in [&path, &data] {
            if let Ok(f) = std::fs::File::open(f) {
                let _ = f.sync_all();
            }
        }
        let m = Model {
            key: "b".into(),
            label: format!(
                "transformer, {} layers, d={}, external data",
                shape.layers, shape.hidden
            ),
            path: path.clone(),
            data: Some(data.clone()),
            size: n + d,
            data_size: d,
            iters: 1,
            runs,
            main_ops: vec![Op::LoadMeta, Op::LoadCopy, Op::LoadNoCopy, Op::Save],
            extra_ops: vec![Op::SaveNoSync],
            generated: vec![path, data],
            pyir: Command::new(&python)
                .args(["-c", "import onnx_ir"])
                .output()
                .is_ok_and(|o| o.status.success()),
        };
        if !m.pyir {
            eprintln!(
                "onnx_ir is not importable by {}: onnx-ir row skipped",
                python.display()
            );
        }
        r.model(&m);
        models.push(m);
    }

    // Run small models first; show them in the order (a), (b), (c), (d), (d2), …
    models.sort_by(|x, y| x.key.cmp(&y.key));
    let report = report(
        &r,
        &models,
        &machine(&python),
        started.elapsed().as_secs_f64(),
        &load_start,
    );
    println!("{report}");
    if let Some(out) = opts.get("out") {
        std::fs::write(out, &report).expect("write --out");
    }
}

// ------------------------------------------------------------------------------------ report

fn cell_text(r: &Runner, row: Row, m: &Model, op: Op) -> String {
    match r.results.get(&(row, m.key.clone(), op)) {
        Some(Cell::Ok {
            ns,
            hwm_kb,
            realigned,
            ..
        }) => {
            // No-copy loads: how many tensors were copied because their bytes were misaligned.
            let copied = match (op, realigned) {
                (Op::LoadNoCopy | Op::LoadNoCopyAlign1 | Op::LoadNoCopyAligned, Some(n)) => {
                    format!(" · {n} realigned")
                }
                _ => String::new(),
            };
            format!("{} · {}{copied}", fmt_time(*ns), fmt_mib(hwm_kb * 1024))
        }
        Some(Cell::Na(s)) | Some(Cell::Err(s)) => s.clone(),
        None => "—".into(),
    }
}

fn ratio(a: Option<u64>, b: Option<u64>) -> Option<f64> {
    Some(a? as f64 / b? as f64)
}

fn fmt_ratio(x: Option<f64>) -> String {
    match x {
        Some(x) if x >= 100.0 => format!("{x:.0}×"),
        Some(x) if x >= 10.0 => format!("{x:.1}×"),
        Some(x) => format!("{x:.2}×"),
        None => "n/a".into(),
    }
}

fn verdict(ok: Option<bool>) -> &'static str {
    match ok {
        Some(true) => "**met**",
        Some(false) => "**not met**",
        None => "not measured",
    }
}

fn loadavg() -> String {
    let l = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    l.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

fn report(r: &Runner, models: &[Model], machine: &str, secs: f64, load_start: &str) -> String {
    let mut s = String::new();
    let n = r.threads;
    writeln!(
        s,
        "{machine}- each case: best time of {} runs for (a) and (b), {} for (c), (e) and (f), {} for \
         the real models (d), every run a fresh process, the libraries taking turns; full run took \
         {:.0} s; load average (1/5/15 min) at start {load_start}, at end {}\n",
        r.runs,
        r.runs + 2,
        r.runs * 3,
        secs,
        loadavg()
    )
    .unwrap();
    writeln!(s, "Models:\n").unwrap();
    for m in models {
        let ext = if m.data.is_some() {
            format!(
                " (`.onnx` {} bytes + external data {} bytes)",
                m.size - m.data_size,
                m.data_size
            )
        } else {
            String::new()
        };
        writeln!(
            s,
            "- ({}) {}: {} bytes = {}{}; {} timed repetitions per run",
            m.key,
            m.label,
            m.size,
            fmt_mib(m.size),
            ext,
            m.iters
        )
        .unwrap();
    }
    writeln!(s).unwrap();

    // The main table.
    let shown: Vec<(&Model, Op)> = models
        .iter()
        .flat_map(|m| m.main_ops.iter().map(move |&op| (m, op)))
        .collect();
    write!(s, "| library / case |").unwrap();
    for (m, op) in &shown {
        write!(s, " ({}) {} |", m.key, op.header()).unwrap();
    }
    writeln!(s).unwrap();
    write!(s, "|---|").unwrap();
    for _ in &shown {
        write!(s, "---|").unwrap();
    }
    writeln!(s).unwrap();
    for row in ROWS.into_iter().filter(|r| !r.keeps_freed()) {
        write!(s, "| {} |", row.label(n)).unwrap();
        for (m, op) in &shown {
            write!(s, " {} |", cell_text(r, row, m, *op)).unwrap();
        }
        writeln!(s).unwrap();
    }
    writeln!(
        s,
        "\nEach cell: best wall time · peak RSS of the process (VmHWM, or the RSS right after a repetition when higher; \
         of the run whose peak added the most to its RSS before); \
         onnx_light's no-copy loads add the number of tensors copied because their bytes were not \
         aligned to `ParseOptions::alignment` (default 64) in the file (\"realigned\").\n"
    )
    .unwrap();
    aligned_placement(&mut s, r, models);

    // Ratios.
    writeln!(s, "### Targets and ratios\n").unwrap();
    let t = |row: Row, key: &str, op: Op| r.get(row, key, op).map(|x| x.0);
    let hwm = |row: Row, key: &str, op: Op| r.get(row, key, op).map(|x| x.1);
    let grow = |row: Row, key: &str, op: Op| r.get(row, key, op).map(|x| x.1.saturating_sub(x.2));
    if let Some(a) = models.iter().find(|m| m.key == "a") {
        let size = a.size;
        writeln!(s, "Model (a), {} ({}):\n", a.label, fmt_mib(size)).unwrap();
        writeln!(
            s,
            "| target | onnx_light 1 thread | onnx_light {n} threads | verdict |\n|---|---|---|---|"
        )
        .unwrap();
        let both = |f: &dyn Fn(Row) -> Option<f64>,
                    fmt: &dyn Fn(Option<f64>) -> String,
                    ok: &dyn Fn(f64) -> bool| {
            let (x1, xn) = (f(Row::Light1), f(Row::LightN));
            let v = match (x1.map(ok), xn.map(ok)) {
                (Some(true), Some(true)) => "**met**".to_string(),
                (Some(true), _) => "**met** with 1 thread".to_string(),
                (_, Some(true)) => format!("**met** with {n} threads"),
                (None, None) => "not measured".to_string(),
                _ => "**not met**".to_string(),
            };
            (fmt(x1), fmt(xn), v)
        };
        let rows: Vec<(&str, (String, String, String))> = vec![
            (
                "copy load ≤ 0.25× `fs::read` of the file",
                both(
                    &|row| ratio(t(row, "a", Op::LoadCopy), t(Row::Read, "a", Op::LoadCopy)),
                    &fmt_ratio,
                    &|x| x <= 0.25,
                ),
            ),
            (
                "copy load ≥ 10× faster than `onnx.load`",
                both(
                    &|row| ratio(t(Row::Onnx, "a", Op::LoadCopy), t(row, "a", Op::LoadCopy)),
                    &fmt_ratio,
                    &|x| x >= 10.0,
                ),
            ),
            (
                "copy load peak RSS ≤ 1.05× file size",
                both(
                    &|row| hwm(row, "a", Op::LoadCopy).map(|h| h as f64 / size as f64),
                    &fmt_ratio,
                    &|x| x <= 1.05,
                ),
            ),
            (
                "no-copy load < 1 ms (best of 5 in a process)",
                both(
                    &|row| t(row, "a", Op::LoadNoCopy).map(|x| x as f64),
                    &|x| x.map_or("n/a".into(), |v| fmt_time(v as u64)),
                    &|x| x < 1e6,
                ),
            ),
            (
                "no-copy load < 1 ms (first load in a fresh process)",
                both(
                    &|row| r.first(row, "a", Op::LoadNoCopy).map(|x| x as f64),
                    &|x| x.map_or("n/a".into(), |v| fmt_time(v as u64)),
                    &|x| x < 1e6,
                ),
            ),
            (
                "save ≤ 1.1× one buffered write of the same bytes (both + fsync)",
                both(
                    &|row| ratio(t(row, "a", Op::Save), t(Row::Read, "a", Op::Save)),
                    &fmt_ratio,
                    &|x| x <= 1.1,
                ),
            ),
        ];
        for (name, (x1, xn, v)) in rows {
            writeln!(s, "| {name} | {x1} | {xn} | {v} |").unwrap();
        }
        writeln!(s).unwrap();
        writeln!(
            s,
            "- copy load, peak RSS above the process's RSS before loading: onnx_light 1 thread {} , {n} threads {}; \
             `onnx.load` {} ({} of the file; the issue quotes ~2×), prost {}, onnx-rs {} (these two keep the read buffer).",
            fmt_ratio(grow(Row::Light1, "a", Op::LoadCopy).map(|g| g as f64 / size as f64)),
            fmt_ratio(grow(Row::LightN, "a", Op::LoadCopy).map(|g| g as f64 / size as f64)),
            fmt_ratio(grow(Row::Onnx, "a", Op::LoadCopy).map(|g| g as f64 / size as f64)),
            fmt_ratio(hwm(Row::Onnx, "a", Op::LoadCopy).map(|g| g as f64 / size as f64)),
            fmt_ratio(grow(Row::Prost, "a", Op::LoadCopy).map(|g| g as f64 / size as f64)),
            fmt_ratio(grow(Row::OnnxRs, "a", Op::LoadCopy).map(|g| g as f64 / size as f64)),
        )
        .unwrap();
        writeln!(
            s,
            "- copy load vs memcpy of the bytes into a fresh buffer: onnx_light 1 thread {}, {n} threads {}.",
            fmt_ratio(ratio(t(Row::Light1, "a", Op::LoadCopy), t(Row::Memcpy, "a", Op::LoadCopy))),
            fmt_ratio(ratio(t(Row::LightN, "a", Op::LoadCopy), t(Row::Memcpy, "a", Op::LoadCopy))),
        )
        .unwrap();
        if models.iter().any(|m| m.key == "b") {
            writeln!(
                s,
                "- no-copy load is independent of tensor bytes if it costs about what parsing metadata alone costs: \
                 (a) no-copy {} (1 thread; first in a process {}) vs (b)'s `.onnx` (metadata of a larger \
                 transformer, no payload bytes) {} (first {}). Peers' no-copy load of (a): prost {}, onnx-rs {}.",
                t(Row::Light1, "a", Op::LoadNoCopy).map_or("n/a".into(), fmt_time),
                r.first(Row::Light1, "a", Op::LoadNoCopy).map_or("n/a".into(), fmt_time),
                t(Row::Light1, "b", Op::LoadMeta).map_or("n/a".into(), fmt_time),
                r.first(Row::Light1, "b", Op::LoadMeta).map_or("n/a".into(), fmt_time),
                t(Row::Prost, "a", Op::LoadNoCopy).map_or("n/a".into(), fmt_time),
                t(Row::OnnxRs, "a", Op::LoadNoCopy).map_or("n/a".into(), fmt_time),
            )
            .unwrap();
        }
        writeln!(
            s,
            "- save without fsync (`serialize_to_writer` into a `File` vs one `write_all`): 1 thread {}, {n} threads {}.\n",
            fmt_ratio(ratio(t(Row::Light1, "a", Op::SaveNoSync), t(Row::Read, "a", Op::SaveNoSync))),
            fmt_ratio(ratio(t(Row::LightN, "a", Op::SaveNoSync), t(Row::Read, "a", Op::SaveNoSync))),
        )
        .unwrap();
    }

    if let Some(b) = models.iter().find(|m| m.key == "b") {
        let (size, data) = (b.size, b.data_size);
        writeln!(
            s,
            "Model (b), {} ({}, of which {} external data):\n",
            b.label,
            fmt_mib(size),
            fmt_mib(data)
        )
        .unwrap();
        writeln!(
            s,
            "| target | onnx_light 1 thread | onnx_light {n} threads | verdict |\n|---|---|---|---|"
        )
        .unwrap();
        let row3 = |f: &dyn Fn(Row) -> Option<f64>,
                    fmt: &dyn Fn(Option<f64>) -> String,
                    ok: &dyn Fn(f64) -> bool| {
            let (x1, xn) = (f(Row::Light1), f(Row::LightN));
            let v = match (x1.map(ok), xn.map(ok)) {
                (Some(true), Some(true)) => "**met**".to_string(),
                (Some(true), _) => "**met** with 1 thread".to_string(),
                (_, Some(true)) => format!("**met** with {n} threads"),
                (None, None) => "not measured".to_string(),
                _ => "**not met**".to_string(),
            };
            (fmt(x1), fmt(xn), v)
        };
        let time_fmt = |x: Option<f64>| x.map_or("n/a".into(), |v| fmt_time(v as u64));
        let rows: Vec<(&str, (String, String, String))> = vec![
            (
                "save with external data ≤ 1.1× one `write_all` of the same bytes (both files, both + fsync)",
                row3(
                    &|row| ratio(t(row, "b", Op::Save), t(Row::Read, "b", Op::Save)),
                    &fmt_ratio,
                    &|x| x <= 1.1,
                ),
            ),
            (
                "the same without fsync (informational, same 1.1× bar)",
                row3(
                    &|row| {
                        ratio(
                            t(row, "b", Op::SaveNoSync),
                            t(Row::Read, "b", Op::SaveNoSync),
                        )
                    },
                    &fmt_ratio,
                    &|x| x <= 1.1,
                ),
            ),
            (
                "no-copy load < 1 ms (best of 5 in a process)",
                row3(
                    &|row| t(row, "b", Op::LoadNoCopy).map(|x| x as f64),
                    &time_fmt,
                    &|x| x < 1e6,
                ),
            ),
            (
                "no-copy load peak RSS ÷ external data bytes ≤ 0.05×",
                row3(
                    &|row| hwm(row, "b", Op::LoadNoCopy).map(|h| h as f64 / data as f64),
                    &fmt_ratio,
                    &|x| x <= 0.05,
                ),
            ),
            (
                "copy load peak RSS ≤ 1.05× model + data size",
                row3(
                    &|row| hwm(row, "b", Op::LoadCopy).map(|h| h as f64 / size as f64),
                    &fmt_ratio,
                    &|x| x <= 1.05,
                ),
            ),
        ];
        for (name, (x1, xn, v)) in rows {
            writeln!(s, "| {name} | {x1} | {xn} | {v} |").unwrap();
        }
        let extra = |row: Row| {
            Some(t(row, "b", Op::LoadNoCopy)?.saturating_sub(t(row, "b", Op::LoadMeta)?))
        };
        writeln!(
            s,
            "| no-copy load ÷ parsing the `.onnx` alone (informational: the extra, {} / {}, is per-tensor work; mapping the data file costs {}) | {} | {} | — |\n",
            extra(Row::Light1).map_or("n/a".into(), fmt_time),
            extra(Row::LightN).map_or("n/a".into(), fmt_time),
            t(Row::Read, "b", Op::LoadNoCopy).map_or("n/a".into(), fmt_time),
            fmt_ratio(ratio(t(Row::Light1, "b", Op::LoadNoCopy), t(Row::Light1, "b", Op::LoadMeta))),
            fmt_ratio(ratio(t(Row::LightN, "b", Op::LoadNoCopy), t(Row::LightN, "b", Op::LoadMeta))),
        )
        .unwrap();
        let tf = |row: Row, op: Op| t(row, "b", op).map_or("n/a".into(), fmt_time);
        writeln!(
            s,
            "- (b) copy load vs `fs::read` of both files: 1 thread {}, {n} threads {}; `onnx.load` time ÷ onnx_light's (1 thread): {}.",
            fmt_ratio(ratio(t(Row::Light1, "b", Op::LoadCopy), t(Row::Read, "b", Op::LoadCopy))),
            fmt_ratio(ratio(t(Row::LightN, "b", Op::LoadCopy), t(Row::Read, "b", Op::LoadCopy))),
            fmt_ratio(ratio(t(Row::Onnx, "b", Op::LoadCopy), t(Row::Light1, "b", Op::LoadCopy))),
        )
        .unwrap();
        writeln!(
            s,
            "- (b) no-copy load: onnx_light {} (1 thread; first in a process {}), {n} threads {}; onnx-ir's lazy `onnx_ir.load` {}; \
             the `.onnx` alone: onnx_light {}, upb {}; (a)'s no-copy load (6× fewer weight bytes) {}.",
            tf(Row::Light1, Op::LoadNoCopy),
            r.first(Row::Light1, "b", Op::LoadNoCopy).map_or("n/a".into(), fmt_time),
            tf(Row::LightN, Op::LoadNoCopy),
            tf(Row::OnnxIr, Op::LoadNoCopy),
            tf(Row::Light1, Op::LoadMeta),
            tf(Row::Onnx, Op::LoadMeta),
            t(Row::Light1, "a", Op::LoadNoCopy).map_or("n/a".into(), fmt_time),
        )
        .unwrap();
        writeln!(
            s,
            "- (b) save with external data (+ fsync): onnx_light {} (1 thread) / {} ({n} threads), one `write_all` per file {}, \
             onnx-ir {}, onnx {}; without fsync: onnx_light {} / {}, `write_all` {}, onnx-ir {}.\n",
            tf(Row::Light1, Op::Save),
            tf(Row::LightN, Op::Save),
            tf(Row::Read, Op::Save),
            tf(Row::OnnxIr, Op::Save),
            tf(Row::Onnx, Op::Save),
            tf(Row::Light1, Op::SaveNoSync),
            tf(Row::LightN, Op::SaveNoSync),
            tf(Row::Read, Op::SaveNoSync),
            tf(Row::OnnxIr, Op::SaveNoSync),
        )
        .unwrap();
    }

    let meta: Vec<&Model> = models
        .iter()
        .filter(|m| m.extra_ops.contains(&Op::ParseMem))
        .collect();
    if !meta.is_empty() {
        for by_cpu in [false, true] {
            let t = |row: Row, key: &str, op: Op| {
                if by_cpu {
                    r.cpu(row, key, op)
                } else {
                    t(row, key, op)
                }
            };
            if by_cpu {
                writeln!(
                    s,
                    "\nThe same by CPU time of the process (user + system), which other load on the machine \
                     disturbs less than wall time:\n"
                )
                .unwrap();
            } else {
                writeln!(
                    s,
                    "Metadata-heavy and real models, bytes already in memory (parse = bytes → model, serialize = \
                     model → new buffer; onnx_light 1 thread; a peer's time ÷ onnx_light's, > 1 means onnx_light \
                     is faster), by wall time:\n"
                )
                .unwrap();
            }
            writeln!(
                s,
                "| model | onnx_light parse | vs onnx-rs | vs upb | vs prost | onnx_light serialize | vs upb | vs onnx-rs | vs prost | verdict (parse < onnx-rs and upb, serialize < upb) |\n|---|---|---|---|---|---|---|---|---|---|"
            )
            .unwrap();
            for m in &meta {
                let (p, sz) = (Op::ParseMem, Op::SerializeMem);
                let lp = t(Row::Light1, &m.key, p);
                let ls = t(Row::Light1, &m.key, sz);
                let vs = |row: Row, op: Op, own: Option<u64>| ratio(t(row, &m.key, op), own);
                let ok = match (
                    vs(Row::OnnxRs, p, lp),
                    vs(Row::Onnx, p, lp),
                    vs(Row::Onnx, sz, ls),
                ) {
                    (Some(a), Some(b), Some(c)) => Some(a > 1.0 && b > 1.0 && c > 1.0),
                    _ => None,
                };
                writeln!(
                    s,
                    "| ({}) {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    m.key,
                    m.label,
                    lp.map_or("n/a".into(), fmt_time),
                    fmt_ratio(vs(Row::OnnxRs, p, lp)),
                    fmt_ratio(vs(Row::Onnx, p, lp)),
                    fmt_ratio(vs(Row::Prost, p, lp)),
                    ls.map_or("n/a".into(), fmt_time),
                    fmt_ratio(vs(Row::Onnx, sz, ls)),
                    fmt_ratio(vs(Row::OnnxRs, sz, ls)),
                    fmt_ratio(vs(Row::Prost, sz, ls)),
                    verdict(ok),
                )
                .unwrap();
            }
        }
        metadata_targets(&mut s, r, &meta);
        if let Some(c) = models.iter().find(|m| m.key == "c") {
            let f = |row: Row, op: Op| t(row, &c.key, op).map_or("n/a".into(), fmt_time);
            writeln!(
                s,
                "\nModel (c) absolute: parse — onnx_light {} (1 thread) / {} ({n} threads), onnx-rs {}, upb {}, prost {}; \
                 serialize — onnx_light {}, upb {}, onnx-rs {}, prost {}; memcpy of its bytes {}.",
                f(Row::Light1, Op::ParseMem),
                f(Row::LightN, Op::ParseMem),
                f(Row::OnnxRs, Op::ParseMem),
                f(Row::Onnx, Op::ParseMem),
                f(Row::Prost, Op::ParseMem),
                f(Row::Light1, Op::SerializeMem),
                f(Row::Onnx, Op::SerializeMem),
                f(Row::OnnxRs, Op::SerializeMem),
                f(Row::Prost, Op::SerializeMem),
                f(Row::Memcpy, Op::ParseMem),
            )
            .unwrap();
            writeln!(
                s,
                "Model (c) save vs one buffered write: with fsync {} (1 thread), without fsync {}.",
                fmt_ratio(ratio(
                    t(Row::Light1, "c", Op::Save),
                    t(Row::Read, "c", Op::Save)
                )),
                fmt_ratio(ratio(
                    t(Row::Light1, "c", Op::SaveNoSync),
                    t(Row::Read, "c", Op::SaveNoSync)
                )),
            )
            .unwrap();
        }
    }
    s
}

/// The metadata targets against upb, per model parsed and serialized in memory: warm (best
/// repetition in a process, each model freed before the next) and cold (first repetition in a
/// fresh process) times, and the peak RSS the operation adds to its process (peak − RSS before
/// the first run, the peak as in `cases::peak_kb`: the interpreter of the Python row is not
/// counted).
fn metadata_targets(s: &mut String, r: &Runner, meta: &[&Model]) {
    writeln!(
        s,
        "\nMetadata targets against upb (onnx_light 1 thread; ratio = upb's time ÷ onnx_light's, so > 1 means \
         onnx_light is faster; targets: parse ≥ 1.35×, serialize ≥ 1.3×, warm and cold; peak RSS added by a parse \
         ≤ 0.8× upb's):\n"
    )
    .unwrap();
    writeln!(
        s,
        "| model | parse warm: onnx_light · upb · ratio | parse cold | serialize warm | serialize cold | parse peak RSS added: onnx_light · upb · ratio | verdict |\n|---|---|---|---|---|---|---|"
    )
    .unwrap();
    let added = |row: Row, key: &str, op: Op| {
        r.get(row, key, op)
            .map(|(_, hwm, base)| hwm.saturating_sub(base))
    };
    for m in meta {
        let k = m.key.as_str();
        let warm = |op: Op| {
            (
                r.get(Row::Light1, k, op).map(|x| x.0),
                r.get(Row::Onnx, k, op).map(|x| x.0),
            )
        };
        let cold = |op: Op| (r.first(Row::Light1, k, op), r.first(Row::Onnx, k, op));
        let cell = |(own, upb): (Option<u64>, Option<u64>), unit: fn(u64) -> String| {
            format!(
                "{} · {} · {}",
                own.map_or("n/a".into(), unit),
                upb.map_or("n/a".into(), unit),
                fmt_ratio(ratio(upb, own))
            )
        };
        let meets =
            |(own, upb): (Option<u64>, Option<u64>), bar: f64| ratio(upb, own).map(|x| x >= bar);
        let rss = (
            added(Row::Light1, k, Op::ParseMem),
            added(Row::Onnx, k, Op::ParseMem),
        );
        let checks = [
            ("parse warm", meets(warm(Op::ParseMem), 1.35)),
            ("parse cold", meets(cold(Op::ParseMem), 1.35)),
            ("serialize warm", meets(warm(Op::SerializeMem), 1.3)),
            ("serialize cold", meets(cold(Op::SerializeMem), 1.3)),
            ("RSS", ratio(rss.0, rss.1).map(|x| x <= 0.8)),
        ];
        let missed: Vec<&str> = checks
            .iter()
            .filter(|(_, ok)| *ok != Some(true))
            .map(|(name, _)| *name)
            .collect();
        let verdict = if missed.is_empty() {
            "**met**".to_string()
        } else {
            format!("**not met**: {}", missed.join(", "))
        };
        writeln!(
            s,
            "| ({}) {} | {} | {} | {} | {} | {} · {} · {} | {} |",
            m.key,
            m.label,
            cell(warm(Op::ParseMem), fmt_time),
            cell(cold(Op::ParseMem), fmt_time),
            cell(warm(Op::SerializeMem), fmt_time),
            cell(cold(Op::SerializeMem), fmt_time),
            rss.0.map_or("n/a".into(), fmt_mib),
            rss.1.map_or("n/a".into(), fmt_mib),
            fmt_ratio(ratio(rss.0, rss.1)),
            verdict,
        )
        .unwrap();
    }
    kept_freed_memory(s, r, meta);
}

/// The metadata parse and serialize of both libraries in processes whose C allocator keeps
/// freed memory ([`KEEP_FREED`]): upb without the page faults its arena costs on every parse
/// with glibc's defaults. Not part of the verdict above (which follows the processes as they
/// are), shown so that the comparison does not rest on that cost alone.
fn kept_freed_memory(s: &mut String, r: &Runner, meta: &[&Model]) {
    let have = meta
        .iter()
        .any(|m| r.get(Row::OnnxKept, &m.key, Op::ParseMem).is_some());
    if !have {
        return;
    }
    let vars: Vec<String> = KEEP_FREED.iter().map(|(k, v)| format!("{k}={v}")).collect();
    writeln!(
        s,
        "\nThe same with glibc's malloc keeping freed memory in both processes (`{}`: freed \
         memory is neither given back to the kernel nor mapped afresh, so a repeated parse finds \
         it faulted in; with the defaults upb's arena is faulted in again on every parse). Warm: \
         best wall time · best CPU time; ratio by CPU time (upb's ÷ onnx_light's):\n",
        vars.join(" ")
    )
    .unwrap();
    writeln!(
        s,
        "| model | parse warm: onnx_light · upb · ratio | serialize warm: onnx_light · upb · ratio | parse cold: onnx_light · upb · ratio |\n|---|---|---|---|"
    )
    .unwrap();
    for m in meta {
        let k = m.key.as_str();
        let cell = |op: Op| {
            let get = |row: Row| r.get(row, k, op).zip(r.cpu(row, k, op));
            let (own, upb) = (get(Row::Light1Kept), get(Row::OnnxKept));
            let one = |x: Option<((u64, u64, u64), u64)>| {
                x.map_or("n/a".into(), |((ns, _, _), cpu)| {
                    format!("{} ({} CPU)", fmt_time(ns), fmt_time(cpu))
                })
            };
            format!(
                "{} · {} · {}",
                one(own),
                one(upb),
                fmt_ratio(ratio(upb.map(|x| x.1), own.map(|x| x.1)))
            )
        };
        let cold = (
            r.first(Row::Light1Kept, k, Op::ParseMem),
            r.first(Row::OnnxKept, k, Op::ParseMem),
        );
        writeln!(
            s,
            "| ({}) {} | {} | {} | {} · {} · {} |",
            m.key,
            m.label,
            cell(Op::ParseMem),
            cell(Op::SerializeMem),
            cold.0.map_or("n/a".into(), fmt_time),
            cold.1.map_or("n/a".into(), fmt_time),
            fmt_ratio(ratio(cold.1, cold.0)),
        )
        .unwrap();
    }
}

/// Alignment of (a)'s aligned save (`SerializeOptions::inline_alignment`).
const ALIGNED_SAVE: u64 = 4096;

/// Where (a)'s aligned save is: beside it.
fn aligned_copy(path: &Path) -> PathBuf {
    path.with_extension("aligned.onnx")
}

/// A no-copy load with the default options.
fn light_no_copy() -> onnx_light::ParseOptions {
    onnx_light::ParseOptions {
        no_copy: true,
        ..Default::default()
    }
}

/// The aligned-placement section: copy loads of model (a) with `ParseOptions::alignment` 64
/// (the default: every payload at a multiple of 64) against 1 (payloads wherever they fall),
/// measured in alternating runs; and what no-copy loads copied for alignment.
fn aligned_placement(s: &mut String, r: &Runner, models: &[Model]) {
    let Some(a) = models.iter().find(|m| m.key == "a") else {
        return;
    };
    let n = r.threads;
    writeln!(
        s,
        "### Aligned placement (model (a), {})\n\nCopy load with `ParseOptions::alignment` 64 (the \
         default) vs 1, runs alternating; cold = first load in a fresh process, warm = best of the \
         later loads in it, CPU = best CPU time (user + system, all threads) of a load. Target: \
         aligned ≤ 1.05× unaligned.\n",
        fmt_mib(a.size)
    )
    .unwrap();
    writeln!(
        s,
        "| onnx_light copy load | alignment 64 | alignment 1 | 64 ÷ 1 | verdict (≤ 1.05×) |\n|---|---|---|---|---|"
    )
    .unwrap();
    let cell = |row: Row, op: Op| match r.results.get(&(row, "a".to_string(), op)) {
        Some(Cell::Ok {
            ns,
            first_ns,
            cpu_ns,
            ..
        }) => Some((*first_ns, *ns, *cpu_ns)),
        _ => None,
    };
    for (row, who) in [
        (Row::Light1, "1 thread".to_string()),
        (Row::LightN, format!("{n} threads")),
    ] {
        let (x, y) = (cell(row, Op::LoadCopy), cell(row, Op::LoadCopyAlign1));
        type Pick = fn((u64, u64, u64)) -> u64;
        let pick: [(&str, Pick); 3] = [
            ("cold, wall", |c| c.0),
            ("warm, wall", |c| c.1),
            ("CPU", |c| c.2),
        ];
        for (what, f) in pick {
            let (a64, a1) = (x.map(f), y.map(f));
            let q = ratio(a64, a1);
            writeln!(
                s,
                "| {who}, {what} | {} | {} | {} | {} |",
                a64.map_or("n/a".into(), fmt_time),
                a1.map_or("n/a".into(), fmt_time),
                fmt_ratio(q),
                verdict(q.map(|q| q <= 1.05)),
            )
            .unwrap();
        }
    }
    let nc = |row: Row, op: Op| match r.results.get(&(row, "a".to_string(), op)) {
        Some(Cell::Ok { ns, realigned, .. }) => format!(
            "{} ({} tensors copied for alignment)",
            fmt_time(*ns),
            realigned.map_or("n/a".into(), |x| x.to_string())
        ),
        _ => "n/a".into(),
    };
    writeln!(
        s,
        "\nNo-copy load of (a), best of 5 in a process: alignment 64 — 1 thread {}, {n} threads {}; \
         alignment 1 — 1 thread {}, {n} threads {}.\n",
        nc(Row::Light1, Op::LoadNoCopy),
        nc(Row::LightN, Op::LoadNoCopy),
        nc(Row::Light1, Op::LoadNoCopyAlign1),
        nc(Row::LightN, Op::LoadNoCopyAlign1),
    )
    .unwrap();
    aligned_save_rows(s, r);
}

/// No-copy loads (default options: `alignment` 64) of (a) as generated (protobuf's layout) and
/// saved with `inline_alignment` [`ALIGNED_SAVE`]: cold = first load in a fresh process, warm
/// = best of 5 in it, with the peak RSS and the tensors copied for alignment.
fn aligned_save_rows(s: &mut String, r: &Runner) {
    writeln!(
        s,
        "No-copy load (default options) of (a) saved plain (protobuf's layout) vs aligned \
         (`SerializeOptions::inline_alignment` {ALIGNED_SAVE}), fresh processes. Target: aligned < 1 ms.\n\n\
         | onnx_light no-copy load of (a) | plain: cold · warm · peak RSS · copied | aligned: cold · warm · peak RSS · copied | verdict (aligned warm < 1 ms) |\n|---|---|---|---|"
    )
    .unwrap();
    let cell = |row: Row, op: Op| match r.results.get(&(row, "a".to_string(), op)) {
        Some(Cell::Ok {
            ns,
            first_ns,
            hwm_kb,
            realigned,
            ..
        }) => (
            format!(
                "{} · {} · {} MiB · {}",
                fmt_time(*first_ns),
                fmt_time(*ns),
                hwm_kb / 1024,
                realigned.map_or("n/a".into(), |x| x.to_string())
            ),
            Some(*ns),
        ),
        _ => ("n/a".into(), None),
    };
    for (row, who) in [
        (Row::Light1, "1 thread".to_string()),
        (Row::LightN, format!("{} threads", r.threads)),
    ] {
        let (plain, aligned) = (cell(row, Op::LoadNoCopy), cell(row, Op::LoadNoCopyAligned));
        writeln!(
            s,
            "| {who} | {} | {} | {} |",
            plain.0,
            aligned.0,
            verdict(aligned.1.map(|ns| ns < 1_000_000)),
        )
        .unwrap();
    }
    writeln!(s).unwrap();
}
