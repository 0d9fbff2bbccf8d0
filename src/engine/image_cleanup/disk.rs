//! How full the file system holding Docker's root directory is: `statvfs(3)`, the one call
//! here that is not Rust's own standard library.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The share of `path`'s file system in use, 0–1 (`df`'s count, see
/// [`super::select::used_ratio`]).
pub fn used_ratio_of(path: &Path) -> Result<f64, String> {
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| format!("{} holds a NUL byte", path.display()))?;
    // SAFETY: `statvfs` only writes into the zeroed struct we own and reads the NUL-terminated
    // path, which outlives the call.
    let mut stats: libc::statvfs = unsafe { std::mem::zeroed() };
    let answer = unsafe { libc::statvfs(c_path.as_ptr(), &mut stats) };
    if answer != 0 {
        return Err(format!(
            "statvfs {}: {}",
            path.display(),
            std::io::Error::last_os_error()
        ));
    }
    #[allow(clippy::unnecessary_cast)]
    let (total, free, available) = (
        stats.f_blocks as u64,
        stats.f_bfree as u64,
        stats.f_bavail as u64,
    );
    super::select::used_ratio(total, free, available)
        .ok_or_else(|| format!("{}: an empty file system", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_file_system_has_a_usage_between_zero_and_one() {
        let ratio = used_ratio_of(Path::new("/")).expect("statvfs /");
        assert!((0.0..=1.0).contains(&ratio), "{ratio}");
        assert!(used_ratio_of(Path::new("/no/such/directory/here")).is_err());
    }
}
