//! The gRPC messages' codec: prost's, except that a message which does not decode is
//! the client's error (INVALID_ARGUMENT, naming the message type and what failed), not
//! INTERNAL as prost's codec answers (an operator's alert on INTERNAL must mean a fault
//! of the daemon). The generated service and client use it (build.rs: codec_path).

use std::marker::PhantomData;

use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder};
use tonic::Status;
use tonic_prost::{ProstCodec, ProstDecoder, ProstEncoder};

/// prost's codec with decode errors answered INVALID_ARGUMENT.
#[derive(Debug, Clone)]
pub struct CuzkCodec<T, U> {
    _pd: PhantomData<(T, U)>,
}

impl<T, U> Default for CuzkCodec<T, U> {
    fn default() -> Self {
        CuzkCodec { _pd: PhantomData }
    }
}

impl<T, U> Codec for CuzkCodec<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = ArgumentDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstCodec::<T, U>::raw_encoder(BufferSettings::default())
    }

    fn decoder(&mut self) -> Self::Decoder {
        ArgumentDecoder { inner: ProstCodec::<T, U>::raw_decoder(BufferSettings::default()) }
    }
}

/// prost's decoder, its errors turned into INVALID_ARGUMENT.
#[derive(Debug, Clone)]
pub struct ArgumentDecoder<U> {
    inner: ProstDecoder<U>,
}

impl<U: prost::Message + Default> Decoder for ArgumentDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        self.inner.decode(buf).map_err(|e| {
            let name = std::any::type_name::<U>().rsplit("::").next().unwrap_or("message");
            Status::invalid_argument(format!("the {name} message does not decode: {}", e.message()))
        })
    }

    fn buffer_settings(&self) -> BufferSettings {
        self.inner.buffer_settings()
    }
}
