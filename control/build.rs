//! Compiles the OpAMP messages (`proto/opamp.proto` at the repository root) into Rust with
//! prost. protox parses the .proto in-process, so no `protoc` binary is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=../proto/opamp.proto");
    let descriptors = protox::compile(["opamp.proto"], ["../proto"])?;
    prost_build::Config::new()
        // Ordered maps: a config map encodes the same bytes every time.
        .btree_map(["."])
        .compile_fds(descriptors)?;
    Ok(())
}
