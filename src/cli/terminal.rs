//! `deckhand top` as a command — `--once` and `--json` for scripts, and the live view — and the
//! terminal under the live view, with a few escape codes and `termios` (libc,
//! already a dependency) rather than a terminal crate: the view needs only to switch to the
//! alternate screen, hide the cursor, move it home, clear to the end of a line and of the
//! screen, set bold, dim, inverse and two colours — codes every terminal since the VT100
//! (and xterm, tmux, screen, the Linux console, an SSH session's) understands — and to read one
//! key without echo. crossterm brings a reader thread's worth of machinery (mio,
//! parking_lot, signal-hook-mio) for keys and events this view does not use.
//!
//! [`RawTerminal`] restores what it changed when dropped, and the loop also ends on SIGINT,
//! SIGTERM and SIGHUP (a closed SSH session), so the terminal is given back in a usable state.

use super::client::ApiClient;
use super::commands::{answer_failure, CliFailure};
use super::top::{colour_allowed, render, StatsReading, Style, TopView};
use std::io::{self, Write};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const STDIN: RawFd = 0;
const STDOUT: RawFd = 1;

/// Whether `fd` is a terminal.
pub fn is_terminal(fd: RawFd) -> bool {
    // SAFETY: isatty only inspects the descriptor.
    unsafe { libc::isatty(fd) == 1 }
}

/// Both stdin (for keys) and stdout (for the frames) are terminals.
pub fn is_interactive() -> bool {
    is_terminal(STDIN) && is_terminal(STDOUT)
}

/// The terminal's columns and rows, when stdout is one that says.
pub fn size() -> Option<(usize, usize)> {
    // SAFETY: winsize is plain data, and TIOCGWINSZ writes only into it.
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    let done = unsafe { libc::ioctl(STDOUT, libc::TIOCGWINSZ, &mut size) };
    (done == 0 && size.ws_col > 0 && size.ws_row > 0)
        .then_some((usize::from(size.ws_col), usize::from(size.ws_row)))
}

/// The terminal in the state the live view needs: keys one at a time without echo (Ctrl-C
/// arrives as a key, so the view ends through its own exit path), the alternate screen and
/// no cursor. Dropping it puts everything back.
pub struct RawTerminal {
    saved: libc::termios,
}

impl RawTerminal {
    pub fn enter() -> io::Result<RawTerminal> {
        // SAFETY: termios is plain data that tcgetattr fills.
        let mut saved: libc::termios = unsafe { std::mem::zeroed() };
        if unsafe { libc::tcgetattr(STDIN, &mut saved) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let mut raw = saved;
        raw.c_lflag &= !(libc::ICANON | libc::ECHO | libc::ISIG);
        raw.c_cc[libc::VMIN] = 1;
        raw.c_cc[libc::VTIME] = 0;
        // SAFETY: raw is a termios copied from the terminal's own.
        if unsafe { libc::tcsetattr(STDIN, libc::TCSANOW, &raw) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let terminal = RawTerminal { saved };
        let mut out = io::stdout().lock();
        out.write_all(b"\x1b[?1049h\x1b[?25l\x1b[H\x1b[2J")?;
        out.flush()?;
        Ok(terminal)
    }

    /// Draws `lines` over the screen: each line is cleared to its end, then the rest of the
    /// screen. The last line gets no line feed, so a full screen never scrolls.
    pub fn draw(&self, lines: &[String]) -> io::Result<()> {
        let mut frame = String::from("\x1b[H");
        for (index, line) in lines.iter().enumerate() {
            if index > 0 {
                frame.push_str("\r\n");
            }
            frame.push_str(line);
            frame.push_str("\x1b[K");
        }
        frame.push_str("\x1b[J");
        let mut out = io::stdout().lock();
        out.write_all(frame.as_bytes())?;
        out.flush()
    }
}

impl Drop for RawTerminal {
    fn drop(&mut self) {
        let mut out = io::stdout().lock();
        let _ = out.write_all(b"\x1b[0m\x1b[?25h\x1b[?1049l");
        let _ = out.flush();
        // SAFETY: restores the termios read in `enter`.
        unsafe { libc::tcsetattr(STDIN, libc::TCSANOW, &self.saved) };
    }
}

/// What ended a wait for a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// Time to read the agent again.
    Refresh,
    /// The terminal changed size: draw the last frame again.
    Resized,
    /// `q`, Ctrl-C, or a signal to end.
    Quit,
}

/// The signals the live view listens for, as flags their handlers set.
pub struct Signals {
    resized: Arc<AtomicBool>,
    ending: Arc<AtomicBool>,
}

impl Signals {
    pub fn register() -> io::Result<Signals> {
        let resized = Arc::new(AtomicBool::new(false));
        let ending = Arc::new(AtomicBool::new(false));
        signal_hook::flag::register(signal_hook::consts::SIGWINCH, resized.clone())?;
        for signal in [
            signal_hook::consts::SIGINT,
            signal_hook::consts::SIGTERM,
            signal_hook::consts::SIGHUP,
        ] {
            signal_hook::flag::register(signal, ending.clone())?;
        }
        Ok(Signals { resized, ending })
    }

    /// Waits until `deadline` for a key on stdin; returns early for `q`, Ctrl-C, a resize or
    /// a signal to end. Other keys are read and ignored.
    pub fn wait(&self, deadline: Instant) -> Wake {
        loop {
            if self.ending.load(Ordering::Relaxed) {
                return Wake::Quit;
            }
            if self.resized.swap(false, Ordering::Relaxed) {
                return Wake::Resized;
            }
            let now = Instant::now();
            if now >= deadline {
                return Wake::Refresh;
            }
            // Wake at least every 250 ms: a signal that lands just before poll starts is
            // then seen soon all the same.
            let wait = (deadline - now).min(Duration::from_millis(250));
            let mut poll = libc::pollfd {
                fd: STDIN,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one pollfd, valid for the call.
            let ready = unsafe { libc::poll(&mut poll, 1, wait.as_millis() as libc::c_int) };
            if ready <= 0 {
                continue;
            }
            if poll.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
                return Wake::Quit;
            }
            let mut keys = [0u8; 64];
            // SAFETY: reads at most keys.len() bytes into keys.
            let read = unsafe { libc::read(STDIN, keys.as_mut_ptr().cast(), keys.len()) };
            if read == 0 {
                return Wake::Quit;
            }
            let read = usize::try_from(read).unwrap_or(0);
            if keys[..read]
                .iter()
                .any(|key| matches!(key, b'q' | b'Q' | 3))
            {
                return Wake::Quit;
            }
        }
    }
}

/// How often the live view reads the agent.
pub const REFRESH: Duration = Duration::from_secs(2);
/// Between the two readings `--once` and `--json` turn into rates (`docker stats
/// --no-stream` also waits for a second reading).
const ONCE_INTERVAL: Duration = Duration::from_secs(1);
/// A reading of the stats is a few file reads in the agent; it should answer at once.
const STATS_TIMEOUT: Duration = Duration::from_secs(10);

/// One reading of `GET /v1/stats`.
pub fn read_stats(client: &ApiClient) -> Result<StatsReading, CliFailure> {
    let response = client.request("GET", "/v1/stats", None, STATS_TIMEOUT)?;
    if response.status != 200 {
        return Err(answer_failure(&response));
    }
    serde_json::from_value(response.body).map_err(|error| {
        CliFailure::Runtime(format!("the agent's stats could not be read: {error}"))
    })
}

/// `deckhand top [--once] [--json]`.
pub fn top(
    client: &ApiClient,
    once: bool,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliFailure> {
    let output = |error: io::Error| CliFailure::Runtime(format!("cannot write: {error}"));
    if once || json {
        let first = read_stats(client)?;
        std::thread::sleep(ONCE_INTERVAL);
        let second = read_stats(client)?;
        let view = TopView::new(Some(&first), &second);
        let text = if json {
            let mut text = serde_json::to_string_pretty(&view.to_json()).unwrap_or_default();
            text.push('\n');
            text
        } else {
            let stdout_is_terminal = is_terminal(STDOUT);
            let style = style_for(stdout_is_terminal);
            let width = if stdout_is_terminal {
                size().map(|(columns, _)| columns)
            } else {
                None
            };
            let mut text = render(&view, width, None, style, false, None).join("\n");
            text.push('\n');
            text
        };
        return out.write_all(text.as_bytes()).map_err(output);
    }
    if !is_interactive() {
        return Err(CliFailure::Invalid(vec![
            "top needs a terminal; use `deckhand top --once` or `--json` in scripts".into(),
        ]));
    }
    // The first reading must work, or the user sees an empty screen for nothing.
    let mut previous = read_stats(client)?;
    let signals = Signals::register().map_err(|error| {
        CliFailure::Runtime(format!("cannot listen for terminal signals: {error}"))
    })?;
    let terminal = RawTerminal::enter()
        .map_err(|error| CliFailure::Runtime(format!("cannot set up the terminal: {error}")))?;
    let style = style_for(true);
    let mut view = TopView::new(None, &previous);
    let mut problem: Option<String> = None;
    // The first rates come half a second after the start, then every two seconds.
    let mut deadline = Instant::now() + Duration::from_millis(500);
    loop {
        let (columns, rows) = size().unwrap_or((80, 24));
        let lines = render(
            &view,
            Some(columns),
            Some(rows),
            style,
            true,
            problem.as_deref(),
        );
        terminal.draw(&lines).map_err(output)?;
        match signals.wait(deadline) {
            Wake::Quit => break,
            Wake::Resized => continue,
            Wake::Refresh => {}
        }
        deadline = Instant::now() + REFRESH;
        match read_stats(client) {
            Ok(current) => {
                view = TopView::new(Some(&previous), &current);
                previous = current;
                problem = None;
            }
            // The agent restarting is a pause of the view, not its end.
            Err(failure) => problem = Some(failure.messages().join("; ")),
        }
    }
    drop(terminal);
    Ok(())
}

fn style_for(stdout_is_terminal: bool) -> Style {
    let no_color = std::env::var("NO_COLOR").ok();
    let term = std::env::var("TERM").ok();
    if colour_allowed(stdout_is_terminal, no_color.as_deref(), term.as_deref()) {
        Style::Colour
    } else {
        Style::Plain
    }
}
