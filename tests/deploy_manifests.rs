//! `deploy/` renders with kustomize (`kubectl kustomize`, what `kubectl apply -k` runs) into
//! the objects deploy/README.md promises, with the settings that make io_uring work in a pod. The
//! server-side dry run needs a real API server and is not part of this test.

use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn render() -> String {
    let work = tempfile::tempdir().expect("tempdir");
    let copy = work.path().join("deploy");
    let status = Command::new("cp")
        .arg("-a")
        .arg(format!("{ROOT}/deploy"))
        .arg(&copy)
        .status()
        .expect("cp");
    assert!(status.success());
    // The CRDs are written separately into deploy/crds/; until they are there, an empty
    // kustomization stands in so the rest can still be checked.
    if !copy.join("crds/kustomization.yaml").exists() {
        std::fs::create_dir_all(copy.join("crds")).expect("mkdir");
        std::fs::write(
            copy.join("crds/kustomization.yaml"),
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nmetadata:\n  name: crds-not-yet-written\n",
        )
        .expect("write");
    }
    let output = Command::new("kubectl")
        .arg("kustomize")
        .arg(&copy)
        .output()
        .expect("run kubectl kustomize");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("utf-8")
}

#[test]
fn deploy_renders_every_object_with_the_io_uring_settings() {
    let yaml = render();
    for kind in [
        "kind: StatefulSet",
        "kind: Service",
        "kind: PersistentVolumeClaim",
        "kind: ServiceAccount",
        "kind: Role",
        "kind: RoleBinding",
        "kind: PodDisruptionBudget",
        "kind: DaemonSet",
        "kind: ConfigMap",
    ] {
        assert!(yaml.contains(kind), "missing {kind}");
    }
    for setting in [
        "podManagementPolicy: Parallel",
        "- ReadWriteMany",
        "localhostProfile: profiles/kaas.json",
        "type: Localhost",
        "- IPC_LOCK",
        "fieldPath: metadata.name",
        "fieldPath: metadata.namespace",
        "fieldPath: status.podIP",
        "path: /readyz",
        "resource: limits.cpu",
        "containerPort: 9092",
        "containerPort: 9094",
        "containerPort: 9644",
        "path: /var/lib/kubelet/seccomp",
        "image: localhost/kaas:latest",
    ] {
        assert!(yaml.contains(setting), "missing {setting}");
    }
    // The profile the pods name is the one shipped, io_uring calls included.
    assert!(
        yaml.contains("io_uring_setup"),
        "profile not in the ConfigMap"
    );
    // No namespace is pinned: `kubectl apply -n <ns> -k deploy/` decides.
    assert!(!yaml.contains("namespace:"), "a namespace is pinned");
}

/// The StatefulSet configures kaas through `KAAS_*` variables: each must be one the binary
/// reads (a misspelt one would be ignored silently), and the Service whose EndpointSlices the
/// controller watches must exist.
#[test]
fn every_kaas_variable_of_the_statefulset_is_a_flag_and_names_real_objects() {
    let help = Command::new(env!("CARGO_BIN_EXE_kaas"))
        .arg("--help")
        .output()
        .expect("run kaas --help");
    assert!(help.status.success());
    let help = String::from_utf8_lossy(&help.stdout);
    let statefulset =
        std::fs::read_to_string(format!("{ROOT}/deploy/statefulset.yaml")).expect("read");
    let variables: Vec<&str> = statefulset
        .lines()
        .filter_map(|line| line.trim().strip_prefix("- name: "))
        .filter(|name| name.starts_with("KAAS_"))
        .collect();
    assert!(
        variables.contains(&"KAAS_LEASE_DURATION_MS"),
        "{variables:?}"
    );
    for variable in &variables {
        assert!(
            help.contains(&format!("[env: {variable}=")),
            "{variable} is not an environment variable kaas reads"
        );
    }
    let service = statefulset
        .lines()
        .skip_while(|line| line.trim() != "- name: KAAS_SERVICE_NAME")
        .nth(1)
        .and_then(|line| line.trim().strip_prefix("value: "))
        .expect("KAAS_SERVICE_NAME has a value");
    let services = std::fs::read_to_string(format!("{ROOT}/deploy/services.yaml")).expect("read");
    assert!(
        services.contains(&format!("  name: {service}\n")),
        "no Service {service} in deploy/services.yaml"
    );
}
