"""Kueue's webhook configurations for the devstack, from the manifests its module ships.

Reads config/components/webhook/manifests.yaml on stdin and prints the two configurations to
apply: only the webhooks of the Kueue API itself and of plain pods (the one integration the
devstack enables), each pointed at Kueue's loopback URL with our CA bundle, and the pod webhooks
restricted to namespaces carrying the opt-in label, so no other namespace of the shared devstack
is intercepted. Standard library and PyYAML only (the system Python's).

Usage: webhooks.py PORT CA_BUNDLE_BASE64 OPT_IN_LABEL MUTATING_NAME VALIDATING_NAME < manifests.yaml
"""

import sys

import yaml

KEEP = {"mpod.kb.io", "vpod.kb.io", "mworkload.kb.io", "vworkload.kb.io", "mclusterqueue.kb.io",
        "vclusterqueue.kb.io", "mresourceflavor.kb.io", "vresourceflavor.kb.io", "vcohort.kb.io"}
POD_WEBHOOKS = {"mpod.kb.io", "vpod.kb.io"}


def main() -> None:
    port, ca_bundle, label, mutating, validating = sys.argv[1:6]
    out = []
    for doc in yaml.safe_load_all(sys.stdin):
        if not doc:
            continue
        name = mutating if doc["kind"] == "MutatingWebhookConfiguration" else validating
        hooks = []
        for hook in doc.get("webhooks") or []:
            if hook["name"] not in KEEP:
                continue
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca_bundle}
            hook["timeoutSeconds"] = 10
            if hook["name"] in POD_WEBHOOKS:
                hook["namespaceSelector"] = {"matchLabels": {label: "true"}}
            hooks.append(hook)
        doc["metadata"] = {"name": name, "labels": {"app.kubernetes.io/managed-by": "tfk8s-devstack"}}
        doc["webhooks"] = hooks
        out.append(doc)
    print(yaml.safe_dump_all(out, sort_keys=False), end="")


if __name__ == "__main__":
    main()
