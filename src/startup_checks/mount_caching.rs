//! Cluster mode: is the shared volume mounted with caching that would hide the partition fence?
//!
//! The fence (`kaas_engine::fence`) needs three things of the shared file system: a file
//! another broker creates is visible to this broker's next lookup, a file another broker
//! removes makes this broker's next open fail, and a file another broker wrote and
//! fdatasync'd reads as written when this broker opens it afterwards (close-to-open). NFS
//! breaks the first two with its defaults: `lookupcache=all` caches negative and positive
//! lookups, and directory attribute caching (`acdirmin` / `acdirmax`, 30 / 60 s by default)
//! lets those cached lookups stand for up to a minute. `nocto` breaks the third: an open no
//! longer revalidates the file's cached attributes and pages with the server. And the fence
//! is built on NFSv4's close-to-open, where an open revalidates against the server's change
//! attribute; NFSv3 (and 2) revalidate by modification time and size, which miss a change
//! made within the server's timestamp granularity. In each case a stale leader could keep
//! finding its removed claim token, or miss a newer claim, and acknowledge writes that the
//! new leader never reads.
//!
//! The check reads `/proc/self/mountinfo`, finds the mount that holds the data directory
//! (the longest mount point that is a prefix of its canonical path) and, for NFS, requires
//! version 4 (the kernel lists NFSv4 mounts as `nfs4` with `vers=4.x`, older versions as
//! `nfs` with `vers=3` or `vers=2`), no `nocto`, `lookupcache=none` and directory attribute
//! caching off (`acdirmin=0,acdirmax=0`, which `actimeo=0` and `noac` give). Other file
//! systems pass: local disks and CephFS keep lookups coherent between clients.

use std::path::Path;

use super::{ExitCode, Refusal};

/// The mount point, file system type and options of one `/proc/self/mountinfo` line (the
/// per-mount and the super-block options together).
#[derive(Debug, PartialEq, Eq)]
struct Mount {
    point: String,
    fs_type: String,
    options: Vec<String>,
}

pub fn check(data_dir: &Path) -> Result<(), Refusal> {
    let Ok(canonical) = std::fs::canonicalize(data_dir) else {
        return Ok(());
    };
    let Ok(mountinfo) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Ok(());
    };
    let Some(mount) = mount_of(&mountinfo, &canonical.to_string_lossy()) else {
        return Ok(());
    };
    let hazards = hazards(&mount);
    if hazards.is_empty() {
        return Ok(());
    }
    let reasons: Vec<String> = hazards.iter().map(Hazard::explain).collect();
    Err(Refusal::new(
        ExitCode::FenceUnsafeCaching,
        format!(
            "kaas cannot start: the data directory {} is on an {} mount ({}) whose caching \
             breaks the partition fence: {}. A broker that lost a partition could so \
             acknowledge writes the new leader never reads. Fix: mount the shared volume as \
             NFSv4 (vers=4.1 or vers=4.2) with lookupcache=none,actimeo=0 and without nocto \
             (in Kubernetes, the PersistentVolume's mountOptions), or use a file system with \
             coherent lookups (CephFS).",
            data_dir.display(),
            mount.fs_type,
            mount.point,
            reasons.join("; ")
        ),
    ))
}

/// One way an NFS mount breaks what the fence needs of the shared volume.
#[derive(Debug, PartialEq, Eq)]
enum Hazard {
    /// NFS before version 4 (the version as mounted, `3` or `2`; empty when not listed).
    BeforeVersion4(String),
    /// `nocto`: opens do not revalidate cached attributes and data with the server.
    NoCloseToOpen,
    /// Lookup or directory attribute caching on: the options that would turn it off.
    Caching(Vec<&'static str>),
}

impl Hazard {
    /// One clause of the refusal, saying what the mount does and what it breaks.
    fn explain(&self) -> String {
        match self {
            Hazard::BeforeVersion4(version) => {
                let version = if version.is_empty() {
                    "older than version 4".to_string()
                } else {
                    format!("vers={version}")
                };
                format!(
                    "it is NFS {version}, and the fence needs NFSv4's close-to-open \
                     consistency, where every open revalidates against the server's change \
                     attribute (NFSv3 revalidates by modification time and size, which miss a \
                     change made within the server's timestamp granularity, so a broker can \
                     read stale attributes and data of a file another broker changed)"
                )
            }
            Hazard::NoCloseToOpen => "it is mounted with nocto, so an open does not \
                 revalidate with the server at all and a broker can keep using cached \
                 attributes and data of a file another broker changed or removed (its claim \
                 token)"
                .to_string(),
            Hazard::Caching(missing) => format!(
                "it lacks {}, and with NFS's default lookup and directory attribute caching a \
                 broker can keep seeing files another broker removed (its claim token) and \
                 miss files another broker created, for up to a minute",
                missing.join(", ")
            ),
        }
    }
}

/// Every way `mount` breaks the fence (none for a file system other than NFS).
fn hazards(mount: &Mount) -> Vec<Hazard> {
    let mut hazards = Vec::new();
    if let Some(version) = version_before_4(mount) {
        hazards.push(Hazard::BeforeVersion4(version));
    }
    if is_nfs(mount) && mount.options.iter().any(|o| o == "nocto") {
        hazards.push(Hazard::NoCloseToOpen);
    }
    let missing = missing_options(mount);
    if !missing.is_empty() {
        hazards.push(Hazard::Caching(missing));
    }
    hazards
}

fn is_nfs(mount: &Mount) -> bool {
    mount.fs_type == "nfs" || mount.fs_type == "nfs4"
}

/// For an NFS mount older than version 4, its `vers=` (or `nfsvers=`) value, empty when
/// none is listed. The kernel lists NFSv4 as type `nfs4` and versions 2 and 3 as `nfs`.
fn version_before_4(mount: &Mount) -> Option<String> {
    if mount.fs_type != "nfs" {
        return None;
    }
    let version = mount
        .options
        .iter()
        .find_map(|o| {
            o.strip_prefix("vers=")
                .or_else(|| o.strip_prefix("nfsvers="))
        })
        .unwrap_or("");
    let major = version.split('.').next().unwrap_or("");
    let version_4_or_later = matches!(major.parse::<u32>(), Ok(major) if major >= 4);
    (!version_4_or_later).then(|| version.to_string())
}

/// The caching options `mount` needs and does not have (none for a file system other than
/// NFS).
fn missing_options(mount: &Mount) -> Vec<&'static str> {
    if !is_nfs(mount) {
        return Vec::new();
    }
    let has = |wanted: &str| mount.options.iter().any(|o| o == wanted);
    let mut missing = Vec::new();
    if !has("lookupcache=none") {
        missing.push("lookupcache=none");
    }
    if !(has("acdirmin=0") && has("acdirmax=0")) {
        missing.push("actimeo=0 (acdirmin=0,acdirmax=0)");
    }
    missing
}

/// The mount of `mountinfo` that holds `path` (an absolute, canonical path): the last-listed
/// one with the longest mount point that is `path` or one of its ancestors.
fn mount_of(mountinfo: &str, path: &str) -> Option<Mount> {
    let mut best: Option<Mount> = None;
    for mount in mountinfo.lines().filter_map(parse_line) {
        if !contains(&mount.point, path) {
            continue;
        }
        if best
            .as_ref()
            .is_none_or(|b| mount.point.len() >= b.point.len())
        {
            best = Some(mount);
        }
    }
    best
}

fn contains(point: &str, path: &str) -> bool {
    point == "/"
        || path == point
        || (path.starts_with(point) && path.as_bytes().get(point.len()) == Some(&b'/'))
}

/// One line: `id parent major:minor root point options [optional fields...] - type source
/// super-options` (proc(5)); octal escapes (`\040` for a space) in the mount point decoded.
fn parse_line(line: &str) -> Option<Mount> {
    let (before, after) = line.split_once(" - ")?;
    let fields: Vec<&str> = before.split(' ').collect();
    let point = unescape(fields.get(4)?);
    let mount_options = fields.get(5)?;
    let mut rest = after.split(' ');
    let fs_type = rest.next()?.to_string();
    let super_options = rest.nth(1).unwrap_or("");
    let options = mount_options
        .split(',')
        .chain(super_options.split(','))
        .filter(|o| !o.is_empty())
        .map(str::to_string)
        .collect();
    Some(Mount {
        point,
        fs_type,
        options,
    })
}

fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).and_then(|digits| {
            let text = std::str::from_utf8(digits).ok()?;
            u8::from_str_radix(text, 8).ok()
        });
        match (bytes[i], octal) {
            (b'\\', Some(byte)) => {
                out.push(byte);
                i += 4;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOT: &str = "22 1 253:0 / / rw,relatime shared:1 - ext4 /dev/vda rw";
    const NFS_DEFAULT: &str = "40 22 0:50 / /data rw,relatime shared:30 - nfs4 \
        server:/export rw,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,acregmin=3,\
        acregmax=60,acdirmin=30,acdirmax=60,hard,proto=tcp,timeo=600,retrans=2,sec=sys,\
        local_lock=none,addr=10.0.0.5";
    const NFS_SAFE: &str = "41 22 0:51 / /safe rw,relatime shared:31 - nfs4 \
        server:/export rw,vers=4.2,acregmin=0,acregmax=0,acdirmin=0,acdirmax=0,hard,\
        lookupcache=none,proto=tcp,sec=sys,addr=10.0.0.5";
    const SPACED: &str = "42 22 0:52 / /mnt/with\\040space rw - nfs server:/x rw,vers=3";
    /// NFSv3 with every caching option the fence needs: its version alone is refused.
    const NFS_V3_SAFE_CACHING: &str = "43 22 0:53 / /v3 rw,relatime shared:32 - nfs \
        server:/export rw,vers=3,rsize=1048576,wsize=1048576,namlen=255,acregmin=0,\
        acregmax=0,acdirmin=0,acdirmax=0,hard,lookupcache=none,proto=tcp,timeo=600,\
        retrans=2,sec=sys,mountaddr=10.0.0.5,mountvers=3,mountport=20048,mountproto=udp,\
        local_lock=none,addr=10.0.0.5";

    fn mountinfo() -> String {
        [ROOT, NFS_DEFAULT, NFS_SAFE, SPACED].join("\n")
    }

    #[test]
    fn the_longest_containing_mount_point_wins() {
        let info = mountinfo();
        assert_eq!(
            mount_of(&info, "/data/kaas").map(|m| m.point),
            Some("/data".into())
        );
        assert_eq!(
            mount_of(&info, "/data").map(|m| m.point),
            Some("/data".into())
        );
        assert_eq!(
            mount_of(&info, "/database").map(|m| m.point),
            Some("/".into())
        );
        assert_eq!(
            mount_of(&info, "/tmp/x").map(|m| m.fs_type),
            Some("ext4".into())
        );
    }

    #[test]
    fn escaped_mount_points_are_decoded() {
        let mount = mount_of(&mountinfo(), "/mnt/with space/kaas").map(|m| m.point);
        assert_eq!(mount, Some("/mnt/with space".into()));
    }

    #[test]
    fn nfs_with_default_caching_is_refused_and_says_what_is_missing() {
        let mount = parse_line(NFS_DEFAULT).expect("parses");
        assert_eq!(
            missing_options(&mount),
            vec!["lookupcache=none", "actimeo=0 (acdirmin=0,acdirmax=0)"]
        );
        let spaced = parse_line(SPACED).expect("parses");
        assert_eq!(missing_options(&spaced).len(), 2);
    }

    #[test]
    fn nfs_without_lookup_and_attribute_caching_passes() {
        let mount = parse_line(NFS_SAFE).expect("parses");
        assert!(missing_options(&mount).is_empty());
    }

    #[test]
    fn nfs_with_only_lookupcache_off_still_lacks_attribute_caching_off() {
        let line = NFS_SAFE.replace("acdirmin=0", "acdirmin=30");
        let mount = parse_line(&line).expect("parses");
        assert_eq!(
            missing_options(&mount),
            vec!["actimeo=0 (acdirmin=0,acdirmax=0)"]
        );
    }

    #[test]
    fn local_file_systems_pass() {
        let mount = parse_line(ROOT).expect("parses");
        assert!(missing_options(&mount).is_empty());
        assert!(hazards(&mount).is_empty());
    }

    #[test]
    fn nfs_version_4_without_caching_has_no_hazard() {
        let mount = parse_line(NFS_SAFE).expect("parses");
        assert!(hazards(&mount).is_empty());
    }

    #[test]
    fn nfs_version_3_is_refused_even_with_caching_off() {
        let mount = parse_line(NFS_V3_SAFE_CACHING).expect("parses");
        assert_eq!(hazards(&mount), vec![Hazard::BeforeVersion4("3".into())]);
        let why = hazards(&mount)[0].explain();
        assert!(why.contains("vers=3"), "{why}");
        assert!(why.contains("close-to-open"), "{why}");
    }

    #[test]
    fn nfs_version_2_and_an_unlisted_version_of_type_nfs_are_refused() {
        let v2 = NFS_V3_SAFE_CACHING.replace("vers=3,", "vers=2,");
        let mount = parse_line(&v2).expect("parses");
        assert_eq!(hazards(&mount), vec![Hazard::BeforeVersion4("2".into())]);
        let unlisted = NFS_V3_SAFE_CACHING.replace("vers=3,", "");
        let mount = parse_line(&unlisted).expect("parses");
        assert_eq!(hazards(&mount), vec![Hazard::BeforeVersion4(String::new())]);
    }

    #[test]
    fn nfs4_is_version_4_whatever_it_lists() {
        for version in ["vers=4.0", "vers=4.1", "vers=4.2", "vers=4"] {
            let line = NFS_SAFE.replace("vers=4.2", version);
            let mount = parse_line(&line).expect("parses");
            assert!(hazards(&mount).is_empty(), "{version}");
        }
    }

    #[test]
    fn nocto_is_refused() {
        let line = NFS_SAFE.replace("hard,", "hard,nocto,");
        let mount = parse_line(&line).expect("parses");
        assert_eq!(hazards(&mount), vec![Hazard::NoCloseToOpen]);
        assert!(hazards(&mount)[0].explain().contains("nocto"));
    }

    #[test]
    fn every_hazard_of_a_mount_is_named() {
        let line = format!("{SPACED},nocto");
        let mount = parse_line(&line).expect("parses");
        assert_eq!(
            hazards(&mount),
            vec![
                Hazard::BeforeVersion4("3".into()),
                Hazard::NoCloseToOpen,
                Hazard::Caching(vec![
                    "lookupcache=none",
                    "actimeo=0 (acdirmin=0,acdirmax=0)"
                ]),
            ]
        );
    }

    #[test]
    fn malformed_lines_are_skipped() {
        assert_eq!(parse_line("garbage"), None);
        assert_eq!(parse_line("1 2 - nfs"), None);
        let info = format!("garbage\n{ROOT}\n\\\\\\ - -");
        assert_eq!(mount_of(&info, "/x").map(|m| m.point), Some("/".into()));
    }

    #[test]
    fn this_machines_data_directories_pass() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(check(dir.path()).is_ok());
    }
}
