//! `TensorProto.DataType`: element types of tensors and their storage sizes.

/// `TensorProto.DataType` (an open enum: `data_type` fields are plain `int32`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
#[allow(missing_docs)]
pub enum DataType {
    Undefined = 0,
    Float = 1,
    Uint8 = 2,
    Int8 = 3,
    Uint16 = 4,
    Int16 = 5,
    Int32 = 6,
    Int64 = 7,
    String = 8,
    Bool = 9,
    Float16 = 10,
    Double = 11,
    Uint32 = 12,
    Uint64 = 13,
    Complex64 = 14,
    Complex128 = 15,
    Bfloat16 = 16,
    Float8e4m3fn = 17,
    Float8e4m3fnuz = 18,
    Float8e5m2 = 19,
    Float8e5m2fnuz = 20,
    Uint4 = 21,
    Int4 = 22,
    Float4e2m1 = 23,
    Float8e8m0 = 24,
    Uint2 = 25,
    Int2 = 26,
    Float6e2m3 = 27,
    Float6e3m2 = 28,
}

const ALL: [DataType; 29] = {
    use DataType::*;
    [
        Undefined,
        Float,
        Uint8,
        Int8,
        Uint16,
        Int16,
        Int32,
        Int64,
        String,
        Bool,
        Float16,
        Double,
        Uint32,
        Uint64,
        Complex64,
        Complex128,
        Bfloat16,
        Float8e4m3fn,
        Float8e4m3fnuz,
        Float8e5m2,
        Float8e5m2fnuz,
        Uint4,
        Int4,
        Float4e2m1,
        Float8e8m0,
        Uint2,
        Int2,
        Float6e2m3,
        Float6e3m2,
    ]
};

impl DataType {
    /// The type with enum value `v`, if known.
    pub fn from_i32(v: i32) -> Option<Self> {
        ALL.get(usize::try_from(v).ok()?).copied()
    }

    /// Bits per element in `raw_data` (0 for UNDEFINED and STRING).
    pub fn bits(self) -> u32 {
        use DataType::*;
        match self {
            Undefined | String => 0,
            Uint2 | Int2 => 2,
            Uint4 | Int4 | Float4e2m1 => 4,
            Float6e2m3 | Float6e3m2 => 6,
            Uint8 | Int8 | Bool | Float8e4m3fn | Float8e4m3fnuz | Float8e5m2 | Float8e5m2fnuz
            | Float8e8m0 => 8,
            Uint16 | Int16 | Float16 | Bfloat16 => 16,
            Float | Int32 | Uint32 => 32,
            Int64 | Double | Uint64 | Complex64 => 64,
            Complex128 => 128,
        }
    }

    /// The ONNX name, e.g. `FLOAT16`.
    pub fn name(self) -> &'static str {
        use DataType::*;
        match self {
            Undefined => "UNDEFINED",
            Float => "FLOAT",
            Uint8 => "UINT8",
            Int8 => "INT8",
            Uint16 => "UINT16",
            Int16 => "INT16",
            Int32 => "INT32",
            Int64 => "INT64",
            String => "STRING",
            Bool => "BOOL",
            Float16 => "FLOAT16",
            Double => "DOUBLE",
            Uint32 => "UINT32",
            Uint64 => "UINT64",
            Complex64 => "COMPLEX64",
            Complex128 => "COMPLEX128",
            Bfloat16 => "BFLOAT16",
            Float8e4m3fn => "FLOAT8E4M3FN",
            Float8e4m3fnuz => "FLOAT8E4M3FNUZ",
            Float8e5m2 => "FLOAT8E5M2",
            Float8e5m2fnuz => "FLOAT8E5M2FNUZ",
            Uint4 => "UINT4",
            Int4 => "INT4",
            Float4e2m1 => "FLOAT4E2M1",
            Float8e8m0 => "FLOAT8E8M0",
            Uint2 => "UINT2",
            Int2 => "INT2",
            Float6e2m3 => "FLOAT6E2M3",
            Float6e3m2 => "FLOAT6E3M2",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip() {
        for (i, t) in ALL.iter().enumerate() {
            assert_eq!(*t as i32, i as i32);
            assert_eq!(DataType::from_i32(i as i32), Some(*t));
        }
        assert_eq!(DataType::from_i32(29), None);
        assert_eq!(DataType::from_i32(-1), None);
    }
}
