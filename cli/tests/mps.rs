//! `kplace mps` and `kplace_lab::mps`: the parsers on the daemon's answers (fixtures in
//! tests/fixtures/mps, see its README), clear failures without the control program or a
//! driver, and start / status / client check / stop against a fake control program (a shell
//! script keeping its state in the pipe directory) with the fake libcuda.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kplace_lab::mps::{self, Control, MpsDirs, MpsError, parse_percentage, parse_pid_list};

fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/mps")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn driver_present() -> bool {
    kplace_cuda_libs::find(kplace_cuda_libs::Library::Cuda).is_loaded()
}

#[test]
fn answers_parse_as_assumed() {
    assert_eq!(
        parse_pid_list(&fixture("get_server_list.one.txt")),
        Ok(vec![1_523_074])
    );
    assert_eq!(
        parse_pid_list(&fixture("get_server_list.two.txt")),
        Ok(vec![1_523_074, 1_523_188])
    );
    assert_eq!(
        parse_pid_list(&fixture("get_server_list.none.txt")),
        Ok(vec![])
    );
    assert_eq!(
        parse_pid_list(&fixture("get_client_list.three.txt")),
        Ok(vec![1_523_101, 1_523_122, 1_523_157])
    );
    assert_eq!(
        parse_pid_list(&fixture("get_client_list.none.txt")),
        Ok(vec![])
    );
    assert_eq!(
        parse_percentage(&fixture("get_default_active_thread_percentage.txt")),
        Ok(100.0)
    );
    // A message where a list was expected is an error quoting it, never "no clients".
    let err = parse_pid_list(&fixture("no_daemon.txt"))
        .expect_err("not a list")
        .to_string();
    assert!(err.contains("Cannot find MPS control daemon"), "{err}");
    assert!(parse_percentage(&fixture("no_daemon.txt")).is_err());
}

/// `kplace` with `PATH` set to `path` and, when given, the fake libcuda on the loader path.
fn kplace_with(path: &Path, fake_driver: bool, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kplace"));
    cmd.args(args).env("PATH", path);
    if fake_driver {
        let lib = kplace_testkit::build_c_library("fake_cuda.c", "cuda", &[]);
        cmd.env("LD_LIBRARY_PATH", lib.parent().expect("a directory"))
            .env("FAKE_CUDA_DEVICES", "1");
    }
    kplace_testkit::output(&mut cmd)
}

#[test]
fn every_command_fails_clearly_without_the_control_program() {
    let empty = tempfile::tempdir().expect("temp dir");
    let base = empty.path().join("mps");
    let base = base.to_str().expect("utf-8");
    for args in [
        &["mps", "start", "--dir", base][..],
        &["mps", "stop", "--dir", base],
    ] {
        let out = kplace_with(empty.path(), false, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("MPS cannot be used here: nvidia-cuda-mps-control not found on PATH"),
            "{err}"
        );
        if !driver_present() {
            assert!(err.contains("no CUDA driver found"), "{err}");
        }
    }
    assert!(!Path::new(base).exists(), "nothing created");
}

/// `mps status` answers "is a daemon running?", so it exits 0 when none can run here: it says
/// no daemon answers, and why.
#[test]
fn status_without_the_control_program_says_no_daemon_runs_and_exits_0() {
    let empty = tempfile::tempdir().expect("temp dir");
    let base = empty.path().join("mps");
    let base = base.to_str().expect("utf-8");
    let out = kplace_with(empty.path(), false, &["mps", "status", "--dir", base]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.starts_with(&format!("no MPS control daemon answers on {base}/pipe"))
            && said.contains("MPS cannot be used here: nvidia-cuda-mps-control not found on PATH"),
        "{said}"
    );

    let out = kplace_with(
        empty.path(),
        false,
        &["mps", "status", "--dir", base, "--json"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(json["running"], false, "{json:#}");
    assert_eq!(json["servers"], serde_json::json!([]), "{json:#}");
    let why = json["unavailable"].as_str().unwrap_or_default();
    assert!(why.contains("not found on PATH"), "{json:#}");
    assert!(!Path::new(base).exists(), "nothing created");
}

/// Writes the fake control program into `dir` and returns its path. It mimics the assumed
/// behaviour (module docs of `kplace_lab::mps`): `-d` "starts" a daemon (a `control` file in the
/// pipe directory), queries fail without one, and answers come from files the test writes; the
/// next `fake-busy` queries fail as a daemon busy with another client does.
fn fake_control(dir: &Path) -> PathBuf {
    let script = r#"#!/bin/sh
dir="${CUDA_MPS_PIPE_DIRECTORY:-/tmp/nvidia-mps}"
if [ "$1" = "-d" ]; then
    echo "fake daemon started" >> "$CUDA_MPS_LOG_DIRECTORY/control.log"
    : > "$dir/control"
    exit 0
fi
if [ ! -e "$dir/control" ]; then
    echo "Cannot find MPS control daemon process" >&2
    exit 1
fi
busy=$(cat "$dir/fake-busy" 2>/dev/null || echo 0)
if [ "$busy" -gt 0 ]; then
    echo $((busy - 1)) > "$dir/fake-busy"
    echo "Cannot send command to MPS control daemon process" >&2
    exit 1
fi
read -r cmd arg || exit 0
case "$cmd" in
    get_server_list) cat "$dir/fake-servers" 2>/dev/null || true ;;
    get_client_list) cat "$dir/fake-clients-$arg" 2>/dev/null || true ;;
    set_default_active_thread_percentage) echo "$arg" > "$dir/fake-atp"; echo "$arg" ;;
    get_default_active_thread_percentage) cat "$dir/fake-atp" 2>/dev/null || echo 100.0 ;;
    quit) rm -f "$dir/control" ;;
    *) echo "unknown command $cmd" >&2; exit 1 ;;
esac
"#;
    let path = dir.join(mps::CONTROL_PROGRAM);
    std::fs::write(&path, script).expect("write the fake");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

/// `bin` first, then the system directories the fake's shell commands need.
fn path_with(bin: &Path) -> PathBuf {
    PathBuf::from(format!("{}:/usr/bin:/bin", bin.display()))
}

#[test]
fn without_a_driver_the_commands_name_the_driver() {
    if driver_present() {
        println!("skipped: a CUDA driver is present");
        return;
    }
    let tmp = tempfile::tempdir().expect("temp dir");
    fake_control(tmp.path());
    let base = tmp.path().join("mps");
    let out = kplace_with(
        &path_with(tmp.path()),
        false,
        &["mps", "start", "--dir", base.to_str().expect("utf-8")],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("MPS cannot be used here: no CUDA driver found") && !err.contains("PATH"),
        "{err}"
    );
}

#[test]
fn start_status_client_check_and_stop_against_a_fake_daemon() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let program = fake_control(tmp.path());
    let path = path_with(tmp.path());
    let base = tmp.path().join("mps");
    let base_arg = base.to_str().expect("utf-8");
    let dirs = MpsDirs::under(&base);
    let run = |args: &[&str]| kplace_with(&path, true, args);

    let out = run(&["mps", "status", "--dir", base_arg]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).starts_with("no MPS control daemon answers on"),
        "{}",
        text(&out)
    );

    let out = run(&[
        "mps",
        "start",
        "--dir",
        base_arg,
        "--active-thread-percentage",
        "50",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.starts_with("started: MPS control daemon answers on"),
        "{said}"
    );
    assert!(
        said.contains("default active thread percentage 50"),
        "{said}"
    );
    assert!(said.contains("no servers"), "{said}");
    let mode = std::fs::metadata(&dirs.pipe)
        .expect("pipe dir")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700, "the pipe directory is private");
    let log = std::fs::read_to_string(dirs.log.join("control.log")).expect("the daemon's log");
    assert!(
        log.contains("fake daemon started"),
        "the log directory was passed: {log}"
    );

    let out = run(&["mps", "start", "--dir", base_arg]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("already answers"), "{}", text(&out));

    // A server with two clients.
    std::fs::write(dirs.pipe.join("fake-servers"), "4242\n").expect("write");
    std::fs::write(dirs.pipe.join("fake-clients-4242"), "777\n888\n").expect("write");
    let out = run(&["mps", "status", "--dir", base_arg, "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(json["running"], true, "{json:#}");
    assert_eq!(json["unavailable"], serde_json::Value::Null, "{json:#}");
    assert_eq!(json["default_active_thread_percentage"], 50.0, "{json:#}");
    assert_eq!(
        json["servers"],
        serde_json::json!([{"pid": 4242, "clients": [777, 888]}])
    );

    let control = Control::with_program(program.clone(), &dirs);
    let client = mps::client_status_with(&control, 888).expect("asks");
    assert!(client.is_client);
    // A daemon busy with another client's command is asked again.
    std::fs::write(dirs.pipe.join("fake-busy"), "3\n").expect("write");
    let client = mps::client_status_with(&control, 888).expect("asks again when busy");
    assert!(client.is_client);
    std::fs::write(dirs.pipe.join("fake-busy"), "1000\n").expect("write");
    let err = mps::client_status_with(&control, 888)
        .expect_err("always busy")
        .to_string();
    assert!(
        err.contains(mps::BUSY)
            && err.contains(&format!("busy at each of {} tries", mps::BUSY_TRIES)),
        "{err}"
    );
    std::fs::remove_file(dirs.pipe.join("fake-busy")).expect("rm");
    let client = mps::client_status_with(&control, 888).expect("asks");
    assert!(client.is_client);
    assert_eq!(client.server, Some(4242));
    assert_eq!(client.active_thread_percentage, Some(50.0));
    assert_eq!(client.pipe_dir, dirs.pipe);
    let other = mps::client_status_with(&control, 999).expect("asks");
    assert!(!other.is_client && other.server.is_none());

    // An answer that is not a list fails loudly.
    std::fs::write(dirs.pipe.join("fake-servers"), "server 4242 is busy\n").expect("write");
    let out = run(&["mps", "status", "--dir", base_arg]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("cannot parse the answer to `get_server_list`"),
        "{}",
        text(&out)
    );
    assert!(matches!(
        mps::client_status_with(&control, 888),
        Err(MpsError::Parse { .. })
    ));
    std::fs::write(dirs.pipe.join("fake-servers"), "").expect("write");

    let out = run(&["mps", "stop", "--dir", base_arg]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).starts_with("stopped the MPS control daemon"),
        "{}",
        text(&out)
    );
    assert!(!control.answers());
    let out = run(&["mps", "stop", "--dir", base_arg]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("nothing to stop"), "{}", text(&out));
}

#[test]
fn a_run_records_mps_even_when_it_cannot_be_checked() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let pipe = tmp.path().join("no-daemon-here");
    let run = mps::check_run(true, std::process::id(), Some(&pipe));
    assert!(run.requested);
    assert!(!run.is_client);
    assert_eq!(run.pipe_dir, pipe);
    assert!(
        run.checked.starts_with("not a client: cannot check ("),
        "{}",
        run.checked
    );
    let json = serde_json::to_value(&run).expect("JSON");
    for key in [
        "requested",
        "pipe_dir",
        "active_thread_percentage",
        "is_client",
        "checked",
    ] {
        assert!(json.get(key).is_some(), "{key} missing from {json}");
    }
}

#[test]
fn a_run_without_mps_configured_asks_no_daemon() {
    let tmp = tempfile::tempdir().expect("temp dir");
    // No pipe directory asked for and no control pipe: nothing is run, whatever PATH holds.
    let run = mps::check_run(false, std::process::id(), Some(tmp.path()));
    assert!(!run.requested && !run.is_client);
    assert!(
        run.checked
            .starts_with("MPS is not configured (CUDA_MPS_PIPE_DIRECTORY unset")
            && run
                .checked
                .contains(&tmp.path().join("control").display().to_string()),
        "{}",
        run.checked
    );
}

#[test]
fn a_control_program_saying_no_daemon_reads_as_not_running() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dirs = MpsDirs::under(&tmp.path().join("mps"));
    std::fs::create_dir_all(&dirs.pipe).expect("pipe dir");
    // A stale control pipe, and a control program that exits 0 saying no daemon listens (as
    // the real one may): not running, and never an answer that failed to parse.
    std::fs::write(dirs.control_pipe(), "").expect("stale control pipe");
    let program = tmp.path().join("nvidia-cuda-mps-control");
    std::fs::write(
        &program,
        format!("#!/bin/sh\necho \"{}\"\nexit 0\n", mps::NO_DAEMON),
    )
    .expect("write the program");
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let control = Control::with_program(program, &dirs);
    assert!(!control.answers());
    let err = control.server_list().expect_err("no daemon").to_string();
    assert!(
        err.contains("no MPS control daemon answers on") && err.contains(mps::NO_DAEMON),
        "{err}"
    );
    let err = mps::client_status_with(&control, 4242).expect_err("no daemon");
    assert!(!matches!(err, MpsError::Parse { .. }), "{err:?}");
    // Without the control pipe nothing is asked at all.
    std::fs::remove_file(dirs.control_pipe()).expect("remove");
    let err = control.server_list().expect_err("no daemon").to_string();
    assert!(err.contains("it has no control pipe"), "{err}");
}
