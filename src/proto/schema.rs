//! The ONNX schema as ONE table: every message of `onnx.proto` (onnx 1.23, proto2) and of
//! `onnx-data.proto`, with field numbers, types, labels, packing and oneofs.
//!
//! Everything message-shaped in this crate is generated from this table by the `codegen` crate
//! (`cargo run -p codegen`): the Rust structs and their codec (`src/proto/generated.rs`), and the
//! C accessors. A test fails when the generated files are stale. The table is also compiled into
//! the library so tools can reflect on it (field names for paths, the `info` command).
//!
//! Messages are listed in the order of `onnx.proto`; fields in declaration order (the generator
//! sorts them by number where the wire format needs it).

/// The value type of a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `int64` (varint, two's complement).
    Int64,
    /// `int32` (varint; negative values are sign-extended to 10 bytes).
    Int32,
    /// `uint64` (varint).
    UInt64,
    /// `float` (fixed32).
    Float,
    /// `double` (fixed64).
    Double,
    /// `string` (proto2: not validated as UTF-8, kept as bytes).
    String,
    /// `bytes`.
    Bytes,
    /// `bytes` holding a tensor payload: stored as a [`crate::ByteSpan`] (owned or borrowed).
    Payload,
    /// A closed proto2 enum (values outside `values` are kept as unknown fields).
    Enum(&'static EnumDef),
    /// An embedded message, by its full name (e.g. `TensorProto.Segment`).
    Message(&'static str),
}

/// Whether a field is optional (with presence) or repeated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Label {
    /// `optional`: has presence; written when set, even to its default.
    Optional,
    /// `repeated`.
    Repeated,
}

/// A closed enum of the schema.
#[derive(Debug, PartialEq, Eq)]
pub struct EnumDef {
    /// Full name, e.g. `AttributeProto.AttributeType`.
    pub name: &'static str,
    /// `(name, value)` pairs.
    pub values: &'static [(&'static str, i32)],
}

/// One field of a message.
#[derive(Debug)]
pub struct FieldDef {
    /// Field name as in the .proto file.
    pub name: &'static str,
    /// Field number.
    pub number: u32,
    /// Value type.
    pub kind: Kind,
    /// Optional or repeated.
    pub label: Label,
    /// `[packed = true]` in the schema (repeated scalars only).
    pub packed: bool,
    /// Name of the oneof this field belongs to, if any.
    pub oneof: Option<&'static str>,
}

/// One message.
#[derive(Debug)]
pub struct MessageDef {
    /// Full name, e.g. `TensorProto.Segment`.
    pub name: &'static str,
    /// Fields in declaration order.
    pub fields: &'static [FieldDef],
}

impl MessageDef {
    /// The field with number `number`, if the message has one.
    pub fn field(&self, number: u32) -> Option<&'static FieldDef> {
        self.fields.iter().find(|f| f.number == number)
    }
}

/// The message named `name`.
pub fn message(name: &str) -> Option<&'static MessageDef> {
    MESSAGES.iter().find(|m| m.name == name)
}

const fn opt(name: &'static str, number: u32, kind: Kind) -> FieldDef {
    FieldDef {
        name,
        number,
        kind,
        label: Label::Optional,
        packed: false,
        oneof: None,
    }
}
const fn rep(name: &'static str, number: u32, kind: Kind) -> FieldDef {
    FieldDef {
        name,
        number,
        kind,
        label: Label::Repeated,
        packed: false,
        oneof: None,
    }
}
const fn packed(name: &'static str, number: u32, kind: Kind) -> FieldDef {
    FieldDef {
        name,
        number,
        kind,
        label: Label::Repeated,
        packed: true,
        oneof: None,
    }
}
const fn one(oneof: &'static str, name: &'static str, number: u32, kind: Kind) -> FieldDef {
    FieldDef {
        name,
        number,
        kind,
        label: Label::Optional,
        packed: false,
        oneof: Some(oneof),
    }
}

use Kind::*;

/// `AttributeProto.AttributeType` (closed).
pub static ATTRIBUTE_TYPE: EnumDef = EnumDef {
    name: "AttributeProto.AttributeType",
    values: &[
        ("UNDEFINED", 0),
        ("FLOAT", 1),
        ("INT", 2),
        ("STRING", 3),
        ("TENSOR", 4),
        ("GRAPH", 5),
        ("SPARSE_TENSOR", 11),
        ("TYPE_PROTO", 13),
        ("FLOATS", 6),
        ("INTS", 7),
        ("STRINGS", 8),
        ("TENSORS", 9),
        ("GRAPHS", 10),
        ("SPARSE_TENSORS", 12),
        ("TYPE_PROTOS", 14),
    ],
};

/// `TensorProto.DataLocation` (closed).
pub static DATA_LOCATION: EnumDef = EnumDef {
    name: "TensorProto.DataLocation",
    values: &[("DEFAULT", 0), ("EXTERNAL", 1)],
};

/// Every message, in `onnx.proto` order, then `onnx-data.proto`.
pub static MESSAGES: &[MessageDef] = &[
    MessageDef {
        name: "AttributeProto",
        fields: &[
            opt("name", 1, String),
            opt("ref_attr_name", 21, String),
            opt("doc_string", 13, String),
            opt("type", 20, Enum(&ATTRIBUTE_TYPE)),
            opt("f", 2, Float),
            opt("i", 3, Int64),
            opt("s", 4, Bytes),
            opt("t", 5, Message("TensorProto")),
            opt("g", 6, Message("GraphProto")),
            opt("sparse_tensor", 22, Message("SparseTensorProto")),
            opt("tp", 14, Message("TypeProto")),
            rep("floats", 7, Float),
            rep("ints", 8, Int64),
            rep("strings", 9, Bytes),
            rep("tensors", 10, Message("TensorProto")),
            rep("graphs", 11, Message("GraphProto")),
            rep("sparse_tensors", 23, Message("SparseTensorProto")),
            rep("type_protos", 15, Message("TypeProto")),
        ],
    },
    MessageDef {
        name: "ValueInfoProto",
        fields: &[
            opt("name", 1, String),
            opt("type", 2, Message("TypeProto")),
            opt("doc_string", 3, String),
            rep("metadata_props", 4, Message("StringStringEntryProto")),
        ],
    },
    MessageDef {
        name: "NodeProto",
        fields: &[
            rep("input", 1, String),
            rep("output", 2, String),
            opt("name", 3, String),
            opt("op_type", 4, String),
            opt("domain", 7, String),
            opt("overload", 8, String),
            rep("attribute", 5, Message("AttributeProto")),
            opt("doc_string", 6, String),
            rep("metadata_props", 9, Message("StringStringEntryProto")),
            rep(
                "device_configurations",
                10,
                Message("NodeDeviceConfigurationProto"),
            ),
        ],
    },
    MessageDef {
        name: "IntIntListEntryProto",
        fields: &[opt("key", 1, Int64), rep("value", 2, Int64)],
    },
    MessageDef {
        name: "NodeDeviceConfigurationProto",
        fields: &[
            opt("configuration_id", 1, String),
            rep("sharding_spec", 2, Message("ShardingSpecProto")),
            opt("pipeline_stage", 3, Int32),
        ],
    },
    MessageDef {
        name: "ShardingSpecProto",
        fields: &[
            opt("tensor_name", 1, String),
            rep("device", 2, Int64),
            rep(
                "index_to_device_group_map",
                3,
                Message("IntIntListEntryProto"),
            ),
            rep("sharded_dim", 4, Message("ShardedDimProto")),
        ],
    },
    MessageDef {
        name: "ShardedDimProto",
        fields: &[
            opt("axis", 1, Int64),
            rep("simple_sharding", 2, Message("SimpleShardedDimProto")),
        ],
    },
    MessageDef {
        name: "SimpleShardedDimProto",
        fields: &[
            one("dim", "dim_value", 1, Int64),
            one("dim", "dim_param", 2, String),
            opt("num_shards", 3, Int64),
        ],
    },
    MessageDef {
        name: "TrainingInfoProto",
        fields: &[
            opt("initialization", 1, Message("GraphProto")),
            opt("algorithm", 2, Message("GraphProto")),
            rep(
                "initialization_binding",
                3,
                Message("StringStringEntryProto"),
            ),
            rep("update_binding", 4, Message("StringStringEntryProto")),
        ],
    },
    MessageDef {
        name: "ModelProto",
        fields: &[
            opt("ir_version", 1, Int64),
            rep("opset_import", 8, Message("OperatorSetIdProto")),
            opt("producer_name", 2, String),
            opt("producer_version", 3, String),
            opt("domain", 4, String),
            opt("model_version", 5, Int64),
            opt("doc_string", 6, String),
            opt("graph", 7, Message("GraphProto")),
            rep("metadata_props", 14, Message("StringStringEntryProto")),
            rep("training_info", 20, Message("TrainingInfoProto")),
            rep("functions", 25, Message("FunctionProto")),
            rep("configuration", 26, Message("DeviceConfigurationProto")),
        ],
    },
    MessageDef {
        name: "DeviceConfigurationProto",
        fields: &[
            opt("name", 1, String),
            opt("num_devices", 2, Int32),
            rep("device", 3, String),
        ],
    },
    MessageDef {
        name: "StringStringEntryProto",
        fields: &[opt("key", 1, String), opt("value", 2, String)],
    },
    MessageDef {
        name: "TensorAnnotation",
        fields: &[
            opt("tensor_name", 1, String),
            rep(
                "quant_parameter_tensor_names",
                2,
                Message("StringStringEntryProto"),
            ),
        ],
    },
    MessageDef {
        name: "GraphProto",
        fields: &[
            rep("node", 1, Message("NodeProto")),
            opt("name", 2, String),
            rep("initializer", 5, Message("TensorProto")),
            rep("sparse_initializer", 15, Message("SparseTensorProto")),
            opt("doc_string", 10, String),
            rep("input", 11, Message("ValueInfoProto")),
            rep("output", 12, Message("ValueInfoProto")),
            rep("value_info", 13, Message("ValueInfoProto")),
            rep("quantization_annotation", 14, Message("TensorAnnotation")),
            rep("metadata_props", 16, Message("StringStringEntryProto")),
        ],
    },
    MessageDef {
        name: "TensorProto",
        fields: &[
            rep("dims", 1, Int64),
            opt("data_type", 2, Int32),
            opt("segment", 3, Message("TensorProto.Segment")),
            packed("float_data", 4, Float),
            packed("int32_data", 5, Int32),
            rep("string_data", 6, Bytes),
            packed("int64_data", 7, Int64),
            opt("name", 8, String),
            opt("doc_string", 12, String),
            opt("raw_data", 9, Payload),
            rep("external_data", 13, Message("StringStringEntryProto")),
            opt("data_location", 14, Enum(&DATA_LOCATION)),
            packed("double_data", 10, Double),
            packed("uint64_data", 11, UInt64),
            rep("metadata_props", 16, Message("StringStringEntryProto")),
        ],
    },
    MessageDef {
        name: "TensorProto.Segment",
        fields: &[opt("begin", 1, Int64), opt("end", 2, Int64)],
    },
    MessageDef {
        name: "SparseTensorProto",
        fields: &[
            opt("values", 1, Message("TensorProto")),
            opt("indices", 2, Message("TensorProto")),
            rep("dims", 3, Int64),
        ],
    },
    MessageDef {
        name: "TensorShapeProto",
        fields: &[rep("dim", 1, Message("TensorShapeProto.Dimension"))],
    },
    MessageDef {
        name: "TensorShapeProto.Dimension",
        fields: &[
            one("value", "dim_value", 1, Int64),
            one("value", "dim_param", 2, String),
            opt("denotation", 3, String),
        ],
    },
    MessageDef {
        name: "TypeProto",
        fields: &[
            one("value", "tensor_type", 1, Message("TypeProto.Tensor")),
            one("value", "sequence_type", 4, Message("TypeProto.Sequence")),
            one("value", "map_type", 5, Message("TypeProto.Map")),
            one("value", "optional_type", 9, Message("TypeProto.Optional")),
            one(
                "value",
                "sparse_tensor_type",
                8,
                Message("TypeProto.SparseTensor"),
            ),
            one("value", "opaque_type", 7, Message("TypeProto.Opaque")),
            opt("denotation", 6, String),
        ],
    },
    MessageDef {
        name: "TypeProto.Tensor",
        fields: &[
            opt("elem_type", 1, Int32),
            opt("shape", 2, Message("TensorShapeProto")),
        ],
    },
    MessageDef {
        name: "TypeProto.Sequence",
        fields: &[opt("elem_type", 1, Message("TypeProto"))],
    },
    MessageDef {
        name: "TypeProto.Map",
        fields: &[
            opt("key_type", 1, Int32),
            opt("value_type", 2, Message("TypeProto")),
        ],
    },
    MessageDef {
        name: "TypeProto.Optional",
        fields: &[opt("elem_type", 1, Message("TypeProto"))],
    },
    MessageDef {
        name: "TypeProto.SparseTensor",
        fields: &[
            opt("elem_type", 1, Int32),
            opt("shape", 2, Message("TensorShapeProto")),
        ],
    },
    MessageDef {
        name: "TypeProto.Opaque",
        fields: &[opt("domain", 1, String), opt("name", 2, String)],
    },
    MessageDef {
        name: "OperatorSetIdProto",
        fields: &[opt("domain", 1, String), opt("version", 2, Int64)],
    },
    MessageDef {
        name: "FunctionProto",
        fields: &[
            opt("name", 1, String),
            rep("input", 4, String),
            rep("output", 5, String),
            rep("attribute", 6, String),
            rep("attribute_proto", 11, Message("AttributeProto")),
            rep("node", 7, Message("NodeProto")),
            opt("doc_string", 8, String),
            rep("opset_import", 9, Message("OperatorSetIdProto")),
            opt("domain", 10, String),
            opt("overload", 13, String),
            rep("value_info", 12, Message("ValueInfoProto")),
            rep("metadata_props", 14, Message("StringStringEntryProto")),
        ],
    },
    MessageDef {
        name: "SequenceProto",
        fields: &[
            opt("name", 1, String),
            opt("elem_type", 2, Int32),
            rep("tensor_values", 3, Message("TensorProto")),
            rep("sparse_tensor_values", 4, Message("SparseTensorProto")),
            rep("sequence_values", 5, Message("SequenceProto")),
            rep("map_values", 6, Message("MapProto")),
            rep("optional_values", 7, Message("OptionalProto")),
        ],
    },
    MessageDef {
        name: "MapProto",
        fields: &[
            opt("name", 1, String),
            opt("key_type", 2, Int32),
            rep("keys", 3, Int64),
            rep("string_keys", 4, Bytes),
            opt("values", 5, Message("SequenceProto")),
        ],
    },
    MessageDef {
        name: "OptionalProto",
        fields: &[
            opt("name", 1, String),
            opt("elem_type", 2, Int32),
            opt("tensor_value", 3, Message("TensorProto")),
            opt("sparse_tensor_value", 4, Message("SparseTensorProto")),
            opt("sequence_value", 5, Message("SequenceProto")),
            opt("map_value", 6, Message("MapProto")),
            opt("optional_value", 7, Message("OptionalProto")),
        ],
    },
];
