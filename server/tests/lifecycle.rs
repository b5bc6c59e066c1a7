//! `pi-forge ui` start, reuse, replacement after a crash, restart and `ui stop`, as real
//! processes.

mod support;

use std::time::Duration;

use support::{split_url, Dirs, Server};

/// Runs `pi-forge ui --no-open --port 0 --project <p> [extra]` to completion (the reuse case)
/// and returns its first stdout line.
fn run_ui(dirs: &Dirs, extra: &[&str]) -> (std::process::ExitStatus, String, String) {
    let project = dirs.project();
    let mut args = vec![
        "ui",
        "--no-open",
        "--port",
        "0",
        "--project",
        project.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = dirs.command(&args).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    (
        out.status,
        stdout.lines().next().unwrap_or_default().to_string(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn meta_ok(server_url: &str) -> bool {
    let (base, token) = split_url(server_url);
    reqwest::blocking::Client::new()
        .get(format!("{base}/api/meta"))
        .header("x-pi-forge-token", token)
        .timeout(Duration::from_secs(5))
        .send()
        .is_ok_and(|r| r.status().is_success())
}

#[test]
fn a_second_run_reuses_the_live_server_and_a_dead_one_is_replaced() {
    let dirs = Dirs::new();
    let mut first = Server::start(&dirs, &[], &[]);
    assert!(meta_ok(&first.url));
    let states = dirs.state_files();
    assert_eq!(states.len(), 1);
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&states[0]).unwrap()).unwrap();
    assert_eq!(record["url"], first.url);
    assert_eq!(record["port"], first.port);
    assert_eq!(record["pid"], first.child.id());
    assert_eq!(record["project"], dirs.project().display().to_string());
    assert_eq!(record["version"], env!("CARGO_PKG_VERSION"));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&states[0]).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let dir_mode = std::fs::metadata(states[0].parent().unwrap())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(dir_mode & 0o777, 0o700);
    }

    // While the first lives, a second run prints the same URL and exits without serving.
    for _ in 0..2 {
        let (status, url, stderr) = run_ui(&dirs, &[]);
        assert!(status.success(), "{stderr}");
        assert_eq!(url, first.url, "{stderr}");
        assert!(stderr.contains("already running"), "{stderr}");
    }
    assert!(
        first.child.try_wait().unwrap().is_none(),
        "the first server still runs"
    );

    // After it dies (without cleaning up), a new one starts with a new URL.
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    let second = Server::start(&dirs, &[], &[]);
    assert_ne!(second.url, first.url);
    assert!(meta_ok(&second.url));
    assert!(!meta_ok(&first.url));
    assert_eq!(dirs.state_files().len(), 1);
    let (status, url, _) = run_ui(&dirs, &[]);
    assert!(status.success());
    assert_eq!(url, second.url);
}

#[test]
fn ui_stop_stops_the_server_and_removes_its_state_file() {
    let dirs = Dirs::new();
    let mut server = Server::start(&dirs, &[], &[]);
    assert_eq!(dirs.state_files().len(), 1);
    let out = ui_stop(&dirs);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("stopped"));
    let status = server
        .wait_exit(Duration::from_secs(10))
        .expect("the server exits after ui stop");
    assert!(
        status.success(),
        "graceful shutdown exits 0: {status:?}\n{}",
        server.stderr()
    );
    assert!(dirs.state_files().is_empty());
    assert!(!meta_ok(&server.url));

    // Stopping again is fine and says nothing is running.
    let out = ui_stop(&dirs);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no editor is running"));
}

#[test]
fn restart_replaces_the_server_with_a_new_token() {
    let dirs = Dirs::new();
    let mut first = Server::start(&dirs, &[], &[]);
    let mut second = Server::start(&dirs, &["--restart"], &[]);
    assert_ne!(second.url, first.url);
    // The same address (origin): open tabs and the drafts a browser keeps per origin find
    // the new server there.
    assert_eq!(second.port, first.port, "{}", second.stderr());
    first
        .wait_exit(Duration::from_secs(10))
        .expect("--restart stops the old server");
    assert!(meta_ok(&second.url));
    assert_eq!(dirs.state_files().len(), 1);
    // SIGTERM also shuts down gracefully and removes the state file.
    std::process::Command::new("kill")
        .args(["-TERM", &second.child.id().to_string()])
        .status()
        .unwrap();
    second
        .wait_exit(Duration::from_secs(10))
        .expect("SIGTERM stops the server");
    assert!(dirs.state_files().is_empty());
}

#[test]
fn a_stopped_editor_starts_again_at_its_address_unless_the_port_is_taken() {
    let dirs = Dirs::new();
    let first = Server::start(&dirs, &[], &[]);
    let port = first.port;
    let stop = |dirs: &Dirs| {
        let out = ui_stop(dirs);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    stop(&dirs);
    drop(first);
    let second = Server::start(&dirs, &[], &[]);
    assert_eq!(second.port, port, "{}", second.stderr());
    stop(&dirs);
    drop(second);

    // The port is taken meanwhile: another one, and the warning says what that means.
    let taken = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
    let third = Server::start(&dirs, &[], &[]);
    assert_ne!(third.port, port);
    let stderr = third.stderr();
    assert!(
        stderr.contains(&format!(
            "pi-forge: the editor's previous address, port {port}, is not free ("
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("using another port, so tabs still open at the old one must be opened again at the new address (their unsaved drafts stay in the browser, under the old one)"),
        "{stderr}"
    );
    drop(taken);
}

#[test]
fn the_configured_port_is_used_and_a_taken_one_falls_back() {
    let dirs = Dirs::new();
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = free.local_addr().unwrap().port();
    drop(free);
    dirs.write(
        ".pi/forge/config.json",
        &format!("{{\"webEditor\":{{\"port\":{port}}}}}"),
    );
    let project = dirs.project();
    let mut cmd = dirs.command(&["ui", "--no-open", "--project", project.to_str().unwrap()]);
    let server = Server::from_command(&dirs, &mut cmd);
    assert_eq!(server.port, port, "{}", server.stderr());
    drop(server);

    // Take a port, then configure it: the server must warn and pick another.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    dirs.write(
        ".pi/forge/config.json",
        &format!("{{\"webEditor\":{{\"port\":{port}}}}}"),
    );
    let project = dirs.project();
    let mut cmd = dirs.command(&["ui", "--no-open", "--project", project.to_str().unwrap()]);
    let server = Server::from_command(&dirs, &mut cmd);
    assert_ne!(server.port, port);
    assert!(server
        .stderr()
        .contains(&format!("cannot listen on 127.0.0.1:{port}")));
    drop(server);
    drop(taken);
}

#[test]
fn the_demo_serves_seeded_resources() {
    let dirs = Dirs::new();
    let mut cmd = dirs.command(&["ui", "--no-open", "--demo", "--port", "0"]);
    let server = Server::from_command(&dirs, &mut cmd);
    let (base, token) = split_url(&server.url);
    let client = reqwest::blocking::Client::new();
    let get = |path: &str| -> serde_json::Value {
        client
            .get(format!("{base}{path}"))
            .header("x-pi-forge-token", &token)
            .send()
            .unwrap()
            .json()
            .unwrap()
    };
    assert_eq!(get("/api/meta")["demo"], true);
    assert!(get("/api/stacks")["stacks"].as_array().unwrap().len() >= 4);
    assert_eq!(
        get("/api/profiles")["profiles"].as_array().unwrap().len(),
        2
    );
    assert_eq!(
        get("/api/capabilities")["capabilities"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert!(
        dirs.state_files().is_empty(),
        "the demo writes no state file"
    );
}

/// Issue 16, point 6: the browser is opened through a user-only launch page; the token is never
/// an argument of the opener (readable by every local user in the process list) nor in stderr.
#[cfg(unix)]
#[test]
fn the_browser_opens_a_user_only_launch_page_and_never_sees_the_token() {
    use std::os::unix::fs::PermissionsExt;
    let dirs = Dirs::new();
    let argv_file = dirs.root.path().join("opener-args.txt");
    let opener = dirs.root.path().join("opener.sh");
    std::fs::write(
        &opener,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" > '{}.part' && mv '{0}.part' '{0}'\n",
            argv_file.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&opener, std::fs::Permissions::from_mode(0o755)).unwrap();
    let project = dirs.project();
    let project_text = project.to_str().unwrap().to_string();
    let opener_text = opener.to_str().unwrap().to_string();
    let mut cmd = dirs.command(&["ui", "--port", "0", "--project", &project_text]);
    cmd.env("PI_FORGE_BROWSER", &opener_text);
    let mut server = Server::from_command(&dirs, &mut cmd);
    // The opener runs right after the URL is printed; give it a generous while.
    let mut waited = 0;
    while !argv_file.exists() && waited < 300 {
        std::thread::sleep(Duration::from_millis(50));
        waited += 1;
    }
    let args = std::fs::read_to_string(&argv_file).expect("the opener ran");
    let args: Vec<&str> = args.lines().collect();
    assert_eq!(args.len(), 1, "{args:?}");
    assert!(!args[0].contains(&server.token), "{args:?}");
    let page = std::path::PathBuf::from(args[0].strip_prefix("file://").unwrap());
    assert_eq!(
        page.parent().unwrap(),
        dirs.run_dir().join("pi-forge").as_path()
    );
    let mode = std::fs::metadata(&page).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains(&format!("content=\"0;url={}\"", server.url)),
        "{html}"
    );
    assert!(!server.stderr().contains(&server.token));
    // Stopping the server removes the page.
    terminate(&mut server);
    assert!(!page.exists());
}

/// The launch page `pi-forge ui open` writes for a running server (what `/forge ui` in Pi runs)
/// goes when that server stops: no file holding the token outlives the editor.
#[cfg(unix)]
#[test]
fn the_launch_page_of_ui_open_goes_with_the_server() {
    let dirs = Dirs::new();
    let mut server = Server::start(&dirs, &[], &[]);
    let project = dirs.project();
    let out = dirs
        .command(&["ui", "open", "--project", project.to_str().unwrap()])
        .env("PI_FORGE_BROWSER", "/bin/true")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let state = dirs.state_files();
    assert_eq!(state.len(), 1);
    let page = launch_page(&state[0]);
    let html = std::fs::read_to_string(&page).expect("ui open wrote the launch page");
    assert!(html.contains(&format!("url={}", server.url)), "{html}");
    terminate(&mut server);
    assert!(!page.exists(), "{} outlived the server", page.display());
    assert_eq!(dirs.state_files(), Vec::<std::path::PathBuf>::new());
}

/// A launch page left by a server that was killed (no clean stop) is removed by the next
/// server of the project when it starts, before any browser is opened.
#[cfg(unix)]
#[test]
fn a_stale_launch_page_goes_when_the_next_server_starts() {
    let dirs = Dirs::new();
    let mut first = Server::start(&dirs, &[], &[]);
    let state = dirs.state_files();
    let page = launch_page(&state[0]);
    std::fs::write(
        &page,
        "<meta http-equiv=\"refresh\" content=\"0;url=http://127.0.0.1:1/?token=dead\">",
    )
    .unwrap();
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    assert!(page.exists(), "a killed server cannot clean up");
    let second = Server::start(&dirs, &[], &[]);
    assert_ne!(second.url, first.url);
    assert!(!page.exists(), "{} survived the next start", page.display());
}

/// The launch page beside a state file: `ui-<hash>-open.html`.
fn launch_page(state: &std::path::Path) -> std::path::PathBuf {
    let stem = state.file_stem().unwrap().to_str().unwrap();
    state.with_file_name(format!("{stem}-open.html"))
}

/// SIGTERM, then the server's exit within 20 s.
fn terminate(server: &mut Server) {
    std::process::Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .unwrap();
    assert!(server.wait_exit(Duration::from_secs(20)).is_some());
}

/// A copy of the pi-forge binary in the test's folder, which the test may remove or replace.
fn own_binary(dirs: &Dirs) -> std::path::PathBuf {
    let copy = dirs.root.path().join("bin/pi-forge");
    std::fs::create_dir_all(copy.parent().unwrap()).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_pi-forge"), &copy).unwrap();
    copy
}

fn start_from(dirs: &Dirs, binary: &std::path::Path) -> Server {
    let project = dirs.project();
    let cmd = dirs.command(&[]);
    let mut own = std::process::Command::new(binary);
    own.args([
        "ui",
        "--no-open",
        "--port",
        "0",
        "--project",
        project.to_str().unwrap(),
    ])
    .current_dir(project);
    for (key, value) in cmd.get_envs() {
        match value {
            Some(v) => own.env(key, v),
            None => own.env_remove(key),
        };
    }
    Server::from_command(dirs, &mut own)
}

#[test]
fn a_server_whose_binary_is_removed_or_replaced_stops() {
    // Removed (`pi remove npm:pi-forge`): the server stops by itself, state file gone.
    let dirs = Dirs::new();
    let binary = own_binary(&dirs);
    let mut server = start_from(&dirs, &binary);
    assert!(meta_ok(&server.url));
    assert_eq!(dirs.state_files().len(), 1);
    std::fs::remove_file(&binary).unwrap();
    let status = server
        .wait_exit(Duration::from_secs(10))
        .expect("the server stops after its binary is removed");
    assert!(status.success(), "{status:?}\n{}", server.stderr());
    assert!(
        server.stderr().contains(&format!(
            "pi-forge: {} was removed or replaced; stopping this editor",
            binary.display()
        )),
        "{}",
        server.stderr()
    );
    assert!(dirs.state_files().is_empty());

    // Replaced at the same path (`pi update`): the same.
    let dirs = Dirs::new();
    let binary = own_binary(&dirs);
    let mut server = start_from(&dirs, &binary);
    let fresh = binary.with_file_name("pi-forge.new");
    std::fs::copy(env!("CARGO_BIN_EXE_pi-forge"), &fresh).unwrap();
    std::fs::rename(&fresh, &binary).unwrap();
    let status = server
        .wait_exit(Duration::from_secs(10))
        .expect("the server stops after its binary is replaced");
    assert!(status.success(), "{status:?}\n{}", server.stderr());
    assert!(dirs.state_files().is_empty());

    // Untouched, it keeps running past several checks.
    let dirs = Dirs::new();
    let binary = own_binary(&dirs);
    let mut server = start_from(&dirs, &binary);
    std::thread::sleep(Duration::from_secs(5));
    assert!(
        server.child.try_wait().unwrap().is_none(),
        "{}",
        server.stderr()
    );
    assert!(meta_ok(&server.url));
}

#[test]
fn a_server_of_another_version_is_replaced_by_the_next_ui() {
    // What `pi update` leaves: the project's editor runs the old version.
    let dirs = Dirs::new();
    let mut old = Server::start(&dirs, &[], &[]);
    let states = dirs.state_files();
    assert_eq!(states.len(), 1);
    let mut record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&states[0]).unwrap()).unwrap();
    record["version"] = serde_json::Value::from("0.0.1-old");
    std::fs::write(&states[0], record.to_string()).unwrap();

    let new = Server::start(&dirs, &[], &[]);
    assert!(
        new.stderr()
            .contains("(it is another pi-forge version; restarting)"),
        "{}",
        new.stderr()
    );
    old.wait_exit(Duration::from_secs(10))
        .expect("the old server is stopped");
    assert_ne!(new.url, old.url);
    assert!(meta_ok(&new.url));
    assert!(!meta_ok(&old.url));
    assert_eq!(dirs.state_files().len(), 1, "one server, one state file");
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&dirs.state_files()[0]).unwrap()).unwrap();
    assert_eq!(record["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(record["url"], new.url);
}

/// `pi-forge ui stop` for the test project.
fn ui_stop(dirs: &Dirs) -> std::process::Output {
    let project = dirs.project();
    dirs.command(&["ui", "stop", "--project", project.to_str().unwrap()])
        .output()
        .unwrap()
}
