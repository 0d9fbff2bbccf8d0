//! Blocking Docker Engine client over the Unix socket. Knows nothing of tasks.
