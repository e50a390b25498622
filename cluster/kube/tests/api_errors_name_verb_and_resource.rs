//! What a broker sees when Kubernetes says no: a ServiceAccount without the RBAC rules kaas
//! needs (its token from TokenRequest) and an API server that is not there both give errors
//! that name the verb and the resource; and start-up from the environment (`KUBECONFIG`,
//! `POD_NAMESPACE`) reaches the server.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kaas_cluster::ids::TopicName;
use kaas_cluster_kube::endpoint_slices::ServiceEndpoints;
use kaas_cluster_kube::lease::{Candidate, ControllerLease};
use kaas_cluster_kube::topic_store::TopicStore;
use kaas_cluster_kube::{KubeAdapterError, KubeContext};
use kaas_test_support::apiserver::{
    admin_client, api_server, apply_crds, fresh_namespace, token_client,
};
use kube::api::{Api, PostParams};

fn candidate() -> Candidate {
    Candidate {
        identity: "kaas-0".into(),
        lease_duration: Duration::from_secs(15),
        heartbeat_endpoint: "kaas-0.kaas:9094".into(),
    }
}

fn assert_names(error: &KubeAdapterError, verb: &str, resource: &str, cause: &str) {
    let text = error.to_string();
    assert!(
        text.starts_with(&format!("cannot {verb} {resource}")),
        "{text:?} should start with the verb {verb:?} and the resource {resource:?}"
    );
    assert!(text.contains(cause), "{text:?} should say {cause:?}");
}

#[tokio::test]
async fn a_service_account_without_the_rules_gets_errors_naming_verb_and_resource() {
    let admin = admin_client().await;
    apply_crds(&admin).await;
    let namespace = fresh_namespace(&admin, "rbac").await;
    let create = PostParams::default();
    let accounts = Api::<ServiceAccount>::namespaced(admin.clone(), &namespace);
    let account: ServiceAccount =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "kaas"}})).unwrap();
    accounts.create(&create, &account).await.unwrap();
    // The account may read Leases but not write them, and nothing else.
    let role: Role = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "lease-reader"},
        "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get"]}],
    }))
    .unwrap();
    Api::<Role>::namespaced(admin.clone(), &namespace)
        .create(&create, &role)
        .await
        .unwrap();
    let binding: RoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "lease-reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "lease-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "kaas", "namespace": namespace}],
    }))
    .unwrap();
    Api::<RoleBinding>::namespaced(admin.clone(), &namespace)
        .create(&create, &binding)
        .await
        .unwrap();
    let token = accounts
        .create_token_request(
            "kaas",
            &create,
            &TokenRequest {
                spec: Some(TokenRequestSpec {
                    expiration_seconds: Some(3600),
                    ..TokenRequestSpec::default()
                }),
                ..TokenRequest::default()
            },
        )
        .await
        .unwrap()
        .status
        .unwrap()
        .token
        .unwrap();
    let context = KubeContext::new(token_client(&token).await, namespace.clone());

    let lease = ControllerLease::new(&context);
    assert!(lease.read().await.unwrap().is_none(), "get is allowed");
    let error = lease.acquire(None, &candidate()).await.unwrap_err();
    assert_eq!(error.status_code(), Some(403));
    let lease_resource =
        format!("leases.coordination.k8s.io \"kaas-controller\" in namespace \"{namespace}\"");
    assert_names(&error, "create", &lease_resource, "forbidden");

    let error = ServiceEndpoints::new(&context, "kaas")
        .ready_brokers()
        .await
        .unwrap_err();
    assert_names(
        &error,
        "list",
        &format!("endpointslices.discovery.k8s.io in namespace \"{namespace}\" with label kubernetes.io/service-name=kaas"),
        "forbidden",
    );
    let topics = TopicStore::new(&context);
    assert_names(
        &topics.list().await.unwrap_err(),
        "list",
        &format!("kafkatopics.kaas.io in namespace \"{namespace}\""),
        "forbidden",
    );
    let orders = TopicName::new("orders").unwrap();
    assert_names(
        &topics
            .create(&orders, 1, None, Default::default())
            .await
            .unwrap_err(),
        "get",
        &format!("kafkatopics.kaas.io \"orders\" in namespace \"{namespace}\""),
        "forbidden",
    );
}

#[tokio::test]
async fn an_api_server_that_is_not_there_gives_an_error_naming_verb_and_resource() {
    // A port nothing listens on: bind one, note it, close it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let yaml = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:{port}\n    insecure-skip-tls-verify: true\nusers:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\n"
    );
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::from_yaml(&yaml).unwrap(),
        &Default::default(),
    )
    .await
    .unwrap();
    let context = KubeContext::new(kube::Client::try_from(config).unwrap(), "kaas");
    let error = ControllerLease::new(&context).read().await.unwrap_err();
    assert_eq!(error.status_code(), None);
    assert_names(
        &error,
        "get",
        "leases.coordination.k8s.io \"kaas-controller\" in namespace \"kaas\"",
        "",
    );
}

#[tokio::test]
async fn start_up_from_the_environment_uses_kubeconfig_and_pod_namespace() {
    let server = api_server();
    let admin = admin_client().await;
    let namespace = fresh_namespace(&admin, "environment").await;
    // Only this test of the binary touches the environment.
    std::env::set_var("KUBECONFIG", &server.kubeconfig);
    std::env::set_var("POD_NAMESPACE", &namespace);
    let context = KubeContext::from_environment().await.unwrap();
    assert_eq!(context.namespace, namespace);
    let lease = ControllerLease::new(&context);
    lease.acquire(None, &candidate()).await.unwrap();
    let seen = ControllerLease::new(&KubeContext::new(admin, namespace))
        .read()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(seen.holder.as_deref(), Some("kaas-0"));
}
