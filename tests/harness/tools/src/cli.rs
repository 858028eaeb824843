//! Command lines parsed the way LLVM's `cl` library parses them (the real air-opt, aircc, llc
//! and triton-shared-opt all use it), with LLVM's error texts.
//!
//! Long options may be spelled `-opt` or `--opt`; values come as `--opt=value` or
//! `--opt value`; one-letter value options also accept `-ovalue`. `--` ends the options; a
//! lone `-` is a positional (stdin).

/// How an option takes its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `--flag` (or `--flag=true|false|1|0`).
    Flag,
    /// `--opt value` or `--opt=value`; the last occurrence wins.
    Value,
    /// `--opt` or `--opt=value` (never takes the next token).
    OptionalValue,
    /// Like `Value`, but every occurrence is kept.
    List,
}

#[derive(Debug, Clone, Copy)]
pub struct Spec {
    pub name: &'static str,
    pub kind: Kind,
}

pub const fn flag(name: &'static str) -> Spec {
    Spec {
        name,
        kind: Kind::Flag,
    }
}
pub const fn value(name: &'static str) -> Spec {
    Spec {
        name,
        kind: Kind::Value,
    }
}
pub const fn optional(name: &'static str) -> Spec {
    Spec {
        name,
        kind: Kind::OptionalValue,
    }
}
pub const fn list(name: &'static str) -> Spec {
    Spec {
        name,
        kind: Kind::List,
    }
}

/// The options seen, in command-line order, and the positionals.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parsed {
    pub options: Vec<(&'static str, Option<String>)>,
    pub positionals: Vec<String>,
}

impl Parsed {
    /// Whether a flag is on (the last `--flag=false` turns it off).
    pub fn flag(&self, name: &str) -> bool {
        self.options
            .iter()
            .rev()
            .find(|(n, _)| *n == name)
            .is_some_and(|(_, v)| v.as_deref() != Some("false") && v.as_deref() != Some("0"))
    }

    pub fn present(&self, name: &str) -> bool {
        self.options.iter().any(|(n, _)| *n == name)
    }

    /// The last value given.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.options
            .iter()
            .rev()
            .find(|(n, _)| *n == name)
            .and_then(|(_, v)| v.as_deref())
    }

    /// Every value given, in order.
    pub fn values(&self, name: &str) -> Vec<&str> {
        self.options
            .iter()
            .filter(|(n, _)| *n == name)
            .filter_map(|(_, v)| v.as_deref())
            .collect()
    }
}

/// Parses `args` (without the program name). `tool` prefixes errors; `argv0` appears in the
/// `Try:` hint. Errors are the texts LLVM prints (without the trailing newline).
pub fn parse(
    tool: &str,
    argv0: &str,
    args: &[String],
    specs: &[Spec],
    positionals: std::ops::RangeInclusive<usize>,
) -> Result<Parsed, String> {
    let mut parsed = Parsed::default();
    let mut it = args.iter().peekable();
    let mut options_done = false;
    while let Some(arg) = it.next() {
        if options_done || arg == "-" || !arg.starts_with('-') {
            parsed.positionals.push(arg.clone());
            continue;
        }
        if arg == "--" {
            options_done = true;
            continue;
        }
        let body = arg.strip_prefix("--").unwrap_or(&arg[1..]);
        let (name, inline) = match body.split_once('=') {
            Some((n, v)) => (n, Some(v.to_owned())),
            None => (body, None),
        };
        let (spec, inline) = match specs.iter().find(|s| s.name == name) {
            Some(s) => (s, inline),
            // `-ofile`: a one-letter value option glued to its value.
            None => match specs.iter().find(|s| {
                s.name.len() == 1
                    && matches!(s.kind, Kind::Value | Kind::List)
                    && !arg.starts_with("--")
                    && body.starts_with(s.name)
            }) {
                Some(s) => (s, Some(body[1..].to_owned())),
                None => {
                    return Err(format!(
                        "{tool}: Unknown command line argument '{arg}'.  Try: '{argv0} --help'"
                    ));
                }
            },
        };
        let dashes = if spec.name.len() == 1 { "-" } else { "--" };
        let value = match spec.kind {
            Kind::Flag => match inline.as_deref() {
                None | Some("true") | Some("1") => None,
                Some("false") | Some("0") => Some("false".to_owned()),
                Some(v) => {
                    return Err(format!(
                        "{tool}: for the {dashes}{} option: '{v}' is invalid value for boolean \
                         argument! Try 0 or 1",
                        spec.name
                    ));
                }
            },
            Kind::OptionalValue => inline,
            Kind::Value | Kind::List => match inline {
                Some(v) => Some(v),
                None => match it.next() {
                    Some(v) => Some(v.clone()),
                    None => {
                        return Err(format!(
                            "{tool}: for the {dashes}{} option: requires a value!",
                            spec.name
                        ));
                    }
                },
            },
        };
        parsed.options.push((spec.name, value));
    }
    let n = parsed.positionals.len();
    if n < *positionals.start() {
        return Err(format!(
            "{tool}: Not enough positional command line arguments specified!\n\
             Must specify at least {} positional argument: See: {argv0} --help",
            positionals.start()
        ));
    }
    if n > *positionals.end() {
        return Err(format!(
            "{tool}: Too many positional arguments specified!\n\
             Can specify at most {} positional arguments: See: {argv0} --help",
            positionals.end()
        ));
    }
    Ok(parsed)
}

/// Parses an unsigned option value with LLVM's error text.
pub fn unsigned(tool: &str, option: &str, value: &str) -> Result<u64, String> {
    value.parse().map_err(|_| {
        format!("{tool}: for the --{option} option: '{value}' value invalid for uint argument!")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPECS: &[Spec] = &[
        flag("no-xbridge"),
        value("o"),
        value("device"),
        list("sizes"),
        optional("omit"),
    ];

    fn p(args: &[&str]) -> Result<Parsed, String> {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        parse("aircc", "/bin/aircc", &args, SPECS, 1..=1)
    }

    #[test]
    fn spellings() {
        let r = p(&[
            "-no-xbridge",
            "--device",
            "npu2",
            "-oout",
            "--sizes=4",
            "-sizes",
            "8",
            "--omit",
            "in.mlir",
        ])
        .unwrap();
        assert!(r.flag("no-xbridge"));
        assert_eq!(r.value("device"), Some("npu2"));
        assert_eq!(r.value("o"), Some("out"));
        assert_eq!(r.values("sizes"), ["4", "8"]);
        assert!(r.present("omit") && r.value("omit").is_none());
        assert_eq!(r.positionals, ["in.mlir"]);
        assert_eq!(p(&["--o=x", "-"]).unwrap().value("o"), Some("x"));
    }

    #[test]
    fn llvm_errors() {
        assert_eq!(
            p(&["--frob", "x"]).unwrap_err(),
            "aircc: Unknown command line argument '--frob'.  Try: '/bin/aircc --help'"
        );
        assert_eq!(
            p(&["in", "-o"]).unwrap_err(),
            "aircc: for the -o option: requires a value!"
        );
        assert!(p(&[]).unwrap_err().contains("Not enough positional"));
        assert!(p(&["a", "b"]).unwrap_err().contains("Too many positional"));
        assert!(
            p(&["--no-xbridge=maybe", "x"])
                .unwrap_err()
                .contains("invalid value for boolean")
        );
        // A value option swallows the next token, as LLVM does.
        assert!(
            p(&["--device", "in.mlir"])
                .unwrap_err()
                .contains("Not enough positional")
        );
    }
}
