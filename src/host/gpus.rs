//! The host's NVIDIA GPUs, by id: what `resourceRequirements` of type `GPU` are assigned from.
//! An id is the GPU's UUID (`GPU-8b4e2e9c-…`), the name the ECS agent gives a GPU and what
//! `NVIDIA_VISIBLE_DEVICES` accepts. They are read from `nvidia-smi -L` when that program runs,
//! else from the driver's `/proc/driver/nvidia/gpus/*/information` files, or taken from
//! `DECKHAND_GPU_IDS`, a comma list that replaces discovery. All three are outside bytes: the
//! parsers are pure, never panic and keep only ids made of the characters an id has (a fuzz
//! target checks them: `fuzzing::gpu_list`).

use std::path::Path;
use std::process::{Command, Stdio};

/// The longest id kept: a UUID with its `GPU-` or `MIG-` prefix is 40 characters; more is not
/// an id.
pub const MAX_GPU_ID_CHARS: usize = 64;

/// Whether `id` reads as a GPU id: 1 to [`MAX_GPU_ID_CHARS`] ASCII letters, digits, `-` or `_`
/// (nothing that could split an environment list or a JSON string).
pub fn is_gpu_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_GPU_ID_CHARS
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// The GPU ids in `nvidia-smi -L`'s output, in its order. It writes one line per GPU,
/// `GPU 0: Tesla T4 (UUID: GPU-8b4e2e9c-…)`, and indented lines for the MIG devices of a
/// partitioned GPU, which are not GPUs of their own and are skipped. A line that does not read
/// so is skipped; an id seen twice is kept once.
pub fn parse_nvidia_smi_list(text: &str) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("GPU ") else {
            continue;
        };
        let Some((_, tail)) = rest.rsplit_once("(UUID:") else {
            continue;
        };
        let Some(id) = tail.trim_end().strip_suffix(')') else {
            continue;
        };
        let id = id.trim();
        if is_gpu_id(id) && !ids.iter().any(|seen| seen == id) {
            ids.push(id.to_string());
        }
    }
    ids
}

/// The id in one `/proc/driver/nvidia/gpus/<bus>/information` file: its `GPU UUID:` line
/// (`GPU UUID:        GPU-8b4e2e9c-…`). `None` when there is no such line or it holds no id.
pub fn parse_proc_information(text: &str) -> Option<String> {
    let value = text
        .lines()
        .find_map(|line| line.strip_prefix("GPU UUID:"))?
        .trim();
    is_gpu_id(value).then(|| value.to_string())
}

/// `DECKHAND_GPU_IDS`: ids separated by commas (spaces around them ignored; an empty value is
/// a host without GPUs). An id that does not read as one, or one given twice, is an error
/// naming it.
pub fn parse_id_list(value: &str) -> Result<Vec<String>, String> {
    let mut ids: Vec<String> = Vec::new();
    if value.trim().is_empty() {
        return Ok(ids);
    }
    for word in value.split(',').map(str::trim) {
        if !is_gpu_id(word) {
            return Err(format!(
                "{word:?} is not a GPU id (1 to {MAX_GPU_ID_CHARS} letters, digits, '-' or '_')"
            ));
        }
        if ids.iter().any(|seen| seen == word) {
            return Err(format!("GPU id {word:?} is given twice"));
        }
        ids.push(word.to_string());
    }
    Ok(ids)
}

/// The longest output of `nvidia-smi -L` or of one `information` file read: far more than a
/// host with dozens of GPUs writes.
const MAX_DISCOVERY_BYTES: usize = 1 << 20;

/// The host's GPU ids: `nvidia-smi -L` when it runs and names some, else the driver's
/// `/proc` files in bus order; empty on a host without NVIDIA's driver.
pub fn discover() -> Vec<String> {
    let listed = Command::new("nvidia-smi")
        .arg("-L")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output();
    if let Ok(output) = listed {
        if output.status.success() && output.stdout.len() <= MAX_DISCOVERY_BYTES {
            let ids = parse_nvidia_smi_list(&String::from_utf8_lossy(&output.stdout));
            if !ids.is_empty() {
                return ids;
            }
        }
    }
    from_proc(Path::new("/proc/driver/nvidia/gpus"))
}

/// The GPU ids tasks are given: `configured` (`DECKHAND_GPU_IDS`) when it names any, else those
/// [`discover`] finds (logged).
pub fn for_tasks(configured: &[String]) -> Vec<String> {
    if !configured.is_empty() {
        return configured.to_vec();
    }
    let found = discover();
    if !found.is_empty() {
        log::info!(
            "GPUs for tasks: {} (nvidia-smi -L or /proc/driver/nvidia/gpus)",
            found.join(",")
        );
    }
    found
}

/// The ids in `<dir>/*/information`, by the subdirectories' names (the PCI bus addresses).
fn from_proc(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut buses: Vec<_> = entries.filter_map(|entry| entry.ok()).collect();
    crate::sorting::sort_by_key(&mut buses, |entry| entry.file_name());
    let mut ids: Vec<String> = Vec::new();
    for bus in buses {
        let Ok(bytes) = std::fs::read(bus.path().join("information")) else {
            continue;
        };
        if bytes.len() > MAX_DISCOVERY_BYTES {
            continue;
        }
        if let Some(id) = parse_proc_information(&String::from_utf8_lossy(&bytes)) {
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
    }
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    const T4: &str = "GPU-8b4e2e9c-1d2a-4f55-b1a2-7c0d5e3f9a10";
    const A100: &str = "GPU-0c1d2e3f-4a5b-6c7d-8e9f-a0b1c2d3e4f5";

    #[test]
    fn table_of_nvidia_smi_listings() {
        let cases: &[(&str, &[&str])] = &[
            ("", &[]),
            ("No devices were found\n", &[]),
            (&format!("GPU 0: Tesla T4 (UUID: {T4})\n"), &[T4]),
            (
                &format!("GPU 0: Tesla T4 (UUID: {T4})\nGPU 1: A100-SXM4-40GB (UUID: {A100})\n"),
                &[T4, A100],
            ),
            // MIG devices of a partitioned GPU are not GPUs of their own.
            (
                &format!(
                    "GPU 0: A100-SXM4-40GB (UUID: {A100})\n  MIG 1g.5gb      Device  0: (UUID: MIG-4f1c2d3e-aaaa-bbbb-cccc-0123456789ab)\n"
                ),
                &[A100],
            ),
            // A model name with parentheses; Windows line ends.
            (&format!("GPU 0: Orin (nvgpu) (UUID: {T4})\r\n"), &[T4]),
            // The same GPU twice is one GPU.
            (&format!("GPU 0: T4 (UUID: {T4})\nGPU 1: T4 (UUID: {T4})\n"), &[T4]),
            // No closing parenthesis, an empty id, an id with a comma or a space: skipped.
            (&format!("GPU 0: T4 (UUID: {T4}\n"), &[]),
            ("GPU 0: T4 (UUID: )\n", &[]),
            ("GPU 0: T4 (UUID: GPU-1,GPU-2)\n", &[]),
            ("GPU 0: T4 (UUID: GPU 1)\n", &[]),
            ("GPU 0: T4 (UUID: GPU-ü)\n", &[]),
        ];
        for (text, want) in cases {
            assert_eq!(parse_nvidia_smi_list(text), *want, "{text:?}");
        }
    }

    #[test]
    fn table_of_proc_information_files() {
        let file = format!(
            "Model: \t\t Tesla T4\nIRQ:   \t\t 35\nGPU UUID: \t {T4}\nVideo BIOS: \t 90.04.38.00.03\nBus Type: \t PCIe\nDevice Minor: \t 0\n"
        );
        let cases: &[(&str, Option<&str>)] = &[
            (&file, Some(T4)),
            ("", None),
            ("Model: Tesla T4\n", None),
            ("GPU UUID: \n", None),
            ("GPU UUID: GPU-1;rm -rf\n", None),
            (
                &format!("GPU UUID: {}\n", "a".repeat(MAX_GPU_ID_CHARS + 1)),
                None,
            ),
        ];
        for (text, want) in cases {
            assert_eq!(parse_proc_information(text).as_deref(), *want, "{text:?}");
        }
    }

    #[test]
    fn table_of_configured_id_lists() {
        let ok: &[(&str, &[&str])] = &[
            ("", &[]),
            ("  ", &[]),
            ("0", &["0"]),
            ("0,1", &["0", "1"]),
            (&format!(" {T4} , {A100} "), &[T4, A100]),
        ];
        for (value, want) in ok {
            let ids = parse_id_list(value).expect(value);
            assert_eq!(ids, *want, "{value:?}");
        }
        let bad: &[(&str, &str)] = &[
            ("0,,1", "\"\" is not a GPU id"),
            ("0,1,", "\"\" is not a GPU id"),
            ("GPU 1", "\"GPU 1\" is not a GPU id"),
            ("0,1,0", "GPU id \"0\" is given twice"),
        ];
        for (value, want) in bad {
            let error = parse_id_list(value).expect_err(value);
            assert!(error.starts_with(want), "{value:?}: {error}");
        }
    }

    #[test]
    fn configured_ids_replace_discovery() {
        let configured = vec!["GPU-x".to_string(), "GPU-y".to_string()];
        assert_eq!(for_tasks(&configured), configured);
        // Nothing configured: what this host has (no NVIDIA driver here: nothing, no panic).
        assert_eq!(for_tasks(&[]), discover());
    }

    #[test]
    fn proc_files_are_read_in_bus_order_and_unreadable_ones_skipped() {
        let dir = std::env::temp_dir().join(format!("deckhand-gpus-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (bus, id) in [("0000:3b:00.0", A100), ("0000:00:1e.0", T4)] {
            std::fs::create_dir_all(dir.join(bus)).expect("a temporary directory");
            std::fs::write(
                dir.join(bus).join("information"),
                format!("GPU UUID: {id}\n"),
            )
            .expect("a temporary file");
        }
        std::fs::create_dir_all(dir.join("0000:ff:00.0")).expect("a temporary directory");
        assert_eq!(from_proc(&dir), vec![T4.to_string(), A100.to_string()]);
        assert!(from_proc(&dir.join("absent")).is_empty());
        std::fs::remove_dir_all(&dir).expect("the temporary directory is removed");
    }
}
