//! `triton-npu doctor`: one line per component, with what is missing and how to fix it.

use serde::Serialize;

use npu_target::target::{self, TargetProbe};
use npu_target::{Config, OutputFormat};

use npu_toolchain::discovery::{self, SearchPaths};

use crate::Host;

#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The state of one component.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    /// Usable, but something is worth knowing.
    Warn,
    /// Compiling cannot work until this is fixed.
    Error,
    /// Not needed for compiling (e.g. a runtime in compile-only use).
    Missing,
}

#[derive(Debug, Clone, Serialize)]
pub struct Line {
    pub component: String,
    pub status: Status,
    pub detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub version: &'static str,
    pub runtime: Option<String>,
    pub target: Option<String>,
    pub target_source: Option<String>,
    pub output_format: Option<String>,
    pub components: Vec<Line>,
    /// Everything that stops compiling, as sentences.
    pub errors: Vec<String>,
    /// Whether the configuration is usable for compiling.
    pub usable: bool,
}

impl Report {
    fn push(&mut self, component: &str, status: Status, detail: String, fix: Option<String>) {
        if status == Status::Error {
            let mut e = format!("{component}: {detail}");
            if let Some(f) = &fix {
                e.push_str(&format!(" (fix: {f})"));
            }
            self.errors.push(e);
        }
        self.components.push(Line {
            component: component.to_owned(),
            status,
            detail,
            fix,
        });
    }
}

pub fn collect(host: &Host) -> Report {
    let mut r = Report {
        version: npu_target::VERSION,
        runtime: None,
        target: None,
        target_source: None,
        output_format: None,
        components: Vec::new(),
        errors: Vec::new(),
        usable: false,
    };
    r.push(
        "triton-npu",
        Status::Ok,
        npu_target::VERSION.to_owned(),
        None,
    );
    match &host.python {
        Some(py) => {
            r.push(
                "python",
                Status::Ok,
                format!("{} ({})", py.version, py.executable.display()),
                None,
            );
            match (&py.triton_version, &py.triton_error) {
                (Some(v), _) => r.push("triton", Status::Ok, v.clone(), None),
                (None, err) => r.push(
                    "triton",
                    Status::Error,
                    format!(
                        "cannot be imported{}",
                        err.as_ref().map(|e| format!(": {e}")).unwrap_or_default()
                    ),
                    Some("pip install 'triton>=3.9,<3.10'".to_owned()),
                ),
            }
        }
        None => r.push(
            "python",
            Status::Warn,
            "not known to the standalone binary".to_owned(),
            Some("run `python -m triton_npu doctor` to include Python and triton".to_owned()),
        ),
    }

    let config = match Config::current() {
        Ok(c) => c,
        Err(e) => {
            r.push(
                "configuration",
                Status::Error,
                e.to_string(),
                Some("correct or unset the variable".to_owned()),
            );
            return r;
        }
    };
    r.runtime = Some(config.runtime.as_str().to_owned());
    r.push(
        "runtime",
        Status::Ok,
        config.runtime.as_str().to_owned(),
        None,
    );

    let driver_host = host.driver_host();
    let probes = npu_driver::runtimes::probes(&config, &driver_host);
    let probe_refs: Vec<&dyn TargetProbe> = probes.iter().map(|p| p.as_ref()).collect();
    match target::detect_memoised(&config, &probe_refs) {
        Ok(d) => {
            r.target = Some(d.target.as_str().to_owned());
            r.target_source = Some(d.source.clone());
            r.push(
                "target",
                Status::Ok,
                format!("{} ({}), from {}", d.target, d.target.arch(), d.source),
                None,
            );
            match OutputFormat::resolve(config.output_format, config.runtime, d.target) {
                Ok(f) => {
                    r.output_format = Some(f.as_str().to_owned());
                    let how = if config.output_format.is_some() {
                        "AMD_TRITON_NPU_OUTPUT_FORMAT"
                    } else {
                        "default for the target"
                    };
                    r.push("output format", Status::Ok, format!("{f} ({how})"), None);
                }
                Err(e) => r.push(
                    "output format",
                    Status::Error,
                    e.to_string(),
                    Some("unset or change AMD_TRITON_NPU_OUTPUT_FORMAT".to_owned()),
                ),
            }
        }
        Err(e) => r.push(
            "target",
            Status::Error,
            e.to_string(),
            Some("set AMD_TRITON_NPU_TARGET=npu1 or npu2".to_owned()),
        ),
    }

    let format = r.output_format.as_deref().and_then(OutputFormat::parse);
    tools(&mut r, &config, host, format);
    runtimes(&mut r, &config, &driver_host);
    remote_cache(&mut r, &config);

    r.usable = r.errors.is_empty();
    r
}

/// The remote kernel cache (Triton's `TRITON_REMOTE_CACHE_BACKEND`): what it is, the mode, and
/// whether it answers (one lookup of a key no entry has, within the remote timeout).
fn remote_cache(r: &mut Report, config: &Config) {
    use npu_target::RemoteCacheMode;
    let configured = std::env::var_os("TRITON_REMOTE_CACHE_BACKEND").is_some_and(|v| !v.is_empty());
    let link = npu_cache::remote::installed();
    let described = link.as_ref().and_then(|l| l.describe());
    let (Some(link), Some(what)) = (link, described) else {
        if configured {
            r.push(
                "remote cache",
                Status::Warn,
                "TRITON_REMOTE_CACHE_BACKEND is set, but the standalone binary cannot reach a \
                 Python backend"
                    .to_owned(),
                Some(
                    "run `python -m triton_npu doctor` (or the `triton-npu` of the Python \
                      package)"
                        .to_owned(),
                ),
            );
        } else {
            r.push(
                "remote cache",
                Status::Missing,
                "none (TRITON_REMOTE_CACHE_BACKEND is not set)".to_owned(),
                None,
            );
        }
        return;
    };
    let mode = match config.remote_cache {
        RemoteCacheMode::On => "fetch and publish",
        RemoteCacheMode::Read => "fetch only (AMD_TRITON_NPU_REMOTE_CACHE=read)",
        RemoteCacheMode::Off => "not used (AMD_TRITON_NPU_REMOTE_CACHE=off)",
    };
    // A key no entry can have: 64 zeros is not the sha256 of any input set we know of.
    match link.get(&"0".repeat(64), config.remote_cache_timeout) {
        Ok(_) => r.push(
            "remote cache",
            Status::Ok,
            format!("{what}: answers; {mode}"),
            None,
        ),
        Err(e) => r.push(
            "remote cache",
            Status::Warn,
            format!("{what}: does not answer ({e}); kernels are built locally"),
            Some(
                "start the remote (or fix TRITON_REDIS_HOST / TRITON_REDIS_PORT), or unset \
                 TRITON_REMOTE_CACHE_BACKEND"
                    .to_owned(),
            ),
        ),
    }
}

/// One line per tool a compile to `format` runs (directly or inside aircc): where it was found
/// and its version, or every place looked. A tool the format does not need (or that aiecc may
/// have built in) is a warning when missing, not an error.
fn tools(r: &mut Report, config: &Config, host: &Host, format: Option<OutputFormat>) {
    let search = SearchPaths {
        site_packages: host
            .python
            .as_ref()
            .map(|p| p.site_packages.clone())
            .unwrap_or_default(),
        triton_dir: host.python.as_ref().and_then(|p| p.triton_dir.clone()),
    };
    for tool in discovery::report_for(config, &search, format) {
        match &tool.found {
            Some(found) => r.push(
                &tool.tool,
                Status::Ok,
                format!(
                    "{} ({}, from {})",
                    found.path.display(),
                    found.identity.describe(),
                    found.origin
                ),
                None,
            ),
            None => {
                let detail = format!(
                    "not found; needed for {}; looked in {}",
                    tool.needed_for,
                    summarize_places(&tool.searched)
                );
                let status = if tool.required {
                    Status::Error
                } else {
                    Status::Warn
                };
                r.push(&tool.tool, status, detail, Some(tool.install.clone()));
            }
        }
    }
}

/// Every registered runtime: where it was found and what device it sees. None is needed to
/// compile, so a missing one is a warning only for the runtime that would run kernels.
fn runtimes(r: &mut Report, config: &Config, host: &npu_driver::Host) {
    for backend in npu_runtime::registry::backends() {
        let kind = backend.kind();
        let diagnosis = backend.diagnose(config, host);
        let selected = config.runtime == kind && !config.compile_only;
        let status = match (diagnosis.usable, selected) {
            (true, _) => Status::Ok,
            (false, true) => Status::Warn,
            (false, false) => Status::Missing,
        };
        r.push(
            &format!("{} ({kind})", kind.label()),
            status,
            diagnosis.detail,
            (!diagnosis.usable).then_some(diagnosis.fix),
        );
    }
}

/// Where discovery looked, grouped by origin: every path for configured locations, a count
/// for `PATH` (the full list is in `--json`).
fn summarize_places(searched: &[npu_toolchain::error::Candidate]) -> String {
    if searched.is_empty() {
        return "no place (no location is configured and PATH is empty)".to_owned();
    }
    let mut groups: Vec<(&str, Vec<String>)> = Vec::new();
    for c in searched {
        let entry = format!(
            "{}{}",
            c.path.display(),
            c.rejected
                .as_deref()
                .map(|w| format!(" ({w})"))
                .unwrap_or_default()
        );
        match groups.iter_mut().find(|(origin, _)| *origin == c.origin) {
            Some((_, paths)) => paths.push(entry),
            None => groups.push((&c.origin, vec![entry])),
        }
    }
    groups
        .into_iter()
        .map(|(origin, paths)| {
            if origin == "PATH" {
                format!("PATH ({} directories)", paths.len())
            } else {
                format!("{origin}: {}", paths.join(", "))
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn symbol(status: Status) -> &'static str {
    match status {
        Status::Ok => "ok",
        Status::Warn => "warn",
        Status::Error => "ERROR",
        Status::Missing => "missing",
    }
}

pub fn run(args: &DoctorArgs, host: &Host) -> u8 {
    let report = collect(host);
    if args.json {
        match serde_json::to_string_pretty(&report) {
            Ok(text) => println!("{text}"),
            Err(e) => {
                eprintln!("triton-npu doctor: cannot encode the report as JSON: {e}");
                return 1;
            }
        }
    } else {
        for line in &report.components {
            println!(
                "{:<16} {:<7} {}",
                line.component,
                symbol(line.status),
                line.detail
            );
            if let Some(fix) = &line.fix
                && line.status != Status::Ok
            {
                println!("{:<16} {:<7} fix: {fix}", "", "");
            }
        }
        if report.usable {
            println!("\nThe configuration is usable for compiling.");
        } else {
            println!(
                "\nNot usable for compiling yet: {} problem(s) above.",
                report.errors.len()
            );
        }
    }
    if report.usable { 0 } else { 1 }
}
