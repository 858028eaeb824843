//! Element types, their memory layout and the rounding the device applies to each.
//!
//! Every element is held as an `f64` between operations; after each operation the result is
//! rounded to its element type ([`DType::round`]), which is where the device rounds: an op
//! whose result type is bf16 gives a bf16-representable value (computed in f32, then rounded
//! to nearest even), an f32 op an f32 value, an integer op a value wrapped to its width.

/// Element types a program computes with and moves to and from memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    F16,
    Bf16,
    F64,
    I8,
    I16,
    I32,
    I64,
    U8,
    /// Booleans (comparison results, masks): 0 or 1.
    I1,
}

impl DType {
    /// Indexed by the binary code of each type.
    const ALL: [DType; 10] = [
        DType::F32,
        DType::F16,
        DType::Bf16,
        DType::F64,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::I1,
    ];

    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::Bf16 => "bf16",
            DType::F64 => "f64",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U8 => "u8",
            DType::I1 => "i1",
        }
    }

    pub fn parse(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }

    /// Bytes one element takes in memory (booleans are stored as bytes, as Triton does).
    pub fn size(self) -> usize {
        match self {
            DType::I8 | DType::U8 | DType::I1 => 1,
            DType::F16 | DType::Bf16 | DType::I16 => 2,
            DType::F32 | DType::I32 => 4,
            DType::F64 | DType::I64 => 8,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::Bf16 | DType::F64)
    }

    /// Bits of an integer type (floats: their storage width).
    pub fn bits(self) -> u32 {
        match self {
            DType::I1 => 1,
            _ => self.size() as u32 * 8,
        }
    }

    pub(crate) fn code(self) -> u32 {
        DType::ALL.iter().position(|d| *d == self).unwrap_or(0) as u32
    }

    pub(crate) fn from_code(code: u32) -> Option<DType> {
        DType::ALL.get(code as usize).copied()
    }

    /// Reads one element from the start of `b` (at least [`DType::size`] bytes).
    pub fn read(self, b: &[u8]) -> f64 {
        match self {
            DType::F32 => f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
            DType::F16 => f16_to_f32(u16::from_le_bytes([b[0], b[1]])) as f64,
            DType::Bf16 => bf16_to_f32(u16::from_le_bytes([b[0], b[1]])) as f64,
            DType::F64 => f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
            DType::I8 => b[0] as i8 as f64,
            DType::I16 => i16::from_le_bytes([b[0], b[1]]) as f64,
            DType::I32 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
            DType::I64 => {
                i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]) as f64
            }
            DType::U8 => b[0] as f64,
            DType::I1 => f64::from(u8::from(b[0] != 0)),
        }
    }

    /// Writes one element (already rounded to this type) to the start of `b`.
    pub fn write(self, v: f64, b: &mut [u8]) {
        match self {
            DType::F32 => b[..4].copy_from_slice(&(v as f32).to_le_bytes()),
            DType::F16 => b[..2].copy_from_slice(&f32_to_f16(v as f32).to_le_bytes()),
            DType::Bf16 => b[..2].copy_from_slice(&f32_to_bf16(v as f32).to_le_bytes()),
            DType::F64 => b[..8].copy_from_slice(&v.to_le_bytes()),
            DType::I8 => b[0] = wrap(v, 8) as i8 as u8,
            DType::I16 => b[..2].copy_from_slice(&(wrap(v, 16) as i16).to_le_bytes()),
            DType::I32 => b[..4].copy_from_slice(&(wrap(v, 32) as i32).to_le_bytes()),
            DType::I64 => b[..8].copy_from_slice(&(v as i64).to_le_bytes()),
            DType::U8 => b[0] = wrap(v, 8) as u8,
            DType::I1 => b[0] = u8::from(v != 0.0),
        }
    }

    /// `v` rounded to this type: floats to nearest even (narrow floats through f32, as the
    /// device computes them in f32 and rounds the result), integers wrapped to their width
    /// (two's complement), booleans to 0/1.
    pub fn round(self, v: f64) -> f64 {
        match self {
            DType::F64 => v,
            DType::F32 => v as f32 as f64,
            DType::Bf16 => bf16_to_f32(f32_to_bf16(v as f32)) as f64,
            DType::F16 => f16_to_f32(f32_to_f16(v as f32)) as f64,
            DType::U8 => (wrap(v, 8) as u8) as f64,
            DType::I1 => f64::from(u8::from(v != 0.0)),
            _ => wrap(v, self.bits()) as f64,
        }
    }

    /// The value of an integer element seen as unsigned of this width.
    pub fn unsigned(self, v: f64) -> u64 {
        let bits = self.bits();
        let x = v as i64 as u64;
        if bits >= 64 {
            x
        } else {
            x & ((1u64 << bits) - 1)
        }
    }
}

/// An integer value wrapped to `bits` (two's complement, sign-extended). Non-finite inputs
/// give 0, as a saturating conversion to i64 would not be representative anyway.
pub(crate) fn wrap(v: f64, bits: u32) -> i64 {
    if !v.is_finite() {
        return 0;
    }
    let x = v as i64;
    if bits >= 64 {
        return x;
    }
    let shift = 64 - bits;
    (x << shift) >> shift
}

pub fn bf16_to_f32(h: u16) -> f32 {
    f32::from_bits(u32::from(h) << 16)
}

pub fn f32_to_bf16(v: f32) -> u16 {
    if v.is_nan() {
        return 0x7fc0 | ((v.to_bits() >> 16) as u16 & 0x8000);
    }
    let bits = v.to_bits();
    let round = 0x7fff + ((bits >> 16) & 1);
    (bits.wrapping_add(round) >> 16) as u16
}

pub fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h >> 15) & 1) as u32;
    let exp = ((h >> 10) & 0x1f) as u32;
    let frac = (h & 0x3ff) as u32;
    let bits = match (exp, frac) {
        (0, 0) => sign << 31,
        (0, f) => {
            // Subnormal: value = f × 2^-24.
            let v = f as f32 * 2f32.powi(-24);
            return if sign == 1 { -v } else { v };
        }
        (0x1f, f) => (sign << 31) | (0xff << 23) | (f << 13),
        (e, f) => (sign << 31) | ((e + 112) << 23) | (f << 13),
    };
    f32::from_bits(bits)
}

pub fn f32_to_f16(v: f32) -> u16 {
    let bits = v.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    if v.is_nan() {
        return sign | 0x7e00;
    }
    let a = v.abs();
    if a >= 65520.0 {
        return sign | 0x7c00;
    }
    if a < 2f32.powi(-24) * 0.5 {
        return sign;
    }
    if a < 2f32.powi(-14) {
        return sign | (a / 2f32.powi(-24)).round_ties_even() as u16;
    }
    let exp = ((bits >> 23) & 0xff) as i32 - 127 + 15;
    let mant = bits & 0x7f_ffff;
    let mut half = ((exp as u32) << 10) | (mant >> 13);
    let rest = mant & 0x1fff;
    if rest > 0x1000 || (rest == 0x1000 && half & 1 == 1) {
        half += 1;
    }
    sign | half as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_precision_conversions() {
        for v in [0.0f32, 1.0, -2.5, 65504.0, 6.1035156e-5, 5.9604645e-8] {
            assert_eq!(f16_to_f32(f32_to_f16(v)), v, "{v}");
        }
        assert_eq!(f32_to_bf16(1.0), 0x3f80);
        assert!(f16_to_f32(f32_to_f16(f32::NAN)).is_nan());
    }

    #[test]
    fn rounding_per_type() {
        // 1 + 2^-8 is not a bf16: ties to even gives 1.0; 1 + 3·2^-9 rounds up.
        assert_eq!(DType::Bf16.round(1.0 + 2f64.powi(-8)), 1.0);
        assert_eq!(
            DType::Bf16.round(1.0 + 3.0 * 2f64.powi(-9)),
            1.0 + 2f64.powi(-7)
        );
        assert_eq!(DType::F32.round(0.1), 0.1f32 as f64);
        assert_eq!(DType::I8.round(130.0), -126.0);
        assert_eq!(DType::I32.round(2f64.powi(31)), -(2f64.powi(31)));
        assert_eq!(DType::U8.round(-1.0), 255.0);
        assert_eq!(DType::I1.round(5.0), 1.0);
        assert_eq!(DType::I8.unsigned(-1.0), 255);
    }

    #[test]
    fn memory_round_trip() {
        for (t, v) in [
            (DType::F32, -1.5),
            (DType::Bf16, 3.0),
            (DType::F16, 0.25),
            (DType::I8, -7.0),
            (DType::I16, 300.0),
            (DType::I32, -70000.0),
            (DType::I64, 1e12),
            (DType::U8, 200.0),
            (DType::F64, 0.1),
            (DType::I1, 1.0),
        ] {
            let mut b = [0u8; 8];
            t.write(v, &mut b);
            assert_eq!(t.read(&b), v, "{t:?}");
            assert_eq!(DType::from_code(t.code()), Some(t));
            assert_eq!(DType::parse(t.name()), Some(t));
        }
    }
}
