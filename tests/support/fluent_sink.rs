//! A stand-in FireLens log router for the real-Docker tests, compiled on its own with `rustc`
//! (no crates, statically linked) and run in the busybox test image: it listens on the Unix
//! socket the task's router listens on (`/var/run/fluent.sock` inside the router) and appends
//! every byte each connection sends to `<out>/connection-<n>.bin`, for the test to decode as
//! the Fluent forward protocol. Usage: `fluent-sink SOCKET OUT_DIR`.

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::PathBuf;

fn main() {
    let mut args = std::env::args().skip(1);
    let socket = PathBuf::from(args.next().expect("the socket path"));
    let out = PathBuf::from(args.next().expect("the output directory"));
    // A socket a previous run of the router left behind.
    let _ = std::fs::remove_file(&socket);
    let listener = UnixListener::bind(&socket).expect("bind the socket");
    let _ = std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666));
    eprintln!("fluent-sink: listening on {}", socket.display());
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_nanos())
        .unwrap_or(0);
    for (number, connection) in listener.incoming().enumerate() {
        let Ok(mut connection) = connection else {
            continue;
        };
        let path = out.join(format!("connection-{started}-{number}.bin"));
        std::thread::spawn(move || {
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .expect("open the output file");
            let mut buffer = [0u8; 65536];
            loop {
                match connection.read(&mut buffer) {
                    Ok(0) | Err(_) => return,
                    Ok(read) => {
                        file.write_all(&buffer[..read]).expect("write the output file");
                        file.flush().expect("flush the output file");
                    }
                }
            }
        });
    }
}
