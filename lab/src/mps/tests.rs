use super::*;

#[test]
fn pid_lists_parse_strictly() {
    assert_eq!(parse_pid_list(""), Ok(vec![]));
    assert_eq!(parse_pid_list("\n\n"), Ok(vec![]));
    assert_eq!(parse_pid_list("4242\n"), Ok(vec![4242]));
    assert_eq!(parse_pid_list(" 12 \n\n34\r\n"), Ok(vec![12, 34]));
    for bad in [
        "Cannot find MPS control daemon process\n",
        "12 34\n",
        "-5\n",
        "0\n",
        "12\nserver exited\n",
    ] {
        let err = parse_pid_list(bad).expect_err(bad).to_string();
        assert!(err.contains("one pid per line"), "{err}");
    }
}

#[test]
fn percentages_parse_strictly() {
    assert_eq!(parse_percentage("100.0\n"), Ok(100.0));
    assert_eq!(parse_percentage("  25\n"), Ok(25.0));
    for bad in ["", "abc", "101", "25 50", "-1"] {
        assert!(parse_percentage(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn directories_are_private_per_user_and_overridable() {
    let dirs = MpsDirs::under(Path::new("/x/y"));
    assert_eq!(dirs.pipe, Path::new("/x/y/pipe"));
    assert_eq!(dirs.log, Path::new("/x/y/log"));
    let base = MpsDirs::default_base();
    let text = base.to_string_lossy();
    assert!(text.contains("kplace-mps"), "{text}");
    assert_eq!(dirs.client_env()[0].0, PIPE_ENV);
}
