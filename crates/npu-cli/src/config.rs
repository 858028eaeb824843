//! `triton-npu config`: every environment variable the driver reads, with its value here.
//!
//! Printed from the one table of variables (`npu_target::config::VARIABLES`), so it lists
//! exactly what the driver reads. An invalid value is reported the way a launch would
//! report it, and the command then exits 1.

use npu_target::Config;
use npu_target::config::VARIABLES;

#[derive(Debug, Clone, clap::Args)]
pub struct ConfigArgs {
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &ConfigArgs) -> u8 {
    run_with(args, &|name| std::env::var(name).ok())
}

/// The command over an environment lookup.
pub fn run_with(args: &ConfigArgs, env: &dyn Fn(&str) -> Option<String>) -> u8 {
    let problem = Config::load(env, &npu_target::config::overrides())
        .err()
        .map(|e| e.to_string());
    let rows: Vec<serde_json::Value> = VARIABLES
        .iter()
        .map(|v| {
            serde_json::json!({
                "name": v.name,
                "value": env(v.name).filter(|s| !s.is_empty()),
                "default": (!v.default.is_empty()).then_some(v.default),
                "property": v.setting.map(|s| s.name()),
                "meaning": v.meaning,
            })
        })
        .collect();
    if args.json {
        let out = serde_json::json!({ "variables": rows, "error": problem });
        println!("{out}");
    } else {
        let width = VARIABLES.iter().map(|v| v.name.len()).max().unwrap_or(0);
        for v in VARIABLES {
            let value = match env(v.name).filter(|s| !s.is_empty()) {
                Some(value) => format!("= {value}"),
                None if v.default.is_empty() => "(unset)".to_owned(),
                None => format!("(unset: {})", v.default),
            };
            let property = v
                .setting
                .map(|s| format!(" [npu_config.{}]", s.name()))
                .unwrap_or_default();
            println!(
                "{:width$}  {value}\n{:width$}  {}{property}",
                v.name, "", v.meaning
            );
        }
        if let Some(problem) = &problem {
            eprintln!("triton-npu config: {problem}");
        }
    }
    u8::from(problem.is_some())
}
