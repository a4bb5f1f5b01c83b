//! Clients that stall or send garbage never block the others: with a dozen connections held
//! open half-way (no request line, headers without an end, a body shorter than its length) and
//! others sending garbage, a well-formed request is still answered at once, and the garbage
//! gets an error reply or a closed connection, never a hang of the server; a stop waits for
//! them no longer than its grace period.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use frognano_llm::assets;
use frognano_serve::server::{ServerConfig, ServerHandle};
use serde_json::{Value, json};

fn server() -> ServerHandle {
    let model = assets::tiny_model(&|m| eprintln!("tiny: {m}"))
        .expect("tiny model")
        .join("fp32");
    ServerHandle::spawn(ServerConfig {
        port: 0,
        default_max_tokens: 4,
        intra_threads: 1,
        shutdown_grace_s: 2,
        ..ServerConfig::new(model)
    })
    .expect("start the server")
}

fn connect(server: &ServerHandle) -> TcpStream {
    let stream = TcpStream::connect(server.addr()).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    stream
}

/// A complete completions request, answered within the read timeout.
fn complete(server: &ServerHandle) -> (u16, Value) {
    let body = json!({"prompt": "def add(a, b):", "max_tokens": 2, "temperature": 0}).to_string();
    let mut stream = connect(server);
    write!(
        stream,
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("send");
    let mut reply = String::new();
    stream.read_to_string(&mut reply).expect("a reply");
    let status: u16 = reply
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    let json = reply
        .split_once("\r\n\r\n")
        .and_then(|(_, body)| serde_json::from_str(body).ok())
        .unwrap_or(Value::Null);
    (status, json)
}

#[test]
fn stalled_and_garbage_clients_do_not_block_a_well_formed_request() {
    let server = server();
    let mut held = Vec::new();
    for i in 0..12 {
        let mut stream = connect(&server);
        let partial: &[u8] = match i % 4 {
            0 => b"",
            1 => b"POST /v1/completions HT",
            2 => b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Le",
            _ => b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n{\"prompt\": ",
        };
        stream.write_all(partial).expect("send part of a request");
        held.push(stream);
    }
    let mut garbage = Vec::new();
    for i in 0..4u8 {
        let mut stream = connect(&server);
        let noise: Vec<u8> = (0..4096u32)
            .map(|k| (k as u8).wrapping_mul(31).wrapping_add(i))
            .collect();
        // The server may close the connection before all of it is read.
        let _ = stream.write_all(&noise);
        let _ = stream.write_all(b"\r\n\r\n");
        garbage.push(stream);
    }
    let started = Instant::now();
    let (status, reply) = complete(&server);
    let waited = started.elapsed();
    assert_eq!(status, 200, "{reply}");
    assert!(reply["choices"][0]["text"].is_string(), "{reply}");
    assert!(
        waited < Duration::from_secs(20),
        "answered after {waited:?}"
    );
    for mut stream in garbage {
        let mut reply = Vec::new();
        // An error reply then a close, or a close: either way the read ends.
        let ended = stream.read_to_end(&mut reply);
        if let Ok(n) = ended
            && n > 0
        {
            let text = String::from_utf8_lossy(&reply);
            assert!(
                text.starts_with("HTTP/1.1 4"),
                "garbage answered with {text}"
            );
        }
    }
    // The stalled ones are still held; a second request is answered as fast.
    let (status, _) = complete(&server);
    assert_eq!(status, 200);
    // Stopping waits for the stalled clients no longer than its grace period (one of them has
    // a request in flight: its body never comes).
    let started = Instant::now();
    server.stop().expect("stop");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "stopped after {:?}",
        started.elapsed()
    );
    drop(held);
}
