//! Generates the gRPC code of `proto/cuzk/v1/proving.proto` (server and client) into the
//! build's output folder. protox parses the file in Rust, so no `protoc` is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/cuzk/v1/proving.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["proto"])?;
    tonic_prost_build::configure().compile_fds(descriptors)?;
    Ok(())
}
