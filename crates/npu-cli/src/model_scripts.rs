//! Example scripts that run a whole language model (upstream's `gpt2/gpt2_inference.py` and
//! `qwen2_5/qwen_inference.py`) load it with Hugging Face `transformers`, which downloads the
//! weights at first run. Neither is a dependency of the backend: the `models` extra installs
//! the packages. `test-examples` skips such a script, saying what to install, when the
//! interpreter that would run it cannot import `transformers`, instead of failing it.

use std::path::Path;
use std::time::Duration;

use npu_process::{Output, Quiet, RunError, ToolCommand};

/// Why a model script is skipped where `transformers` is missing.
pub const MISSING_TRANSFORMERS: &str = "needs transformers and model weights: pip install \
     triton-npu[models] (the weights download from the Hugging Face Hub at first run)";

/// How long the import probe may take (a cold interpreter start, no import is made).
const PROBE_TIMEOUT: Duration = Duration::from_secs(60);

/// Whether `source` imports `transformers` (at any indentation: upstream's scripts import it
/// inside the function that loads the model).
pub fn imports_transformers(source: &str) -> bool {
    source.lines().any(|line| {
        let line = line.trim_start();
        [
            "import transformers",
            "from transformers import",
            "from transformers.",
        ]
        .iter()
        .any(|form| {
            line.strip_prefix(form).is_some_and(|rest| {
                rest.is_empty() || form.ends_with('.') || rest.starts_with([' ', ',', '\t'])
            })
        })
    })
}

/// `Some(reason)` when `script` imports `transformers` and `python`, run in `dir`, cannot
/// find it; `None` when the script can run. The probe only looks the package up (it does not
/// import it, which takes seconds).
pub fn missing_dependency(
    python: &Path,
    script: &Path,
    dir: &Path,
) -> Result<Option<&'static str>, RunError> {
    let Ok(source) = std::fs::read_to_string(script) else {
        // Unreadable: running it reports the error.
        return Ok(None);
    };
    if !imports_transformers(&source) {
        return Ok(None);
    }
    Ok((!finds_module(python, dir, "transformers")?).then_some(MISSING_TRANSFORMERS))
}

/// Whether `python`, started in `dir`, finds the top-level module `module`.
fn finds_module(python: &Path, dir: &Path, module: &str) -> Result<bool, RunError> {
    let probe = ToolCommand::new(format!("the {module} probe"), python, PROBE_TIMEOUT)
        .arg("-c")
        .arg(format!(
            "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec({module:?}) else 3)"
        ))
        .cwd(dir)
        .output(Output::Capture);
    Ok(probe.run(&mut Quiet)?.status.success())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transformers_imports_are_found_at_any_indentation() {
        for source in [
            "import transformers\n",
            "def load():\n    from transformers import AutoModelForCausalLM, AutoTokenizer\n",
            "from transformers.models.gpt2 import GPT2Model\n",
            "import os\nimport transformers as hf\n",
        ] {
            assert!(imports_transformers(source), "{source}");
        }
        for source in [
            "import torch\n",
            "# from transformers import nothing, a comment\n",
            "import transformers_lite\n",
            "from transformers_extra import x\n",
        ] {
            assert!(!imports_transformers(source), "{source}");
        }
    }

    fn python3() -> std::path::PathBuf {
        let path: Vec<_> = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .filter(|p| p.is_absolute())
            .collect();
        npu_process::lookup::find_program("python3", &path).expect("python3 on PATH")
    }

    #[test]
    fn the_probe_finds_installed_and_local_modules_only() {
        let dir = tempfile::tempdir().unwrap();
        let python = python3();
        assert!(finds_module(&python, dir.path(), "json").unwrap());
        assert!(!finds_module(&python, dir.path(), "no_such_module_issue_16").unwrap());
        // The probe runs in the script's directory, as the script does.
        std::fs::create_dir(dir.path().join("no_such_module_issue_16")).unwrap();
        std::fs::write(dir.path().join("no_such_module_issue_16/__init__.py"), "").unwrap();
        assert!(finds_module(&python, dir.path(), "no_such_module_issue_16").unwrap());
    }

    #[test]
    fn only_scripts_that_import_transformers_are_probed() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain.py");
        std::fs::write(&plain, "import torch\n").unwrap();
        let nowhere = Path::new("/nonexistent/python3");
        assert_eq!(
            missing_dependency(nowhere, &plain, dir.path()).unwrap(),
            None
        );
        let model = dir.path().join("tiny_inference.py");
        std::fs::write(&model, "from transformers import AutoModel\n").unwrap();
        assert!(missing_dependency(nowhere, &model, dir.path()).is_err());
        // A `transformers` the script's directory provides counts as installed.
        std::fs::create_dir(dir.path().join("transformers")).unwrap();
        std::fs::write(dir.path().join("transformers/__init__.py"), "").unwrap();
        assert_eq!(
            missing_dependency(&python3(), &model, dir.path()).unwrap(),
            None
        );
    }
}
