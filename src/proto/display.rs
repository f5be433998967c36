//! Human-readable forms of types and shapes, as `onnx.helper` prints them
//! (e.g. `tensor(float)[batch,4]`).

use std::fmt;

use super::{
    DataType, TensorShapeProto, TensorShapeProtoDimensionValue, TypeProto, TypeProtoValue,
};

fn elem_name(t: i32) -> String {
    match DataType::from_i32(t) {
        Some(d) => d.name().to_ascii_lowercase(),
        None => format!("type{t}"),
    }
}

impl fmt::Display for TensorShapeProto {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.dim.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match &d.value {
                Some(TensorShapeProtoDimensionValue::DimValue(v)) => write!(f, "{v}")?,
                Some(TensorShapeProtoDimensionValue::DimParam(p)) => write!(f, "{p}")?,
                None => f.write_str("?")?,
            }
        }
        f.write_str("]")
    }
}

impl fmt::Display for TypeProto {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Types nest without bound (sequences of sequences ...): see `wire::stack`.
        crate::wire::guard_stack(|| self.fmt_guarded(f))
    }
}

impl TypeProto {
    fn fmt_guarded(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value {
            Some(TypeProtoValue::TensorType(t)) => {
                write!(f, "tensor({})", elem_name(t.elem_type()))?;
                if let Some(s) = &t.shape {
                    write!(f, "{s}")?;
                }
                Ok(())
            }
            Some(TypeProtoValue::SparseTensorType(t)) => {
                write!(f, "sparse_tensor({})", elem_name(t.elem_type()))?;
                if let Some(s) = &t.shape {
                    write!(f, "{s}")?;
                }
                Ok(())
            }
            Some(TypeProtoValue::SequenceType(s)) => write!(f, "seq({})", s.elem_type()),
            Some(TypeProtoValue::OptionalType(o)) => write!(f, "optional({})", o.elem_type()),
            Some(TypeProtoValue::MapType(m)) => {
                write!(f, "map({},{})", elem_name(m.key_type()), m.value_type())
            }
            Some(TypeProtoValue::OpaqueType(o)) => write!(f, "opaque({},{})", o.domain(), o.name()),
            None => f.write_str("?"),
        }
    }
}
