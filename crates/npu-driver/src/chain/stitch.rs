//! Stitching: the AIR modules of a chain's ops (each lowered on its own, with its own grid)
//! become one module whose single function runs one `air.launch` per op, in order, over the
//! chain's combined buffers — what upstream's multilaunch builds for aircc's load_pdi path
//! (one full ELF, one runtime sequence, one dispatch).
//!
//! ```text
//! #op0_map = affine_map<(d0) -> (d0)>             aliases of op k, renamed #op<k>_…
//! module {
//!   func.func private @ext(…)                     external kernels: kept, declared once
//!   air.channel @op1_channel_0 [1, 1]             other module-level ops of op k, symbols @op<k>_…
//!   func.func @<chain>(%arg0: memref<*xf32>, …) { one buffer per combined index
//!     // op0: add_kernel …
//!     %op0_c4 = arith.constant 4 : index         op k's function-scope values, %op<k>_…
//!     air.launch (…) in (…) args(%arg16=%arg0, …) : … {  operands: combined buffers
//!       air.segment @op0_add_kernel_0 …            the launch's region: symbols and aliases
//!     }                                              renamed, values untouched (isolated)
//!     // op1: …
//!     return
//!   }
//! }
//! ```
//!
//! Names: every symbol an op defines or uses gets the prefix `op<k>_` except external
//! declarations (`func.func private @f(…)` without a body: kernels linked from object files,
//! which must keep their names); attribute and type aliases get it too. SSA values are renamed
//! only in the function's own scope — the hierarchy ops (`air.launch`, `air.segment`,
//! `air.herd`) are isolated from above, so names inside their regions, and the block
//! arguments their headers bind (`(%x) in (%n=…)`, `args(%a=…)`), belong to the op and stay
//! as printed; only the values they bind from outside are renamed. A buffer parameter of the
//! op's function becomes the chain function's `%arg<combined index>`. A scalar parameter
//! (Triton's grid ids, sizes) must no longer be used once lowered — chains pass buffers only.
//!
//! A lowered function without an `air.launch` (a bare `air.herd`, as canonicalisation leaves a
//! 1×1×1 launch) is first wrapped in `air.launch () in () args(…)` + `air.segment`, as
//! upstream does, because aircc's runtime-sequence lowering associates launches with devices
//! through segments. Module attributes are not carried over: they describe one op's module.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write;
use std::ops::Range;

use super::mlir::{self, At, Token};

/// One op, lowered.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StitchOp<'a> {
    /// The kernel function's name in `air`.
    pub kernel: &'a str,
    pub grid: [u32; 3],
    /// Buffer parameter i of the kernel → combined index `arg_map[i]`.
    pub arg_map: &'a [usize],
    /// The op's AIR module (the lowering's output).
    pub air: &'a str,
}

/// Why an op could not be stitched: `(op index, reason)`.
pub(crate) type StitchFailure = (usize, String);

/// The hierarchy ops whose regions are isolated from above.
const ISOLATED: [&str; 3] = ["air.launch", "air.segment", "air.herd"];

/// Stitches `ops` into one module whose function `@chain` takes the combined buffers.
pub(crate) fn stitch(chain: &str, ops: &[StitchOp<'_>]) -> Result<String, StitchFailure> {
    let mut aliases: Vec<String> = Vec::new();
    // name → (text without locations, for comparison; text to emit; first op)
    let mut externals: BTreeMap<String, (String, String, usize)> = BTreeMap::new();
    let mut support: Vec<String> = Vec::new();
    let mut bodies: Vec<String> = Vec::new();
    let mut types: BTreeMap<usize, (String, usize)> = BTreeMap::new();

    for (k, op) in ops.iter().enumerate() {
        let fail = |reason: String| (k, reason);
        let module = mlir::parse_module(op.air).map_err(fail)?;
        if let Some(attributes) = module.attributes {
            tracing::debug!(op = k, attributes, "module attributes are not stitched");
        }
        let funcs: Vec<Option<mlir::Func>> =
            module.ops.iter().map(|t| mlir::parse_func(t)).collect();
        // Names this op declares without a body: external kernels, which keep their names.
        let own_externals: HashSet<String> = funcs
            .iter()
            .flatten()
            .filter(|f| f.body.is_none())
            .map(|f| f.name.clone())
            .collect();
        let prefix = format!("op{k}_");
        let alias_names: HashSet<&str> = module.aliases.iter().map(|(n, _)| *n).collect();
        let globals = |text: &str| rename_globals(text, &prefix, &alias_names, &own_externals);

        let mut entry = None;
        let mut defined: Vec<&mlir::Func> = Vec::new();
        let mut others: Vec<&str> = Vec::new();
        for (text, f) in module.ops.iter().zip(&funcs) {
            match f {
                Some(f) if f.body.is_none() => {
                    let bare = globals(&mlir::without_locations(text));
                    let normal = bare.split_whitespace().collect::<Vec<_>>().join(" ");
                    match externals.get(&f.name) {
                        Some((seen, _, first)) if *seen != normal => {
                            return Err(fail(format!(
                                "it declares @{} as `{normal}`, op {first} as `{seen}`; an \
                                 external function has one signature",
                                f.name
                            )));
                        }
                        Some(_) => {}
                        None => {
                            externals.insert(f.name.clone(), (normal, bare, k));
                        }
                    }
                }
                Some(f) if f.name == op.kernel => entry = Some((f, *text)),
                Some(f) => {
                    defined.push(f);
                    others.push(text);
                }
                None => others.push(text),
            }
        }
        let (func, func_text) = match entry {
            Some(e) => e,
            None => {
                let public: Vec<String> = defined
                    .iter()
                    .filter(|f| f.visibility.as_deref() != Some("private"))
                    .map(|f| format!("@{}", f.name))
                    .collect();
                return Err(fail(format!(
                    "its AIR module has no function @{} (functions with a body: {})",
                    op.kernel,
                    if public.is_empty() {
                        "none".to_owned()
                    } else {
                        public.join(", ")
                    }
                )));
            }
        };
        let func_text: &str = func_text;
        if func.results {
            return Err(fail(format!(
                "@{} returns values; a launched kernel returns nothing",
                op.kernel
            )));
        }

        // Buffer parameters → combined indices; their types must agree across ops.
        let buffers: Vec<&mlir::Param> = func.params.iter().filter(|p| p.is_buffer()).collect();
        if buffers.len() != op.arg_map.len() {
            return Err(fail(format!(
                "@{} has {} buffer parameters after lowering, its arg_map maps {}",
                op.kernel,
                buffers.len(),
                op.arg_map.len()
            )));
        }
        let mut values: HashMap<String, Binding> = HashMap::new();
        for (i, (param, &combined)) in buffers.iter().zip(op.arg_map).enumerate() {
            if let Some((ty, first)) = types.get(&combined)
                && *ty != param.ty
            {
                let what = if mlir::element_type(ty) != mlir::element_type(&param.ty) {
                    "conflicting element types"
                } else {
                    "conflicting types"
                };
                return Err(fail(format!(
                    "combined argument {combined} is {ty} in op {first} but buffer parameter \
                     {i} of @{} is {}: {what}",
                    op.kernel, param.ty
                )));
            }
            types.entry(combined).or_insert((param.ty.clone(), k));
            if let Some(v) = &param.value {
                values.insert(v.clone(), Binding::Combined(combined));
            }
        }
        for param in func.params.iter().filter(|p| !p.is_buffer()) {
            if let Some(v) = &param.value {
                values.insert(v.clone(), Binding::Scalar(param.ty.clone()));
            }
        }

        let body_range = func.body.clone().unwrap_or(0..0);
        let body = body_without_return(&func_text[body_range], op.kernel).map_err(fail)?;
        let body = if mlir::word_positions(&body, "air.launch").is_empty() {
            wrap_in_launch(&body, op.kernel, &func.params).map_err(fail)?
        } else {
            body
        };

        let body = rename_function_scope(&body, &prefix, &values).map_err(|e| {
            fail(format!(
                "{e}; after lowering, @{} may only use its buffer parameters (chains pass \
                 buffers only: make scalars constexpr)",
                op.kernel
            ))
        })?;
        let mut text = format!(
            "    // op{k}: {} grid ({}, {}, {}), buffers {}\n",
            op.kernel,
            op.grid[0],
            op.grid[1],
            op.grid[2],
            op.arg_map
                .iter()
                .enumerate()
                .map(|(i, c)| format!("{i}->{c}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        text.push_str(globals(&body).trim_start_matches('\n'));
        bodies.push(text);
        for (_, definition) in &module.aliases {
            aliases.push(globals(definition));
        }
        for other in others {
            support.push(globals(other));
        }
    }

    // The combined signature: one buffer per index, 0..N without gaps.
    let mut params = Vec::with_capacity(types.len());
    for (expected, (index, (ty, _))) in types.iter().enumerate() {
        if *index != expected {
            return Err((
                0,
                format!("combined argument {expected} is used by no op; indices must be 0..N-1"),
            ));
        }
        params.push(format!("%arg{index}: {ty}"));
    }
    if externals.contains_key(chain) {
        let (_, _, first) = &externals[chain];
        return Err((
            *first,
            format!("it declares an external function @{chain}, the chain's own name"),
        ));
    }

    let mut out = String::new();
    let _ = writeln!(
        out,
        "// The chain @{chain}: {} launches stitched by triton-npu.",
        ops.len()
    );
    for alias in &aliases {
        let _ = writeln!(out, "{alias}");
    }
    out.push_str("module {\n");
    for (_, text, _) in externals.values() {
        let _ = writeln!(out, "  {text}");
    }
    for op in &support {
        let _ = writeln!(out, "  {op}");
    }
    let _ = writeln!(out, "  func.func @{chain}({}) {{", params.join(", "));
    for body in &bodies {
        out.push_str(body);
        if !body.ends_with('\n') {
            out.push('\n');
        }
    }
    out.push_str("    return\n  }\n}\n");
    Ok(out)
}

/// What a parameter of an op's function stands for in the chain's function.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Binding {
    Combined(usize),
    Scalar(String),
}

/// The body without its final `return` (which must return nothing); one block only.
fn body_without_return(body: &str, kernel: &str) -> Result<String, String> {
    let items = mlir::items(body);
    if let Some(label) = items.iter().find(|i| i.starts_with('^')) {
        return Err(format!(
            "@{kernel} has several blocks ({}); only a single-block function can be stitched",
            label.split(':').next().unwrap_or(label)
        ));
    }
    let last = items.last().copied().unwrap_or_default();
    let ret = ["return", "func.return"]
        .into_iter()
        .find(|w| mlir::starts_with_word(last, w));
    let Some(ret) = ret else {
        return Err(format!("@{kernel}'s body does not end with `return`"));
    };
    let operands = mlir::without_locations(&last[ret.len()..]);
    if !operands.trim().is_empty() {
        return Err(format!(
            "@{kernel} returns `{}`; a launched kernel returns nothing",
            operands.trim()
        ));
    }
    let at = last.as_ptr() as usize - body.as_ptr() as usize;
    Ok(body[..at].trim_end().to_owned() + "\n")
}

/// Wraps a body that has no `air.launch` in `air.launch () in () args(…)` and an
/// `air.segment`, binding every buffer parameter.
fn wrap_in_launch(body: &str, kernel: &str, params: &[mlir::Param]) -> Result<String, String> {
    let used: HashSet<&str> = mlir::tokens(body)
        .into_iter()
        .filter_map(|(t, _)| match t {
            Token::Value(v) => Some(v),
            _ => None,
        })
        .collect();
    let fresh = |stem: &str| {
        let mut stem = stem.to_owned();
        while used.iter().any(|u| u.starts_with(&stem)) {
            stem.push('_');
        }
        stem
    };
    let (launch, segment) = (fresh("%launch_arg"), fresh("%segment_arg"));
    let buffers: Vec<(&str, &str)> = params
        .iter()
        .filter(|p| p.is_buffer())
        .filter_map(|p| Some((p.value.as_deref()?, p.ty.as_str())))
        .collect();
    let types: Vec<&str> = buffers.iter().map(|(_, t)| *t).collect();
    let launch_args: Vec<String> = buffers
        .iter()
        .enumerate()
        .map(|(i, (v, _))| format!("{launch}{i}={v}"))
        .collect();
    let segment_args: Vec<String> = (0..buffers.len())
        .map(|i| format!("{segment}{i}={launch}{i}"))
        .collect();
    let inner: HashMap<String, Binding> = buffers
        .iter()
        .enumerate()
        .map(|(i, (v, _))| ((*v).to_owned(), Binding::Combined(i)))
        .chain(
            params
                .iter()
                .filter(|p| !p.is_buffer())
                .filter_map(|p| Some((p.value.clone()?, Binding::Scalar(p.ty.clone())))),
        )
        .collect();
    // Inside the segment, the body reads the segment's arguments.
    let renamed = rename_scope(body, &|token| match inner.get(token) {
        Some(Binding::Combined(i)) => Ok(Some(format!("{segment}{i}"))),
        Some(Binding::Scalar(ty)) => Err(format!("it uses the scalar parameter {token} ({ty})")),
        None => Ok(None),
    })?;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "    air.launch () in () args({}) : {} {{",
        launch_args.join(", "),
        types.join(", ")
    );
    let _ = writeln!(
        out,
        "      air.segment @{kernel}_seg  args({}) : {} {{",
        segment_args.join(", "),
        types.join(", ")
    );
    for line in renamed.lines() {
        let _ = writeln!(out, "    {line}");
    }
    out.push_str("      }\n    }\n");
    Ok(out)
}

/// Renames the function-scope values of an op's body: buffer parameters to the chain's
/// `%arg<combined>`, everything else to `%<prefix><name>`; a scalar parameter is an error.
fn rename_function_scope(
    body: &str,
    prefix: &str,
    params: &HashMap<String, Binding>,
) -> Result<String, String> {
    rename_scope(body, &|token| match params.get(token) {
        Some(Binding::Combined(c)) => Ok(Some(format!("%arg{c}"))),
        Some(Binding::Scalar(ty)) => Err(format!("it uses the scalar parameter {token} ({ty})")),
        None => Ok(Some(format!("%{prefix}{}", &token[1..]))),
    })
}

type Renamer<'r> = dyn Fn(&str) -> Result<Option<String>, String> + 'r;

/// Applies `rename` to the values of `body`'s own scope (see the module docs).
fn rename_scope(body: &str, rename: &Renamer<'_>) -> Result<String, String> {
    let inner = isolated_ranges(body);
    let mut error = None;
    let out = mlir::rewrite(body, |token, At { start, .. }| {
        let Token::Value(v) = token else {
            return None;
        };
        if inner.iter().any(|r| r.contains(&start)) {
            return None;
        }
        match rename(v) {
            Ok(new) => new,
            Err(e) => {
                error.get_or_insert(e);
                None
            }
        }
    });
    match error {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// The byte ranges of `body` that belong to isolated hierarchy ops: their regions, the block
/// arguments their headers bind, and their induction variables.
fn isolated_ranges(body: &str) -> Vec<Range<usize>> {
    let mut starts: Vec<usize> = ISOLATED
        .iter()
        .flat_map(|w| mlir::word_positions(body, w))
        .collect();
    starts.sort_unstable();
    let b = body.as_bytes();
    let mut out: Vec<Range<usize>> = Vec::new();
    for start in starts {
        if out.iter().any(|r| r.contains(&start)) {
            continue; // nested inside an op already covered
        }
        let mut i = start;
        while i < b.len() {
            match b[i] {
                b'"' => i = mlir::skip_string(b, i),
                b'(' | b'[' => {
                    let Some(close) = mlir::matching(body, i) else {
                        break;
                    };
                    let before = last_word(&body[start..i]);
                    let after = body[close + 1..].trim_start();
                    if b[i] == b'(' && (before == "in" || before == "args") {
                        out.extend(binding_names(body, i + 1..close));
                    } else if b[i] == b'(' && mlir::starts_with_word(after, "in") {
                        out.push(i..close + 1);
                    }
                    i = close + 1;
                }
                b'{' => {
                    let Some(close) = mlir::matching(body, i) else {
                        break;
                    };
                    if last_word(&body[start..i]) != "attributes" {
                        out.push(i..close + 1);
                        break;
                    }
                    i = close + 1;
                }
                _ => i += 1,
            }
        }
    }
    out
}

/// The left-hand sides of `%a=%b, %c=%d` within `range`.
fn binding_names(text: &str, range: Range<usize>) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut piece_start = range.start;
    let mut depth = 0i32;
    let b = text.as_bytes();
    for i in range.clone() {
        match b[i] {
            b'(' | b'[' | b'{' | b'<' => depth += 1,
            b')' | b']' | b'}' | b'>' => depth -= 1,
            b'=' if depth == 0 => out.push(piece_start..i),
            b',' if depth == 0 => piece_start = i + 1,
            _ => {}
        }
    }
    out
}

fn last_word(text: &str) -> &str {
    text.trim_end()
        .rsplit(|c: char| c.is_whitespace() || c == ')' || c == ']')
        .next()
        .unwrap_or("")
}

/// Prefixes the op's symbols (except its external declarations) and aliases.
fn rename_globals(
    text: &str,
    prefix: &str,
    aliases: &HashSet<&str>,
    externals: &HashSet<String>,
) -> String {
    mlir::rewrite(text, |token, _| match token {
        Token::Symbol(s) => {
            let name = s[1..].trim_matches('"');
            if externals.contains(name) {
                None
            } else if s[1..].starts_with('"') {
                Some(format!("@\"{prefix}{name}\""))
            } else {
                Some(format!("@{prefix}{name}"))
            }
        }
        Token::Alias(a) if aliases.contains(a) => Some(format!("{}{prefix}{}", &a[..1], &a[1..])),
        _ => None,
    })
}

#[cfg(test)]
mod tests;
