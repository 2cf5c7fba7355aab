// Generates the cuzk.v1 messages and service from proto/ with the protoc that
// protoc-bin-vendored ships, so building needs no protoc installed.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::var_os("PROTOC").is_none() {
        std::env::set_var("PROTOC", protoc_bin_vendored::protoc_bin_path()?);
    }
    println!("cargo:rerun-if-changed=proto/cuzk/v1/proving.proto");
    // A message that does not decode is the client's error: INVALID_ARGUMENT (src/codec.rs).
    tonic_prost_build::configure().codec_path("crate::codec::CuzkCodec").compile_protos(&["proto/cuzk/v1/proving.proto"], &["proto"])?;
    Ok(())
}
