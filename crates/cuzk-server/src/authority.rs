//! HTTP/2 `:authority` for gRPC C-core clients on the unix socket.
//!
//! C-core clients (Python's grpcio, C++, Ruby …) send a unix socket's percent-encoded
//! path as `:authority` ("tmp%2Fcuzk.sock"). The HTTP/2 server refuses that as a
//! malformed authority and resets every stream (PROTOCOL_ERROR): every call fails.
//! [`AuthorityFix`] sits between a unix connection and the server and reads the
//! client's header blocks (HPACK, RFC 7541). Blocks pass unchanged until one carries
//! an authority that is not a host; from then on every block of that connection is
//! re-encoded as literals that do not touch the server's dynamic table (so the
//! server's table cannot drift from what the client's encoder assumes), with
//! `:authority: localhost` in place of the bad one. Go clients (Curio) send
//! "localhost" themselves and never reach the rewrite.
//!
//! Invariant: the bytes the server reads are the client's, frame for frame, except the
//! HEADERS/CONTINUATION frames of rewritten blocks; a block that does not decode is
//! passed on unchanged, for the server to refuse as it would have.

use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tonic::transport::server::Connected;

/// The client's connection preface (RFC 9113 §3.4).
const PREFACE_BYTES: usize = 24;
const FRAME_HEADER_BYTES: usize = 9;
const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;
/// The frame payload every HTTP/2 peer accepts (SETTINGS_MAX_FRAME_SIZE's floor).
const MAX_PAYLOAD: usize = 16_384;
/// A header block larger than this ends the connection (gRPC metadata is ≤ 16 KiB in
/// C-core; this bounds what a CONTINUATION flood can make the daemon hold).
const MAX_BLOCK_BYTES: usize = 1 << 20;

/// What a unix connection's reads go through (see the module's comment).
pub struct AuthorityFix<T> {
    io: T,
    /// Read from the client, not yet a whole frame.
    raw: Vec<u8>,
    /// Ready for the server, from `sent` on.
    out: Vec<u8>,
    sent: usize,
    preface_left: usize,
    /// The header block being gathered: its frames as read, and its parts.
    block: Option<Block>,
    decoder: fluke_hpack::Decoder<'static>,
    rewriting: bool,
    eof: bool,
}

struct Block {
    stream: u32,
    end_stream: bool,
    priority: Option<[u8; 5]>,
    fragments: Vec<u8>,
    frames: Vec<u8>,
}

impl<T> AuthorityFix<T> {
    pub fn new(io: T) -> Self {
        AuthorityFix {
            io,
            raw: Vec::new(),
            out: Vec::new(),
            sent: 0,
            preface_left: PREFACE_BYTES,
            block: None,
            decoder: fluke_hpack::Decoder::new(),
            rewriting: false,
            eof: false,
        }
    }

    /// Moves every whole frame of `raw` to `out`, header blocks rewritten where needed.
    fn process(&mut self) -> io::Result<()> {
        let preface = self.preface_left.min(self.raw.len());
        self.out.extend(self.raw.drain(..preface));
        self.preface_left -= preface;
        if self.preface_left > 0 {
            return Ok(());
        }
        let mut at = 0;
        while self.raw.len() - at >= FRAME_HEADER_BYTES {
            let h = &self.raw[at..at + FRAME_HEADER_BYTES];
            let len = (h[0] as usize) << 16 | (h[1] as usize) << 8 | h[2] as usize;
            if self.raw.len() - at < FRAME_HEADER_BYTES + len {
                break;
            }
            let frame = self.raw[at..at + FRAME_HEADER_BYTES + len].to_vec();
            at += FRAME_HEADER_BYTES + len;
            self.frame(frame)?;
        }
        self.raw.drain(..at);
        Ok(())
    }

    fn frame(&mut self, frame: Vec<u8>) -> io::Result<()> {
        let (kind, flags) = (frame[3], frame[4]);
        let stream = u32::from_be_bytes([frame[5], frame[6], frame[7], frame[8]]) & 0x7fff_ffff;
        let payload = &frame[FRAME_HEADER_BYTES..];
        match (kind, self.block.as_mut()) {
            (HEADERS, None) => {
                let Some((priority, fragment)) = headers_parts(flags, payload) else {
                    // Malformed: the server refuses it as it would have.
                    self.out.extend_from_slice(&frame);
                    return Ok(());
                };
                let block = Block { stream, end_stream: flags & END_STREAM != 0, priority, fragments: fragment.to_vec(), frames: frame.clone() };
                self.block = Some(block);
            }
            (CONTINUATION, Some(b)) if b.stream == stream => {
                b.fragments.extend_from_slice(payload);
                b.frames.extend_from_slice(&frame);
                if b.frames.len() > MAX_BLOCK_BYTES {
                    return Err(io::Error::new(io::ErrorKind::InvalidData, "a header block of more than 1 MiB"));
                }
            }
            _ => {
                // Anything else, and anything out of order inside a block (the server
                // refuses that itself): passed on as read.
                if let Some(b) = self.block.take() {
                    self.out.extend_from_slice(&b.frames);
                }
                self.out.extend_from_slice(&frame);
                return Ok(());
            }
        }
        if flags & END_HEADERS != 0 {
            if let Some(b) = self.block.take() {
                self.finish_block(b);
            }
        }
        Ok(())
    }

    /// A whole header block: passed on, or re-encoded with a valid authority.
    fn finish_block(&mut self, b: Block) {
        let decoder = &mut self.decoder;
        // The decoder panics on some malformed input (a truncated size update).
        let decoded = catch_unwind(AssertUnwindSafe(|| decoder.decode(&b.fragments)));
        let headers = match decoded {
            Ok(Ok(h)) => h,
            _ => {
                self.out.extend_from_slice(&b.frames);
                return;
            }
        };
        if !self.rewriting && headers.iter().any(|(n, v)| n == b":authority" && !is_host(v)) {
            tracing::debug!("a unix-socket client sends its socket path as :authority (gRPC C-core): header blocks rewritten with localhost");
            self.rewriting = true;
        }
        if !self.rewriting {
            self.out.extend_from_slice(&b.frames);
            return;
        }
        let mut block = Vec::new();
        for (name, value) in &headers {
            let value: &[u8] = if name == b":authority" && !is_host(value) { b"localhost" } else { value };
            // Literal without indexing, new name (RFC 7541 §6.2.2): the server's
            // dynamic table is left as it is.
            block.push(0x00);
            string(&mut block, name);
            string(&mut block, value);
        }
        write_header_frames(&mut self.out, b.stream, b.end_stream, b.priority, &block);
    }
}

/// A HEADERS payload's priority fields and header block fragment (padding removed).
fn headers_parts(flags: u8, payload: &[u8]) -> Option<(Option<[u8; 5]>, &[u8])> {
    let (pad, mut rest) = if flags & PADDED != 0 { (*payload.first()? as usize, payload.get(1..)?) } else { (0, payload) };
    let priority = if flags & PRIORITY != 0 {
        let p: [u8; 5] = rest.get(..5)?.try_into().ok()?;
        rest = &rest[5..];
        Some(p)
    } else {
        None
    };
    Some((priority, rest.get(..rest.len().checked_sub(pad)?)?))
}

/// HEADERS then CONTINUATION frames carrying `block`, each within MAX_PAYLOAD.
fn write_header_frames(out: &mut Vec<u8>, stream: u32, end_stream: bool, priority: Option<[u8; 5]>, block: &[u8]) {
    let first_room = MAX_PAYLOAD - if priority.is_some() { 5 } else { 0 };
    let (first, mut rest) = block.split_at(block.len().min(first_room));
    let mut flags = if end_stream { END_STREAM } else { 0 } | if priority.is_some() { PRIORITY } else { 0 };
    if rest.is_empty() {
        flags |= END_HEADERS;
    }
    let prio: &[u8] = match &priority {
        Some(p) => p,
        None => &[],
    };
    frame_header(out, prio.len() + first.len(), HEADERS, flags, stream);
    out.extend_from_slice(prio);
    out.extend_from_slice(first);
    while !rest.is_empty() {
        let (part, more) = rest.split_at(rest.len().min(MAX_PAYLOAD));
        frame_header(out, part.len(), CONTINUATION, if more.is_empty() { END_HEADERS } else { 0 }, stream);
        out.extend_from_slice(part);
        rest = more;
    }
}

fn frame_header(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    out.extend_from_slice(&(len as u32).to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&stream.to_be_bytes());
}

/// An HPACK string literal, not Huffman-coded (RFC 7541 §5.2).
fn string(out: &mut Vec<u8>, s: &[u8]) {
    integer(out, 0x00, 7, s.len());
    out.extend_from_slice(s);
}

/// An HPACK integer with an N-bit prefix after `high` (RFC 7541 §5.1).
fn integer(out: &mut Vec<u8>, high: u8, bits: u32, mut v: usize) {
    let max = (1usize << bits) - 1;
    if v < max {
        out.push(high | v as u8);
        return;
    }
    out.push(high | max as u8);
    v -= max;
    while v >= 128 {
        out.push((v % 128) as u8 | 0x80);
        v /= 128;
    }
    out.push(v as u8);
}

/// Whether `v` is an authority the HTTP/2 server takes: a host name or address and an
/// optional port (no percent-encoding, no path).
fn is_host(v: &[u8]) -> bool {
    !v.is_empty() && v.iter().all(|b| b.is_ascii_alphanumeric() || b"-._~:[]".contains(b))
}

impl<T: AsyncRead + Unpin> AsyncRead for AuthorityFix<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.sent < this.out.len() {
                let n = (this.out.len() - this.sent).min(buf.remaining());
                buf.put_slice(&this.out[this.sent..this.sent + n]);
                this.sent += n;
                if this.sent == this.out.len() {
                    this.out.clear();
                    this.sent = 0;
                }
                return Poll::Ready(Ok(()));
            }
            if this.eof {
                return Poll::Ready(Ok(()));
            }
            let mut chunk = [0u8; 16 * 1024];
            let mut read = ReadBuf::new(&mut chunk);
            match Pin::new(&mut this.io).poll_read(cx, &mut read) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(())) if read.filled().is_empty() => {
                    // The client is done: whatever is left goes on as it is.
                    this.eof = true;
                    if let Some(b) = this.block.take() {
                        this.out.extend_from_slice(&b.frames);
                    }
                    this.out.append(&mut this.raw);
                }
                Poll::Ready(Ok(())) => {
                    this.raw.extend_from_slice(read.filled());
                    this.process()?;
                }
            }
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for AuthorityFix<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, data)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

impl<T: Connected> Connected for AuthorityFix<T> {
    type ConnectInfo = T::ConnectInfo;
    fn connect_info(&self) -> Self::ConnectInfo {
        self.io.connect_info()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let mut f = Vec::new();
        frame_header(&mut f, payload.len(), kind, flags, stream);
        f.extend_from_slice(payload);
        f
    }

    /// A block as C-core sends it: `:authority` literal with incremental indexing
    /// (static name 1), the rest literals; a second block refers to the dynamic entry.
    fn c_core_blocks(authority: &[u8]) -> (Vec<u8>, Vec<u8>) {
        let mut first = vec![0x41];
        string(&mut first, authority);
        first.push(0x83); // :method POST
        first.push(0x86); // :scheme http
        first.push(0x04); // :path, literal without indexing
        string(&mut first, b"/cuzk.v1.ProvingEngine/GetStatus");
        // The second block: :authority from the dynamic table (index 62).
        let second = vec![0xbe, 0x83, 0x86];
        (first, second)
    }

    async fn through(bytes: Vec<u8>) -> Vec<u8> {
        let mut r = AuthorityFix::new(std::io::Cursor::new(bytes));
        let mut out = Vec::new();
        r.read_to_end(&mut out).await.unwrap();
        out
    }

    /// The frames after the preface, as (kind, flags, stream, payload).
    fn frames(mut b: &[u8]) -> Vec<(u8, u8, u32, Vec<u8>)> {
        b = &b[PREFACE.len()..];
        let mut v = Vec::new();
        while !b.is_empty() {
            let len = (b[0] as usize) << 16 | (b[1] as usize) << 8 | b[2] as usize;
            v.push((b[3], b[4], u32::from_be_bytes([b[5], b[6], b[7], b[8]]), b[9..9 + len].to_vec()));
            b = &b[9 + len..];
        }
        v
    }

    fn decoded(d: &mut fluke_hpack::Decoder<'_>, block: &[u8]) -> Vec<(String, String)> {
        d.decode(block).unwrap().into_iter().map(|(n, v)| (String::from_utf8(n).unwrap(), String::from_utf8(v).unwrap())).collect()
    }

    #[tokio::test]
    async fn a_socket_path_authority_becomes_localhost_in_every_later_block() {
        let (first, second) = c_core_blocks(b"tmp%2Fcuzk.sock");
        let data = frame(0x0, END_STREAM, 1, &[0, 0, 0, 0, 0]);
        let input =
            [PREFACE.to_vec(), frame(0x4, 0, 0, &[]), frame(HEADERS, END_HEADERS, 1, &first), data.clone(), frame(HEADERS, END_HEADERS, 3, &second)]
                .concat();
        let out = through(input).await;
        assert!(out.starts_with(PREFACE));
        let f = frames(&out);
        assert_eq!(f.len(), 4);
        assert_eq!((f[0].0, f[0].3.len()), (0x4, 0), "SETTINGS as sent");
        assert_eq!(frame(f[2].0, f[2].1, f[2].2, &f[2].3), data, "DATA as sent");
        // The server's decoder sees localhost both times, and the request otherwise intact.
        let mut server = fluke_hpack::Decoder::new();
        for (i, stream) in [(1, 1), (3, 3)] {
            let (kind, flags, s, block) = &f[i];
            assert_eq!((*kind, *flags & END_HEADERS, *s), (HEADERS, END_HEADERS, stream));
            let h = decoded(&mut server, block);
            assert!(h.contains(&(":authority".into(), "localhost".into())), "{h:?}");
            assert!(h.contains(&(":method".into(), "POST".into())), "{h:?}");
        }
        assert!(decoded(&mut server, &f[1].3).contains(&(":path".into(), "/cuzk.v1.ProvingEngine/GetStatus".into())));
    }

    #[tokio::test]
    async fn a_valid_authority_passes_byte_for_byte_and_bad_blocks_pass_unchanged() {
        let (first, second) = c_core_blocks(b"localhost");
        let input = [PREFACE.to_vec(), frame(HEADERS, END_HEADERS, 1, &first), frame(HEADERS, END_HEADERS | END_STREAM, 3, &second)].concat();
        assert_eq!(through(input.clone()).await, input);
        // A block that does not decode (a size update cut short) goes on as read.
        let bad = [PREFACE.to_vec(), frame(HEADERS, END_HEADERS, 1, &[0x3f])].concat();
        assert_eq!(through(bad.clone()).await, bad);
        // A partial frame at the end of the stream, too.
        let cut = [PREFACE.to_vec(), frame(HEADERS, END_HEADERS, 1, &first)[..7].to_vec()].concat();
        assert_eq!(through(cut.clone()).await, cut);
    }

    #[tokio::test]
    async fn continuations_padding_and_priority_are_handled_and_large_blocks_split() {
        let mut block = vec![0x41];
        string(&mut block, b"tmp%2Fcuzk.sock");
        // Metadata of 40 KB: the rewritten block needs CONTINUATION frames.
        block.push(0x00);
        string(&mut block, b"x-big");
        string(&mut block, &vec![b'v'; 40_000]);
        let (a, b) = block.split_at(10);
        let mut headers = vec![3u8]; // pad length 3
        headers.extend_from_slice(&[0, 0, 0, 0, 15]); // priority
        headers.extend_from_slice(a);
        headers.extend_from_slice(&[0, 0, 0]);
        let input = [PREFACE.to_vec(), frame(HEADERS, PADDED | PRIORITY | END_STREAM, 5, &headers), frame(CONTINUATION, END_HEADERS, 5, b)].concat();
        let f = frames(&through(input).await);
        assert!(f.len() >= 3, "{} frames", f.len());
        assert_eq!(f[0].1, PRIORITY | END_STREAM);
        assert_eq!(&f[0].3[..5], &[0, 0, 0, 0, 15]);
        assert!(f[1..].iter().all(|x| x.0 == CONTINUATION && x.2 == 5));
        assert_eq!(f.last().unwrap().1, END_HEADERS);
        assert!(f.iter().all(|x| x.3.len() <= MAX_PAYLOAD));
        let joined: Vec<u8> = [&f[0].3[5..]].into_iter().chain(f[1..].iter().map(|x| &x.3[..])).flatten().copied().collect();
        let h = decoded(&mut fluke_hpack::Decoder::new(), &joined);
        assert_eq!(h[0], (":authority".into(), "localhost".into()));
        assert_eq!(h[1].1.len(), 40_000);
    }

    #[test]
    fn integers_follow_rfc_7541() {
        // RFC 7541 C.1.1–C.1.3.
        let enc = |high, bits, v| {
            let mut o = Vec::new();
            integer(&mut o, high, bits, v);
            o
        };
        assert_eq!(enc(0, 5, 10), [10]);
        assert_eq!(enc(0, 5, 1337), [31, 154, 10]);
        assert_eq!(enc(0, 8, 42), [42]);
        assert!(is_host(b"localhost") && is_host(b"127.0.0.1:9820") && is_host(b"[::1]:1"));
        assert!(!is_host(b"tmp%2Fcuzk.sock") && !is_host(b"/run/curio/cuzk.sock") && !is_host(b""));
    }
}
