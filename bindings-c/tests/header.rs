//! Keeps `include/frognano.h` in sync with the Rust sources: the header is generated with the
//! cbindgen library and compared with the committed file. Set `FROGNANO_UPDATE_HEADER=1` to
//! write the file instead.

use std::path::Path;

#[test]
fn header_is_up_to_date() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = match cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")) {
        Ok(config) => config,
        Err(e) => panic!("cbindgen.toml: {e}"),
    };
    let bindings = match cbindgen::Builder::new()
        .with_crate(crate_dir)
        .with_config(config)
        .generate()
    {
        Ok(bindings) => bindings,
        Err(e) => panic!("generating the header failed: {e}"),
    };
    let mut generated = Vec::new();
    bindings.write(&mut generated);
    let generated = String::from_utf8_lossy(&generated).into_owned();

    let header = crate_dir.join("include").join("frognano.h");
    if std::env::var_os("FROGNANO_UPDATE_HEADER").is_some_and(|v| v == "1") {
        if let Err(e) = std::fs::write(&header, &generated) {
            panic!("writing {}: {e}", header.display());
        }
        return;
    }
    let committed = std::fs::read_to_string(&header).unwrap_or_default();
    if committed != generated {
        let line = committed
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| committed.lines().count().min(generated.lines().count()));
        panic!(
            "include/frognano.h is stale (first difference at line {}: committed {:?}, \
             generated {:?}); regenerate it with \
             FROGNANO_UPDATE_HEADER=1 cargo test -p frognano-c --test header",
            line + 1,
            committed.lines().nth(line).unwrap_or("<end of file>"),
            generated.lines().nth(line).unwrap_or("<end of file>"),
        );
    }
}
