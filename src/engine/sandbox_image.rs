//! The sandbox image of `awsvpc` tasks (`task::sandbox`), made on the host: no registry is ever
//! asked for it, so an edge host with no registry access runs awsvpc tasks too.
//!
//! The image holds one file, `/pause`: a static Linux program of a few hundred bytes that deckhand
//! carries for x86_64, aarch64 and 32-bit ARM (armhf). It installs a handler for SIGTERM and
//! SIGINT that exits 0, then waits for signals forever. (PID 1 of a container ignores a signal it
//! has no handler for, so without the handler every stop would wait out its grace and end in
//! SIGKILL.) The program is written here as machine code, each instruction commented, inside the
//! smallest ELF file the kernel runs; the image is a one-file tar archive handed to Docker's
//! import.

use crate::runtime::{ContainerRuntime, RuntimeError};
use crate::task::sandbox::{SANDBOX_IMAGE, SANDBOX_IMAGE_REPOSITORY, SANDBOX_IMAGE_TAG};

/// Where the program is loaded: the classic static-executable base.
const LOAD_ADDRESS: u64 = 0x40_0000;
/// `SA_RESTORER`: x86_64 delivers a signal only to a handler that names a restorer.
const SA_RESTORER: u64 = 0x0400_0000;
/// `EF_ARM_EABI_VER5`: the ARM EABI's system calls (number in r7, `svc #0`); without it an
/// emulator takes the program for the old ABI.
const EF_ARM_EABI_VER5: u32 = 0x0500_0000;

/// A CPU the sandbox program exists for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Architecture {
    X86_64,
    Aarch64,
    /// 32-bit ARM, EABI (Debian's armhf, ARMv7).
    Arm,
}

impl Architecture {
    /// Every architecture the program exists for.
    pub const ALL: [Architecture; 3] = [
        Architecture::X86_64,
        Architecture::Aarch64,
        Architecture::Arm,
    ];

    /// The architecture deckhand was built for, if the program exists for it.
    pub fn of_this_build() -> Option<Architecture> {
        match std::env::consts::ARCH {
            "x86_64" => Some(Architecture::X86_64),
            "aarch64" => Some(Architecture::Aarch64),
            "arm" => Some(Architecture::Arm),
            _ => None,
        }
    }

    /// The `e_machine` of its ELF files.
    pub fn elf_machine(self) -> u16 {
        match self {
            Architecture::X86_64 => 62,
            Architecture::Aarch64 => 183,
            Architecture::Arm => 40,
        }
    }

    /// The size in bytes of an address (and of `long`): ELF64 or ELF32.
    fn word_size(self) -> usize {
        match self {
            Architecture::X86_64 | Architecture::Aarch64 => 8,
            Architecture::Arm => 4,
        }
    }

    /// Where the code starts: right after the ELF header and its one program header.
    fn code_offset(self) -> u64 {
        match self.word_size() {
            8 => 64 + 56,
            _ => 52 + 32,
        }
    }

    /// The size of the kernel's `struct sigaction` the code ends with: handler, flags and
    /// restorer (a `long` each) and a 64-bit signal mask.
    pub fn sigaction_size(self) -> usize {
        3 * self.word_size() + 8
    }
}

/// Instructions of a fixed-width instruction set, little-endian.
fn words(instructions: &[u32]) -> Vec<u8> {
    instructions
        .iter()
        .flat_map(|instruction| instruction.to_le_bytes())
        .collect()
}

/// The code of the pause program for `architecture`, and where in it the handler starts; the
/// code ends where its `struct sigaction` (filled in by [`pause_program`]) goes.
fn pause_code(architecture: Architecture) -> (Vec<u8>, u64) {
    match architecture {
        Architecture::X86_64 => {
            let code: Vec<u8> = [
                &[0x48, 0x8d, 0x35, 0x39, 0, 0, 0][..], //  0: lea rsi, [rip + 57]  (the sigaction, at 64)
                &[0xbf, 15, 0, 0, 0],                   //  7: mov edi, 15          (SIGTERM)
                &[0x31, 0xd2],                          // 12: xor edx, edx         (no old action)
                &[0x41, 0xba, 8, 0, 0, 0],              // 14: mov r10d, 8          (sigset size)
                &[0xb8, 13, 0, 0, 0],                   // 20: mov eax, 13          (rt_sigaction)
                &[0x0f, 0x05],                          // 25: syscall
                &[0xbf, 2, 0, 0, 0],                    // 27: mov edi, 2           (SIGINT)
                &[0xb8, 13, 0, 0, 0],                   // 32: mov eax, 13          (rt_sigaction)
                &[0x0f, 0x05],                          // 37: syscall
                &[0xb8, 34, 0, 0, 0],                   // 39: mov eax, 34          (pause)
                &[0x0f, 0x05],                          // 44: syscall
                &[0xeb, 0xf7],                          // 46: jmp 39
                &[0x31, 0xff],         // 48: xor edi, edi         (handler: status 0)
                &[0xb8, 231, 0, 0, 0], // 50: mov eax, 231         (exit_group)
                &[0x0f, 0x05],         // 55: syscall
                &[0x90; 7],            // 57: nop padding to 64
            ]
            .concat();
            (code, 48)
        }
        Architecture::Aarch64 => {
            let code = words(&[
                0x1000_0241, //  0: adr x1, #72        (the sigaction)
                0xd280_01e0, //  4: mov x0, #15        (SIGTERM)
                0xd280_0002, //  8: mov x2, #0         (no old action)
                0xd280_0103, // 12: mov x3, #8         (sigset size)
                0xd280_10c8, // 16: mov x8, #134       (rt_sigaction)
                0xd400_0001, // 20: svc #0
                0xd280_0040, // 24: mov x0, #2         (SIGINT)
                0xd400_0001, // 28: svc #0
                0xd280_0000, // 32: mov x0, #0         (ppoll(NULL, 0, NULL, NULL): wait)
                0xd280_0001, // 36: mov x1, #0
                0xd280_0002, // 40: mov x2, #0
                0xd280_0003, // 44: mov x3, #0
                0xd280_0928, // 48: mov x8, #73        (ppoll)
                0xd400_0001, // 52: svc #0
                0x17ff_fffa, // 56: b 32
                0xd280_0000, // 60: mov x0, #0         (handler: status 0)
                0xd280_0bc8, // 64: mov x8, #94        (exit_group)
                0xd400_0001, // 68: svc #0
            ]);
            (code, 60)
        }
        // A32 instructions (ARM state). The kernel keeps every register but r0 across a system
        // call, so r1 to r3 serve both rt_sigaction calls.
        Architecture::Arm => {
            let code = words(&[
                0xe28f_1030, //  0: add r1, pc, #48    (the sigaction, at 56: pc reads as 8)
                0xe3a0_000f, //  4: mov r0, #15        (SIGTERM)
                0xe3a0_2000, //  8: mov r2, #0         (no old action)
                0xe3a0_3008, // 12: mov r3, #8         (sigset size)
                0xe3a0_70ae, // 16: mov r7, #174       (rt_sigaction)
                0xef00_0000, // 20: svc #0
                0xe3a0_0002, // 24: mov r0, #2         (SIGINT)
                0xef00_0000, // 28: svc #0
                0xe3a0_701d, // 32: mov r7, #29        (pause)
                0xef00_0000, // 36: svc #0
                0xeaff_fffc, // 40: b 32
                0xe3a0_0000, // 44: mov r0, #0         (handler: status 0)
                0xe3a0_70f8, // 48: mov r7, #248       (exit_group)
                0xef00_0000, // 52: svc #0
            ]);
            (code, 44)
        }
    }
}

/// The pause program: a static ELF executable for `architecture`.
pub fn pause_program(architecture: Architecture) -> Vec<u8> {
    let (mut code, handler_offset) = pause_code(architecture);
    let code_offset = architecture.code_offset();
    let handler = LOAD_ADDRESS + code_offset + handler_offset;
    // Addresses and offsets in the ELF class's width (all of them fit in 32 bits).
    let wide = architecture.word_size() == 8;
    let word = |bytes: &mut Vec<u8>, value: u64| {
        if wide {
            bytes.extend_from_slice(&value.to_le_bytes());
        } else {
            bytes.extend_from_slice(&(value as u32).to_le_bytes());
        }
    };
    let flags = match architecture {
        Architecture::X86_64 => SA_RESTORER,
        Architecture::Aarch64 | Architecture::Arm => 0,
    };
    // struct sigaction { handler, flags, restorer, mask }; the handler never returns, so the
    // restorer is never called.
    for value in [handler, flags, handler] {
        word(&mut code, value);
    }
    code.extend_from_slice(&0u64.to_le_bytes());
    let size = code_offset + code.len() as u64;

    let mut elf = Vec::with_capacity(usize::try_from(size).unwrap_or_default());
    // ELF header: 64- or 32-bit, little-endian, version 1, System V ABI.
    let class = if wide { 2 } else { 1 };
    elf.extend_from_slice(&[0x7f, b'E', b'L', b'F', class, 1, 1, 0]);
    elf.extend_from_slice(&[0; 8]);
    elf.extend_from_slice(&2u16.to_le_bytes()); // e_type: executable
    elf.extend_from_slice(&architecture.elf_machine().to_le_bytes());
    elf.extend_from_slice(&1u32.to_le_bytes()); // e_version
    word(&mut elf, LOAD_ADDRESS + code_offset); // e_entry
    word(&mut elf, if wide { 64 } else { 52 }); // e_phoff: right after this header
    word(&mut elf, 0); // e_shoff: no sections
    let elf_flags = match architecture {
        Architecture::Arm => EF_ARM_EABI_VER5,
        Architecture::X86_64 | Architecture::Aarch64 => 0,
    };
    elf.extend_from_slice(&elf_flags.to_le_bytes()); // e_flags
    let (header_size, program_header_size): (u16, u16) = if wide { (64, 56) } else { (52, 32) };
    elf.extend_from_slice(&header_size.to_le_bytes()); // e_ehsize
    elf.extend_from_slice(&program_header_size.to_le_bytes()); // e_phentsize
    elf.extend_from_slice(&1u16.to_le_bytes()); // e_phnum
    elf.extend_from_slice(&[0; 6]); // e_shentsize, e_shnum, e_shstrndx

    // One loadable segment, readable and executable: the whole file. ELF64 puts p_flags second,
    // ELF32 seventh.
    const PT_LOAD: u32 = 1;
    const READ_EXECUTE: u32 = 5;
    elf.extend_from_slice(&PT_LOAD.to_le_bytes()); // p_type
    if wide {
        elf.extend_from_slice(&READ_EXECUTE.to_le_bytes()); // p_flags
    }
    word(&mut elf, 0); // p_offset
    word(&mut elf, LOAD_ADDRESS); // p_vaddr
    word(&mut elf, LOAD_ADDRESS); // p_paddr
    word(&mut elf, size); // p_filesz
    word(&mut elf, size); // p_memsz
    if !wide {
        elf.extend_from_slice(&READ_EXECUTE.to_le_bytes()); // p_flags
    }
    word(&mut elf, 0x1000); // p_align
    elf.extend_from_slice(&code);
    elf
}

/// A tar archive (POSIX ustar) holding one executable file `name` with `contents`.
pub fn single_file_tar(name: &str, contents: &[u8]) -> Vec<u8> {
    let mut header = [0u8; 512];
    let mut put = |offset: usize, field: &[u8]| {
        header[offset..offset + field.len()].copy_from_slice(field);
    };
    put(0, name.as_bytes());
    put(100, b"0000755\0"); // mode
    put(108, b"0000000\0"); // uid
    put(116, b"0000000\0"); // gid
    put(124, format!("{:011o}\0", contents.len()).as_bytes()); // size
    put(136, b"00000000000\0"); // mtime: fixed, so the archive is the same every time
    put(148, b"        "); // checksum, counted as spaces
    put(156, b"0"); // a regular file
    put(257, b"ustar\0"); // magic
    put(263, b"00"); // version
    let checksum: u32 = header.iter().map(|byte| u32::from(*byte)).sum();
    header[148..156].copy_from_slice(format!("{checksum:06o}\0 ").as_bytes());

    let mut archive = header.to_vec();
    archive.extend_from_slice(contents);
    let padding = (512 - contents.len() % 512) % 512;
    archive.resize(archive.len() + padding, 0);
    // Two zero blocks end the archive.
    archive.resize(archive.len() + 1024, 0);
    archive
}

/// Makes sure Docker has the sandbox image: an inspection when it does (the usual case), an
/// import of the one-file archive when it does not (first use on this host, or after image
/// cleanup removed it).
pub fn ensure_sandbox_image(runtime: &dyn ContainerRuntime) -> Result<(), RuntimeError> {
    match runtime.inspect_image(SANDBOX_IMAGE) {
        Ok(_) => return Ok(()),
        Err(RuntimeError::NoSuchImage { .. }) => {}
        Err(error) => return Err(error),
    }
    let Some(architecture) = Architecture::of_this_build() else {
        return Err(RuntimeError::CannotPull {
            message: format!(
                "awsvpc tasks need deckhand's sandbox program, which this build for {} does \
                 not carry (it exists for x86_64, aarch64 and 32-bit ARM)",
                std::env::consts::ARCH
            ),
        });
    };
    let archive = single_file_tar("pause", &pause_program(architecture));
    let id = runtime.import_image(&archive, SANDBOX_IMAGE_REPOSITORY, SANDBOX_IMAGE_TAG)?;
    log::info!("made the awsvpc sandbox image {SANDBOX_IMAGE} ({id})");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    /// Reads the little-endian unsigned number of `width` bytes at `offset`.
    fn number(program: &[u8], offset: usize, width: usize) -> u64 {
        program[offset..offset + width]
            .iter()
            .rev()
            .fold(0, |value, byte| value << 8 | u64::from(*byte))
    }

    #[test]
    fn every_program_is_an_elf_executable_whose_size_matches_its_header() {
        for architecture in Architecture::ALL {
            let program = pause_program(architecture);
            let width = architecture.word_size();
            assert_eq!(&program[..4], b"\x7fELF");
            assert_eq!(
                program[4],
                if width == 8 { 2 } else { 1 },
                "{architecture:?}"
            );
            assert_eq!(
                number(&program, 18, 2),
                u64::from(architecture.elf_machine())
            );
            let entry = number(&program, 24, width);
            assert_eq!(entry, LOAD_ADDRESS + architecture.code_offset());
            let file_size_at = if width == 8 { 96 } else { 52 + 16 };
            let file_size = number(&program, file_size_at, width);
            assert_eq!(file_size, program.len() as u64, "{architecture:?}");
            // The sigaction's handler points at an instruction inside the file.
            let action = program.len() - architecture.sigaction_size();
            let handler = number(&program, action, width);
            assert!(handler > entry, "{architecture:?}");
            assert!(handler < LOAD_ADDRESS + action as u64, "{architecture:?}");
            if architecture != Architecture::X86_64 {
                assert_eq!((handler - LOAD_ADDRESS) % 4, 0, "aligned instruction");
            }
        }
        // The 32-bit ARM program says it uses the EABI's system calls.
        let arm = pause_program(Architecture::Arm);
        assert_eq!(number(&arm, 36, 4), u64::from(EF_ARM_EABI_VER5));
    }

    /// Runs the program of this machine's architecture as a process: it waits, and a SIGTERM
    /// or SIGINT ends it with status 0.
    #[test]
    fn the_pause_program_waits_until_a_stop_signal_and_exits_zero() {
        let Some(architecture) = Architecture::of_this_build() else {
            return;
        };
        let directory = std::env::temp_dir().join(format!("deckhand-pause-{}", std::process::id()));
        std::fs::create_dir_all(&directory).expect("temp dir");
        let path = directory.join("pause");
        {
            let mut file = std::fs::File::create(&path).expect("create");
            file.write_all(&pause_program(architecture)).expect("write");
            file.set_permissions(std::fs::Permissions::from_mode(0o755))
                .expect("chmod");
        }
        for signal in ["TERM", "INT"] {
            let mut child = Command::new(&path)
                .stdin(Stdio::null())
                .spawn()
                .expect("the program runs");
            // It waits (blocked in pause or ppoll, which it reaches only after installing its
            // handlers), and a signal it ignores does not end it.
            let waiting = match architecture {
                Architecture::X86_64 => "34",
                Architecture::Aarch64 => "73",
                Architecture::Arm => "29",
            };
            let deadline = Instant::now() + Duration::from_secs(10);
            while std::fs::read_to_string(format!("/proc/{}/syscall", child.id()))
                .map_or(true, |syscall| {
                    syscall.split_whitespace().next() != Some(waiting)
                })
            {
                assert!(Instant::now() < deadline, "the program never waits");
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = Command::new("kill")
                .args(["-CHLD", &child.id().to_string()])
                .status();
            std::thread::sleep(Duration::from_millis(100));
            assert!(child.try_wait().expect("wait").is_none(), "it waits");
            let status = Command::new("kill")
                .args([&format!("-{signal}"), &child.id().to_string()])
                .status()
                .expect("kill runs");
            assert!(status.success());
            let deadline = Instant::now() + Duration::from_secs(10);
            let exit = loop {
                if let Some(exit) = child.try_wait().expect("wait") {
                    break exit;
                }
                assert!(Instant::now() < deadline, "SIG{signal} ends it");
                std::thread::sleep(Duration::from_millis(10));
            };
            assert_eq!(exit.code(), Some(0), "SIG{signal}: {exit:?}");
        }
        let _ = std::fs::remove_dir_all(&directory);
    }

    #[test]
    fn the_archive_is_one_ustar_file_that_tar_reads_back() {
        let contents = pause_program(Architecture::X86_64);
        let archive = single_file_tar("pause", &contents);
        assert_eq!(archive.len() % 512, 0);
        assert_eq!(&archive[257..263], b"ustar\0");
        // The checksum covers the header with its own field as spaces.
        let mut header = archive[..512].to_vec();
        header[148..156].copy_from_slice(b"        ");
        let sum: u32 = header.iter().map(|byte| u32::from(*byte)).sum();
        let written = std::str::from_utf8(&archive[148..154]).expect("octal");
        assert_eq!(u32::from_str_radix(written, 8).expect("octal"), sum);
        assert_eq!(&archive[512..512 + contents.len()], &contents[..]);

        // GNU tar agrees (where it is installed, as on every Debian host).
        let Ok(mut tar) = Command::new("tar")
            .args(["-tvf", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
        else {
            return;
        };
        tar.stdin
            .take()
            .expect("stdin")
            .write_all(&archive)
            .expect("write");
        let output = tar.wait_with_output().expect("tar ends");
        assert!(output.status.success());
        let listing = String::from_utf8_lossy(&output.stdout);
        assert!(listing.starts_with("-rwxr-xr-x"), "{listing}");
        assert!(
            listing.contains(&format!(" {} ", contents.len())),
            "{listing}"
        );
        assert!(listing.trim_end().ends_with(" pause"), "{listing}");
    }
}
