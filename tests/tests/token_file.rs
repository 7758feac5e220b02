//! The official token file (`$MZBENCHTOKEN`) and `$MZBENCH_API_HOST`, read by
//! `BenchClient::from_host`, `with_token_file` and `from_env`. Environment variables are
//! process-wide, so this binary holds one test that changes them in sequence.

use std::path::PathBuf;

use benchlink_core::bench::ReasonCode;
use benchlink_std::bench::{BenchClient, ServerAddress, StartOptions, HOST_ENV};
use benchlink_tests::{hello, server_with, wait_final, within, PATIENCE};

const TOKEN_ENV: &str = benchlink_std::bench::token::TOKEN_FILE_ENV;

fn token_file(name: &str, contents: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("benchlink-token-{}-{name}", std::process::id()));
    std::fs::write(&path, contents).expect("writing a token file");
    path
}

fn bounded(c: BenchClient) -> BenchClient {
    c.with_reply_timeout(Some(PATIENCE))
        .with_stream_idle_timeout(Some(PATIENCE))
}

fn forbidden(c: &mut BenchClient, what: &str) {
    match c.clusters_info() {
        Err(e) => assert_eq!(e.reason_code(), Some(ReasonCode::Forbidden), "{what}: {e}"),
        Ok(v) => panic!("{what}: expected 403, got {v:?}"),
    }
}

#[test]
fn token_file_and_host_from_the_environment() {
    let server = server_with(|c| {
        c.users = Some(vec![benchlink_sandbox::bench::User::new(
            "user",
            "file-token",
        )])
    });
    let host = server.host();
    let files = [
        token_file(
            "per-host",
            &format!("# tokens\nlocalhost:1 other\n{host} file-token   # this server\n"),
        ),
        token_file("global", "file-token\n"),
        token_file("elsewhere", "localhost:1 file-token\n"),
    ];
    let [per_host, global, elsewhere] = &files;

    // A per-host line, through from_host.
    std::env::set_var(TOKEN_ENV, per_host);
    let mut c = bounded(BenchClient::from_host(&host).expect("from_host"));
    let id = c
        .start(&hello(), &StartOptions::default())
        .expect("start with the file's token");
    assert_eq!(wait_final(&mut c, id).status_text, "complete");
    let lines = within(PATIENCE, "log with the file's token", move || {
        c.log(id).expect("log").count()
    });
    assert!(lines > 0);
    // The same through new + with_token_file.
    let address = ServerAddress::parse(&host).expect("address");
    let mut c = bounded(
        BenchClient::new(address.clone())
            .expect("client")
            .with_token_file(),
    );
    c.clusters_info().expect("with_token_file");
    // A bare client does not read the file.
    forbidden(
        &mut bounded(BenchClient::new(address.clone()).expect("client")),
        "new without a token",
    );

    // A one-word line is a token for every host.
    std::env::set_var(TOKEN_ENV, global);
    bounded(BenchClient::from_host(&host).expect("from_host"))
        .status(id)
        .expect("global token");

    // Only another host's token: none for this one.
    std::env::set_var(TOKEN_ENV, elsewhere);
    forbidden(
        &mut bounded(BenchClient::from_host(&host).expect("from_host")),
        "token of another host",
    );
    // A missing file: no token, no error.
    std::env::set_var(
        TOKEN_ENV,
        std::env::temp_dir().join("benchlink-no-such-file"),
    );
    forbidden(
        &mut bounded(BenchClient::from_host(&host).expect("from_host")),
        "missing token file",
    );
    // An explicit token wins over the file.
    bounded(
        BenchClient::from_host(&host)
            .expect("from_host")
            .with_token("file-token"),
    )
    .status(id)
    .expect("explicit token");

    // from_env: the host from MZBENCH_API_HOST, the token from the file.
    std::env::set_var(TOKEN_ENV, per_host);
    std::env::set_var(HOST_ENV, &host);
    let mut c = bounded(BenchClient::from_env().expect("from_env"));
    assert_eq!(c.address().authority, host);
    assert_eq!(
        c.status(id).expect("status via from_env").status_text,
        "complete"
    );
    std::env::remove_var(HOST_ENV);
    assert_eq!(
        BenchClient::from_env()
            .expect("from_env")
            .address()
            .authority,
        "localhost:4800",
        "the official default"
    );

    std::env::remove_var(TOKEN_ENV);
    for f in &files {
        let _ = std::fs::remove_file(f);
    }
}
