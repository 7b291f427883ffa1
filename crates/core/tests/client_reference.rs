//! vectors/client.json's expected values come from an independent Python reference
//! (vectors/tools/client_reference.py, written from semantics §9); a hand-edited or stale `expect`
//! fails here, not only on one host. (The other references run in tests/json.rs.)
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[test]
fn client_vectors_agree_with_the_python_reference() {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../vectors/tools/client_reference.py"
    );
    let output = std::process::Command::new("python3")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .arg(script)
        .arg("--check")
        .output()
        .unwrap_or_else(|e| panic!("python3 {script}: {e} (python3 is needed to test)"));
    assert!(
        output.status.success(),
        "client_reference.py disagrees with vectors/client.json:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
