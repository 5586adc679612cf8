//! Opening files so that what the path check approved is what gets opened.
//!
//! `paths::resolve_in_workspace` resolves a path and checks it; the tool then opens it.
//! In between, a command the model started (exec runs concurrently, in the background
//! if it likes) can swap a directory for a symlink pointing out of the workspace, and a
//! plain `open` by name would follow it into the gateway's home or another user's
//! workspace. Here every open is done by the kernel relative to a handle on the
//! workspace with `openat2(RESOLVE_BENEATH)`, directories are walked one component at a
//! time without following symlinks (the resolved path has none left, so one appearing
//! is the attack), and writes land through a temporary file renamed inside a directory
//! handle that was verified the same way. Only regular files are read or replaced: a
//! FIFO planted by a command would otherwise block a gateway thread for ever.

use std::ffi::CString;
use std::fs::File;
use std::io::Write as _;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path};

/// Why a checked open failed.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("not found")]
    NotFound,
    #[error("is a directory")]
    IsDir,
    #[error("is not a regular file")]
    NotRegular,
    /// A component changed into a symlink (or something else) after the check.
    #[error("the path changed while it was being opened; refused")]
    Changed,
    #[error("{0}")]
    Io(std::io::Error),
}

impl From<std::io::Error> for OpenError {
    fn from(e: std::io::Error) -> Self {
        match e.raw_os_error() {
            Some(libc::ENOENT) => OpenError::NotFound,
            // ELOOP: a symlink where none may be; EXDEV: resolution left the root.
            Some(libc::ELOOP) | Some(libc::EXDEV) | Some(libc::ENOTDIR) => OpenError::Changed,
            Some(libc::EISDIR) => OpenError::IsDir,
            _ => OpenError::Io(e),
        }
    }
}

fn cstr(p: &Path) -> Result<CString, OpenError> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| OpenError::NotFound)
}

/// `openat2(dir, rel, flags, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | extra)`.
fn openat2(
    dir: &impl AsRawFd,
    rel: &Path,
    flags: i32,
    mode: u32,
    extra: u64,
) -> Result<OwnedFd, OpenError> {
    let path = cstr(rel)?;
    // SAFETY: zeroed is a valid `open_how` (all integer fields).
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (flags | libc::O_CLOEXEC) as u64;
    how.mode = u64::from(mode);
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS | extra;
    // SAFETY: valid descriptor, NUL-terminated path, `how` outlives the call, size exact.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            path.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    // SAFETY: the kernel just gave us this descriptor and nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// `resolved` relative to `workspace` (both canonical), split into its components.
fn relative<'a>(workspace: &Path, resolved: &'a Path) -> Result<&'a Path, OpenError> {
    let rel = resolved
        .strip_prefix(workspace)
        .map_err(|_| OpenError::Changed)?;
    if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        return Err(OpenError::Changed);
    }
    Ok(rel)
}

fn open_root(workspace: &Path) -> Result<File, OpenError> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .open(workspace)?;
    Ok(f)
}

/// Opens the regular file `resolved` (canonical, inside the canonical `workspace`) for
/// reading, beneath the workspace and without following any symlink.
pub fn open_read(workspace: &Path, resolved: &Path) -> Result<File, OpenError> {
    let root = open_root(workspace)?;
    let rel = relative(workspace, resolved)?;
    if rel.as_os_str().is_empty() {
        return Err(OpenError::IsDir);
    }
    // Non-blocking: opening a FIFO for reading would otherwise wait for a writer.
    let fd = openat2(
        &root,
        rel,
        libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY,
        0,
        libc::RESOLVE_NO_SYMLINKS,
    )?;
    let file = File::from(fd);
    let meta = file.metadata()?;
    if meta.is_dir() {
        return Err(OpenError::IsDir);
    }
    if !meta.is_file() {
        return Err(OpenError::NotRegular);
    }
    Ok(file)
}

/// Opens the directory `resolved` beneath the workspace (an `O_PATH` handle), without
/// following any symlink. List it through `/proc/self/fd/<fd>` ([`fd_path`]): the
/// handle, not the name, decides which directory is read.
pub fn open_dir(workspace: &Path, resolved: &Path) -> Result<OwnedFd, OpenError> {
    let root = open_root(workspace)?;
    let rel = relative(workspace, resolved)?;
    if rel.as_os_str().is_empty() {
        return Ok(root.into());
    }
    openat2(
        &root,
        rel,
        libc::O_PATH | libc::O_DIRECTORY,
        0,
        libc::RESOLVE_NO_SYMLINKS,
    )
}

/// The path that reopens `fd` itself (`/proc/self/fd/<fd>`).
pub fn fd_path(fd: &OwnedFd) -> std::path::PathBuf {
    std::path::PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// Reads the whole regular file (see [`open_read`]).
pub fn read(workspace: &Path, resolved: &Path) -> Result<Vec<u8>, OpenError> {
    let mut f = open_read(workspace, resolved)?;
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut f, &mut out)?;
    Ok(out)
}

/// Opens the directory holding `resolved`, creating missing directories when
/// `create` is set, one component at a time and never through a symlink.
fn open_parent(
    workspace: &Path,
    resolved: &Path,
    create: bool,
) -> Result<(OwnedFd, CString), OpenError> {
    let rel = relative(workspace, resolved)?;
    let name = rel.file_name().ok_or(OpenError::IsDir)?;
    let mut dir: OwnedFd = open_root(workspace)?.into();
    if let Some(parent) = rel.parent() {
        for comp in parent.components() {
            let Component::Normal(part) = comp else {
                return Err(OpenError::Changed);
            };
            let part = Path::new(part);
            if create {
                let c = cstr(part)?;
                // SAFETY: valid descriptor and NUL-terminated name.
                let rc = unsafe { libc::mkdirat(dir.as_raw_fd(), c.as_ptr(), 0o755) };
                if rc != 0 {
                    let e = std::io::Error::last_os_error();
                    if e.raw_os_error() != Some(libc::EEXIST) {
                        return Err(e.into());
                    }
                }
            }
            dir = openat2(
                &dir,
                part,
                libc::O_PATH | libc::O_DIRECTORY,
                0,
                libc::RESOLVE_NO_SYMLINKS,
            )?;
        }
    }
    Ok((dir, cstr(Path::new(name))?))
}

/// Replaces (or creates) the regular file `resolved` with `bytes`: written to a
/// temporary file in the verified parent directory, then renamed over the name there.
/// Keeps the permissions of a file it replaces.
pub fn write(
    workspace: &Path,
    resolved: &Path,
    bytes: &[u8],
    create_dirs: bool,
) -> Result<(), OpenError> {
    let (dir, name) = open_parent(workspace, resolved, create_dirs)?;
    // What is there now, without following a symlink.
    // SAFETY: zeroed is a valid `stat`; fstatat fills it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid descriptor, NUL-terminated name, `st` is writable.
    let rc = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    let mode = if rc == 0 {
        match st.st_mode & libc::S_IFMT {
            libc::S_IFREG => st.st_mode & 0o7777,
            libc::S_IFDIR => return Err(OpenError::IsDir),
            _ => return Err(OpenError::NotRegular),
        }
    } else {
        0o644
    };
    let tmp_name = format!(
        ".{}.ferroclaw-{}.tmp",
        Path::new(std::ffi::OsStr::from_bytes(name.as_bytes())).display(),
        uuid::Uuid::new_v4().simple()
    );
    let tmp = cstr(Path::new(&tmp_name))?;
    // SAFETY: valid descriptor and NUL-terminated name; O_EXCL|O_NOFOLLOW create a new file.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            tmp.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            mode as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    // SAFETY: fresh descriptor owned here.
    let mut file = unsafe { File::from_raw_fd(fd) };
    let unlink_tmp = || {
        // SAFETY: valid descriptor and NUL-terminated name.
        unsafe { libc::unlinkat(dir.as_raw_fd(), tmp.as_ptr(), 0) };
    };
    let written = file
        .write_all(bytes)
        .and_then(|()| file.set_permissions(std::fs::Permissions::from_mode(mode)));
    if let Err(e) = written {
        unlink_tmp();
        return Err(e.into());
    }
    drop(file);
    // SAFETY: both names relative to the same verified directory descriptor.
    let rc = unsafe {
        libc::renameat(
            dir.as_raw_fd(),
            tmp.as_ptr(),
            dir.as_raw_fd(),
            name.as_ptr(),
        )
    };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        unlink_tmp();
        return Err(e.into());
    }
    Ok(())
}

/// Removes the file `resolved` (not through a symlink; a symlink itself is removed).
pub fn remove(workspace: &Path, resolved: &Path) -> Result<(), OpenError> {
    let (dir, name) = open_parent(workspace, resolved, false)?;
    // SAFETY: valid descriptor and NUL-terminated name.
    if unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0) } != 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ws() -> (tempfile::TempDir, std::path::PathBuf) {
        let d = tempfile::tempdir().expect("tempdir");
        let p = std::fs::canonicalize(d.path()).expect("canon");
        (d, p)
    }

    #[test]
    fn reads_and_writes_inside() {
        let (_d, w) = ws();
        write(&w, &w.join("a/b/c.txt"), b"hello", true).expect("write");
        assert_eq!(read(&w, &w.join("a/b/c.txt")).expect("read"), b"hello");
        write(&w, &w.join("a/b/c.txt"), b"again", false).expect("replace");
        assert_eq!(std::fs::read(w.join("a/b/c.txt")).expect("fs"), b"again");
        assert!(matches!(read(&w, &w.join("a")), Err(OpenError::IsDir)));
        assert!(matches!(
            read(&w, &w.join("nope")),
            Err(OpenError::NotFound)
        ));
        remove(&w, &w.join("a/b/c.txt")).expect("remove");
        assert!(!w.join("a/b/c.txt").exists());
    }

    #[test]
    fn a_symlink_swapped_in_is_never_followed() {
        let (_d, w) = ws();
        let (_o, outside) = ws();
        std::fs::write(outside.join("secret"), "TOPAZ").expect("secret");
        // The checked path was `race/secret` with `race` a directory; now it is a link.
        std::os::unix::fs::symlink(&outside, w.join("race")).expect("link");
        let r = read(&w, &w.join("race/secret"));
        assert!(matches!(r, Err(OpenError::Changed)), "{r:?}");
        let r = write(&w, &w.join("race/planted"), b"x", true);
        assert!(matches!(r, Err(OpenError::Changed)), "{r:?}");
        assert!(!outside.join("planted").exists());
        // A final component that is a link is not followed either.
        std::os::unix::fs::symlink(outside.join("secret"), w.join("f")).expect("link");
        assert!(matches!(read(&w, &w.join("f")), Err(OpenError::Changed)));
        let r = write(&w, &w.join("f"), b"mine", false);
        assert!(
            matches!(r, Err(OpenError::NotRegular)),
            "a link is never written through: {r:?}"
        );
        assert_eq!(
            std::fs::read_to_string(outside.join("secret")).expect("fs"),
            "TOPAZ"
        );
    }

    #[test]
    fn fifos_are_refused_without_blocking() {
        let (_d, w) = ws();
        let c = CString::new(w.join("fifo").as_os_str().as_bytes()).expect("c");
        // SAFETY: NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        assert!(matches!(
            read(&w, &w.join("fifo")),
            Err(OpenError::NotRegular)
        ));
        assert!(matches!(
            write(&w, &w.join("fifo"), b"x", false),
            Err(OpenError::NotRegular)
        ));
    }
}
