//! Build script: generates the gRPC code from `proto/` and records the git commit the binary is
//! built from.
//!
//! - `proto/room/v1/room.proto` is parsed by `protox` (a protobuf compiler in Rust: no `protoc`
//!   needed on a fresh machine) and turned into Rust by `tonic-prost-build`
//!   (`OUT_DIR/room.v1.rs`, included by `src/grpc/mod.rs`); the encoded descriptor set
//!   (`OUT_DIR/room_descriptor.bin`) feeds server reflection. A broken proto fails the build.
//! - The commit is recorded as `VERGEN_GIT_SHA` (read by `src/build.rs`), through
//!   `vergen-gitcl` (the `git` command line). This part never fails the build: outside a git
//!   checkout (a Docker build context without `.git`, a source tarball) or without a `git`
//!   binary, the variable is left unset (with a cargo warning) and `src/build.rs` falls back
//!   to `ROOM_SERVICE_GIT_COMMIT`, then to "unknown".

use std::path::Path;
use std::process::Command;

use vergen_gitcl::{Emitter, Gitcl};

/// The proto root and the files compiled from it.
const PROTO_ROOT: &str = "proto";
const PROTOS: [&str; 1] = ["room/v1/room.proto"];

fn main() {
    if let Err(error) = generate_grpc() {
        panic!("generating the gRPC code from {PROTO_ROOT}/: {error}");
    }
    record_git_commit();
    // `sqlx::migrate!` embeds `migrations/` at compile time, but on stable Rust it cannot tell
    // cargo to watch the directory: without this line a new migration file would not rebuild
    // the crate, and the binary would ship without it.
    println!("cargo:rerun-if-changed=migrations");
}

/// Compiles [`PROTOS`] with `protox` and generates the server and client code.
fn generate_grpc() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed={PROTO_ROOT}");
    let out_dir = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    let mut compiler = protox::Compiler::new([PROTO_ROOT])?;
    compiler.include_source_info(true);
    for proto in PROTOS {
        compiler.open_file(proto)?;
    }
    std::fs::write(out_dir.join("room_descriptor.bin"), compiler.encode_file_descriptor_set())?;
    tonic_prost_build::configure().compile_fds(compiler.file_descriptor_set())?;
    Ok(())
}

fn record_git_commit() {
    // Full SHA; `src/build.rs` keeps its first 12 characters whatever `core.abbrev` says.
    let git = Gitcl::builder().sha(false).build();
    let emitted = Emitter::default().add_instructions(&git).and_then(|emitter| emitter.emit());
    match emitted {
        Ok(_) => watch_branch_ref(),
        Err(error) => println!(
            "cargo:warning=the git commit is not recorded ({error}); ROOM_SERVICE_GIT_COMMIT or \"unknown\" is used"
        ),
    }
}

/// vergen watches `HEAD` and the branch ref under the worktree's own git directory. In a linked
/// worktree (`git worktree add`) branch refs live in the common directory, and anywhere a ref
/// may be packed: without these lines a new commit would not rerun this script and the
/// recorded commit would go stale. Watches the ref (or, while it is packed, its directory, where
/// the next commit writes it) and `packed-refs`, wherever git says they are.
fn watch_branch_ref() {
    let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) else {
        return; // a detached HEAD: vergen's watch on HEAD covers it
    };
    if let Some(path) = git(&["rev-parse", "--git-path", &branch]) {
        let path = Path::new(&path);
        if let Some(watched) = [Some(path), path.parent()].into_iter().flatten().find(|p| p.exists()) {
            println!("cargo:rerun-if-changed={}", watched.display());
        }
    }
    if let Some(packed) = git(&["rev-parse", "--git-path", "packed-refs"]).filter(|p| Path::new(p).exists()) {
        println!("cargo:rerun-if-changed={packed}");
    }
}

/// The trimmed output of a successful `git` command.
fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).output().ok().filter(|o| o.status.success())?;
    let text = String::from_utf8(output.stdout).ok()?;
    Some(text.trim().to_owned()).filter(|t| !t.is_empty())
}
