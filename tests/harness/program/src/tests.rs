use super::*;

/// `out[i] = x[i] + y[i]` for `i < n`, BLOCK 4, one program per block (masked).
const ADD: &str = "args 3
grid 2 1 1
%0 = ptr arg0 f32
%1 = ptr arg1 f32
%2 = ptr arg2 f32
%3 = program_id 0
%4 = const i32 [] 4
%5 = muli %3 %4
%6 = range 0 4
%7 = splat %5 [4]
%8 = addi %7 %6
%9 = const i32 [4] 6
%10 = cmpi slt %8 %9
%11 = splat %0 [4]
%12 = addptr %11 %8
%13 = load %12 mask %10
%14 = splat %1 [4]
%15 = addptr %14 %8
%16 = load %15 mask %10
%17 = addf %13 %16
%18 = splat %2 [4]
%19 = addptr %18 %8
store %19 %17 mask %10
";

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn read_f32s(b: &[u8]) -> Vec<f32> {
    b.chunks(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn read_i32s(b: &[u8]) -> Vec<i32> {
    b.chunks(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn bf16s(v: &[f32]) -> Vec<u8> {
    v.iter()
        .flat_map(|x| f32_to_bf16(*x).to_le_bytes())
        .collect()
}

fn read_bf16s(b: &[u8]) -> Vec<f32> {
    b.chunks(2)
        .map(|c| bf16_to_f32(u16::from_le_bytes([c[0], c[1]])))
        .collect()
}

#[test]
fn text_binary_round_trip() {
    let p = Program::parse_text(ADD).unwrap();
    assert_eq!(p.to_string(), ADD);
    let bytes = p.encode();
    assert_eq!(bytes.len() % 4, 0);
    assert_eq!(Program::decode(&bytes).unwrap(), p);
    let mut padded = bytes.clone();
    padded.extend_from_slice(&[0; 64]);
    assert_eq!(Program::decode(&padded).unwrap(), p);
    assert_eq!(p.written_args(), vec![false, false, true]);
    assert_eq!(p.grids(), vec![[2, 1, 1]]);
}

#[test]
fn every_op_round_trips() {
    let text = "args 2
bf16-emulation
grid 1 2 3
%0 = ptr arg0 bf16
%1 = ptr arg1 f32
%2 = program_id 2
%3 = num_programs 1
%4 = const f32 [2,2] -inf
%5 = const bf16 [2,2] 1.5
%6 = range 0 2
%7 = expand_dims %6 1
%8 = broadcast %7 [2,2]
%9 = trans %8 [1,0]
%10 = reshape %9 [4]
%11 = reshape %10 [2,2]
%12 = splat %0 [2,2]
%13 = addptr %12 %11
%14 = const i1 [2,2] 1
%15 = load %13 mask %14 other %5
%16 = extf %15 f32
%17 = exp2 %16
%18 = cmpf ogt %17 %4
%19 = select %18 %17 %4
%20 = fma %19 %19 %4
%21 = dot %15 %15 %4
%22 = reduce maxnumf %21 1
%23 = sitofp %11 f32
%24 = bitcast %23 i32
%25 = xori %24 %24
%26 = floordivsi %25 %11
%27 = splat %1 [2,2]
%28 = addptr %27 %11
store %28 %20 mask %18
launch
%0 = ptr arg1 f32
%1 = load %0
store %0 %1
";
    let p = Program::parse_text(text).unwrap();
    assert_eq!(p.to_string(), text);
    assert!(p.bf16_emulation);
    assert_eq!(Program::decode(&p.encode()).unwrap(), p);
    assert_eq!(p.launches(), 2);
    assert_eq!(p.grids(), vec![[1, 2, 3], [1, 1, 1]]);
}

#[test]
fn masked_blocks_over_the_grid() {
    let p = Program::parse_text(ADD).unwrap();
    let (mut x, mut y) = (
        f32s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
        f32s(&[10.0, 20.0, 30.0, 40.0, 50.0, 60.0]),
    );
    let mut out = f32s(&[-1.0; 6]);
    p.execute(&mut [&mut x, &mut y, &mut out]).unwrap();
    assert_eq!(read_f32s(&out), [11.0, 22.0, 33.0, 44.0, 55.0, 66.0]);
    // Without the mask the second program reads past the 6 elements: a clear error.
    let unmasked = ADD
        .replace(" mask %10\n%14", "\n%14")
        .replace(" mask %10\n%17", "\n%17")
        .replace("store %19 %17 mask %10", "store %19 %17");
    let p = Program::parse_text(&unmasked).unwrap();
    let err = p
        .execute(&mut [&mut x, &mut y, &mut out])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("program (1, 0, 0)") && err.contains("loads element 6 of argument 0"),
        "{err}"
    );
    let err = p.execute(&mut [&mut x, &mut y]).unwrap_err().to_string();
    assert!(
        err.contains("3 buffer arguments") && err.contains("passed 2"),
        "{err}"
    );
}

#[test]
fn only_the_tiles_the_herd_computes_are_stored() {
    let run = |herd: [u32; 2], domain: &[u32], tiles: &[u32]| {
        let mut p = Program::parse_text(ADD).unwrap();
        p.set_tiling(herd, domain, tiles);
        p.validate().unwrap();
        let (mut x, mut y) = (f32s(&[1.0; 6]), f32s(&[2.0; 6]));
        let mut out = f32s(&[0.0; 6]);
        p.execute(&mut [&mut x, &mut y, &mut out]).unwrap();
        read_f32s(&out)
    };
    // Two cores of two elements each cover the block of 4: everything lands.
    assert_eq!(run([2, 1], &[4], &[2]), [3.0; 6]);
    // Tiles of 3 need two cores too (the second one computes a partial tile).
    assert_eq!(run([2, 1], &[4], &[3]), [3.0; 6]);
    // One core of two: the second half of every block is never written.
    assert_eq!(run([1, 1], &[4], &[2]), [3.0, 3.0, 0.0, 0.0, 3.0, 3.0]);
    // A tiling of another loop space does not describe this block.
    assert_eq!(run([1, 1], &[8], &[2]), [3.0; 6]);
    // Trailing loops that are not split (a matmul's K) are not part of the stored block.
    assert_eq!(
        run([1, 1], &[4, 16], &[2, 0]),
        [3.0, 3.0, 0.0, 0.0, 3.0, 3.0]
    );
}

#[test]
fn herds_that_give_an_element_to_different_cores_do_not_store_it() {
    let run = |herds: &[([u32; 2], Vec<u32>, Vec<u32>)]| {
        let mut p = Program::parse_text(ADD).unwrap();
        p.set_tilings(herds);
        p.validate().unwrap();
        let (mut x, mut y) = (f32s(&[1.0; 6]), f32s(&[2.0; 6]));
        let mut out = f32s(&[0.0; 6]);
        p.execute(&mut [&mut x, &mut y, &mut out]).unwrap();
        read_f32s(&out)
    };
    let halves = ([2, 1], vec![4], vec![2]);
    // Two herds that agree (a prologue and its compute): every element lands.
    assert_eq!(run(&[halves.clone(), halves.clone()]), [3.0; 6]);
    // A herd over another loop space does not take part.
    assert_eq!(run(&[halves.clone(), ([1, 1], vec![8], vec![2])]), [3.0; 6]);
    // One core writes the whole block back: the second half was computed by core 1, so it
    // never reaches core 0's memory.
    assert_eq!(
        run(&[halves.clone(), ([1, 1], vec![4], vec![4])]),
        [3.0, 3.0, 0.0, 0.0, 3.0, 3.0]
    );
}

#[test]
fn a_tiling_maps_split_dimensions_to_herd_columns_then_rows() {
    // A 2x3 block; dimension 0 split into rows of 1 over 1 column, dimension 1 into tiles of 2
    // over 1 row: only row 0's first two elements land.
    let text = format!(
        "args 2\ntiling 1 1 [2,3] [1,2]\n{ROWS}%14 = splat %1 [2,3]\n%15 = addptr %14 %10\n\
         store %15 %13\n"
    );
    let p = Program::parse_text(&text).unwrap();
    let mut x = f32s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let mut out = f32s(&[0.0; 6]);
    p.execute(&mut [&mut x, &mut out]).unwrap();
    assert_eq!(read_f32s(&out), [1.0, 2.0, 0.0, 0.0, 0.0, 0.0]);
    // The whole herd (2 columns x 2 rows) covers it.
    let p = Program::parse_text(&text.replace("tiling 1 1", "tiling 2 2")).unwrap();
    let mut out = f32s(&[0.0; 6]);
    p.execute(&mut [&mut x, &mut out]).unwrap();
    assert_eq!(read_f32s(&out), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
}

#[test]
fn a_tiling_round_trips_and_bad_ones_are_refused() {
    let mut p = Program::parse_text(ADD).unwrap();
    p.set_tiling([4, 1], &[1024], &[256]);
    assert!(
        p.to_string()
            .contains("grid 2 1 1\ntiling 4 1 [1024] [256]\n")
    );
    assert_eq!(Program::parse_text(&p.to_string()).unwrap(), p);
    assert_eq!(Program::decode(&p.encode()).unwrap(), p);
    // Several (one per herd), before the ops, one tile extent per bound, a herd of at least
    // one core.
    assert!(Program::parse_text("args 1\ntiling 1 1 [4] [2]\ntiling 2 1 [4] [2]\n").is_ok());
    for bad in [
        "args 1\n%0 = ptr arg0 f32\ntiling 1 1 [4] [2]\n",
        "args 1\ntiling 1 1 [4,4] [2]\n",
        "args 1\ntiling 0 1 [4] [2]\n",
    ] {
        assert!(Program::parse_text(bad).is_err(), "{bad}");
    }
}

/// A 2×3 row-major block: `x[r, c]` at `r * 3 + c`.
const ROWS: &str = "%0 = ptr arg0 f32
%1 = ptr arg1 f32
%2 = range 0 2
%3 = expand_dims %2 1
%4 = const i32 [2,1] 3
%5 = muli %3 %4
%6 = broadcast %5 [2,3]
%7 = range 0 3
%8 = expand_dims %7 0
%9 = broadcast %8 [2,3]
%10 = addi %6 %9
%11 = splat %0 [2,3]
%12 = addptr %11 %10
%13 = load %12
";

#[test]
fn reductions_along_each_axis() {
    let x = [1.0f32, 2.0, 3.0, 4.0, 5.0, 7.0];
    // axis 1 (per row): sums [6, 16]; axis 0 (per column): maxima [4, 5, 7].
    for (reduce, n, expect) in [
        ("reduce addf %13 1", 2, vec![6.0f32, 16.0]),
        ("reduce maxnumf %13 0", 3, vec![4.0, 5.0, 7.0]),
        ("reduce minimumf %13 0", 3, vec![1.0, 2.0, 3.0]),
    ] {
        let text = format!(
            "args 2\n{ROWS}%14 = {reduce}\n%15 = range 0 {n}\n%16 = splat %1 [{n}]\n\
             %17 = addptr %16 %15\nstore %17 %14\n"
        );
        let p = Program::parse_text(&text).unwrap();
        let (mut a, mut out) = (f32s(&x), f32s(&vec![0.0; n]));
        p.execute(&mut [&mut a, &mut out]).unwrap();
        assert_eq!(read_f32s(&out), expect, "{reduce}");
    }
}

#[test]
fn bf16_rounds_at_every_op_whose_result_is_bf16() {
    // 256 + 1 + 1 in bf16: each addition rounds back to 256 (8 bits of mantissa), while the
    // same sum in f32 is 258.
    let text = "args 2
%0 = ptr arg0 bf16
%1 = ptr arg1 bf16
%2 = range 0 3
%3 = splat %0 [3]
%4 = addptr %3 %2
%5 = load %4
%6 = reduce addf %5 0
store %1 %6
";
    let p = Program::parse_text(text).unwrap();
    let (mut a, mut out) = (bf16s(&[256.0, 1.0, 1.0]), bf16s(&[0.0]));
    p.execute(&mut [&mut a, &mut out]).unwrap();
    assert_eq!(read_bf16s(&out), [256.0]);
    let f32_text = text.replace("bf16", "f32");
    let p = Program::parse_text(&f32_text).unwrap();
    let (mut a, mut out) = (f32s(&[256.0, 1.0, 1.0]), f32s(&[0.0]));
    p.execute(&mut [&mut a, &mut out]).unwrap();
    assert_eq!(read_f32s(&out), [258.0]);
}

/// `c = a·b` for 2×2 blocks with a zero accumulator of `acc`; inputs of type `t`.
fn dot_program(t: &str, acc: &str, emulation: bool) -> Program {
    let text = format!(
        "args 3\n{}%0 = ptr arg0 {t}\n%1 = ptr arg1 {t}\n%2 = ptr arg2 {acc}\n%3 = range 0 2\n\
         %4 = expand_dims %3 1\n%5 = const i32 [2,1] 2\n%6 = muli %4 %5\n%7 = broadcast %6 [2,2]\n\
         %8 = expand_dims %3 0\n%9 = broadcast %8 [2,2]\n%10 = addi %7 %9\n%11 = splat %0 [2,2]\n\
         %12 = addptr %11 %10\n%13 = load %12\n%14 = splat %1 [2,2]\n%15 = addptr %14 %10\n\
         %16 = load %15\n%17 = const {acc} [2,2] 0.0\n%18 = dot %13 %16 %17\n%19 = splat %2 [2,2]\n\
         %20 = addptr %19 %10\nstore %20 %18\n",
        if emulation { "bf16-emulation\n" } else { "" }
    );
    Program::parse_text(&text).unwrap()
}

#[test]
fn dot_accumulates_as_the_device_does() {
    // i8 inputs, i32 accumulator: 100·100 + 100·100 = 20000 does not wrap at i8.
    let p = dot_program("i8", "i32", false);
    let mut a = vec![100u8, 100, 1, 2];
    let mut b = vec![100u8, 3, 100, 4];
    let mut c = vec![0u8; 16];
    p.execute(&mut [&mut a, &mut b, &mut c]).unwrap();
    assert_eq!(read_i32s(&c), [20000, 700, 300, 11]);

    // f32 inputs: exact without emulation; with --bf16-emulation the inputs are rounded to
    // bf16 first (1 + 2^-10 becomes 1).
    let v = 1.0 + 2f32.powi(-10);
    for (emulation, expect) in [(false, v * v), (true, 1.0)] {
        let p = dot_program("f32", "f32", emulation);
        let (mut a, mut b, mut c) = (
            f32s(&[v, 0.0, 0.0, 0.0]),
            f32s(&[v, 0.0, 0.0, 0.0]),
            f32s(&[9.0; 4]),
        );
        p.execute(&mut [&mut a, &mut b, &mut c]).unwrap();
        assert_eq!(
            read_f32s(&c),
            [expect, 0.0, 0.0, 0.0],
            "emulation {emulation}"
        );
    }

    // bf16 inputs, f32 accumulator: the sum keeps what bf16 could not.
    let p = dot_program("bf16", "f32", false);
    let (mut a, mut b, mut c) = (
        bf16s(&[256.0, 1.0, 0.0, 0.0]),
        bf16s(&[1.0, 0.0, 1.0, 0.0]),
        f32s(&[0.0; 4]),
    );
    p.execute(&mut [&mut a, &mut b, &mut c]).unwrap();
    assert_eq!(read_f32s(&c), [257.0, 0.0, 0.0, 0.0]);
}

#[test]
fn elementwise_math_casts_and_selects() {
    let text = "args 2
%0 = ptr arg0 f32
%1 = ptr arg1 i8
%2 = range 0 4
%3 = splat %0 [4]
%4 = addptr %3 %2
%5 = load %4
%6 = const f32 [4] 0.0
%7 = cmpf olt %5 %6
%8 = negf %5
%9 = select %7 %8 %5
%10 = sqrt %9
%11 = fptosi %10 i8
%12 = splat %1 [4]
%13 = addptr %12 %2
store %13 %11
";
    let p = Program::parse_text(text).unwrap();
    let (mut x, mut out) = (f32s(&[-16.0, 9.0, 1e6, -2.25]), vec![0u8; 4]);
    p.execute(&mut [&mut x, &mut out]).unwrap();
    // |x| then sqrt, truncated and saturated to i8: 4, 3, 1000 → 127, 1.5 → 1.
    assert_eq!(out, [4, 3, 127, 1]);
}

#[test]
fn erf_and_tanh_round_to_the_result_type() {
    let text = "args 2
%0 = ptr arg0 bf16
%1 = ptr arg1 bf16
%2 = range 0 2
%3 = splat %0 [2]
%4 = addptr %3 %2
%5 = load %4
%6 = erf %5
%7 = tanh %6
%8 = splat %1 [2]
%9 = addptr %8 %2
store %9 %7
";
    let p = Program::parse_text(text).unwrap();
    let (mut x, mut out) = (bf16s(&[0.5, -1.0]), bf16s(&[0.0, 0.0]));
    p.execute(&mut [&mut x, &mut out]).unwrap();
    let r = |v: f64| DType::Bf16.round(v) as f32;
    let e0 = r(libm::erf(0.5));
    let e1 = r(libm::erf(-1.0));
    assert_eq!(
        read_bf16s(&out),
        [r((e0 as f64).tanh()), r((e1 as f64).tanh())]
    );
}

#[test]
fn chained_launches_hand_off_through_a_buffer() {
    let copy = |from: u8, to: u8| {
        format!(
            "%0 = ptr arg{from} f32\n%1 = ptr arg{to} f32\n%2 = range 0 2\n%3 = splat %0 [2]\n\
             %4 = addptr %3 %2\n%5 = load %4\n%6 = addf %5 %5\n%7 = splat %1 [2]\n\
             %8 = addptr %7 %2\nstore %8 %6\n"
        )
    };
    let text = format!("args 3\n{}launch\n{}", copy(0, 1), copy(1, 2));
    let p = Program::parse_text(&text).unwrap();
    assert_eq!(p.launches(), 2);
    assert_eq!(p.written_args(), vec![false, true, true]);
    let (mut a, mut b, mut c) = (f32s(&[1.0, 2.0]), f32s(&[0.0; 2]), f32s(&[0.0; 2]));
    p.execute(&mut [&mut a, &mut b, &mut c]).unwrap();
    assert_eq!(read_f32s(&c), [4.0, 8.0]);
}

#[test]
fn set_grid_fills_in_launches_without_one() {
    let mut p = Program::parse_text("args 1\n%0 = ptr arg0 f32\nlaunch\ngrid 2 1 1\n").unwrap();
    p.set_grid([4, 1, 1]);
    assert_eq!(p.grids(), vec![[4, 1, 1], [2, 1, 1]]);
    let mut empty = Program::parse_text("args 0\n").unwrap();
    empty.set_grid([3, 1, 1]);
    assert_eq!(empty.to_string(), "args 0\ngrid 3 1 1\n");
}

#[test]
fn refuses_malformed_programs() {
    assert!(Program::decode(b"nope").is_err());
    assert!(Program::decode(&[0u8; 3]).is_err());
    let mut bytes = Program::parse_text(ADD).unwrap().encode();
    bytes[20] = 0x7f; // first opcode
    assert!(Program::decode(&bytes).is_err());
    let mut v1 = Program::parse_text(ADD).unwrap().encode();
    v1[4] = 1;
    assert!(
        Program::decode(&v1)
            .unwrap_err()
            .to_string()
            .contains("unknown version 1")
    );
    for (text, why) in [
        ("args 1\n%0 = ptr arg3 f32\n", "argument 3 out of range"),
        (
            "args 1\n%0 = range 0 4\n%1 = addf %0 %0\n",
            "addf does not take i32",
        ),
        ("args 1\n%1 = range 0 4\n", "named %0"),
        ("r0 = const 1\n", "expected `args <N>`"),
        ("args 1\n%0 = frobnicate %1 %2\n", "cannot read"),
        (
            "args 1\n%0 = range 0 4\n%1 = broadcast %0 [8]\n",
            "cannot broadcast",
        ),
        (
            "args 1\n%0 = range 0 4\n%1 = reduce addi %0 1\n",
            "axis 1 of a rank-1",
        ),
        ("args 1\n%0 = range 0 4\ngrid 1 1 1\n", "grid comes first"),
        ("args 1\n%0 = const f32 [4096,4096,4096] 0.0\n", "too large"),
    ] {
        let e = Program::parse_text(text).unwrap_err().to_string();
        assert!(e.contains(why), "{text:?}: {e}");
    }
}

#[test]
fn integer_division_by_zero_is_an_error() {
    let text = "args 1
%0 = ptr arg0 i32
%1 = load %0
%2 = const i32 [] 0
%3 = divsi %1 %2
store %0 %3
";
    let p = Program::parse_text(text).unwrap();
    let mut a = 7i32.to_le_bytes().to_vec();
    let e = p.execute(&mut [&mut a]).unwrap_err().to_string();
    assert!(e.contains("division by zero"), "{e}");
}

/// `c = a·b` for an `m×k` by `k×n` dot of f32 inputs with an f32 accumulator.
fn rect_dot_program(m: u32, k: u32, n: u32) -> Program {
    let text = format!(
        "args 3\n%0 = ptr arg0 f32\n%1 = ptr arg1 f32\n%2 = ptr arg2 f32\n\
         %3 = range 0 {m}\n%4 = range 0 {k}\n%5 = range 0 {n}\n\
         %6 = expand_dims %3 1\n%7 = const i32 [{m},1] {k}\n%8 = muli %6 %7\n\
         %9 = broadcast %8 [{m},{k}]\n%10 = expand_dims %4 0\n%11 = broadcast %10 [{m},{k}]\n\
         %12 = addi %9 %11\n%13 = splat %0 [{m},{k}]\n%14 = addptr %13 %12\n%15 = load %14\n\
         %16 = expand_dims %4 1\n%17 = const i32 [{k},1] {n}\n%18 = muli %16 %17\n\
         %19 = broadcast %18 [{k},{n}]\n%20 = expand_dims %5 0\n%21 = broadcast %20 [{k},{n}]\n\
         %22 = addi %19 %21\n%23 = splat %1 [{k},{n}]\n%24 = addptr %23 %22\n%25 = load %24\n\
         %26 = const f32 [{m},{n}] 0.0\n%27 = dot %15 %25 %26\n\
         %28 = expand_dims %3 1\n%29 = const i32 [{m},1] {n}\n%30 = muli %28 %29\n\
         %31 = broadcast %30 [{m},{n}]\n%32 = broadcast %20 [{m},{n}]\n%33 = addi %31 %32\n\
         %34 = splat %2 [{m},{n}]\n%35 = addptr %34 %33\nstore %35 %27\n"
    );
    Program::parse_text(&text).unwrap()
}

#[test]
fn dot_of_unequal_sizes_sums_each_element_in_k_order() {
    // 3×5 by 5×2: every c[i][j] is Σ_k a[i][k]·b[k][j], rounded to f32 after each product
    // in k order (1e8 + 1 - 1e8 loses the 1 in f32 only in that order).
    let (m, k, n) = (3usize, 5usize, 2usize);
    let av: Vec<f32> = (0..m * k).map(|x| x as f32 - 4.0).collect();
    let mut bv: Vec<f32> = (0..k * n).map(|x| (x % 3) as f32 * 0.5).collect();
    let mut av2 = av.clone();
    av2[0] = 1e8;
    av2[1] = 1.0;
    av2[2] = -1e8;
    bv[0] = 1.0;
    bv[2] = 1.0;
    bv[4] = 1.0;
    let mut want = vec![0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut s = 0f32;
            for kk in 0..k {
                s = (f64::from(av2[i * k + kk]).mul_add(f64::from(bv[kk * n + j]), f64::from(s)))
                    as f32;
            }
            want[i * n + j] = s;
        }
    }
    let p = rect_dot_program(m as u32, k as u32, n as u32);
    let (mut a, mut b, mut c) = (f32s(&av2), f32s(&bv), f32s(&vec![0.0; m * n]));
    p.execute(&mut [&mut a, &mut b, &mut c]).unwrap();
    assert_eq!(read_f32s(&c), want);
    // Row 0, column 0: 1e8 + 1 rounds to 1e8, then - 1e8 gives 0 (exactly, 1).
    assert_eq!(want[0], 0.0);
}

#[test]
fn dot_of_i16_wraps_its_i32_sums() {
    // (-32768)² + (-32768)² = 2^31, which wraps to -2^31 in the i32 accumulator.
    let p = dot_program("i16", "i32", false);
    let i16s = |v: &[i16]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let mut a = i16s(&[-32768, -32768, 1, 2]);
    let mut b = i16s(&[-32768, 3, -32768, 4]);
    let mut c = vec![0u8; 16];
    p.execute(&mut [&mut a, &mut b, &mut c]).unwrap();
    assert_eq!(read_i32s(&c), [i32::MIN, -32768 * 7, -32768 * 3, 11]);
}

/// `C = A·B` tiled over a 2×2 grid of 4×4 output tiles, K = 3: A is `m_rows×3` (row-major),
/// B is `3×5`, C is `8×8`; `actual` adds the launch's actual sizes.
fn padded_dot_program(actual: Option<[u32; 3]>) -> Program {
    let actual = actual.map_or(String::new(), |[m, n, k]| format!("actual {m} {n} {k}\n"));
    let text = format!(
        "args 3\ngrid 2 2 1\n{actual}%0 = ptr arg0 f32\n%1 = ptr arg1 f32\n%2 = ptr arg2 f32\n\
         %3 = program_id 0\n%4 = program_id 1\n%5 = const i32 [] 4\n%6 = muli %3 %5\n\
         %7 = muli %4 %5\n%8 = range 0 4\n%9 = splat %6 [4]\n%10 = addi %9 %8\n\
         %11 = splat %7 [4]\n%12 = addi %11 %8\n%13 = range 0 3\n\
         %14 = expand_dims %10 1\n%15 = const i32 [4,1] 3\n%16 = muli %14 %15\n\
         %17 = broadcast %16 [4,3]\n%18 = expand_dims %13 0\n%19 = broadcast %18 [4,3]\n\
         %20 = addi %17 %19\n%21 = splat %0 [4,3]\n%22 = addptr %21 %20\n%23 = load %22\n\
         %24 = expand_dims %13 1\n%25 = const i32 [3,1] 5\n%26 = muli %24 %25\n\
         %27 = broadcast %26 [3,4]\n%28 = expand_dims %12 0\n%29 = broadcast %28 [3,4]\n\
         %30 = addi %27 %29\n%31 = splat %1 [3,4]\n%32 = addptr %31 %30\n%33 = load %32\n\
         %34 = const f32 [4,4] 0.0\n%35 = dot %23 %33 %34\n\
         %36 = const i32 [4,1] 8\n%37 = muli %14 %36\n%38 = broadcast %37 [4,4]\n\
         %39 = broadcast %28 [4,4]\n%40 = addi %38 %39\n%41 = splat %2 [4,4]\n\
         %42 = addptr %41 %40\nstore %42 %35\n"
    );
    Program::parse_text(&text).unwrap()
}

#[test]
fn actual_sizes_cut_the_boundary_tiles_of_a_matmul() {
    // mlir-air's air-split-launch-for-padding: A holds only the 6 actual rows and B the 5
    // actual columns; the tiles that cross them read zeros there and store only the actual
    // part of C (the rest of C keeps its -1s).
    let (m, n, k) = (6usize, 5usize, 3usize);
    let av: Vec<f32> = (0..m * k).map(|x| x as f32 * 0.5 - 2.0).collect();
    let bv: Vec<f32> = (0..k * n).map(|x| (x % 4) as f32 - 1.5).collect();
    let run = |p: &Program| {
        let (mut a, mut b, mut c) = (f32s(&av), f32s(&bv), f32s(&[-1.0; 64]));
        p.execute(&mut [&mut a, &mut b, &mut c])
            .map(|()| read_f32s(&c))
    };
    let c = run(&padded_dot_program(Some([6, 5, 1]))).unwrap();
    for i in 0..8 {
        for j in 0..8 {
            let want = if i < m && j < n {
                (0..k)
                    .map(|kk| av[i * k + kk] * bv[kk * n + j])
                    .sum::<f32>()
            } else {
                -1.0
            };
            assert_eq!(c[i * 8 + j], want, "c[{i}][{j}]");
        }
    }
    // Without the actual sizes the boundary tiles read past A, as the kernel says.
    let e = run(&padded_dot_program(None)).unwrap_err().to_string();
    assert!(
        e.contains("program (1, 0, 0): loads element 18 of argument 0"),
        "{e}"
    );
    // Sizes that leave nothing to cut change nothing.
    let (mut a, mut b) = (f32s(&[1.0; 24]), f32s(&[1.0; 15]));
    let p = padded_dot_program(Some([8, 8, 1]));
    let mut c = f32s(&[0.0; 64]);
    let e = p
        .execute(&mut [&mut a, &mut b, &mut c])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("program (0, 1, 0): loads element 15 of argument 1"),
        "{e}"
    );
}

#[test]
fn actual_sizes_follow_the_grid_and_survive_both_forms() {
    let p = padded_dot_program(Some([6, 5, 1]));
    assert!(
        p.to_string()
            .starts_with("args 3\ngrid 2 2 1\nactual 6 5 1\n")
    );
    assert_eq!(Program::decode(&p.encode()).unwrap(), p);
    for bad in [
        "args 1\nactual 4 4 1\ngrid 1 1 1\n",
        "args 1\ngrid 1 1 1\nactual 0 4 1\n",
    ] {
        assert!(Program::parse_text(bad).is_err(), "{bad}");
    }
    let mut q = padded_dot_program(None);
    q.set_actual_sizes([6, 5, 1]);
    assert_eq!(q, p);
    q.set_actual_sizes([7, 7, 1]);
    assert_eq!(q, p, "a launch keeps the actual sizes it has");
}
