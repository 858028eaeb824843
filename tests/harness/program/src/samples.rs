//! Ready-made one-block programs over `n` elements, for tests that exercise the devices'
//! dispatch contract rather than a kernel (what a Triton kernel of one program with
//! `BLOCK = n` compiles to).

use std::fmt::Write;

/// Builds the text form op by op.
struct Builder {
    text: String,
    next: u32,
    n: usize,
    range: u32,
}

impl Builder {
    fn new(args: u8, n: usize) -> Builder {
        let mut b = Builder {
            text: format!("args {args}\n"),
            next: 0,
            n,
            range: 0,
        };
        b.range = b.op(&format!("range 0 {n}"));
        b
    }

    fn op(&mut self, body: &str) -> u32 {
        let _ = writeln!(self.text, "%{} = {body}", self.next);
        self.next += 1;
        self.next - 1
    }

    fn pointers(&mut self, arg: u8, elem: &str) -> u32 {
        let p = self.op(&format!("ptr arg{arg} {elem}"));
        let s = self.op(&format!("splat %{p} [{}]", self.n));
        self.op(&format!("addptr %{s} %{}", self.range))
    }

    fn load(&mut self, arg: u8, elem: &str) -> u32 {
        let p = self.pointers(arg, elem);
        self.op(&format!("load %{p}"))
    }

    fn constant(&mut self, value: f32) -> u32 {
        self.op(&format!("const f32 [{}] {value:?}", self.n))
    }

    fn store(mut self, arg: u8, elem: &str, value: u32) -> Builder {
        let p = self.pointers(arg, elem);
        let _ = writeln!(self.text, "store %{p} %{value}");
        self
    }
}

/// `out = a <op> b` over f32 (`op`: `addf`, `subf`, `mulf`, …; arguments a, b, out).
pub fn binary_f32(op: &str, n: usize) -> String {
    let mut b = Builder::new(3, n);
    let (x, y) = (b.load(0, "f32"), b.load(1, "f32"));
    let r = b.op(&format!("{op} %{x} %{y}"));
    b.store(2, "f32", r).text
}

/// `out = a + b` over f32.
pub fn add_f32(n: usize) -> String {
    binary_f32("addf", n)
}

/// `out = a * 2 - b` with `a` i32 and `b`, `out` f32.
pub fn scale_sub(n: usize) -> String {
    let mut b = Builder::new(3, n);
    let a = b.load(0, "i32");
    let af = b.op(&format!("sitofp %{a} f32"));
    let two = b.constant(2.0);
    let scaled = b.op(&format!("mulf %{af} %{two}"));
    let y = b.load(1, "f32");
    let r = b.op(&format!("subf %{scaled} %{y}"));
    b.store(2, "f32", r).text
}

/// `a = a + 1` in place over f32.
pub fn increment(n: usize) -> String {
    let mut b = Builder::new(1, n);
    let a = b.load(0, "f32");
    let one = b.constant(1.0);
    let r = b.op(&format!("addf %{a} %{one}"));
    b.store(0, "f32", r).text
}

/// `a = a + a` in place over i32.
pub fn double_i32(n: usize) -> String {
    let mut b = Builder::new(1, n);
    let a = b.load(0, "i32");
    let r = b.op(&format!("addi %{a} %{a}"));
    b.store(0, "i32", r).text
}

/// `out = a + b`, and zeros into `a`: a kernel that writes one of its inputs too.
pub fn add_and_clobber(n: usize) -> String {
    let mut b = Builder::new(3, n);
    let (x, y) = (b.load(0, "f32"), b.load(1, "f32"));
    let r = b.op(&format!("addf %{x} %{y}"));
    let zero = b.constant(0.0);
    b.store(2, "f32", r).store(0, "f32", zero).text
}

/// `b = a` and `c = a + a`: two outputs.
pub fn copy_and_double(n: usize) -> String {
    let mut b = Builder::new(3, n);
    let a = b.load(0, "f32");
    let d = b.op(&format!("addf %{a} %{a}"));
    b.store(1, "f32", a).store(2, "f32", d).text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Program;

    #[test]
    fn samples_are_valid_and_compute() {
        for text in [
            add_f32(3),
            scale_sub(3),
            increment(3),
            double_i32(3),
            add_and_clobber(3),
            copy_and_double(3),
        ] {
            Program::parse_text(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        }
        let p = Program::parse_text(&scale_sub(2)).unwrap();
        let mut a: Vec<u8> = [3i32, -1].iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut b: Vec<u8> = [0.5f32, 2.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut out = vec![0u8; 8];
        p.execute(&mut [&mut a, &mut b, &mut out]).unwrap();
        assert_eq!(out[..4], 5.5f32.to_le_bytes());
        assert_eq!(out[4..], (-4.0f32).to_le_bytes());
        assert_eq!(
            Program::parse_text(&add_and_clobber(2))
                .unwrap()
                .written_args(),
            [true, false, true]
        );
    }
}
