//! Ready-made one-block programs over `n` elements, for tests that exercise the devices'
//! dispatch contract rather than a kernel (what a Triton kernel of one program with
//! `BLOCK = n` compiles to).

use std::fmt::Write;

use crate::DType;

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

/// The program the stand-in toolchain makes of upstream's `bare_matmul` examples
/// (`matmul_bf16_m64_n64_k64`, `matmul_i8_m128_n64_k64`): `C = A·B` for row-major `m×k` A and
/// `k×n` B of `input` (`"bf16"`, `"i8"`, …) into C of `acc` (`"f32"`, `"i32"`), one
/// `block_m×block_n` tile of C per program instance (`BLOCK_SIZE_K = k`), and the herd of
/// `herd` cores (columns, rows) that upstream's schedule makes, each computing one
/// `block_m/cols × block_n/rows` tile.
pub fn matmul(
    input: &str,
    acc: &str,
    [m, n, k]: [u32; 3],
    [bm, bn]: [u32; 2],
    herd: [u32; 2],
) -> String {
    let (tm, tn) = (bm / herd[0], bn / herd[1]);
    let compute = format!(
        "tiling {} {} [{bm},{bn},{k}] [{tm},{tn},0]",
        herd[0], herd[1]
    );
    let store = format!("tiling {} {} [{bm},{bn}] [{tm},{tn}]", herd[0], herd[1]);
    format!(
        "args 3\ngrid {gm} {gn} 1\n{store}\n{compute}\n{store}\n\
         %0 = const {acc} [{bm},{bn}] 0.0\n%1 = const i32 [{k},1] {n}\n%2 = const i32 [{bm},1] {k}\n\
         %3 = const i32 [] {bm}\n%4 = program_id 0\n%5 = program_id 1\n%6 = muli %4 %3\n\
         %7 = range 0 {bm}\n%8 = splat %6 [{bm}]\n%9 = addi %8 %7\n%10 = const i32 [] {bn}\n\
         %11 = muli %5 %10\n%12 = range 0 {bn}\n%13 = splat %11 [{bn}]\n%14 = addi %13 %12\n\
         %15 = range 0 {k}\n%16 = expand_dims %9 1\n%17 = muli %16 %2\n%18 = ptr arg0 {input}\n\
         %19 = splat %18 [{bm},1]\n%20 = addptr %19 %17\n%21 = expand_dims %15 0\n\
         %22 = broadcast %20 [{bm},{k}]\n%23 = broadcast %21 [{bm},{k}]\n%24 = addptr %22 %23\n\
         %25 = load %24\n%26 = expand_dims %15 1\n%27 = muli %26 %1\n%28 = ptr arg1 {input}\n\
         %29 = splat %28 [{k},1]\n%30 = addptr %29 %27\n%31 = expand_dims %14 0\n\
         %32 = broadcast %30 [{k},{bn}]\n%33 = broadcast %31 [{k},{bn}]\n%34 = addptr %32 %33\n\
         %35 = load %34\n%36 = dot %25 %35 %0\n%37 = ptr arg2 {acc}\n%38 = const i32 [{bm},1] {n}\n\
         %39 = muli %16 %38\n%40 = splat %37 [{bm},1]\n%41 = addptr %40 %39\n\
         %42 = broadcast %41 [{bm},{bn}]\n%43 = broadcast %31 [{bm},{bn}]\n%44 = addptr %42 %43\n\
         store %44 %36\n",
        gm = m.div_ceil(bm),
        gn = n.div_ceil(bn),
    )
}

/// Deterministic operands for the samples (xorshift): `n` values of `scale · (an integer in
/// -range..range)`, rounded to `t`.
pub fn values(t: DType, n: usize, seed: u64, range: i64, scale: f64) -> Vec<f64> {
    let mut state = seed | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let v = (state % (2 * range as u64)) as i64 - range;
            t.round(v as f64 * scale)
        })
        .collect()
}

/// `v` as a buffer of `t` elements.
pub fn bytes(t: DType, v: &[f64]) -> Vec<u8> {
    let mut out = vec![0u8; v.len() * t.size()];
    for (x, chunk) in v.iter().zip(out.chunks_exact_mut(t.size())) {
        t.write(*x, chunk);
    }
    out
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
