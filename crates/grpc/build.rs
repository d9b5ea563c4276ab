//! Compiles the RocketMQ 5 gRPC schema (`proto/apache/rocketmq/v2/*.proto`) at build time:
//! protox (a pure-Rust protobuf compiler, so no system `protoc`) parses it into a
//! `FileDescriptorSet`, and tonic-prost-build generates the prost messages and the
//! `MessagingService` server and client from that into `OUT_DIR/apache.rocketmq.v2.rs`.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("proto");
    let files = ["definition.proto", "service.proto"]
        .map(|name| root.join("apache/rocketmq/v2").join(name));
    println!("cargo:rerun-if-changed={}", root.display());
    for file in &files {
        println!("cargo:rerun-if-changed={}", file.display());
    }

    // google/protobuf/{duration,timestamp}.proto come from protox's built-in well-known types.
    let fds = protox::compile(&files, [&root])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        // Every `bytes` field (Message.body above all) as `bytes::Bytes`: zero-copy slices of
        // the request buffer instead of a `Vec<u8>` copy.
        .bytes(".")
        .compile_fds(fds)?;
    Ok(())
}
