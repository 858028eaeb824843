//! Resolving a script's library references before mlir-air sees it (upstream's
//! `_inject_transform_library`, driver.py:972-1131, with errors where upstream leaves a
//! reference unresolved).
//!
//! * Every `transform.include @name` is **expanded inline**: mlir-air's transform interpreter
//!   crashes when it resolves `transform.include` across region boundaries (upstream
//!   driver.py:977-979; mlir-air AIRTransformInterpreter.cpp:107-112, mlir-air #1464). The
//!   callee's body replaces the statement, its parameters replaced by the include's operands,
//!   every other SSA name made unique, and the values its `transform.yield` returns bound to
//!   the include's results. Includes inside the inlined body are expanded in turn. Sequences
//!   the script defines itself take precedence over the library's (as MLIR's symbol lookup
//!   would), and are expanded the same way; their definitions stay in the script.
//! * `transform.foreach_match` refers to its matchers and actions by symbol, so they cannot be
//!   inlined: the library sequences it names (and what those refer to) are inserted right
//!   after the `{` of the enclosing `module attributes {transform.with_named_sequence}`.
//!
//! Unlike upstream, an include or a `foreach_match` symbol that neither the script nor the
//! library defines is an error naming it, the script and the line (upstream leaves it for
//! mlir-air's verifier: "'transform.include' op does not reference a named transform
//! sequence"), and recursive includes are an error rather than a depth cut-off. A script
//! without includes and `foreach_match` is returned unchanged.
//!
//! `failures(suppress)` cannot be kept by inlining: an expanded body's failures propagate (as
//! with upstream's expansion).

use std::collections::{HashMap, HashSet};

use npu_target::NpuVersion;

use npu_mlir::lex::{self, Bracket, Kind};

use crate::error::TransformError;
use crate::library::Library;
use crate::script::{self, FOREACH_MATCH, INCLUDE, Include, Script, Sequence, YIELD};

/// How deep includes may nest (a backstop: recursion is detected by name first).
pub const MAX_DEPTH: usize = 32;

/// The script air-opt will get, and what was done to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expansion {
    pub text: String,
    /// The sequences expanded inline, in order of first use.
    pub expanded: Vec<String>,
    /// The library sequences inserted for `foreach_match`.
    pub inserted: Vec<String>,
    /// Things that will probably fail later on the chosen target.
    pub warnings: Vec<String>,
}

/// Expands `text` (named `origin` in messages, e.g. its path). `target`, when known, adds
/// warnings for sequences written for the other NPU.
pub fn expand(
    text: &str,
    origin: &str,
    target: Option<NpuVersion>,
) -> Result<Expansion, TransformError> {
    let library = Library::get()?;
    if !text.contains(INCLUDE) && !text.contains(FOREACH_MATCH) {
        return Ok(Expansion {
            text: text.to_owned(),
            expanded: Vec::new(),
            inserted: Vec::new(),
            warnings: Vec::new(),
        });
    }
    let script = Script::parse(origin, text)?;
    let mut expander = Expander {
        library,
        user: &script,
        used: value_names(&script),
        instances: 0,
        expanded: Vec::new(),
    };
    let mut inlined = String::with_capacity(text.len() * 2);
    expander.walk(&script, &mut Vec::new(), &mut inlined)?;
    let expanded = expander.expanded;
    let (text, inserted) = insert_match_definitions(inlined, origin, library)?;
    // What we produce must itself be well-formed and free of includes.
    let check = Script::parse(origin, &text)
        .map_err(|e| TransformError::Library(format!("the expanded script is malformed: {e}")))?;
    if let Some(left) = check.includes.first() {
        return Err(TransformError::Library(format!(
            "transform.include @{} survived the expansion",
            left.callee
        )));
    }
    let mut warnings = Vec::new();
    if target == Some(NpuVersion::Npu1) && expanded.iter().any(|n| n == "flatten_tile_forall_aie2p")
    {
        warnings.push(
            "the script uses @flatten_tile_forall_aie2p, which splits the work over npu2's 8 \
             columns; npu1 has 4, so placing the herd will fail: use @flatten_tile_forall"
                .to_owned(),
        );
    }
    Ok(Expansion {
        text,
        expanded,
        inserted,
        warnings,
    })
}

struct Expander<'a> {
    library: &'static Library,
    user: &'a Script,
    /// Every SSA name in the output so far, so that fresh names never collide.
    used: HashSet<String>,
    instances: usize,
    expanded: Vec<String>,
}

impl<'a> Expander<'a> {
    /// Copies `script` to `out`, replacing each include with its expansion and renaming the
    /// values an include bound to one of its operands.
    fn walk(
        &mut self,
        script: &Script,
        stack: &mut Vec<String>,
        out: &mut String,
    ) -> Result<(), TransformError> {
        let starts: HashMap<usize, &Include> =
            script.includes.iter().map(|inc| (inc.start, inc)).collect();
        // Inside a sequence's own definition its name is on the stack, so that an include
        // cycle through it is reported from where it starts.
        let body_opens: HashMap<usize, &str> = script
            .sequences
            .iter()
            .filter_map(|s| s.body.map(|(open, _)| (open, s.name.as_str())))
            .collect();
        let body_ends: HashSet<usize> = script
            .sequences
            .iter()
            .filter_map(|s| s.body.map(|(_, close)| close))
            .collect();
        // Names bound by expanded includes in the current sequence body.
        let mut renamed: HashMap<String, String> = HashMap::new();
        let mut cursor = 0;
        let mut i = 0;
        while i < script.tokens.len() {
            let t = script.tokens[i];
            if let Some(inc) = starts.get(&i) {
                out.push_str(&script.text[cursor..t.start]);
                let indent = indentation(&script.text, t.start);
                let replacement = self.inline(script, inc, &mut renamed, stack, &indent)?;
                out.push_str(&replacement);
                cursor = script.tokens[inc.end].end;
                i = inc.end + 1;
                continue;
            }
            if t.kind == Kind::Value
                && let Some(new) = renamed.get(t.text(&script.text))
            {
                out.push_str(&script.text[cursor..t.start]);
                out.push_str(new);
                cursor = t.end;
            }
            if let Some(name) = body_opens.get(&i) {
                stack.push((*name).to_owned());
            }
            if body_ends.contains(&i) {
                renamed.clear();
                stack.pop();
            }
            i += 1;
        }
        out.push_str(&script.text[cursor..]);
        Ok(())
    }

    /// The sequence an include calls: the script's own definition first, then the library's.
    fn resolve(&self, name: &str) -> Option<(&'a Script, &'a Sequence, String)> {
        let user: &'a Script = self.user;
        let library: &'static Library = self.library;
        if let Some(seq) = user.sequence(name).filter(|s| s.body.is_some()) {
            return Some((user, seq, "defined in this script".to_owned()));
        }
        library.lookup(name).map(|(script, seq)| {
            let file = script.origin.trim_start_matches("library ");
            (script, seq, format!("triton-npu transform library, {file}"))
        })
    }

    fn known_names(&self) -> Vec<String> {
        self.library.names()
    }

    /// The expansion of one include: a comment naming it, then the callee's body.
    fn inline(
        &mut self,
        caller: &Script,
        inc: &Include,
        caller_renamed: &mut HashMap<String, String>,
        stack: &mut Vec<String>,
        indent: &str,
    ) -> Result<String, TransformError> {
        let name = inc.callee.as_str();
        let (callee, seq, from) =
            self.resolve(name)
                .ok_or_else(|| TransformError::UnknownSequence {
                    origin: caller.origin.clone(),
                    line: inc.line,
                    name: name.to_owned(),
                    known: self.known_names(),
                })?;
        if stack.iter().any(|s| s == name) {
            let mut chain = stack.clone();
            chain.push(name.to_owned());
            return Err(TransformError::Recursion {
                origin: caller.origin.clone(),
                line: inc.line,
                chain,
            });
        }
        if stack.len() >= MAX_DEPTH {
            return Err(TransformError::TooDeep {
                origin: caller.origin.clone(),
                line: inc.line,
                name: name.to_owned(),
                max: MAX_DEPTH,
            });
        }
        let signature_error = |message: String| TransformError::Signature {
            origin: caller.origin.clone(),
            line: inc.line,
            name: name.to_owned(),
            message,
            signature: seq.signature(),
        };
        let Some((open, close)) = seq.body else {
            return Err(signature_error(
                "the sequence is declared without a body".into(),
            ));
        };
        if inc.args.len() != seq.params.len() {
            return Err(signature_error(format!(
                "it passes {} handle(s), the sequence takes {}",
                inc.args.len(),
                seq.params.len()
            )));
        }
        let yield_at = top_level_yield(callee, open, close).ok_or_else(|| {
            signature_error("the sequence's body does not end with transform.yield".into())
        })?;
        let yielded: Vec<String> = (yield_at + 1..close)
            .take_while(|&k| !callee.tokens[k].is_punct(b':'))
            .filter(|&k| callee.tokens[k].kind == Kind::Value)
            .map(|k| callee.tok(k).to_owned())
            .collect();
        if !inc.results.is_empty() && inc.results.len() != yielded.len() {
            return Err(signature_error(format!(
                "it binds {} result(s), the sequence yields {}",
                inc.results.len(),
                yielded.len()
            )));
        }

        // Parameters become the include's operands (as the caller now names them).
        let mut rename: HashMap<String, String> = HashMap::new();
        for (param, &arg) in seq.params.iter().zip(&inc.args) {
            let arg = caller.tok(arg);
            let arg = caller_renamed
                .get(arg)
                .cloned()
                .unwrap_or_else(|| arg.to_owned());
            rename.insert(param.name.clone(), arg);
        }
        // A yielded value defined in the body takes the result's name; a yielded parameter
        // (or a value yielded twice) makes the caller use what it stands for instead.
        for (value, &result) in yielded.iter().zip(&inc.results) {
            let result = caller.tok(result).to_owned();
            match rename.get(value) {
                Some(existing) => {
                    caller_renamed.insert(result, existing.clone());
                }
                None => {
                    rename.insert(value.clone(), result);
                }
            }
        }
        self.instances += 1;
        let instance = self.instances;
        for k in open + 1..yield_at {
            let t = callee.tokens[k];
            if t.kind == Kind::Value {
                let local = t.text(&callee.text);
                if !rename.contains_key(local) {
                    let fresh = self.fresh(local, instance);
                    rename.insert(local.to_owned(), fresh);
                }
            }
        }

        // The body with its names replaced, cut before the yield.
        let mut body = String::new();
        let mut cursor = callee.tokens[open].end;
        for k in open + 1..yield_at {
            let t = callee.tokens[k];
            if t.kind == Kind::Value {
                body.push_str(&callee.text[cursor..t.start]);
                body.push_str(&rename[t.text(&callee.text)]);
                cursor = t.end;
            }
        }
        body.push_str(&callee.text[cursor..callee.tokens[yield_at].start]);

        // Includes inside the body, expanded with the callee on the stack.
        let fragment = Script::parse_at(&callee.origin, &body, callee.line(open), true)?;
        stack.push(name.to_owned());
        let mut expanded_body = String::new();
        let walked = self.walk(&fragment, stack, &mut expanded_body);
        stack.pop();
        walked?;

        if !self.expanded.iter().any(|n| n == name) {
            self.expanded.push(name.to_owned());
        }
        let body = reindent(&expanded_body, indent);
        let mut out = format!("// @{name} ({from}), inlined:");
        if !body.is_empty() {
            out.push('\n');
            out.push_str(&body);
        }
        Ok(out)
    }

    /// `%base_<instance>`, or with a further suffix if the script already uses that name.
    fn fresh(&mut self, base: &str, instance: usize) -> String {
        let mut name = format!("{base}_{instance}");
        let mut extra = 0;
        while self.used.contains(&name) {
            extra += 1;
            name = format!("{base}_{instance}_{extra}");
        }
        self.used.insert(name.clone());
        name
    }
}

/// The index of the `transform.yield` that ends the region `open..close` (not one nested in
/// an inner region).
fn top_level_yield(script: &Script, open: usize, close: usize) -> Option<usize> {
    let mut found = None;
    let mut k = open + 1;
    while k < close {
        let t = script.tokens[k];
        match t.kind {
            Kind::Open(_) => k = script.partner(k).unwrap_or(k),
            Kind::Ident if t.text(&script.text) == YIELD => found = Some(k),
            _ => {}
        }
        k += 1;
    }
    found
}

fn value_names(script: &Script) -> HashSet<String> {
    script
        .tokens
        .iter()
        .filter(|t| t.kind == Kind::Value)
        .map(|t| t.text(&script.text).to_owned())
        .collect()
}

/// The whitespace that starts the line holding byte `at`.
fn indentation(text: &str, at: usize) -> String {
    let start = script::line_start(text, at);
    text[start..]
        .chars()
        .take_while(|c| *c == ' ' || *c == '\t')
        .collect()
}

/// `text` without its leading/trailing blank lines and common indentation, every line then
/// indented by `indent`.
fn reindent(text: &str, indent: &str) -> String {
    let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
    let first = lines.iter().position(|l| !l.is_empty());
    let last = lines.iter().rposition(|l| !l.is_empty());
    let (Some(first), Some(last)) = (first, last) else {
        return String::new();
    };
    let lines = &lines[first..=last];
    let common = lines
        .iter()
        .filter(|l| !l.is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    lines
        .iter()
        .map(|l| {
            if l.is_empty() {
                String::new()
            } else {
                format!(
                    "{indent}{}",
                    &l[common.min(l.len() - l.trim_start().len())..]
                )
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Inserts the library sequences the script's `foreach_match` ops refer to (and what those
/// refer to) into the module holding them.
fn insert_match_definitions(
    text: String,
    origin: &str,
    library: &Library,
) -> Result<(String, Vec<String>), TransformError> {
    if !text.contains(FOREACH_MATCH) {
        return Ok((text, Vec::new()));
    }
    let script = Script::parse(origin, &text)?;
    let Some(first) = script.foreach_matches.first() else {
        return Ok((text, Vec::new()));
    };
    let defined: HashSet<&str> = script.sequences.iter().map(|s| s.name.as_str()).collect();
    let mut needed: HashSet<String> = HashSet::new();
    let mut work: Vec<(String, u32)> = script
        .foreach_matches
        .iter()
        .flat_map(|fm| fm.symbols.iter().map(|s| (s.clone(), fm.line)))
        .collect();
    while let Some((name, line)) = work.pop() {
        if defined.contains(name.as_str()) || needed.contains(&name) {
            continue;
        }
        let Some(definition) = library.definition(&name) else {
            return Err(TransformError::UnknownMatchSymbol {
                origin: origin.to_owned(),
                line,
                name,
                known: library.names(),
            });
        };
        for dep in referenced_symbols(definition) {
            if dep != name {
                work.push((dep, line));
            }
        }
        needed.insert(name);
    }
    if needed.is_empty() {
        return Ok((text, Vec::new()));
    }
    // In library order, so the result does not depend on hashing.
    let ordered: Vec<String> = library
        .entries()
        .into_iter()
        .map(|e| e.name)
        .filter(|n| needed.contains(n))
        .collect();
    let Some((open, indent)) = enclosing_transform_module(&script, first.op) else {
        return Err(TransformError::NoModule {
            origin: origin.to_owned(),
            line: first.line,
            names: ordered,
        });
    };
    let inner = format!("{indent}  ");
    let mut insertion = format!(
        "\n{inner}// Inserted by triton-npu: the transform library sequences that \
         transform.foreach_match refers to\n{inner}// (matchers and actions are looked up by \
         symbol, so they cannot be expanded inline).\n"
    );
    for name in &ordered {
        let definition = library.definition(name).unwrap_or_default();
        insertion.push('\n');
        insertion.push_str(&reindent(definition, &inner));
        insertion.push('\n');
    }
    let at = script.tokens[open].end;
    let mut out = String::with_capacity(text.len() + insertion.len());
    out.push_str(&text[..at]);
    out.push_str(&insertion);
    out.push_str(&text[at..]);
    Ok((out, ordered))
}

/// The `@symbols` a definition's text refers to (its own name included).
fn referenced_symbols(definition: &str) -> Vec<String> {
    lex::tokenize(definition)
        .unwrap_or_default()
        .iter()
        .filter(|t| t.kind == Kind::Symbol)
        .map(|t| t.text(definition)[1..].trim_matches('"').to_owned())
        .collect()
}

/// The innermost `module [@name] attributes {… transform.with_named_sequence …} {` whose body
/// holds token `at`: the index of its body's `{` and the module line's indentation.
fn enclosing_transform_module(script: &Script, at: usize) -> Option<(usize, String)> {
    let mut best: Option<(usize, String)> = None;
    for (i, t) in script.tokens.iter().enumerate() {
        if i >= at {
            break;
        }
        if t.kind != Kind::Ident || t.text(&script.text) != "module" {
            continue;
        }
        let mut k = i + 1;
        if script.tokens.get(k).is_some_and(|t| t.kind == Kind::Symbol) {
            k += 1;
        }
        if script.tokens.get(k).map(|t| t.text(&script.text)) != Some("attributes")
            || !script.is_open(k + 1, Bracket::Brace)
        {
            continue;
        }
        let Some(dict_end) = script.partner(k + 1) else {
            continue;
        };
        let marked = (k + 2..dict_end).any(|d| script.tok(d) == "transform.with_named_sequence");
        let body = dict_end + 1;
        if !marked || !script.is_open(body, Bracket::Brace) {
            continue;
        }
        if script.partner(body).is_some_and(|close| close > at) {
            best = Some((body, indentation(&script.text, t.start)));
        }
    }
    best
}

#[cfg(test)]
mod tests;
