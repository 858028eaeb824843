//! The `npu_harness.*` module attributes that carry a kernel's meaning through the IR files.
//!
//! * `npu_harness.program = "<text form>"`: the harness program (see `npu-harness-program`);
//! * `npu_harness.not_computable = "<reason>"`: the kernel is not elementwise;
//! * `npu_harness.pointer_args = N : i32`: how many pointer parameters the kernel has;
//! * `npu_harness.grid = array<i32: X, Y, Z>`: added by the stand-in air-opt from
//!   `air-wrap-func-with-parallel{loop-bounds=X,Y,Z}`.

use npu_harness_program::Program;

pub const PROGRAM: &str = "npu_harness.program";
pub const NOT_COMPUTABLE: &str = "npu_harness.not_computable";
pub const POINTER_ARGS: &str = "npu_harness.pointer_args";
pub const GRID: &str = "npu_harness.grid";
/// The actual sizes `air-wrap-func-with-parallel{actual-sizes=M,N,K}` gave the launch (real AIR
/// carries them as the launch's `air.actual_sizes`).
pub const ACTUAL_SIZES: &str = "npu_harness.actual_sizes";
/// `npu_harness.loads_memory_space = N : i32`: added by the stand-in air-opt's
/// `air-override-memref-memory-space{memory-space=N}`: the memory space of the buffers the
/// kernel's loads copy into (the transform judge's payload model reads it).
pub const LOADS_MEMORY_SPACE: &str = "npu_harness.loads_memory_space";
/// `npu_harness.herd = "<cols> <rows> [domain] [tiles]"`: added by the stand-in air-opt's
/// `air-transform`: the herd the schedule made and the tiles its cores compute.
pub const HERD: &str = "npu_harness.herd";

/// An MLIR string literal for `s` (quotes included).
pub fn mlir_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\{:02X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Reads the MLIR string literal starting at `text[0] == '"'`; returns its value and length.
fn read_string(text: &str) -> Option<(String, usize)> {
    let bytes = text.as_bytes();
    if bytes.first() != Some(&b'"') {
        return None;
    }
    let mut out = Vec::new();
    let mut i = 1;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => return Some((String::from_utf8_lossy(&out).into_owned(), i + 1)),
            b'\\' => {
                let next = *bytes.get(i + 1)?;
                match next {
                    b'n' => out.push(b'\n'),
                    b't' => out.push(b'\t'),
                    b'"' => out.push(b'"'),
                    b'\\' => out.push(b'\\'),
                    _ => {
                        // MLIR's own printer uses two hex digits (`\0A`).
                        let hex = text.get(i + 1..i + 3)?;
                        out.push(u8::from_str_radix(hex, 16).ok()?);
                        i += 1;
                    }
                }
                i += 2;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    None
}

/// The value of a string attribute `name = "…"` anywhere in the module text.
pub fn string_attr(module: &str, name: &str) -> Option<String> {
    let key = format!("{name} = ");
    let at = module.find(&key)? + key.len();
    read_string(&module[at..]).map(|(v, _)| v)
}

/// The value of an integer attribute `name = N : i32`.
pub fn int_attr(module: &str, name: &str) -> Option<i64> {
    let key = format!("{name} = ");
    let at = module.find(&key)? + key.len();
    let digits: String = module[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '-')
        .collect();
    digits.parse().ok()
}

/// What the IR says the kernel computes.
#[derive(Debug, Clone, PartialEq)]
pub enum Meaning {
    Program(Program),
    NotComputable { num_args: u8, reason: String },
}

impl Meaning {
    pub fn num_args(&self) -> u8 {
        match self {
            Meaning::Program(p) => p.num_args,
            Meaning::NotComputable { num_args, .. } => *num_args,
        }
    }
}

/// Reads the kernel meaning from a module produced by the stand-in triton-shared-opt. A module
/// without one (hand-written IR) counts as not computable; so does an unreadable program.
pub fn meaning(module: &str) -> Meaning {
    let pointer_args = int_attr(module, POINTER_ARGS)
        .and_then(|n| u8::try_from(n).ok())
        .unwrap_or_else(|| count_memref_args(module));
    if let Some(text) = string_attr(module, PROGRAM) {
        return match Program::parse_text(&text) {
            Ok(mut p) => {
                if let Some(g) = grid(module) {
                    p.set_grid(g);
                }
                if let Some(sizes) = actual_sizes(module) {
                    p.set_actual_sizes(sizes);
                }
                set_herd_tiling(&mut p, module);
                Meaning::Program(p)
            }
            Err(e) => Meaning::NotComputable {
                num_args: pointer_args,
                reason: format!("the {PROGRAM} attribute is unreadable: {e}"),
            },
        };
    }
    let reason = string_attr(module, NOT_COMPUTABLE).unwrap_or_else(|| {
        format!(
            "the module carries no {PROGRAM} attribute (it was not produced by the harness's \
             triton-shared-opt)"
        )
    });
    Meaning::NotComputable {
        num_args: pointer_args,
        reason,
    }
}

/// The `npu_harness.grid = array<i32: X, Y, Z>` the stand-in air-opt recorded.
pub fn grid(module: &str) -> Option<[u32; 3]> {
    triple(module, GRID)
}

/// The module's `npu_harness.actual_sizes`, if it has them.
pub fn actual_sizes(module: &str) -> Option<[u32; 3]> {
    triple(module, ACTUAL_SIZES)
}

/// An `array<i32: a, b, c>` module attribute.
fn triple(module: &str, name: &str) -> Option<[u32; 3]> {
    let key = format!("{name} = array<i32:");
    let at = module.find(&key)? + key.len();
    let rest = &module[at..];
    let values: Vec<u32> = rest[..rest.find('>')?]
        .split(',')
        .filter_map(|v| v.trim().parse().ok())
        .collect();
    match values.as_slice() {
        [x, y, z] => Some([*x, *y, *z]),
        _ => None,
    }
}

/// Unranked memref parameters of the first `func.func`: the pointer arguments.
fn count_memref_args(module: &str) -> u8 {
    let Some(at) = module.find("func.func @") else {
        return 0;
    };
    let sig = &module[at..];
    let end = sig.find('{').unwrap_or(sig.len());
    sig[..end].matches("memref<*x").count().min(255) as u8
}

/// Adds `name = value` to the module's attribute dictionary (creating it when the module has
/// none); replaces an existing entry of that name.
pub fn set_module_attr(module: &str, name: &str, value: &str) -> String {
    let entry = format!("{name} = {value}");
    if let Some(start) = module.find(&format!("{name} = ")) {
        // Replace up to the end of the value: a string literal, or up to `,`/`}`.
        let vstart = start + name.len() + 3;
        let rest = &module[vstart..];
        let vlen = if rest.starts_with('"') {
            read_string(rest).map(|(_, n)| n).unwrap_or(0)
        } else {
            let mut depth = 0i32;
            rest.char_indices()
                .find(|(_, c)| {
                    match c {
                        '<' | '[' | '(' => depth += 1,
                        '>' | ']' | ')' => depth -= 1,
                        _ => {}
                    }
                    depth <= 0 && (*c == ',' || *c == '}')
                })
                .map(|(i, _)| i)
                .unwrap_or(rest.len())
        };
        return format!("{}{entry}{}", &module[..start], &rest[vlen..]);
    }
    if let Some(at) = module.find("module attributes {") {
        let insert = at + "module attributes {".len();
        return format!("{}{entry}, {}", &module[..insert], &module[insert..]);
    }
    if let Some(at) = module.find("module {") {
        return format!(
            "{}module attributes {{{entry}}} {{{}",
            &module[..at],
            &module[at + "module {".len()..]
        );
    }
    // A bare function list: MLIR wraps it in an implicit module.
    format!("module attributes {{{entry}}} {{\n{module}\n}}\n")
}

/// The text of `npu_harness.herd`: one `cols rows [domain] [tiles]` per herd, `;` between.
pub fn herds_text(herds: &[crate::transform::interp::Herd]) -> String {
    let list = |v: &[u64]| {
        let items: Vec<String> = v.iter().map(u64::to_string).collect();
        format!("[{}]", items.join(","))
    };
    herds
        .iter()
        .map(|h| {
            format!(
                "{} {} {} {}",
                h.size[0],
                h.size[1],
                list(&h.domain),
                list(&h.tiles)
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Gives `program` the tilings of the herds air-opt recorded (`npu_harness.herd`): which
/// tiles the device computes (with several herds, such as a matmul's prologue, compute and
/// epilogue, an element lands only where each herd gives it to the same core).
pub fn set_herd_tiling(program: &mut Program, module: &str) {
    let Some(herds) = string_attr(module, HERD).and_then(|t| parse_herds(&t)) else {
        return;
    };
    let small = |v: &u64| u32::try_from(*v).unwrap_or(u32::MAX);
    let tilings: Vec<([u32; 2], Vec<u32>, Vec<u32>)> = herds
        .iter()
        .map(|h| {
            (
                [small(&h.size[0]), small(&h.size[1])],
                h.domain.iter().map(small).collect(),
                h.tiles.iter().map(small).collect(),
            )
        })
        .collect();
    if !tilings.is_empty() {
        program.set_tilings(&tilings);
    }
}

/// Reads [`herds_text`] back (None when malformed).
pub fn parse_herds(text: &str) -> Option<Vec<crate::transform::interp::Herd>> {
    let list = |s: &str| -> Option<Vec<u64>> {
        let inner = s.strip_prefix('[')?.strip_suffix(']')?;
        if inner.is_empty() {
            return Some(Vec::new());
        }
        inner.split(',').map(|v| v.parse().ok()).collect()
    };
    text.split(';')
        .map(|h| {
            let parts: Vec<&str> = h.split_whitespace().collect();
            let [cols, rows, domain, tiles] = parts.as_slice() else {
                return None;
            };
            Some(crate::transform::interp::Herd {
                size: [cols.parse().ok()?, rows.parse().ok()?],
                domain: list(domain)?,
                tiles: list(tiles)?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_round_trip() {
        let s = "args 1\n%0 = ptr arg0 f32\n\"q\" \\ \t";
        let lit = mlir_string(s);
        assert!(!lit.contains('\n'));
        let module = format!("module attributes {{{PROGRAM} = {lit}}} {{\n}}");
        assert_eq!(string_attr(&module, PROGRAM).as_deref(), Some(s));
        // MLIR's printer writes hex escapes.
        let printed = r#"module attributes {npu_harness.program = "args 0\0A"} {}"#;
        assert_eq!(string_attr(printed, PROGRAM).as_deref(), Some("args 0\n"));
    }

    #[test]
    fn attributes_are_added_and_replaced() {
        let m = "module attributes {a = 1 : i32} {\n}";
        let m = set_module_attr(m, GRID, "array<i32: 4, 1, 1>");
        assert!(
            m.starts_with("module attributes {npu_harness.grid = array<i32: 4, 1, 1>, a = 1"),
            "{m}"
        );
        let m = set_module_attr(&m, GRID, "array<i32: 2, 2, 1>");
        assert!(
            m.contains("npu_harness.grid = array<i32: 2, 2, 1>, a = 1"),
            "{m}"
        );
        assert_eq!(m.matches(GRID).count(), 1);
        let bare = set_module_attr("module {\n}", GRID, "array<i32: 1, 1, 1>");
        assert_eq!(
            bare,
            "module attributes {npu_harness.grid = array<i32: 1, 1, 1>} {\n}"
        );
    }

    #[test]
    fn meaning_of_modules() {
        let p = "args 2\n%0 = ptr arg0 f32\n%1 = load %0\n%2 = ptr arg1 f32\nstore %2 %1\n";
        let m = format!("module attributes {{{PROGRAM} = {}}} {{}}", mlir_string(p));
        assert!(
            matches!(meaning(&m), Meaning::Program(prog) if prog.num_args == 2 && prog.grids() == [[1, 1, 1]])
        );
        // The grid air-opt recorded is the program's.
        let m = format!(
            "module attributes {{{GRID} = array<i32: 4, 2, 1>, {PROGRAM} = {}}} {{}}",
            mlir_string(p)
        );
        assert!(matches!(meaning(&m), Meaning::Program(prog) if prog.grids() == [[4, 2, 1]]));
        let nc = format!(
            "module attributes {{{NOT_COMPUTABLE} = \"reduction\", {POINTER_ARGS} = 2 : i32}} {{}}"
        );
        assert_eq!(
            meaning(&nc),
            Meaning::NotComputable {
                num_args: 2,
                reason: "reduction".into()
            }
        );
        let bare = "module {\n func.func @k(%arg0: memref<*xf32>, %arg1: memref<*xf16>, %arg2: i32) {\n return\n }\n}";
        match meaning(bare) {
            Meaning::NotComputable { num_args, reason } => {
                assert_eq!(num_args, 2);
                assert!(reason.contains("no npu_harness.program"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }
}
