//! Each entry's manifest records how long its build took and how much of that the tools took.

use std::path::Path;
use std::time::Duration;

use npu_cache::{Cache, Inputs};
use npu_process::{Quiet, ToolCommand};

fn inputs(name: &str) -> Inputs {
    Inputs::new().text("kernel_name", name)
}

/// Runs `sh -c <script>` as a build runs its tools.
fn tool(dir: &Path, script: &str) -> std::io::Result<()> {
    ToolCommand::new("sh", "/bin/sh", Duration::from_secs(60))
        .arg("-c")
        .arg(script)
        .cwd(dir)
        .run(&mut Quiet)
        .map(drop)
        .map_err(std::io::Error::other)
}

#[test]
fn a_build_records_its_time_and_its_tools_time() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = Cache::at(tmp.path()).unwrap();

    let with_tools = cache
        .get_or_build(&inputs("with_tools"), |dir| {
            tool(dir, "echo one > a.txt")?;
            tool(dir, "sleep 0.05; echo two > b.txt")
        })
        .unwrap();
    let times = with_tools.manifest().build.expect("build times recorded");
    assert!(times.tools_us >= 50_000, "{times:?}");
    assert!(times.tools_us <= times.total_us, "{times:?}");

    // A build that runs no tool spent none of its time on tools.
    let without = cache
        .get_or_build(&inputs("without"), |dir| {
            std::fs::write(dir.join("x"), b"x")
        })
        .unwrap();
    assert_eq!(without.manifest().build.unwrap().tools_us, 0);

    // Served from the cache, an entry keeps the times of the build that made it.
    let again = Cache::at(tmp.path())
        .unwrap()
        .get_or_build(&inputs("with_tools"), |_| -> std::io::Result<()> {
            panic!("a hit does not build")
        })
        .unwrap();
    assert_eq!(again.manifest().build, Some(times));
}
